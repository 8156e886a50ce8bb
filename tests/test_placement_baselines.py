"""GDP / GO classical placement baselines: human expert (scope layers) and METIS."""

import sys
import types

import numpy as np
import pytest

from gsched import (
    layered_graph,
    make_graph,
    random_computation_graph,
    topological_order,
)
from gsched.baselines.heuristics import kl_partition
from gsched.baselines.placement import (
    PLACEMENT_BASELINES,
    contiguous_split,
    human_expert,
    metis,
    metis_csr,
    scope_layers,
)
from gsched.core.padding import Bucket
from gsched.costmodel.host import evaluate_order
from tests.graphs import diamond


def build(ops, sizes=None):
    """Graph from ``ops`` = [(scope, cost, [predecessor ops], is_input)]; op ``j`` produces
    tensor ``j`` (``sizes[j]`` bytes, default 1) read by every op listing ``j``."""
    n = len(ops)
    edges = [(p, c) for c, (_, _, preds, _) in enumerate(ops) for p in preds]
    return make_graph(compute_cost=[cost for _, cost, _, _ in ops], temporary_memory=np.zeros(n),
                      tensor_producer=np.arange(n),
                      tensor_size=np.ones(n) if sizes is None else sizes,
                      edge_tensor=[p for p, _ in edges], edge_consumer=[c for _, c in edges],
                      is_input=[inp for *_, inp in ops],
                      op_scopes=[scope for scope, *_ in ops])


def layer_chain(costs, per_layer=3, scope="layer_{i}/op_{k}", extra=()):
    """A chain of ``len(costs)`` layers of ``per_layer`` ops each (layer i's ops cost
    ``costs[i]``), each layer's first op reading the previous layer's last op; ``extra`` ops
    ``(scope, cost, preds, is_input)`` appended. Returns (graph, ops of each layer)."""
    ops, layers = [], []
    for i, cost in enumerate(costs):
        ids = []
        for k in range(per_layer):
            preds = [ops_len - 1] if (ops_len := len(ops)) else []
            ops.append((scope.format(i=i, k=k), cost, preds, False))
            ids.append(len(ops) - 1)
        layers.append(ids)
    return build(ops + list(extra)), layers


def device_of_layers(placement, layers):
    devices = []
    for ids in layers:
        assert len(set(placement[ids].tolist())) == 1, "a layer is split over devices"
        devices.append(int(placement[ids[0]]))
    return devices


BUCKET = Bucket(64, 64, 128)  # one padding bucket for every graph here: fewer compilations


def score(graph, order, placement, num_devices):
    return evaluate_order(graph, order, placement, num_devices, scheduler="fifo", bucket=BUCKET)


# --- human expert --------------------------------------------------------------------------

def test_two_devices_two_layers_each():
    g, layers = layer_chain([1, 1, 1, 1])
    order, placement, info = human_expert(g, 2)
    assert info == {"split": "scope", "layers": 4}
    assert device_of_layers(placement, layers) == [0, 0, 1, 1]
    np.testing.assert_array_equal(order, topological_order(g))
    assert order.dtype == np.int64 and placement.dtype == np.int64
    score(g, order, placement, 2)


def test_one_layer_per_device():
    g, layers = layer_chain([1, 1, 1, 1])
    _, placement, info = human_expert(g, 4)
    assert device_of_layers(placement, layers) == [0, 1, 2, 3]
    assert info["layers"] == 4


def test_balance_by_compute_cost():
    g, layers = layer_chain([3, 1, 1, 1])  # by count it would be [0, 0, 1, 1]
    assert device_of_layers(human_expert(g, 2)[1], layers) == [0, 1, 1, 1]
    g, layers = layer_chain([1, 1, 1, 3])
    assert device_of_layers(human_expert(g, 2)[1], layers) == [0, 0, 0, 1]
    g, layers = layer_chain([10, 1, 1, 1])  # a heavy layer cannot leave a device empty
    assert device_of_layers(human_expert(g, 4)[1], layers) == [0, 1, 2, 3]


@pytest.mark.parametrize("num_devices", [2, 3, 4, 5, 7])
def test_contiguous_and_every_device_used(num_devices):
    rng = np.random.default_rng(num_devices)
    g, layers = layer_chain(rng.uniform(0.1, 5.0, size=9).tolist(), per_layer=2)
    order, placement, _ = human_expert(g, num_devices)
    devices = device_of_layers(placement, layers)
    assert devices == sorted(devices), "devices must be non-decreasing along the layers"
    assert set(devices) == set(range(num_devices))
    if num_devices <= 3:  # one compilation per D: score only those other tests use too
        score(g, order, placement, num_devices)


