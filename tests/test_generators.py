"""Tests of gsched.generators: NTO layered graphs (checked against the Moccasin samples of the
same distribution), REGAL-style random graphs and the REGAL A.1 dataset utilities."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from gsched.core.graph import Graph, make_graph, topological_order
from gsched.generators import (
    MOCCASIN_COSTS,
    RandomGraphParams,
    augment,
    dedup,
    layered_graph,
    random_computation_graph,
    split_by_topology,
    synthetic_dataset,
)
from tests.graphs import MOCCASIN

LAYERED_FILES = sorted(MOCCASIN.glob("random_layered_*.json")) if MOCCASIN.is_dir() else []


# ---------------------------------------------------------------------------------- helpers

def _levels(g: Graph) -> np.ndarray:
    """``[N]`` longest-path distance (in edges) from a source to each op."""
    senders, receivers, _, _ = g.gnn_edges()
    succ = [[] for _ in range(g.num_ops)]
    for s, r in zip(senders.tolist(), receivers.tolist()):
        succ[s].append(r)
    level = np.zeros(g.num_ops, np.int64)
    for j in topological_order(g).tolist():
        for c in succ[j]:
            level[c] = max(level[c], level[j] + 1)
    return level


def _layered_stats(g: Graph) -> dict[str, float]:
    level = _levels(g)
    senders, receivers, _, _ = g.gnn_edges()
    out, par = g.tensor_size, g.temporary_memory
    return {
        "edges": g.num_edges,
        "depth": int(level.max()),  # longest path = number of layers - 1
        "skip_edges": int(np.sum(level[receivers] - level[senders] >= 2)),
        "out_zero_frac": float(np.mean(out == 0)),
        "out_mean": float(out.mean()),
        "out_median": float(np.median(out)),
        "param_zero_frac": float(np.mean(par == 0)),
        "param_mean": float(par.mean()),
        "param_median": float(np.median(par)),
    }


def _load_layered_json(path: Path) -> Graph:
    """SPEC §1.2 'layered' flavour of networkx node-link JSON."""
    data = json.loads(path.read_text())
    nodes = data["nodes"]
    index = {node["name"]: j for j, node in enumerate(nodes)}
    links = {(index[link["0"]], index[link["1"]]) for link in data["links"]}
    src, dst = (np.array(v, np.int64) for v in zip(*sorted(links)))
    return make_graph(compute_cost=[n["duration"] for n in nodes],
                      temporary_memory=[n["param_cost"] for n in nodes],
                      tensor_producer=np.arange(len(nodes)),
                      tensor_size=[n["out_cost"] for n in nodes],
                      edge_tensor=src, edge_consumer=dst)


def _band_violations(target: dict, samples: list[dict], k: float = 4.0) -> dict[str, tuple]:
    """Stats of ``target`` outside ``mean ± k·std`` of ``samples`` (or the samples' range, if
    wider). The file is one draw of the distribution, so its z-score is about N(0, 1): k = 4
    makes a false alarm ~1e-4 per check, while a wrong parameter (edge or skip density
    doubled, parameter costs on, costs doubled) moves the stat by far more than 4σ
    (test_layered_band_detects_wrong_parameters)."""
    bad = {}
    for key, value in target.items():
        arr = np.array([s[key] for s in samples], np.float64)
        lo = min(arr.min(), arr.mean() - k * arr.std())
        hi = max(arr.max(), arr.mean() + k * arr.std())
        if not lo - 1e-9 <= value <= hi + 1e-9:
            bad[key] = (value, arr.mean(), arr.std())
    return bad


def _file_params(path: Path) -> tuple[int, float]:
    n, w = re.search(r"_n(\d+)_w([\d.]+)_", path.name).groups()
    return int(n), float(w)


# ---------------------------------------------------------------------------- layered graphs

def test_layered_deterministic():
    a, b = layered_graph(200, 7), layered_graph(200, np.random.default_rng(7))
    assert a == b
    assert a != layered_graph(200, 8)


@pytest.mark.parametrize("n", [3, 4, 10, 57, 300])
def test_layered_structure_paper_defaults(n):
    g = layered_graph(n, n)
    assert g.num_ops == g.num_tensors == n
    np.testing.assert_array_equal(topological_order(g), np.arange(n))  # layer order
    senders, receivers, _, _ = g.gnn_edges()
    assert np.all(senders < receivers)
    indeg = np.bincount(receivers, minlength=n)
    outdeg = np.bincount(senders, minlength=n)
    assert np.flatnonzero(indeg == 0).tolist() == [0]  # single source ...
    assert np.flatnonzero(outdeg == 0).tolist() == [n - 1]  # ... and sink
    layer = np.array([int(name[1:].split("_")[0]) for name in g.op_names])
    for cost in (g.tensor_size, g.temporary_memory):  # one GMM draw per layer (paper)
        assert np.all(cost > 0) and np.all(cost % 10 == 0)
        for l in np.unique(layer):
            assert len(set(cost[layer == l].tolist())) == 1
    dur = g.compute_cost
    assert dur[0] == dur[-1] == 0 and np.all((dur[1:-1] >= 1) & (dur[1:-1] <= 999))


def test_layered_options():
    g = layered_graph(100, 0, width_factor=0.3, single_source_sink=False, duration_range=None,
                      **MOCCASIN_COSTS)
    assert np.all(g.temporary_memory == 0) and np.all(g.compute_cost == 0)
    assert len(set(g.tensor_size.tolist())) > 30  # per-node output costs
    assert np.sum(np.bincount(g.edge_consumer, minlength=100) == 0) > 1  # whole first layer
    with pytest.raises(ValueError):
        layered_graph(100, 0, width_factor=1.0)


@pytest.mark.skipif(not LAYERED_FILES, reason="benchmarks/moccasin not available")
@pytest.mark.parametrize("path", LAYERED_FILES, ids=lambda p: p.name.split("_nlv")[0])
def test_layered_matches_moccasin_samples(path):
    n, w = _file_params(path)
    target = _layered_stats(_load_layered_json(path))
    samples = [_layered_stats(layered_graph(n, s, width_factor=w, **MOCCASIN_COSTS))
               for s in range(20)]
    assert _band_violations(target, samples) == {}


@pytest.mark.skipif(not LAYERED_FILES, reason="benchmarks/moccasin not available")
@pytest.mark.parametrize("wrong, stat", [
    ({"edge_density": 0.4}, "edges"),
    ({"skip_connection_density": 0.28}, "skip_edges"),
    ({"parameter_costs": True}, "param_mean"),
    ({"cost_scale": 2000.0}, "out_mean"),
])
def test_layered_band_detects_wrong_parameters(wrong, stat):
    path = next(p for p in LAYERED_FILES if "_n500_" in p.name)
    n, w = _file_params(path)
    target = _layered_stats(_load_layered_json(path))
    kwargs = {"width_factor": w, **MOCCASIN_COSTS, **wrong}
    samples = [_layered_stats(layered_graph(n, s, **kwargs)) for s in range(20)]
    assert stat in _band_violations(target, samples)


# ----------------------------------------------------------------------------- random graphs

def test_random_graph_deterministic():
    assert random_computation_graph(300, 1) == random_computation_graph(300, 1)
    assert random_computation_graph(300, 1) != random_computation_graph(300, 2)


@pytest.mark.parametrize("n", [1, 2, 10, 500, 3000])
def test_random_graph_valid(n):
    g = random_computation_graph(n, n)  # constructing a Graph validates it (acyclic, ...)
    assert g.num_ops == n and topological_order(g).size == n
    data = ~g.tensor_is_control
    key = g.tensor_producer[data] * 100 + g.tensor_port[data]
    assert np.all(np.diff(key) > 0) and np.all(g.tensor_port[~data] == -1)  # SPEC §1.1 order
    assert np.all(np.flatnonzero(g.tensor_is_control) >= data.sum())


def test_random_graph_features():
    g = random_computation_graph(500, 3)
    data = ~g.tensor_is_control
    outputs_per_op = np.bincount(g.tensor_producer[data], minlength=g.num_ops)
    assert np.sum(outputs_per_op > 1) >= 20  # multi-output ops
    assert np.sum(np.bincount(g.edge_tensor, minlength=g.num_tensors)[data] > 1) >= 50
    assert 10 <= g.tensor_is_control.sum() and np.all(g.tensor_size[~data] == 0)
    senders, receivers, _, is_control = g.gnn_edges()
    assert is_control.sum() == g.tensor_is_control.sum()  # each control tensor is read once
    _, multiplicity = np.unique(senders * g.num_ops + receivers, return_counts=True)
    assert np.sum(multiplicity > 1) >= 10  # parallel GNN edges
    assert not np.array_equal(topological_order(g), np.arange(g.num_ops))
    sizes = g.tensor_size[data]
    assert np.all(sizes >= 1) and np.all(sizes == np.round(sizes))
    assert sizes.max() / np.median(sizes) > 10  # long tail (log-normal, std 1)
    assert 0.05 < np.mean(g.temporary_memory > 0) < 0.5 and np.all(g.compute_cost > 0)


def test_random_graph_params():
    p = RandomGraphParams(multi_output_prob=0.0, control_rate=0.0, temp_memory_prob=0.0)
    g = random_computation_graph(200, 0, params=p)
    assert g.num_tensors == g.num_ops and not g.tensor_is_control.any()
    assert np.all(g.temporary_memory == 0)


# ---------------------------------------------------------------------------------- datasets

def test_augment():
    g = random_computation_graph(400, 5)
    copies = augment(g, 5, 0)
    assert copies == augment(g, 5, 0) and len(copies) == 5
    size = g.tensor_size
    nonzero = size > 0
    ratios = []
    for c in copies:
        assert c.topology_hash() == g.topology_hash()
        assert np.array_equal(c.compute_cost, g.compute_cost)
        assert np.all(c.tensor_size[~nonzero] == 0) and np.all(c.tensor_size[nonzero] >= 1)
        assert np.all(c.tensor_size == np.round(c.tensor_size))
        # rounding moves a size by at most 0.5 byte: the factor lies in [0.5, 1.5]
        assert np.all(c.tensor_size[nonzero] >= 0.5 * size[nonzero] - 0.5)
        assert np.all(c.tensor_size[nonzero] <= 1.5 * size[nonzero] + 0.5)
        big = size >= 1000
        ratios.append(c.tensor_size[big] / size[big])
    ratios = np.concatenate(ratios)
    assert ratios.min() < 0.55 and ratios.max() > 1.45 and abs(ratios.mean() - 1) < 0.02


def test_dedup():
    a, b = random_computation_graph(50, 1), random_computation_graph(50, 2)
    graphs = [a, *augment(a, 3, 0), b, a]
    assert dedup(graphs) == [a, b]


def test_split_by_topology():
    originals = [random_computation_graph(20 + 3 * i, i, name=f"g{i}") for i in range(25)]
    graphs = [c for g in originals for c in [g, *augment(g, 2, 0)]]
    train, valid, test = split_by_topology(graphs, 0)
    assert (len(train), len(valid), len(test)) == (45, 15, 15)
    hashes = [{g.topology_hash() for g in s} for s in (train, valid, test)]
    assert [len(h) for h in hashes] == [15, 5, 5]
    assert not (hashes[0] & hashes[1] or hashes[0] & hashes[2] or hashes[1] & hashes[2])
    role = {g.topology_hash(): r for r, s in enumerate((train, valid, test)) for g in s}
    for start in range(0, 25, 5):  # each group of 5 by size is split 3-1-1
        group = originals[start:start + 5]
        assert Counter(role[g.topology_hash()] for g in group) == {0: 3, 1: 1, 2: 1}
    assert split_by_topology(graphs, 0) == (train, valid, test)


@pytest.mark.parametrize("kind", ["regal", "layered"])
def test_synthetic_dataset(kind):
    ds = synthetic_dataset(kind, 20, (30, 80), seed=3, augment_copies=2)
    again = synthetic_dataset(kind, 20, (30, 80), seed=3, augment_copies=2)
    assert ds == again and set(ds) == {"train", "valid", "test"}
    assert [len(ds[k]) for k in ("train", "valid", "test")] == [36, 12, 12]
    hashes = [{g.topology_hash() for g in ds[k]} for k in ("train", "valid", "test")]
    assert sum(len(h) for h in hashes) == len(set().union(*hashes)) == 20
    assert all(30 <= g.num_ops <= 80 for split in ds.values() for g in split)
    assert synthetic_dataset(kind, 20, (30, 80), seed=4) != synthetic_dataset(kind, 20, (30, 80),
                                                                            seed=3)
    with pytest.raises(ValueError):
        synthetic_dataset("erdos", 5, (10, 20), seed=0)
