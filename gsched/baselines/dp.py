"""Dynamic programming over scheduled sets for single-device peak-memory ordering (NTO §5 and
appendix C.3): the approximate (beam) DP in JAX, the depth-first DP with a time limit, and an
exact subset DP for small graphs.

**Why a set is a state.** With one device (SPEC §3, D = 1) running op ``j`` after the set
``S`` of ops costs ``usage(S, j) = live(S) + out(j) + temp(j)``, where ``out(j)`` sums all of
``j``'s outputs and ``live(S)`` sums the tensors produced in ``S`` that still have a consumer
outside ``S``: a tensor is freed right after its last reader, and a graph output (no
reader) right after the step that made it, so no graph output stays live. The usage depends on
``S`` and ``j`` only, never on the order inside ``S``, so of two partial orders of the same set
the one with the smaller running peak dominates (the paper's *state collapsing*), and the
optimal peak is ``best(S ∪ {j}) = min max(best(S), usage(S, j))`` over sets and ready ops.

* :func:`exact_order` — that recursion over every reachable set, level by level (host; the
  number of sets grows exponentially, so it is for graphs of ≤ ~25 ops, e.g. tests).
* :func:`dfs_dp` — C.3's depth-first DP: orders are built depth first, the next op drawn at
  random among the ready ones; a branch stops when its set was already reached with a running
  peak ≤ the current one, or when its running peak is ≥ the best complete order's. Added
  (exact, only faster): a branch also stops when a not yet scheduled op must alone reach the
  best peak (``need(j) = in(j) + out(j) + temp(j)`` is a lower bound on any order's usage when
  ``j`` runs), and the search ends as soon as the best peak equals ``max_j need(j)``. It
  returns the best order when the time limit hits and whether it proved optimality.
* :func:`approx_dp` — C.3's approximate DP, batched in JAX: a beam of ``K`` distinct sets
  grows by one op per step; every beam entry is expanded by every ready op, candidates reaching
  the same set are collapsed (the smallest running peak is kept) and the ``K`` lowest peaks
  survive. One ``lax.scan`` over the ``N`` steps, one compilation per (bucket, ``K``, batch).
  A step costs ``O(K·(N + T))`` elementwise work (building the ready mask, gathering the
  survivors' counters), the compaction of the ready (entry, op) pairs into a buffer at most
  2× their number (bit-packed rows and popcounts, :func:`_compact`), one sort of that buffer
  by (set hash, running peak) and a selection of the ``K`` lowest peaks by bisection
  (:func:`_smallest`); with a full beam the sort and the counter gathers take most of a
  step. Memory is ``K·(N + T)`` int16 counters (int32 from ``N`` = 2¹⁵) and
  ``K·(2 + N/32)`` int32 of state, ``2·N·K`` int32 of back-pointers, the candidate buffer's
  few ``[M]`` and ``[M, N/32]`` arrays and dense ``[N, N]`` / ``[N, T]`` int8 graph tables:
  about 2.1 GiB peak RSS for ``K`` = 100,000 on a 500-node graph (bucket 512), CPU, JAX
  included.

Host DPs compute in float64 (exact for integer byte sizes below 2⁵³). The JAX DP ranks in
int32 fixed point: sizes are multiples of a power-of-two unit with Σ sizes + max temporary
memory < 2³⁰ units (integer sizes below 2³⁰ are exact), so sums never round; its reported
``best_evaluation`` comes from the cost model.
"""

from __future__ import annotations

import functools
import math
import random
import time
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from gsched.core import fixedpoint as fp
from gsched.core.graph import Graph
from gsched.core.padding import PaddedGraph
from gsched.costmodel.evaluate import Evaluation, evaluate_batch, order_keys, score
from gsched.costmodel.params import CostParams, check_search_settings, is_int
from gsched.registry import Search
from gsched.search.common import SearchResult

# --- Host side: the exact subset DP and the depth-first DP ---------------------------------


class _Problem(NamedTuple):
    """A graph as the host DPs use it (op sets are Python int bitmasks)."""

    num_ops: int
    inc: list[float]  # out(j) + temp(j): what running j adds to the live bytes
    outlive: list[float]  # bytes of j's outputs that have a consumer (stay live after j)
    need: list[float]  # in(j) + inc(j): a lower bound on the usage when j runs
    inputs: list[list[int]]  # tensors j reads
    size: list[float]  # per tensor
    readers: list[int]  # per tensor: bitmask of its consumer ops
    preds: list[int]  # per op: bitmask of its predecessor ops
    succ: list[list[int]]  # per op: distinct successor ops