def test_depth_is_smallest_with_enough_layers():
    g, layers = layer_chain([1, 1, 1, 1], scope="model/layer_{i}/op_{k}")  # depth 1: one layer
    _, placement, info = human_expert(g, 2)
    assert info["layers"] == 4 and device_of_layers(placement, layers) == [0, 0, 1, 1]
    # GNMT-style: {encoder, decoder} at depth 1 for D = 2; {en,de}coder/layer_i for D = 4.
    scope = "{part}/layer_{i}/lstm"
    ops = []
    for part in ("encoder", "decoder"):
        for i in range(2):
            for _ in range(2):
                ops.append((scope.format(part=part, i=i), 1.0, [len(ops) - 1] if ops else [],
                            False))
    g = build(ops)
    _, placement, info = human_expert(g, 2)
    assert info["layers"] == 2 and placement.tolist() == [0] * 4 + [1] * 4
    _, placement, info = human_expert(g, 4)
    assert info["layers"] == 4 and placement.tolist() == [0, 0, 1, 1, 2, 2, 3, 3]
    np.testing.assert_array_equal(scope_layers(g, 4), [0, 0, 1, 1, 2, 2, 3, 3])


def test_full_depth_when_too_few_layers():
    g, _ = layer_chain([1, 1])  # depth 1 has 2 layers, depth 2 ("layer_i/op_k") 6
    _, placement, info = human_expert(g, 4)
    assert info == {"split": "scope", "layers": 6}
    assert placement.tolist() == [0, 1, 1, 2, 3, 3]  # cuts at 1.5, 3, 4.5 of 6, earlier on ties
    g, layers = layer_chain([1, 1], per_layer=1, scope="layer_{i}")
    order, placement, info = human_expert(g, 4)
    assert info["layers"] == 2 and device_of_layers(placement, layers) == [0, 1]
    score(g, order, placement, 4)


def test_layers_ordered_by_topological_position():
    # ops 0-2 (scope "aaa") read ops 3-5 (scope "zzz"): "zzz" comes first.
    ops = [("aaa/x", 1, [5], False), ("aaa/y", 1, [0], False), ("aaa/z", 1, [1], False),
           ("zzz/x", 1, [], False), ("zzz/y", 1, [3], False), ("zzz/z", 1, [4], False)]
    g = build(ops)
    order, placement, _ = human_expert(g, 2)
    assert placement.tolist() == [1, 1, 1, 0, 0, 0]
    score(g, order, placement, 2)


def test_empty_scope_ops_follow_first_consumer_else_producer():
    ops = [("layer_0/a", 1, [], False), ("layer_0/b", 1, [0], False),    # 0, 1
           ("", 1, [1], False), ("", 1, [2], False),                      # 2, 3: unscoped
           ("layer_1/a", 1, [3], False), ("layer_1/b", 1, [4], False),    # 4, 5
           ("layer_2/a", 1, [5], False), ("layer_2/b", 1, [6], False),    # 6, 7
           ("layer_3/a", 1, [7], False), ("layer_3/b", 1, [8], False),    # 8, 9
           ("", 1, [9], False),                                           # 10: sink (loss)
           ("", 1, [], False),                                            # 11: isolated
           ("", 1, [1, 7], False)]                                        # 12: sink, 2 producers
    g = build(ops)
    order, placement, info = human_expert(g, 4)
    assert info["layers"] == 4
    assert placement[[0, 1, 4, 5, 6, 7, 8, 9]].tolist() == [0, 0, 1, 1, 2, 2, 3, 3]
    assert placement[2] == placement[3] == 1  # unscoped chain follows layer 1, its consumer
    assert placement[10] == 3  # no consumer: its producer's device
    assert placement[11] == 0  # isolated
    assert placement[12] == 2  # the producer that comes last topologically (op 7)
    score(g, order, placement, 4)


