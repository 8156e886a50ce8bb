"""Program inputs (SPEC §1): the graph model, the formats, padding and the jitted cost model,
cross-checked against the independent reference (tests/reference_exec.py)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from gsched import (
    FormatError,
    GraphError,
    load_dataset,
    load_graph,
    make_graph,
    random_computation_graph,
    save_dataset,
    save_graph,
)
from gsched.core.padding import Bucket, bucket_for
from gsched.costmodel.host import evaluate_graph
from tests import reference_exec as rx
from tests.graphs import diamond


def with_inputs(graph, rng, fraction=0.7):
    """``graph`` with a random subset of its source ops (no inputs read) marked as inputs."""
    source = np.ones(graph.num_ops, bool)
    source[graph.edge_consumer] = False
    return graph.replace(is_input=source & (rng.random(graph.num_ops) < fraction))


def test_an_input_with_dependencies_is_rejected_naming_it():
    with pytest.raises(GraphError, match=r"op 1 \('b'\) is a program input but reads tensor 0"):
        diamond().replace(is_input=np.array([False, True, False, False]))
    with pytest.raises(GraphError, match="is_input has shape"):
        diamond().replace(is_input=np.array([True]))


def test_formats_keep_inputs_and_refuse_to_lose_them(tmp_path):
    graph = random_computation_graph(12, 3)
    graph = with_inputs(graph, np.random.default_rng(0), fraction=1.0)
    assert graph.has_inputs
    # node-link JSON needs one output tensor per op: a chain a → b → c with a an input.
    chain = make_graph(compute_cost=[1, 2, 3], temporary_memory=[0, 0, 0],
                       tensor_producer=[0, 1, 2], tensor_size=[4, 5, 6], edge_tensor=[0, 1],
                       edge_consumer=[1, 2], is_input=[True, False, False], name="chain")
    save_graph(chain, tmp_path / "chain.json")
    nodes = json.loads((tmp_path / "chain.json").read_text())["nodes"]
    assert [n.get("input", False) for n in nodes] == [True, False, False]
    assert load_graph(tmp_path / "chain.json") == chain
    save_dataset([graph, diamond()], tmp_path / "d.npz")
    assert load_dataset(tmp_path / "d.npz") == [graph, diamond()]
    with pytest.raises(FormatError, match="no program inputs"):
        save_graph(graph, tmp_path / "g.pbtxt")
    assert not (tmp_path / "g.pbtxt").exists()
    data = json.loads((tmp_path / "chain.json").read_text())
    data["nodes"][0]["input"] = "yes"
    (tmp_path / "bad.json").write_text(json.dumps(data))
    with pytest.raises(FormatError, match="non-boolean 'input'"):
        load_graph(tmp_path / "bad.json")


def test_datasets_written_before_inputs_existed_still_load(tmp_path):
    graph = random_computation_graph(9, 1)
    save_dataset([graph], tmp_path / "d.npz")
    with np.load(tmp_path / "d.npz") as npz:
        old = {k: npz[k] for k in npz.files if k != "is_input"}
    np.savez(tmp_path / "old.npz", **old)
    (loaded,) = load_dataset(tmp_path / "old.npz")
    assert loaded == graph and not loaded.has_inputs


def _check(graph, keys, d, **costs):
    got = evaluate_graph(graph, keys, d, **costs)
    want = rx.evaluate(graph, [float(k) for k in keys], d, **costs)
    assert got["placement"] == want["placement"]
    assert [tuple(item) for item in got["order"]] == list(want["order"])
    np.testing.assert_allclose(got["device_peaks"], want["device_peaks"], rtol=1e-6)
    np.testing.assert_allclose(got["runtime"], want["runtime"], rtol=1e-6)
    return got


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("d", [1, 2, 3])
def test_cost_model_puts_inputs_first_as_the_reference_does(seed, d):
    rng = np.random.default_rng(seed)
    graph = with_inputs(random_computation_graph(int(rng.integers(6, 40)), rng), rng)
    keys = rng.random(graph.chromosome_length(d)).astype(np.float32)
    keys[rng.random(keys.shape) < 0.1] = 0.5  # exact ties
    got = _check(graph, keys, d, latency=0.5, bandwidth=1e4)
    inputs = np.flatnonzero(graph.is_input).tolist()
    assert [j for _, j, *_ in got["order"][:len(inputs)]] == inputs  # first, index order


def test_inputs_override_priorities_on_the_diamond():
    # a is the only op without dependencies; even with the lowest priority it runs first.
    graph = diamond().replace(is_input=np.array([True, False, False, False]))
    keys = [.5] * 4 + [0.0, .8, .7, .1] + [.5] * 4
    assert _check(graph, keys, 1)["order"][0] == ["op", 0]
    # Without the flag the same keys cannot start with b (it needs a): a is still first.
    assert evaluate_graph(diamond(), keys, 1)["order"][0] == ["op", 0]


def test_padding_does_not_change_results_with_inputs():
    rng = np.random.default_rng(5)
    graph = with_inputs(random_computation_graph(20, rng), rng)
    keys = rng.random(graph.chromosome_length(2)).astype(np.float32)
    small = evaluate_graph(graph, keys, 2)
    b = bucket_for(graph)
    large = evaluate_graph(graph, keys, 2, bucket=Bucket(2 * b.num_ops, 2 * b.num_tensors,
                                                          2 * b.num_edges))
    assert small == large
