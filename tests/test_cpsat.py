"""CP-SAT baseline: exact against brute force and the cost model; clear errors."""

import functools
import itertools
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gsched import (
    Bucket,
    evaluate_order,
    load_graph,
    order_keys,
    pad_graph,
    random_computation_graph,
)
from gsched.baselines import cpsat
from gsched.costmodel.evaluate import evaluate_population
from gsched.methods import optimize


@pytest.fixture
def ortools():
    return pytest.importorskip("ortools")


def _topological_orders(graph):
    n = graph.num_ops
    preds = [set() for _ in range(n)]
    for t, c in zip(graph.edge_tensor, graph.edge_consumer):
        preds[int(c)].add(int(graph.tensor_producer[t]))

    def extend(prefix, done):
        if len(prefix) == n:
            yield list(prefix)
        for j in range(n):
            if j not in done and preds[j] <= done:
                yield from extend(prefix + [j], done | {j})
    return list(extend([], frozenset()))


TINY = Bucket(num_ops=8, num_tensors=16, num_edges=16)  # one compilation for every tiny graph
SMALL = Bucket(num_ops=16, num_tensors=32, num_edges=32)
COMBOS = 4096  # brute force: every (order, placement) of a ≤ 6-op graph, padded to this many


@functools.partial(jax.jit, static_argnames="num_devices")
def _peaks(padded, orders, places, num_devices):
    keys = jax.vmap(order_keys, in_axes=(None, 0, 0, None))(padded, orders, places, num_devices)
    return evaluate_population(padded, keys, num_devices=num_devices).peak_memory


def _brute_force_peak(graph, num_devices):
    """Min peak over every topological order × placement, in one cost-model call."""
    n, n_pad = graph.num_ops, TINY.num_ops
    combos = [(o, p) for o in _topological_orders(graph)
              for p in itertools.product(range(num_devices), repeat=n)]
    assert len(combos) <= COMBOS
    combos += combos[:1] * (COMBOS - len(combos))
    orders = np.array([o + list(range(n, n_pad)) for o, _ in combos], np.int32)
    places = np.array([list(p) + [0] * (n_pad - n) for _, p in combos], np.int32)
    return float(jnp.min(_peaks(pad_graph(graph, TINY), orders, places, num_devices)))


@pytest.mark.parametrize("num_devices,num_ops,seed", [(1, 6, 0), (1, 6, 1), (2, 5, 2),
                                                      (2, 5, 3)])
def test_optimum_equals_brute_force(ortools, num_devices, num_ops, seed):
    graph = random_computation_graph(num_ops, seed)
    order, placement, info = cpsat.solve(graph, num_devices, time_limit=30, seed=0)
    value = evaluate_order(graph, order, placement, num_devices, bucket=TINY)["peak_memory"]
    assert info["status"] == "optimal"
    assert value == pytest.approx(_brute_force_peak(graph, num_devices), rel=1e-6)
    assert info["cpsat_peak"] == pytest.approx(value, rel=1e-6)
    assert info["bound"] == pytest.approx(value, rel=1e-6)


@pytest.mark.parametrize("num_devices", [1, 2])
def test_reported_peak_is_the_cost_models(ortools, num_devices):
    for seed in range(2):
        graph = random_computation_graph(11, 10 + seed)
        order, placement, info = cpsat.solve(graph, num_devices, time_limit=30, seed=0)
        assert info["status"] == "optimal"
        result = evaluate_order(graph, order, placement, num_devices, bucket=SMALL)
        assert np.float32(info["cpsat_peak"]) == np.float32(result["peak_memory"])
        assert info["bound"] <= info["cpsat_peak"] * (1 + 1e-9)


def test_spec_diamond_optimum(ortools):
    graph = load_graph("/work/shared/examples/diamond.pbtxt")
    order, placement, info = cpsat.solve(graph, 1, time_limit=10)
    assert info["status"] == "optimal" and info["cpsat_peak"] == 12.0  # SPEC §5: a c b d
    assert list(order) == [0, 2, 1, 3] and not placement.any()


def test_optimize_method_rows(ortools):
    graphs = [random_computation_graph(7, s) for s in (4, 5)]
    outcome = optimize("cpsat", graphs, num_devices=2, budget=1, options={"time_limit": 20.0})
    for graph, row in zip(graphs, outcome.results):
        assert row["status"] == "optimal" and row["evals_used"] == 1
        assert row["value"] == pytest.approx(row["cpsat_peak"], rel=1e-6)
        assert row["bound"] <= row["value"] * (1 + 1e-9)
        assert sorted(row["placement"]) and len(row["order"]) >= graph.num_ops


def test_bad_input(ortools, monkeypatch):
    graph = random_computation_graph(6, 0)
    with pytest.raises(ValueError, match="optimizes only peak_memory, not runtime"):
        optimize("cpsat", [graph], num_devices=2, budget=1, objective="runtime")
    with pytest.raises(ValueError, match="time_limit"):
        cpsat.solve(graph, 1, time_limit=0.0)
    with pytest.raises(ValueError, match="num_devices"):
        cpsat.solve(graph, 0)
    monkeypatch.setattr(cpsat, "MAX_CONSTRAINTS", 10)
    with pytest.raises(ValueError, match="too large for the CP-SAT position model"):
        cpsat.solve(graph, 1)


def test_missing_ortools_is_a_clear_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "ortools", None)
    monkeypatch.setitem(sys.modules, "ortools.sat", None)
    monkeypatch.setitem(sys.modules, "ortools.sat.python", None)
    message = r"method cpsat needs OR-Tools: pip install -e \.\[cpsat\]"
    with pytest.raises(ValueError, match=message):
        cpsat.solve(random_computation_graph(4, 0), 1)
    with pytest.raises(ImportError, match=message):  # an ImportError too
        cpsat.build_cpsat(time_limit=1.25)
    with pytest.raises(ValueError, match=message):  # an option value no other test builds
        optimize("cpsat", [random_computation_graph(4, 0)], num_devices=1, budget=1,
                 options={"time_limit": 1.25})


@pytest.mark.subprocess
def test_core_never_imports_ortools():
    code = "import sys, gsched, gsched.methods; print('ortools' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "False"


def test_same_seed_same_solution(ortools):
    graph = random_computation_graph(12, 7)
    first, second = (cpsat.solve(graph, 2, time_limit=30, seed=1) for _ in range(2))
    assert first[2]["status"] == "optimal"
    np.testing.assert_array_equal(first[0], second[0])
    np.testing.assert_array_equal(first[1], second[1])