def test_program_inputs_follow_their_first_consumer():
    # inputs first (as importers write them): 0 scoped "layer_3/w", 1 unscoped, 2 "params"
    ops = [("layer_3/w", 0, [], True), ("", 0, [], True), ("params", 0, [], True)]
    readers = {3 + 3: [0], 3 + 9: [0], 3 + 6: [1], 3 + 11: [2]}  # op → inputs it reads
    for j in range(12):  # layer j // 3, ops 3..14
        preds = ([j + 2] if j else []) + readers.get(j + 3, [])
        ops.append((f"layer_{j // 3}/op_{j % 3}", 1, preds, False))
    g = build(ops)
    layers = [list(range(3 + 3 * i, 6 + 3 * i)) for i in range(4)]
    order, placement, info = human_expert(g, 2)
    assert info["layers"] == 4  # "params" is no layer
    assert device_of_layers(placement, layers) == [0, 0, 1, 1]
    assert placement[0] == 0  # read by op 6 (layer 1, device 0) before op 12 (layer 3)
    assert placement[1] == 1  # read by op 9 (layer 2)
    assert placement[2] == 1  # read by op 14 (layer 3)
    assert scope_layers(g, 2)[:3].tolist() == [-1, -1, -1]
    score(g, order, placement, 2)


def test_topological_fallback_without_scopes():
    g = build([("", 1, [j - 1] if j else [], False) for j in range(8)])
    order, placement, info = human_expert(g, 2)
    assert info == {"split": "topological", "layers": 0}
    assert placement.tolist() == [0] * 4 + [1] * 4
    g = build([("", 0, [j - 1] if j else [], False) for j in range(6)])  # zero cost: by count
    assert human_expert(g, 3)[1].tolist() == [0, 0, 1, 1, 2, 2]
    g = build([("", c, [j - 1] if j else [], False) for j, c in enumerate([6, 1, 1, 1, 1, 1, 1])])
    assert human_expert(g, 2)[1].tolist() == [0, 1, 1, 1, 1, 1, 1]
    # diamond: topological a b c d, costs 2 3 4 1 → cut at 5 of 10
    g = diamond()
    order, placement, info = human_expert(g, 2)
    assert info["split"] == "topological" and placement.tolist() == [0, 0, 1, 1]
    score(g, order, placement, 2)
    # only program inputs scoped: still no layers
    g = build([("params/w", 0, [], True)] + [("", 1, [j - 1] if j > 1 else [0], False)
                                            for j in range(1, 5)])
    assert human_expert(g, 2)[2]["split"] == "topological"


def test_one_device_and_bad_device_counts():
    g, _ = layer_chain([1, 2, 3])
    for fn in (human_expert, metis):
        order, placement, _ = fn(g, 1)
        assert placement.tolist() == [0] * g.num_ops
        np.testing.assert_array_equal(order, topological_order(g))
        for bad in (0, -1, 1.5):
            with pytest.raises(ValueError, match="num_devices"):
                fn(g, bad)
    with pytest.raises(ValueError, match="num_devices"):
        contiguous_split([1.0, 2.0], 0)


def test_contiguous_split():
    assert contiguous_split([1, 1], 4).tolist() == [0, 1]
    assert contiguous_split([1, 1, 1, 1, 1], 2).tolist() == [0, 0, 1, 1, 1]  # earlier on ties
    assert contiguous_split([10, 1, 1, 1], 4).tolist() == [0, 1, 2, 3]
    assert contiguous_split([1, 1, 1, 10], 2).tolist() == [0, 0, 0, 1]
    assert contiguous_split([1] * 12, 3).tolist() == [0] * 4 + [1] * 4 + [2] * 4
    assert contiguous_split([], 2).tolist() == []


# --- METIS ---------------------------------------------------------------------------------

@pytest.fixture
def no_pymetis(monkeypatch):
    monkeypatch.setitem(sys.modules, "pymetis", None)  # `import pymetis` raises ImportError


class FakePymetis(types.ModuleType):
    def __init__(self, parts):
        super().__init__("pymetis")
        self.parts, self.calls = parts, []

    def part_graph(self, nparts, adjacency=None, xadj=None, adjncy=None, vweights=None,
                   eweights=None, recursive=None):
        self.calls.append({"nparts": nparts, "adjacency": adjacency, "xadj": xadj,
                           "adjncy": adjncy, "vweights": vweights, "eweights": eweights})
        return 7, list(self.parts)


@pytest.mark.parametrize("num_devices", [2, 3])
def test_metis_fallback_is_fiduccia_mattheyses(no_pymetis, num_devices):
    g = layered_graph(40, 2)
    order, placement, info = metis(g, num_devices, seed=3)
    assert info == {"partitioner": "fiduccia_mattheyses"}
    np.testing.assert_array_equal(placement, kl_partition(g, num_devices, seed=3))
    counts = np.bincount(placement, minlength=num_devices)
    assert counts.size == num_devices and counts.min() > 0
    if num_devices == 2:
        assert abs(counts[0] - g.num_ops / 2) <= 0.05 * g.num_ops / 2 + 1
    score(g, order, placement, num_devices)


