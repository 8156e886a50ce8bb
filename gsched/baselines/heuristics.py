"""Classical host-side baselines: XLA's memory schedulers and REGAL's GP + DFS (§4.2).

Every heuristic returns ``(op_order [N], placement [N])`` (int64) to be scored with
:func:`gsched.evaluate_order`. They model XLA's ``hlo_memory_scheduler.cc`` as recalled from
its source and comments (not re-read here), with HLO notions mapped onto SPEC §1 graphs:

* an HLO instruction is an op, its *operands* are the distinct producer ops of its input
  tensors in the order of the graph's consumer relations (input order for files), control
  inputs included as ordinary operands (XLA keeps control predecessors apart);
* its *users* are the distinct consumer ops of its outputs; the buffers it *defines* are its
  output tensors; XLA's "memory of called subcomputations" is ``temporary_memory``;
* a computation has one root; a graph may have many sinks (ops without users), so every DFS
  starts from each sink in op-index order (XLA: unreachable roots in instruction order, then
  the root). XLA's special cases for scalars, parameters, constants, infeed/outfeed and
  aliasing have no counterpart here and are left out.

Single-device schedulers place every op on device 0. ``gp_dfs`` is REGAL's GP + DFS: a
balanced min-transfer partition by Fiduccia–Mattheyses (the linear-time Kernighan–Lin) with
recursive bisection, followed by the DFS scheduler's global order.
"""

from __future__ import annotations

import heapq
import math
from typing import Callable, NamedTuple

import numpy as np

from gsched.core.graph import Graph, topological_order
from gsched.costmodel.host import evaluate_order


class OpStructure(NamedTuple):
    """A graph's op-level adjacency as plain lists (host-side heuristics walk it)."""

    inputs: list[list[int]]  # tensors each op reads, edge order
    operands: list[list[int]]  # distinct producer ops of those tensors, first-seen order
    users: list[list[int]]  # distinct consumer ops of each op's outputs
    readers: list[list[int]]  # consumer ops of each tensor
    sinks: list[int]  # ops without users, index order


def op_structure(graph: Graph) -> OpStructure:
    """The :class:`OpStructure` of ``graph``."""
    n, producer = graph.num_ops, graph.tensor_producer.tolist()
    inputs: list[list[int]] = [[] for _ in range(n)]
    readers: list[list[int]] = [[] for _ in range(graph.num_tensors)]
    for t, c in zip(graph.edge_tensor.tolist(), graph.edge_consumer.tolist()):
        inputs[c].append(t)
        readers[t].append(c)
    operands = [list(dict.fromkeys(producer[t] for t in ts)) for ts in inputs]
    users: list[list[int]] = [[] for _ in range(n)]
    for c, ops in enumerate(operands):
        for p in ops:
            users[p].append(c)
    return OpStructure(inputs, operands, users, readers, [j for j in range(n) if not users[j]])


def _output_bytes(graph: Graph) -> np.ndarray:
    return np.bincount(graph.tensor_producer, graph.tensor_size, minlength=graph.num_ops)


def _dfs_post_order(roots: list[int], operands: list[list[int]]) -> np.ndarray:
    """Recursive-DFS post-order (iterative): from each root, visit each op's operands in the
    given order, emitting an op after all its operands."""
    visited = bytearray(len(operands))
    order: list[int] = []
    for root in roots:
        if visited[root]:
            continue
        visited[root] = 1
        stack = [(root, iter(operands[root]))]
        while stack:
            node, pending = stack[-1]
            for child in pending:
                if not visited[child]:
                    visited[child] = 1
                    stack.append((child, iter(operands[child])))
                    break
            else:
                stack.pop()
                order.append(node)
    return np.asarray(order, np.int64)


def post_order_schedule(graph: Graph) -> np.ndarray:
    """XLA's post-order scheduler (``HloComputation::MakeInstructionPostOrder``): DFS
    post-order from each sink (op-index order), operands visited in input order."""
    s = op_structure(graph)
    return _dfs_post_order(s.sinks, s.operands)