def op_memory_need(graph: Graph) -> np.ndarray:
    """``[N]`` bytes op ``j`` needs resident on its device while it runs (SPEC §3): its outputs
    and temporary memory plus the distinct tensors it reads (edges are distinct (tensor,
    consumer) pairs; a transferred copy stays on the consumer's device until its last reader
    there ran). No schedule's usage when ``j`` runs is below it, on any number of devices."""
    n = graph.num_ops
    written = np.bincount(graph.tensor_producer, graph.tensor_size, minlength=n)
    read = np.bincount(graph.edge_consumer, graph.tensor_size[graph.edge_tensor], minlength=n)
    return (written + graph.temporary_memory) + read


def peak_memory_lower_bound(graph: Graph) -> float:
    """The single-op lower bound ``max_j need(j)`` (:func:`op_memory_need`) on the peak memory
    of any placement and order."""
    return float(op_memory_need(graph).max(initial=0.0))


def _problem(graph: Graph) -> _Problem:
    n, size = graph.num_ops, graph.tensor_size.tolist()
    producer = graph.tensor_producer.tolist()
    inputs: list[list[int]] = [[] for _ in range(n)]
    readers = [0] * graph.num_tensors
    preds = [0] * n
    for t, c in zip(graph.edge_tensor.tolist(), graph.edge_consumer.tolist()):
        inputs[c].append(t)
        readers[t] |= 1 << c
        preds[c] |= 1 << producer[t]
    succ: list[list[int]] = [[] for _ in range(n)]
    for c in range(n):
        for p in _bits(preds[c]):
            succ[p].append(c)
    out = np.bincount(graph.tensor_producer, graph.tensor_size, minlength=n)
    kept = np.bincount(graph.tensor_producer,
                       graph.tensor_size * (np.bincount(graph.edge_tensor,
                                                        minlength=graph.num_tensors) > 0),
                       minlength=n)
    inc = (out + graph.temporary_memory).tolist()
    return _Problem(n, inc, kept.tolist(), op_memory_need(graph).tolist(), inputs, size,
                    readers, preds, succ)


def _bits(mask: int) -> list[int]:
    out = []
    while mask:
        low = mask & -mask
        out.append(low.bit_length() - 1)
        mask ^= low
    return out


def _live_after(p: _Problem, mask: int, live: float, j: int) -> float:
    """``live(S ∪ {j})`` from ``live(S)``; ``mask`` already contains ``j``."""
    freed = sum(p.size[t] for t in p.inputs[j] if not p.readers[t] & ~mask)
    return live + p.outlive[j] - freed


def exact_order(graph: Graph, max_ops: int = 25) -> tuple[np.ndarray, float]:
    """The optimal order (``[N]`` int64) and its peak memory, by DP over every reachable set
    of scheduled ops (level by level; ties keep the first order found, ops in index order).
    Raises ``ValueError`` above ``max_ops`` ops (the number of sets is exponential)."""
    p = _problem(graph)
    n = p.num_ops
    if n > max_ops:
        raise ValueError(f"exact_order is exponential in the number of ops: graph "
                         f"{graph.name!r} has {n} ops, more than max_ops={max_ops}")
    level = {0: (0.0, 0.0)}  # set -> (best running peak, live bytes)
    back: list[dict[int, tuple[int, int]]] = []  # per level: set -> (previous set, op)
    for _ in range(n):
        nxt: dict[int, tuple[float, float]] = {}
        came: dict[int, tuple[int, int]] = {}
        for mask, (peak, live) in level.items():
            for j in range(n):
                if mask >> j & 1 or p.preds[j] & ~mask:
                    continue
                cost = max(peak, live + p.inc[j])
                new = mask | 1 << j
                old = nxt.get(new)
                if old is None or cost < old[0]:
                    nxt[new] = (cost, old[1] if old else _live_after(p, new, live, j))
                    came[new] = (mask, j)
        back.append(came)
        level = nxt
    mask = (1 << n) - 1
    peak = level[mask][0] if n else 0.0
    order = []
    for came in reversed(back):
        mask, j = came[mask]
        order.append(j)
    return np.asarray(order[::-1], np.int64), float(peak)