def test_fake_pymetis_gets_csr_and_its_partition_is_used(monkeypatch):
    fake = FakePymetis([1, 0, 1, 0])
    monkeypatch.setitem(sys.modules, "pymetis", fake)
    g = diamond()
    order, placement, info = metis(g, 2)
    assert info == {"partitioner": "pymetis"}
    assert placement.tolist() == [1, 0, 1, 0] and placement.dtype == np.int64
    (call,) = fake.calls
    assert call["nparts"] == 2 and call["adjacency"] is None
    # a-b 4 B, a-c 4 B, b-d 2 B, c-d 3 B, both directions, neighbours in index order
    assert call["xadj"] == [0, 2, 4, 6, 8]
    assert call["adjncy"] == [1, 2, 0, 3, 0, 3, 1, 2]
    assert call["eweights"] == [4, 4, 4, 2, 4, 3, 2, 3]
    assert call["vweights"] == [32768, 49152, 65536, 16384]  # ∝ costs 2 3 4 1
    score(g, order, placement, 2)
    fake.calls.clear()
    metis(g, 1)
    assert not fake.calls  # D = 1: no partitioner


def test_csr_symmetric_with_summed_and_scaled_weights():
    # op 0 → op 1 through two tensors (5 + 7 B), op 1 → op 2 a control edge (0 B).
    g = make_graph(compute_cost=[0, 0, 0], temporary_memory=[0, 0, 0],
                   tensor_producer=[0, 0, 1], tensor_size=[5, 7, 0],
                   tensor_is_control=[False, False, True],
                   edge_tensor=[0, 1, 2], edge_consumer=[1, 1, 2])
    xadj, adjncy, vweights, eweights = metis_csr(g)
    assert (xadj, adjncy, eweights, vweights) == ([0, 1, 3, 4], [1, 0, 2, 1], [12, 12, 1, 1],
                                                  [1, 1, 1])
    for seed in range(3):
        g = random_computation_graph(30, seed)
        g = g.replace(tensor_size=g.tensor_size * 1e9)  # tens of GB: scaled to ints
        xadj, adjncy, vweights, eweights = metis_csr(g)
        assert len(xadj) == g.num_ops + 1 and xadj[0] == 0 and xadj[-1] == len(adjncy)
        assert len(eweights) == len(adjncy) and len(vweights) == g.num_ops
        assert min(eweights) >= 1 and min(vweights) >= 1
        assert sum(eweights) <= 2 ** 29 + len(eweights) and sum(vweights) <= 2 ** 26 + g.num_ops
        arcs = {}
        for u in range(g.num_ops):
            nbrs = adjncy[xadj[u]:xadj[u + 1]]
            assert nbrs == sorted(set(nbrs)) and u not in nbrs
            arcs.update({(u, v): w for v, w in zip(nbrs, eweights[xadj[u]:xadj[u + 1]])})
        assert all(arcs[(v, u)] == w for (u, v), w in arcs.items())
        pairs = {tuple(sorted((int(g.tensor_producer[t]), int(c))))
                 for t, c in zip(g.edge_tensor, g.edge_consumer)}
        assert set(arcs) == pairs | {(v, u) for u, v in pairs}


def test_fake_pymetis_bad_partition_is_an_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "pymetis", FakePymetis([0, 2, 1, 0]))
    with pytest.raises(ValueError, match="invalid partition"):
        metis(diamond(), 2)


# --- both ----------------------------------------------------------------------------------

GRAPHS = [diamond(), layer_chain([1, 2, 3, 4, 5])[0], random_computation_graph(30, 0),
          layered_graph(30, 1)]


@pytest.mark.parametrize("name", sorted(PLACEMENT_BASELINES))
@pytest.mark.parametrize("num_devices", [1, 2, 3])
def test_every_result_scores(no_pymetis, name, num_devices):
    summary, fn = PLACEMENT_BASELINES[name]
    assert isinstance(summary, str) and summary
    for g in GRAPHS:
        order, placement, info = fn(g, num_devices, 0)
        assert isinstance(info, dict)
        assert placement.shape == (g.num_ops,) and placement.min() >= 0
        assert placement.max() < num_devices
        result = score(g, order, placement, num_devices)
        assert np.isfinite(result["runtime"]) and np.isfinite(result["peak_memory"])


def test_registry_names():
    assert set(PLACEMENT_BASELINES) == {"human_expert", "metis"}
    assert PLACEMENT_BASELINES["human_expert"][1] is human_expert
    assert PLACEMENT_BASELINES["metis"][1] is metis