def dfs_schedule(graph: Graph) -> np.ndarray:
    """XLA's ``DFSMemoryScheduler``: a DFS post-order with a heuristic operand order.

    Over the post-order of :func:`post_order_schedule` each op gets
    ``extra_users = max(users − 1, 0) + Σ extra_users(operands)`` (capped at N) and
    ``total_sizes = output bytes + Σ total_sizes(operands)`` (capped at the running sum of
    output bytes in that post-order — XLA's overflow guard, kept since it changes the order);
    shared ancestors are counted once per path, as in XLA. Then a DFS post-order from each sink
    visits operands by decreasing ``extra_users``, then decreasing ``total_sizes``, then
    increasing op index (XLA: increasing name) — the order XLA's comment states. Temporary
    memory is not used (XLA sums only the defined buffers).
    """
    s = op_structure(graph)
    n, out_bytes = graph.num_ops, _output_bytes(graph).tolist()
    extra, total, cumulative = [0] * n, [0.0] * n, 0.0
    for j in _dfs_post_order(s.sinks, s.operands).tolist():
        cumulative += out_bytes[j]
        extra[j] = min(max(len(s.users[j]) - 1, 0) + sum(extra[o] for o in s.operands[j]), n)
        total[j] = min(out_bytes[j] + sum(total[o] for o in s.operands[j]), cumulative)
    ordered = [sorted(ops, key=lambda o: (-extra[o], -total[o], o)) for ops in s.operands]
    return _dfs_post_order(s.sinks, ordered)


def list_schedule(graph: Graph) -> np.ndarray:
    """XLA's ``ListScheduler``: greedy list scheduling for memory.

    Among ready ops (all producers scheduled) run the one with the largest priority
    ``(bytes freed − bytes allocated, number of users)``, where *freed* sums the input tensors
    this op is the last unscheduled reader of and *allocated* is its output bytes plus its
    temporary memory (the op's own usage increment in SPEC §3; XLA counts called
    subcomputations' memory the same way). As in XLA, priorities of ready ops are updated when
    a tensor they read drops to one unscheduled reader. Exact ties go to the smaller op index
    (XLA's multimap picks the most recently inserted entry instead).
    """
    s = op_structure(graph)
    size = graph.tensor_size.tolist()
    alloc = (_output_bytes(graph) + graph.temporary_memory).tolist()
    remaining = [len(r) for r in s.readers]
    pending = [len(ops) for ops in s.operands]
    done = bytearray(graph.num_ops)
    priority: dict[int, float] = {}
    heap: list[tuple[float, int, int]] = []

    def push(j: int) -> None:
        p = sum(size[t] for t in s.inputs[j] if remaining[t] == 1) - alloc[j]
        if priority.get(j) != p:
            priority[j] = p
            heapq.heappush(heap, (-p, -len(s.users[j]), j))

    for j in range(graph.num_ops):
        if not pending[j]:
            push(j)
    order = []
    while heap:
        neg, _, j = heapq.heappop(heap)
        if done[j] or -neg != priority[j]:
            continue  # stale entry
        done[j] = 1
        order.append(j)
        for t in s.inputs[j]:
            remaining[t] -= 1
            if remaining[t] == 1:
                last = next(c for c in s.readers[t] if not done[c])
                if not pending[last]:
                    push(last)
        for c in s.users[j]:
            pending[c] -= 1
            if not pending[c]:
                push(c)
    return np.asarray(order, np.int64)


def default_schedule(graph: Graph) -> np.ndarray:
    """XLA's ``DefaultMemoryScheduler``: the list, DFS and post-order schedules scored by peak
    memory (our cost model, D = 1, instead of XLA's heap simulator); post-order wins only if
    strictly best, else DFS if strictly better than list, else list (XLA's tie rule)."""
    orders = [list_schedule(graph), dfs_schedule(graph), post_order_schedule(graph)]
    lst, dfs, post = (evaluate_order(graph, o)["peak_memory"] for o in orders)
    if post < min(lst, dfs):
        return orders[2]
    return orders[1] if dfs < lst else orders[0]


# --- GP + DFS ------------------------------------------------------------------------------

_MAX_PASSES = 32