class DFSDPResult(NamedTuple):
    """What :func:`dfs_dp` found."""

    order: np.ndarray  # [N] int64, the best complete order
    peak: float  # its peak memory
    optimal: bool  # the search finished (or met the lower bound): ``peak`` is optimal
    expanded: int  # partial orders extended
    seconds: float  # wall time


class _Frame(NamedTuple):
    mask: int
    live: float
    peak: float
    ready: list[int]  # ready ops in the order they will be tried
    cursor: list[int]  # [next index into ready]


def _check_time_limit(time_limit) -> None:
    if (not isinstance(time_limit, (int, float)) or isinstance(time_limit, bool)
            or not (math.isfinite(time_limit) and time_limit > 0)):
        raise ValueError(f"time_limit must be a finite number of seconds > 0, got {time_limit!r}")


def dfs_dp(graph: Graph, time_limit: float = 60.0, seed: int = 0) -> DFSDPResult:
    """C.3's depth-first DP (see the module docstring) with a wall-time limit in seconds.

    The limit is checked only once a complete order exists; the first descent reaches one in
    ``O(N·(N + E))`` (nothing prunes it), so at least one order is always returned.
    """
    _check_time_limit(time_limit)
    start = time.perf_counter()
    deadline = start + time_limit
    p = _problem(graph)
    n, rng = p.num_ops, random.Random(seed)
    full = (1 << n) - 1
    lower_bound = max(p.need, default=0.0)
    by_need = sorted(range(n), key=lambda j: -p.need[j])

    def frame(mask: int, live: float, peak: float, ready: list[int]) -> _Frame:
        rng.shuffle(ready)
        return _Frame(mask, live, peak, ready, [0])

    def remaining_need(mask: int) -> float:
        return next((p.need[j] for j in by_need if not mask >> j & 1), 0.0)

    best_peak, best_order = math.inf, list(range(n)) if n == 0 else None
    seen: dict[int, float] = {0: 0.0}  # set -> lowest running peak it was reached with
    stack = [frame(0, 0.0, 0.0, [j for j in range(n) if not p.preds[j]])]
    path: list[int] = []
    expanded, finished = 0, True
    while stack:
        top = stack[-1]
        if top.cursor[0] == len(top.ready):
            stack.pop()
            if path:
                path.pop()
            continue
        j = top.ready[top.cursor[0]]
        top.cursor[0] += 1
        cost = max(top.peak, top.live + p.inc[j])
        mask = top.mask | 1 << j
        if cost >= best_peak or seen.get(mask, math.inf) <= cost:
            continue
        seen[mask] = cost
        expanded += 1
        if mask == full:
            best_peak, best_order = cost, path + [j]
            if best_peak <= lower_bound:
                break
            continue
        if max(cost, remaining_need(mask)) >= best_peak:
            continue
        if best_order is not None and not expanded & 1023 and time.perf_counter() > deadline:
            finished = False
            break
        ready = [r for r in top.ready if r != j and not mask >> r & 1]
        ready += [c for c in p.succ[j] if not p.preds[c] & ~mask]
        stack.append(frame(mask, _live_after(p, mask, top.live, j), cost, ready))
        path.append(j)
    return DFSDPResult(np.asarray(best_order, np.int64), float(best_peak if n else 0.0),
                       finished, expanded, time.perf_counter() - start)


# --- Device side: the approximate (beam) DP ------------------------------------------------

MEMORY_BITS = 30  # Σ sizes + max temporary memory < 2**30 units: int32 sums cannot overflow
_NONE = jnp.iinfo(jnp.int32).max  # the running peak of an empty beam slot / invalid candidate


class ApproxDPResult(NamedTuple):
    """Per graph (leading ``[B]``)."""

    order: jnp.ndarray  # [B, N] int32 op order, padded ops last
    peak: jnp.ndarray  # [B] float32 the DP's own (fixed-point) peak of that order
    best_evaluation: Evaluation  # leading [B]: the cost model's evaluation of ``order``
    evals_used: jnp.ndarray  # [B] int32: 1 (the evaluation of the final order)
    keys: jnp.ndarray  # [B, L] a chromosome that decodes to ``order`` (``order_keys``)
    value: jnp.ndarray  # [B] float32 the objective's score of that evaluation

    def search_result(self) -> SearchResult:
        """The fields every search returns (what the method registry reads)."""
        return SearchResult(self.value, self.keys, self.best_evaluation, self.evals_used)


