"""Single-device ordering baselines of Neural Topological Ordering (§5): depth-first and
breadth-first sequencing and the best of 100 random topological orders.

All three schedule the ops of one device (D = 1) and are scored for peak memory (SPEC §3) by
the cost model. The paper traverses "the layout of the graph generated using pygraphviz";
without graphviz the layout order within a rank is replaced by the op index (the layered
generator numbers ops layer by layer, left to right, as dot's ranks would be):

* **breadth-first**: Kahn's algorithm with a FIFO queue — sources in op-index order, each
  op's successors queued in op-index order as they become ready;
* **depth-first**: Kahn's algorithm with a LIFO stack — after an op runs, its lowest-index
  newly ready successor runs next, so a path is followed as deep as its dependencies allow;
* **random orders**: each order picks the next op uniformly among the ready ones (random
  Kahn; sampling uniformly over all topological orders is #P-hard and not what the paper
  asks); the first of the ``num_orders`` orders with the lowest peak wins.
"""

from __future__ import annotations

import collections

import numpy as np

from gsched.baselines.heuristics import op_structure, single_device
from gsched.core.graph import Graph
from gsched.costmodel.host import evaluate_order

NUM_RANDOM_ORDERS = 100  # the paper's "best of 100 random topological orders"


def _kahn(graph: Graph, depth_first: bool) -> np.ndarray:
    s = op_structure(graph)
    pending = [len(ops) for ops in s.operands]
    ready = collections.deque(j for j in range(graph.num_ops) if not pending[j])
    order = []
    while ready:
        j = ready.pop() if depth_first else ready.popleft()
        order.append(j)
        released = [c for c in sorted(s.users[j]) if pending[c] == 1]
        for c in s.users[j]:
            pending[c] -= 1
        # The stack pops its end, so the lowest index goes last to run first.
        ready.extend(reversed(released) if depth_first else released)
    return np.asarray(order, np.int64)


def bfs_order(graph: Graph) -> np.ndarray:
    """``[N]`` breadth-first sequencing (FIFO Kahn, op-index order within a level)."""
    return _kahn(graph, depth_first=False)


def dfs_order(graph: Graph) -> np.ndarray:
    """``[N]`` depth-first sequencing (LIFO Kahn, lowest-index successor first)."""
    return _kahn(graph, depth_first=True)


def random_topological_orders(graph: Graph, num_orders: int, seed: int = 0) -> np.ndarray:
    """``[num_orders, N]`` random Kahn orders: each step picks a ready op uniformly."""
    if num_orders < 1:
        raise ValueError(f"num_orders must be >= 1, got {num_orders}")
    n = graph.num_ops
    rng = np.random.default_rng(seed)
    producer = graph.tensor_producer[graph.edge_tensor]
    pairs = np.unique(producer * n + graph.edge_consumer)
    successors = np.zeros((n, n), np.int32)
    successors[pairs // max(n, 1), pairs % max(n, 1)] = 1
    pending = np.repeat(successors.sum(0)[None], num_orders, 0)  # [P, N] unscheduled preds
    orders = np.empty((num_orders, n), np.int64)
    rows = np.arange(num_orders)
    for step in range(n):
        scores = np.where(pending == 0, rng.random((num_orders, n)), -1.0)
        picked = np.argmax(scores, axis=1)
        orders[:, step] = picked
        pending -= successors[picked]
        pending[rows, picked] = -1  # scheduled: never ready again
    return orders


def best_random_order(graph: Graph, num_orders: int = NUM_RANDOM_ORDERS,
                      seed: int = 0) -> tuple[np.ndarray, float]:
    """The first of ``num_orders`` random topological orders with the lowest peak memory
    (D = 1), and that peak. Each order is scored by :func:`gsched.evaluate_order` in the
    graph's own bucket — the compilation the method harness makes before timing."""
    orders = random_topological_orders(graph, num_orders, seed)
    peaks = [evaluate_order(graph, order)["peak_memory"] for order in orders]
    best = int(np.argmin(peaks))
    return orders[best], peaks[best]


def build(name: str):
    """A ``heuristic`` runner for the method registry, every op on device 0:
    ``"dfs_order"``, ``"bfs_order"`` or ``"random_orders"`` (:func:`best_random_order` of
    ``NUM_RANDOM_ORDERS`` orders drawn from the seed)."""
    if name == "random_orders":
        def run(graph: Graph, num_devices: int = 1, seed: int = 0):
            return best_random_order(graph, seed=seed)[0], np.zeros(graph.num_ops, np.int64)

        return run
    return single_device({"dfs_order": dfs_order, "bfs_order": bfs_order}[name])