def transfer_bytes(graph: Graph, placement) -> float:
    """Bytes the cost model transfers for ``placement``: Σ_t size(t) · (number of devices other
    than the producer's holding a consumer of t) — the partition objective."""
    placement = np.asarray(placement)
    devices = {}
    for t, c in zip(graph.edge_tensor.tolist(), graph.edge_consumer.tolist()):
        devices.setdefault(t, set()).add(int(placement[c]))
    producer, size = graph.tensor_producer, graph.tensor_size
    return float(sum(size[t] * len(d - {int(placement[producer[t]])})
                     for t, d in devices.items()))


def kl_partition(graph: Graph, num_devices: int, *, seed: int = 0, imbalance: float = 0.05,
                 restarts: int = 8) -> np.ndarray:
    """``[N]`` a device per op: a balanced partition minimizing :func:`transfer_bytes`.

    Each tensor is a hyperedge over its producer and consumers, weighted by its size. D parts
    come from recursive bisection (a piece for ``k`` devices is split into pieces for
    ``⌈k/2⌉`` and ``⌊k/2⌋``; hyperedges are restricted to the piece, which makes the summed
    cuts equal the transfer bytes). Each bisection keeps the better (first on ties) of
    ``restarts`` Fiduccia–Mattheyses refinements: one from the topological order cut at the
    target, the others from random balanced splits drawn from ``seed``.

    Balance is by op count (compute costs are often all zero in CostGraphDefs): a bisection
    of ``n`` ops with target ``t = n·⌈k/2⌉/k`` ops for one side gives that side
    ``⌈t − ε·m⌉ − 1 .. ⌊t + ε·m⌋ + 1`` ops, ``m = min(t, n − t)`` and ε = ``imbalance`` (the
    ±1 is FM's usual room for single moves). For D = 2 each part is within ``ε·N/2 + 1`` ops
    of ``N/2``; for larger D the deviations compound over the ``⌈log2 D⌉`` levels.
    """
    if num_devices < 1 or restarts < 1:
        raise ValueError(f"need num_devices >= 1 and restarts >= 1, got {num_devices}, "
                         f"{restarts}")
    rng = np.random.default_rng(seed)
    position = np.empty(graph.num_ops, np.int64)
    position[topological_order(graph)] = np.arange(graph.num_ops)
    s = op_structure(graph)
    nets = [(sorted({int(graph.tensor_producer[t])} | set(r)), float(graph.tensor_size[t]))
            for t, r in enumerate(s.readers) if r and graph.tensor_size[t] > 0]
    placement = np.zeros(graph.num_ops, np.int64)

    def split(ops: np.ndarray, k: int, first: int) -> None:
        if k == 1:
            placement[ops] = first
            return
        k0 = (k + 1) // 2
        ordered = ops[np.argsort(position[ops])]
        side = _bisect(ordered, nets, k0 / k, imbalance, restarts, rng)
        split(ordered[side == 0], k0, first)
        split(ordered[side == 1], k - k0, first + k0)

    split(np.arange(graph.num_ops), num_devices, 0)
    return placement


def _bisect(ops: np.ndarray, nets, fraction: float, imbalance: float, restarts: int,
            rng: np.random.Generator) -> np.ndarray:
    """Sides (0/1) for ``ops`` (given in topological order), ~``fraction`` of them on side 0."""
    n = ops.size
    local = {int(v): i for i, v in enumerate(ops)}
    sub = [([local[p] for p in pins if p in local], w) for pins, w in nets]
    sub = [(pins, w) for pins, w in sub if len(pins) > 1]
    target = n * fraction
    slack = imbalance * min(target, n - target)
    lo, hi = max(math.ceil(target - slack) - 1, 0), min(math.floor(target + slack) + 1, n)
    start = round(target)
    best_side, best_cut = None, math.inf
    for r in range(restarts):
        side = np.ones(n, np.int8)
        side[(np.arange(n) if r == 0 else rng.permutation(n))[:start]] = 0
        side, cut = _fm(side, sub, lo, hi)
        if cut < best_cut:
            best_side, best_cut = side, cut
    return best_side