class _Tables(NamedTuple):
    """One padded graph as the beam DP uses it (``N`` ops, ``T`` tensors, fixed point)."""

    op_mask: jnp.ndarray  # [N] bool
    num_ops: jnp.ndarray  # [] int32
    successors: jnp.ndarray  # [N, N] int8: 1 per distinct (producer, consumer) op pair
    reads: jnp.ndarray  # [N, T] int8: 1 where op reads tensor
    size: jnp.ndarray  # [T] int32
    inc: jnp.ndarray  # [N] int32: out(j) + temp(j)
    outlive: jnp.ndarray  # [N] int32: j's outputs that have a consumer
    zobrist: jnp.ndarray  # [N] uint32 random words: a set's hash is the XOR of its ops'
    unit: jnp.ndarray  # [] float32 bytes per fixed-point unit


class _Beam(NamedTuple):
    """``K`` partial orders, each known by its set (row ``k``)."""

    peak: jnp.ndarray  # [K] int32 running peak (``_NONE``: empty slot)
    live: jnp.ndarray  # [K] int32 live bytes after the set
    pending: jnp.ndarray  # [K, N] int16 (int32 for N ≥ 2¹⁵) unscheduled predecessors; −1
    #                       once scheduled
    remaining: jnp.ndarray  # [K, T] int16 (int32 for N ≥ 2¹⁵) unscheduled consumers per tensor
    bits: jnp.ndarray  # [K, W] uint32 the set as a bitset (W = ⌈N / 32⌉)
    hash: jnp.ndarray  # [K] uint32


def _tables(key: jax.Array, graph: PaddedGraph) -> _Tables:
    n, t = graph.op_mask.shape[0], graph.tensor_mask.shape[0]
    successors = jnp.zeros((n, n), jnp.int32).at[graph.pair_producer, graph.pair_consumer].max(
        graph.pair_mask.astype(jnp.int32))
    reads = jnp.zeros((n, t), jnp.int32).at[graph.edge_consumer, graph.edge_tensor].max(
        graph.edge_mask.astype(jnp.int32))
    size_bytes = jnp.where(graph.tensor_mask, graph.tensor_size, 0.0)
    temp_bytes = jnp.where(graph.op_mask, graph.temporary_memory, 0.0)
    unit = fp.choose_unit(fp.ordered_sum(size_bytes) + jnp.max(temp_bytes), MEMORY_BITS)
    size = jnp.round(size_bytes / unit).astype(jnp.int32)
    temp = jnp.round(temp_bytes / unit).astype(jnp.int32)
    out = jnp.zeros(n, jnp.int32).at[graph.tensor_producer].add(size)
    read = jnp.sum(reads, axis=0) > 0
    outlive = jnp.zeros(n, jnp.int32).at[graph.tensor_producer].add(jnp.where(read, size, 0))
    zobrist = jax.vmap(lambda j: jax.random.bits(jax.random.fold_in(key, j), (), jnp.uint32))(
        jnp.arange(n))
    return _Tables(graph.op_mask, jnp.sum(graph.op_mask, dtype=jnp.int32),
                   successors.astype(jnp.int8), reads.astype(jnp.int8), size, out + temp, outlive,
                   zobrist, unit)


def _count_dtype(n: int):
    """The dtype of the beam's per-op / per-tensor counters (at most ``N − 1`` each)."""
    return jnp.int16 if n < 2**15 else jnp.int32


