"""Single-device ordering baselines of Neural Topological Ordering (§5): depth-first and
breadth-first sequencing, the best of 100 random topological orders."""

import collections

import numpy as np
import pytest

from gsched import (
    bucket_for,
    evaluate_order,
    layered_graph,
    make_graph,
    random_computation_graph,
)
from gsched.baselines import (
    best_random_order,
    bfs_order,
    dfs_order,
    random_topological_orders,
)
from gsched.methods import optimize


def _graph(num_ops, edges):
    """One output tensor per op (size 1 + op index); ``edges`` = [(producer, consumer)]."""
    return make_graph(compute_cost=np.ones(num_ops), temporary_memory=np.zeros(num_ops),
                      tensor_producer=np.arange(num_ops), tensor_size=1.0 + np.arange(num_ops),
                      edge_tensor=[p for p, _ in edges], edge_consumer=[c for _, c in edges])


# 0 → {1, 2}, 1 → 3, 2 → 4, {3, 4} → 5.
TWO_PATHS = _graph(6, [(0, 1), (0, 2), (1, 3), (2, 4), (3, 5), (4, 5)])
GRAPHS = [random_computation_graph(40, 0), layered_graph(60, 3), TWO_PATHS]
BUCKET = bucket_for(GRAPHS)


def _check_topological(graph, order):
    n = graph.num_ops
    assert order.dtype == np.int64 and sorted(order.tolist()) == list(range(n))
    position = np.empty(n, np.int64)
    position[order] = np.arange(n)
    assert np.all(position[graph.tensor_producer[graph.edge_tensor]]
                  < position[graph.edge_consumer])


def test_two_paths_by_hand():
    assert bfs_order(TWO_PATHS).tolist() == [0, 1, 2, 3, 4, 5]  # level by level
    assert dfs_order(TWO_PATHS).tolist() == [0, 1, 3, 2, 4, 5]  # down 0-1-3, then 2-4, then 5


def test_orders_are_topological_and_seeded():
    for graph in GRAPHS:
        _check_topological(graph, bfs_order(graph))
        _check_topological(graph, dfs_order(graph))
        orders = random_topological_orders(graph, 20, seed=1)
        assert orders.shape == (20, graph.num_ops)
        for order in orders:
            _check_topological(graph, order)
        assert np.array_equal(orders, random_topological_orders(graph, 20, seed=1))
        assert not np.array_equal(orders, random_topological_orders(graph, 20, seed=2))
    with pytest.raises(ValueError, match="num_orders"):
        random_topological_orders(TWO_PATHS, 0)


def test_random_orders_pick_ready_ops_uniformly():
    antichain = _graph(3, [])
    counts = collections.Counter(map(tuple, random_topological_orders(antichain, 600, seed=0)))
    assert len(counts) == 6 and min(counts.values()) >= 60  # 100 expected per permutation


def test_best_random_order_is_the_best_of_its_orders():
    graph = GRAPHS[1]
    order, peak = best_random_order(graph, seed=4)
    peaks = [evaluate_order(graph, o, bucket=BUCKET)["peak_memory"]
             for o in random_topological_orders(graph, 100, seed=4)]
    assert peak == min(peaks) == evaluate_order(graph, order, bucket=BUCKET)["peak_memory"]
    assert max(peaks) > min(peaks)  # the choice matters on this graph


def test_registered_methods():
    graphs = GRAPHS[:2]
    for name, orderer in (("dfs_order", dfs_order), ("bfs_order", bfs_order)):
        rows = optimize(name, graphs, num_devices=1, budget=1).results
        for graph, row in zip(graphs, rows):
            want = evaluate_order(graph, orderer(graph), bucket=BUCKET)
            assert row["value"] == want["peak_memory"] and row["evals_used"] == 1
            assert row["order"] == want["order"]
    rows = optimize("random_orders", graphs, num_devices=1, budget=100, seed=3).results
    for graph, row in zip(graphs, rows):
        assert row["value"] == best_random_order(graph, seed=3)[1] and row["evals_used"] == 100
    with pytest.raises(ValueError, match="needs 100 evaluations"):
        optimize("random_orders", graphs, num_devices=1, budget=99)
    with pytest.raises(ValueError, match="at most 1 device"):
        optimize("dfs_order", graphs, num_devices=2, budget=1)