def _fm(side: np.ndarray, nets, lo: int, hi: int) -> tuple[np.ndarray, float]:
    """Fiduccia–Mattheyses passes on a bisection (side-0 size kept in ``[lo, hi]``) until a
    pass stops improving the cut (at most ``_MAX_PASSES``). Returns the sides and the cut."""
    n = side.size
    side = side.tolist()
    vnets: list[list[int]] = [[] for _ in range(n)]
    for e, (pins, _) in enumerate(nets):
        for v in pins:
            vnets[v].append(e)
    weight = [w for _, w in nets]
    tolerance = 1e-12 * sum(weight)
    for _ in range(_MAX_PASSES):
        count = [[0, 0] for _ in nets]
        for e, (pins, _) in enumerate(nets):
            for v in pins:
                count[e][side[v]] += 1
        gain = [sum(weight[e] * ((count[e][side[v]] == 1) - (count[e][1 - side[v]] == 0))
                    for e in vnets[v]) for v in range(n)]
        heaps: list[list[tuple[float, int]]] = [[], []]
        for v in range(n):
            heaps[side[v]].append((-gain[v], v))
        heapq.heapify(heaps[0])
        heapq.heapify(heaps[1])
        locked = bytearray(n)
        size0 = side.count(0)
        moves, total, best, best_len = [], 0.0, 0.0, 0

        def bump(u: int, delta: float) -> None:
            gain[u] += delta
            heapq.heappush(heaps[side[u]], (-gain[u], u))

        while True:
            candidates = []
            for f, allowed in ((0, size0 - 1 >= lo), (1, size0 + 1 <= hi)):
                h = heaps[f]
                while h and (locked[h[0][1]] or -h[0][0] != gain[h[0][1]]):
                    heapq.heappop(h)
                if allowed and h:
                    candidates.append(h[0])
            if not candidates:
                break
            _, v = min(candidates)
            f, t = side[v], 1 - side[v]
            locked[v], side[v] = 1, t
            size0 += 1 if t == 0 else -1
            total += gain[v]
            moves.append(v)
            for e in vnets[v]:
                w, c, pins = weight[e], count[e], nets[e][0]
                if c[t] <= 1:  # net becomes cut (c[t] = 0) or stops being t's own (c[t] = 1)
                    for u in pins:
                        if not locked[u] and (c[t] == 0 or side[u] == t):
                            bump(u, w if c[t] == 0 else -w)
                c[f] -= 1
                c[t] += 1
                if c[f] <= 1:  # net becomes uncut (c[f] = 0) or f keeps one pin (c[f] = 1)
                    for u in pins:
                        if not locked[u] and (c[f] == 0 or side[u] == f):
                            bump(u, -w if c[f] == 0 else w)
            if total > best + tolerance:
                best, best_len = total, len(moves)
        for v in moves[best_len:]:
            side[v] = 1 - side[v]
        if best_len == 0:
            break
    cut = sum(w for pins, w in nets if len({side[v] for v in pins}) > 1)
    return np.asarray(side, np.int8), cut


def gp_dfs(graph: Graph, num_devices: int, *, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """REGAL's GP + DFS baseline: placement = :func:`kl_partition`, order = the global
    :func:`dfs_schedule` (each device runs its ops in that relative order)."""
    return dfs_schedule(graph), kl_partition(graph, num_devices, seed=seed)


Heuristic = Callable[[Graph, int, int], tuple[np.ndarray, np.ndarray]]


def single_device(schedule: Callable[[Graph], np.ndarray]) -> Heuristic:
    """A heuristic runner that puts every op on device 0 and orders them by ``schedule``."""
    def run(graph: Graph, num_devices: int = 1, seed: int = 0):
        return schedule(graph), np.zeros(graph.num_ops, np.int64)

    run.__doc__ = f"{schedule.__name__} with every op on device 0 (any D, seed unused)."
    return run


HEURISTICS: dict[str, Heuristic] = {
    "xla_list": single_device(list_schedule),
    "xla_dfs": single_device(dfs_schedule),
    "xla_postorder": single_device(post_order_schedule),
    "xla_default": single_device(default_schedule),
    "gp_dfs": lambda graph, num_devices, seed=0: gp_dfs(graph, num_devices, seed=seed),
}
"""Baselines by name: ``(graph, num_devices, seed) -> (op_order [N], placement [N])``."""

EVALUATIONS = {name: 1 for name in HEURISTICS} | {"xla_default": 4}
"""Cost-model evaluations each heuristic spends, scoring its result included (``xla_default``
scores its three candidate schedules first)."""