def _one_hot_bits(ops: jnp.ndarray, words: int) -> jnp.ndarray:
    """``[..., W]`` uint32 bitsets holding the single op of each entry of ``ops``."""
    bit = jnp.left_shift(jnp.uint32(1), (ops % 32).astype(jnp.uint32))
    return jnp.where(jnp.arange(words) == (ops // 32)[..., None], bit[..., None], jnp.uint32(0))


def _compact(ready: jnp.ndarray, size: int) -> jnp.ndarray:
    """``jnp.nonzero(ready.reshape(-1), size=size, fill_value=ready.size)[0]`` (int32) for a
    ``[K, N]`` mask with at most ``size`` entries set, in ``O(K·N + size·N/32)`` rather than
    ``nonzero``'s ``K·N``-element cumulative sum and scatter: rows are packed into uint32 words,
    each output slot finds its row from the rows' start offsets (a scatter of ``K`` marks and
    a cumulative sum over ``size``), then its word from the row's per-word popcounts and its
    bit by a 5-step popcount bisection."""
    beams, n = ready.shape
    words = -(-n // 32)
    lanes = jnp.left_shift(jnp.uint32(1), jnp.arange(32, dtype=jnp.uint32))
    packed = jnp.pad(ready, ((0, 0), (0, 32 * words - n))).reshape(beams, words, 32)
    bits = jnp.sum(jnp.where(packed, lanes, jnp.uint32(0)), axis=2, dtype=jnp.uint32)
    within = jnp.cumsum(jax.lax.population_count(bits).astype(jnp.int32), axis=1)  # [K, W]
    per_row = within[:, -1]
    start = jnp.cumsum(per_row) - per_row  # first output slot of each row
    total = start[-1] + per_row[-1]
    row = jnp.cumsum(jnp.zeros(size, jnp.int32).at[start].add(1, mode="drop")) - 1
    slot = jnp.arange(size, dtype=jnp.int32)
    row = jnp.clip(row, 0, beams - 1)
    rank = slot - start[row]  # the slot's rank among its row's set entries
    prefix = within[row]  # [size, W]
    word = jnp.minimum(jnp.sum(prefix <= rank[:, None], axis=1, dtype=jnp.int32), words - 1)
    before = jnp.take_along_axis(prefix, jnp.maximum(word - 1, 0)[:, None], axis=1)[:, 0]
    rank = rank - jnp.where(word > 0, before, 0)  # rank among the word's set bits
    x, bit = bits[row, word], jnp.zeros(size, jnp.int32)
    for width in (16, 8, 4, 2, 1):
        low = jax.lax.population_count(x & jnp.uint32((1 << width) - 1)).astype(jnp.int32)
        up = rank >= low
        rank, x, bit = jnp.where(up, rank - low, rank), jnp.where(up, x >> width, x), \
            jnp.where(up, bit + width, bit)
    return jnp.where(slot < total, row * n + word * 32 + bit, beams * n)


def _select(tab: _Tables, beam: _Beam, ready: jnp.ndarray, num_candidates: int):
    """The ``K`` best distinct successor sets among the ready (beam entry, op) pairs, read
    from the first ``num_candidates`` of them (static; every ready pair fits).

    Candidates are sorted by (set hash, running peak); an entry equal to its predecessor —
    same hash *and* same bitset — is a costlier duplicate and dropped. A hash collision
    between different sets never merges them (the bitsets differ); it can only keep a
    duplicate that the colliding set separates from its twin, which wastes a beam slot.
    Returns ``(parent [K], op [K], peak [K])`` in increasing peak, ties by (parent, op).
    """
    beams, n = ready.shape
    words = beam.bits.shape[1]
    flat = _compact(ready, num_candidates)
    real = flat < beams * n
    parent, op = jnp.where(real, flat // n, 0), jnp.where(real, flat % n, 0)
    peak = jnp.where(real, jnp.maximum(beam.peak[parent], beam.live[parent] + tab.inc[op]), _NONE)
    hashed = beam.hash[parent] ^ tab.zobrist[op]
    slot = jnp.arange(num_candidates, dtype=jnp.int32)
    hashed, sorted_peak, slot = jax.lax.sort((hashed, peak, slot), num_keys=2, is_stable=True)
    bits = beam.bits[parent[slot]] | _one_hot_bits(op[slot], words)
    twin = (hashed[1:] == hashed[:-1]) & jnp.all(bits[1:] == bits[:-1], axis=1)
    sorted_peak = jnp.where(jnp.concatenate([jnp.zeros(1, bool), twin]), _NONE, sorted_peak)
    peak = jnp.zeros_like(peak).at[slot].set(sorted_peak)  # back to (parent, op) order
    chosen, peak = _smallest(peak, beams)  # ties: lower index, i.e. (parent, op)
    return parent[chosen], op[chosen], peak


def _smallest(values: jnp.ndarray, k: int) -> tuple[jnp.ndarray, jnp.ndarray]:
    """``(indices, values)`` of the ``k`` smallest of the non-negative int32 ``values [M]``
    (``M ≥ k``) in increasing value, ties by lower index: what ``lax.top_k(-values, k)``
    gives, without its ``O(M log M)``-like multi-operand sort. The ``k``-th smallest value
    is found by bisection (31 counting passes over ``M``), the ``k`` entries are compacted in
    index order (ties at that value: the lowest indices) and only they are sorted."""
    def bisect(_, bounds):
        lo, hi = bounds
        mid = lo + (hi - lo) // 2
        enough = jnp.sum(values <= mid, dtype=jnp.int32) >= k
        return jnp.where(enough, lo, mid + 1), jnp.where(enough, mid, hi)

    kth, _ = jax.lax.fori_loop(0, 31, bisect, (jnp.int32(0), jnp.int32(_NONE)))
    tie = values == kth
    take = (values < kth) | (tie & (jnp.cumsum(tie, dtype=jnp.int32)
                                    <= k - jnp.sum(values < kth, dtype=jnp.int32)))
    m = values.shape[0]
    mask = jnp.pad(take, (0, -m % 32)).reshape(-1, 32)
    index = _compact(mask, k)
    value, index = jax.lax.sort((values[index], index), num_keys=2, is_stable=False)
    return index, value


def _advance(tab: _Tables, beam: _Beam, parent, op, peak) -> _Beam:
    """The beam after appending ``op [K]`` to the orders of rows ``parent [K]``."""
    rows = jnp.arange(parent.shape[0])
    pending = (beam.pending[parent] - tab.successors[op]).at[rows, op].set(-1)
    remaining = beam.remaining[parent]
    reads = tab.reads[op]
    freed = jnp.sum(jnp.where((remaining == 1) & (reads == 1), tab.size, 0), axis=1)
    return _Beam(peak=peak,
                 live=beam.live[parent] + tab.outlive[op] - freed,
                 pending=pending,
                 remaining=remaining - reads,
                 bits=beam.bits[parent] | _one_hot_bits(op, beam.bits.shape[1]),
                 hash=beam.hash[parent] ^ tab.zobrist[op])


def _beam_dp(key: jax.Array, graph: PaddedGraph, beam_size: int):
    """``(order [N] int32, peak [] float32)`` for one padded graph."""
    tab = _tables(key, graph)
    n, t = tab.reads.shape
    k = beam_size
    if k * n >= 2**31:
        raise ValueError(f"beam_size {k} times the bucket's {n} ops exceeds int32 candidate "
                         "indices; use a smaller beam")
    words = -(-n // 32)
    first = jnp.arange(k) == 0
    count = _count_dtype(n)
    beam = _Beam(peak=jnp.where(first, 0, _NONE).astype(jnp.int32),
                 live=jnp.zeros(k, jnp.int32),
                 pending=jnp.broadcast_to(jnp.sum(tab.successors, axis=0, dtype=count), (k, n)),
                 remaining=jnp.broadcast_to(jnp.sum(tab.reads, axis=0, dtype=count), (k, t)),
                 bits=jnp.zeros((k, words), jnp.uint32),
                 hash=jnp.zeros(k, jnp.uint32))
    # Candidate buffers of K·2^i entries up to K·N; each step takes the smallest that holds
    # its ready pairs (a real branch: graphs are mapped, not vmapped, so only one size runs).
    # Factor 2, not 4: each branch adds compile time, but the sort of the buffer (padding
    # included) is a large part of a step at K ≥ 10,000, and 4 let it reach 4× the pairs.
    sizes = [k]
    while sizes[-1] < k * n:
        sizes.append(min(2 * sizes[-1], k * n))
    branches = [functools.partial(_select, num_candidates=m) for m in sizes]

    def step(beam, index):
        def expand(beam):
            ready = (beam.pending == 0) & (beam.peak != _NONE)[:, None] & tab.op_mask
            which = jnp.searchsorted(jnp.asarray(sizes), jnp.sum(ready), side="left")
            parent, op, peak = jax.lax.switch(which, branches, tab, beam, ready)
            return _advance(tab, beam, parent, op, peak), (parent, op)

        def padding(beam):
            return beam, (jnp.arange(k, dtype=jnp.int32), jnp.full(k, -1, jnp.int32))

        return jax.lax.cond(index < tab.num_ops, expand, padding, beam)

    beam, (parents, ops) = jax.lax.scan(step, beam, jnp.arange(n))

    def back(row, choice):
        parent, op = choice
        return parent[row], op[row]

    _, order = jax.lax.scan(back, jnp.int32(0), (parents, ops), reverse=True)
    order = jnp.where(jnp.arange(n) < tab.num_ops, order, jnp.arange(n))
    return order.astype(jnp.int32), beam.peak[0].astype(jnp.float32) * tab.unit


def _check_beam_size(beam_size) -> None:
    if not is_int(beam_size) or beam_size < 1:
        raise ValueError(f"beam_size must be an int >= 1, got {beam_size!r}")


@functools.partial(jax.jit, static_argnames=("beam_size",))
def beam_orders(key: jax.Array, graphs: PaddedGraph, *,
                beam_size: int) -> tuple[jnp.ndarray, jnp.ndarray]:
    """The approximate DP alone on graphs ``[B]``: ``(orders [B, N] int32, peaks [B] float32)``,
    the DP's own fixed-point peaks. One compilation per (bucket, ``B``, ``beam_size``)."""
    _check_beam_size(beam_size)
    return jax.lax.map(lambda g: _beam_dp(key, g, beam_size), graphs)


def approx_dp_batch(key: jax.Array, graphs: PaddedGraph, cost_params: CostParams = CostParams(),
                    *, beam_size: int = 100_000, num_devices: int = 1, budget: int = 1,
                    objective: str = "peak_memory") -> ApproxDPResult:
    """The approximate DP on graphs with a leading ``[B]`` axis (traceable; see
    :func:`approx_dp` for the jitted entry point). ``beam_size`` is ``K`` (paper: 100,000).

    Single device and peak memory only; ``budget`` must allow the 1 evaluation it spends (the
    cost model's score of the final order, whatever ``K``). The graphs are processed one after
    the other (``lax.map``), each as one scan over its bucket's ``N`` steps; ``key`` seeds the
    set hashes, which can change the result only when a collision keeps a duplicate set in
    the beam (see :func:`_select`).
    """
    check_search_settings(budget, num_devices, objective)
    if num_devices != 1 or objective != "peak_memory":
        raise ValueError(f"the DP orders ops on one device for peak memory; got "
                         f"num_devices={num_devices}, objective={objective!r}")
    orders, peaks = beam_orders(key, graphs, beam_size=beam_size)
    n = graphs.op_mask.shape[1]
    keys = jax.vmap(lambda g, o: order_keys(g, o, jnp.zeros(n, jnp.int32), 1))(graphs, orders)
    evaluation = evaluate_batch(graphs, keys[:, None], cost_params, num_devices=1)
    batch = orders.shape[0]
    return ApproxDPResult(orders, peaks, jax.tree.map(lambda x: x[:, 0], evaluation),
                          jnp.ones(batch, jnp.int32), keys,
                          score(evaluation, objective, cost_params)[:, 0])


approx_dp = jax.jit(approx_dp_batch,
                    static_argnames=("beam_size", "num_devices", "budget", "objective"))
"""Jitted :func:`approx_dp_batch`: one compilation per (bucket, batch size, ``beam_size``)."""


# --- Builders for the method registry (``gsched.methods``) ---------------------------------


def build_dfs_dp(time_limit: float = 60.0):
    """A ``heuristic`` runner: :func:`dfs_dp` with ``time_limit`` seconds per graph; its info
    says whether the order is ``optimal`` and how many partial orders were ``dp_expanded``."""
    _check_time_limit(time_limit)

    def run(graph: Graph, num_devices: int = 1, seed: int = 0):
        result = dfs_dp(graph, time_limit, seed)
        return result.order, np.zeros(graph.num_ops, np.int64), {
            "optimal": result.optimal, "dp_expanded": result.expanded}

    return run


def build_exact_dp():
    """A ``heuristic`` runner: :func:`exact_order` (graphs of ≤ 25 ops), ``optimal: true``."""

    def run(graph: Graph, num_devices: int = 1, seed: int = 0):
        order, _ = exact_order(graph)
        return order, np.zeros(graph.num_ops, np.int64), {"optimal": True}

    return run


def build_approx_dp(beam_size: int = 100_000) -> Search:
    """A ``search`` runner: :func:`approx_dp_batch` with ``K = beam_size`` (paper: 100,000)."""
    _check_beam_size(beam_size)
    return Search(lambda *args, **kwargs: approx_dp_batch(*args, **kwargs).search_result(),
                  {"beam_size": beam_size})
