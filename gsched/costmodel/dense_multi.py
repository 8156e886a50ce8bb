"""The dense list schedule for ``D ≥ 2`` devices (``scheduler="list"``) on a CPU.

The multi-device counterpart of :mod:`gsched.costmodel.dense`: the same SPEC §2 schedule and
§4 runtime as the ready-tree loop of :mod:`gsched.costmodel.schedule`, bit for bit
(``tests/test_dense_schedule_multi.py``), with a dozen kernels per step over chromosome-minor
blocks (``[N, BLOCK]``) instead of the loop's ~30 tiny gathers and scatters. Used for op
buckets up to ``dense.DENSE_MULTI_MAX_OPS`` (at 2,048 the loop is faster); SPEC §8.2's
event-driven schedulers keep their own loop.

**Items.** A tensor can only move to the ``D − 1`` devices other than its producer's, so the
ranking covers the ``N`` ops and ``T·(D−1)`` transfer *slots*: slot ``j`` of tensor ``t`` is
``X(t, d)`` with ``d = j`` below the producer's device and ``j + 1`` from it on (per
chromosome). Within a tensor that map is increasing, so ordering slots by ``t·(D−1) + j``
orders them like their SPEC item indices ``N + t·D + d``, and :func:`~gsched.costmodel.
schedule.rank_items` over ``N + T·(D−1)`` items gives SPEC §2's tie rules exactly.

**One word per op.** Every op ``p`` has one int32 word per chromosome, as with one device:
``(unscheduled predecessors << k) | rank`` until ``p`` is scheduled. A transfer's only
predecessor is its producer, and all of ``p``'s transfers become ready together when ``p`` is
scheduled and are then taken in rank order, so ``p``'s word goes on to hold the rank of its
first remaining transfer (a ready word), then of the next (a per-chromosome chain by rank,
built with one sort), then ``2**(2k+1)``, above every real word. The state stays ``N`` words
per chromosome whatever ``D``. A step takes the minimum word (``< 2**k`` when some item is
ready; otherwise the chromosome is done and the step changes nothing), gathers by rank the
item and the next word of its slot, by row (the op, or the transfer's tensor) the successor
bit set, the slot and the duration, subtracts the successors as with one device, updates the
device free times and writes one row of the order (the SPEC item index taken at each step).

**Successors** (``op_indegrees``): an op's row holds its distinct consumer ops (the graph's
``pair_*``), a tensor's its consumer ops; only those on the popped item's device count (the
consumers on the producer's device, or those that ``X(t, d)`` feeds). Rows are static per graph
(``[N + T, ⌈N/32⌉]``, :func:`item_rows`; per chromosome with fusion); placement enters as a
``[N, BLOCK]`` device array compared with the item's device inside the fused update (3.3×
faster than ANDing a gathered per-chromosome device bit set into the row, measured).

**Times.** Each item's start is ``max(ready, free time of the devices it uses)``; an op's
predecessors all ran on its device (producers there, or transfers into it) and a transfer's on
its source, and device free times only grow, so the ready time never exceeds those free
times: a step needs only the ``D`` free times (exact fixed point,
:mod:`gsched.core.fixedpoint`; durations are the loop's own fixed-point values), and the
makespan, their maximum, equals the loop's bit for bit. The :class:`Schedule` is then built over
the loop's ``V = N + T·D`` items; SPEC §3's memory walk reads the steps taken directly, with the
chromosomes of each graph explicit (:func:`gsched.costmodel.memory.multi_device_peak_memory`).

**XLA:CPU notes** (measured on the 2-core CPU): a gather from a table over ~512 KiB is split
over the threads, and that hand-off at every step cost 5–30 µs instead of ~0.2, so per-step
tables are 1-D or narrow; a per-chromosome value gathered as a column of a ``[block, C]`` row
is transposed inside the fused ``[N, block]`` update at every element (3× slower), so each
per-step value comes from its own 1-D gather.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from gsched.core import fixedpoint as fp
from gsched.core.padding import PaddedGraph
from gsched.costmodel.dense import (
    BLOCK,
    DENSE_MAX_DEVICES,
    DENSE_MAX_ITEMS,
    PANEL,
    bit_rows,
    expand_bits,
    in_blocks,
    rank_bits,
)
from gsched.costmodel.params import CostParams
from gsched.costmodel.schedule import (
    TIME_LO_BITS,
    Placement,
    Schedule,
    fixed_durations,
    op_indegrees,
    rank_items,
    split_keys,
)

_NONE = 1 << 14  # "no next transfer" in ``item_next``
SUCCESSOR_FIELDS = ("pair_mask", "pair_producer", "pair_consumer", "edge_mask", "edge_tensor",
                    "edge_consumer", "tensor_producer")  # what item_rows reads


class MultiStart(NamedTuple):
    """One chromosome's input to :func:`dense_multi_order` (``k`` = ``rank_bits(N + T·(D−1))``;
    items are numbered ops, then transfer slots ``N + t·(D−1) + j``; *rows* ``R = N + T`` are
    the ops, then the tensors)."""

    words: jnp.ndarray  # [N] int32 initial words (padding 2**(2k+1))
    item_next: jnp.ndarray  # [N + T·(D−1) + 1] int32 by rank: item | next << 15, ``next`` the
    #                          rank of the op's first transfer or of the transfer's next one
    #                          (_NONE: none); the last entry: no item (item N + T·(D−1))
    row_time: jnp.ndarray  # [R, 2] int32: duration hi | source device << 25, duration lo
    #                         (an op's own device; a tensor's producer's: its transfers')
    device: jnp.ndarray  # [N] int32 device of each op
    num_steps: jnp.ndarray  # [] int32 real ops + transfers
    time_unit: jnp.ndarray  # [] float32
    runtime_bound: jnp.ndarray  # [] float32


def num_items(graph: PaddedGraph, num_devices: int) -> int:
    """``N + T·(D−1)``: the ops and transfer slots the dense schedule ranks."""
    return graph.op_mask.shape[-1] + graph.tensor_mask.shape[-1] * (num_devices - 1)


def item_rows(graph: PaddedGraph) -> jnp.ndarray:
    """``[R, ⌈N/32⌉ + 1]`` int32 per row: the bit set of its consumer ops (an op's distinct
    consumer pairs, a tensor's consumers), then its word slot (the op, the tensor's
    producer). One graph, no batch axis."""
    return _item_rows(graph.op_mask.shape[0], graph.tensor_mask.shape[0],
                      *(getattr(graph, name) for name in SUCCESSOR_FIELDS))


def _item_rows(n, t, pair_mask, pair_producer, pair_consumer, edge_mask, edge_tensor,
               edge_consumer, tensor_producer) -> jnp.ndarray:
    bits = jnp.concatenate([bit_rows(pair_mask, pair_producer, pair_consumer, n, n),
                            bit_rows(edge_mask, edge_tensor, edge_consumer, t, n)])
    slot = jnp.concatenate([jnp.arange(n, dtype=jnp.int32), tensor_producer])
    return jnp.concatenate([bits, slot[:, None]], axis=1)


def multi_start(graph: PaddedGraph, keys: jnp.ndarray, placement: Placement,
                params: CostParams, num_devices: int) -> MultiStart:
    """:class:`MultiStart` of one chromosome; ``keys`` is its SPEC §2 part."""
    n, t, d = graph.op_mask.shape[0], graph.tensor_mask.shape[0], num_devices
    v = num_items(graph, d)
    if v > DENSE_MAX_ITEMS or d > DENSE_MAX_DEVICES:
        raise ValueError(f"the dense schedule ranks at most {DENSE_MAX_ITEMS} ops and transfer "
                         f"slots on at most {DENSE_MAX_DEVICES} devices; N + T·(D−1) = {v}, "
                         f"D = {d}")
    k = rank_bits(v)
    device = placement.device
    _, op_priority, xfer_priority = split_keys(keys, n, d)
    source = device[graph.tensor_producer]  # [T]
    slot = jnp.arange(d - 1, dtype=jnp.int32)[None, :]
    target = slot + (slot >= source[:, None])  # [T, D−1] destination of each slot
    exists = jnp.take_along_axis(placement.transfer_exists, target, axis=1)
    rank, item_at_rank = rank_items(
        jnp.concatenate([op_priority, jnp.take_along_axis(xfer_priority, target, 1).reshape(-1)]),
        jnp.concatenate([graph.op_is_input & graph.op_mask, jnp.zeros(v - n, bool)]))
    slot_rank = rank[n:].reshape(t, d - 1)
    producer = jnp.broadcast_to(graph.tensor_producer[:, None], (t, d - 1))

    # Each op's first transfer, and each transfer's next one of the same producer (by rank).
    first = jnp.full(n, _NONE, jnp.int32).at[jnp.where(exists, producer, n)].min(
        slot_rank, mode="drop")
    absent = jnp.iinfo(jnp.int32).max
    by_producer = jnp.sort(jnp.where(exists, jnp.left_shift(producer, k) | slot_rank,
                                     absent).reshape(-1))
    follows = (jnp.right_shift(by_producer[1:], k) == jnp.right_shift(by_producer[:-1], k)) & (
        by_producer[1:] != absent)
    next_by_rank = jnp.full(v, _NONE, jnp.int32).at[
        jnp.where(by_producer[:-1] != absent, by_producer[:-1] & ((1 << k) - 1), v)].set(
        jnp.where(follows, by_producer[1:] & ((1 << k) - 1), _NONE), mode="drop")
    next_rank = jnp.where(item_at_rank < n, first[jnp.minimum(item_at_rank, n - 1)], next_by_rank)
    item_next = jnp.concatenate([item_at_rank | jnp.left_shift(next_rank, 15),
                                 jnp.array([v | _NONE << 15], jnp.int32)])

    # The loop's own fixed-point durations, every existing X(t, ·) equal.
    duration, unit, runtime_bound = fixed_durations(graph, placement, params, d)
    hi, lo = ([x[:n], jnp.max(x[n:].reshape(t, d), axis=1)] for x in duration)  # absent: 0
    row_time = jnp.stack([jnp.concatenate(hi) | jnp.left_shift(
        jnp.concatenate([device, source]), 25), jnp.concatenate(lo)], axis=1)
    words = jnp.where(graph.op_mask,
                      jnp.left_shift(op_indegrees(graph, placement), k) | rank[:n],
                      1 << (2 * k + 1))
    return MultiStart(words, item_next, row_time, device,
                      jnp.sum(graph.op_mask, dtype=jnp.int32) + jnp.sum(exists, dtype=jnp.int32),
                      unit, runtime_bound)


def dense_multi_order(start: MultiStart, num_devices: int, *, table: jnp.ndarray | None = None,
                      row_base: jnp.ndarray | None = None,
                      successors: tuple[jnp.ndarray, ...] | None = None
                      ) -> tuple[jnp.ndarray, fp.Fixed]:
    """The list schedules of a flat batch of ``B`` chromosomes (``start``'s fields with a
    leading ``[B]``): ``(items [B, N + T·(D−1)], free)``, the SPEC item index taken at each
    step (−1 after the last) and each device's final free time ``[B, D]``.

    Rows (:func:`item_rows`) come either from ``table [G·R, ⌈N/32⌉ + 1]`` (every graph
    involved, stacked; chromosome ``b``'s rows from ``row_base[b]`` on) or, when every
    chromosome has its own graph (fusion), from ``successors``: its :data:`SUCCESSOR_FIELDS`,
    each with a leading ``[B]``, turned into rows one block at a time.
    """
    if (table is None) == (successors is None):
        raise ValueError("give either a shared table (with row_base) or per-chromosome "
                         "successors")
    batch, n = start.words.shape
    d = num_devices
    v = start.item_next.shape[1] - 1
    r = start.row_time.shape[1]
    if batch == 0:
        return jnp.zeros((0, v), jnp.int32), fp.Fixed(*(jnp.zeros((0, d), jnp.int32),) * 2)
    k = rank_bits(v)
    block = min(BLOCK, batch)
    # Filler chromosomes (to a whole block): every op padding, no step; dropped.
    xs = [in_blocks(start.words, jnp.int32(1 << (2 * k + 1)), block),
          in_blocks(start.item_next, start.item_next[0, v], block),
          in_blocks(start.row_time, 0, block), in_blocks(start.device, 0, block),
          in_blocks(start.num_steps, 0, block)]
    xs.append(in_blocks(row_base, 0, block) if successors is None else
              tuple(in_blocks(x, 0, block) for x in successors))  # masks 0: no rows
    lane = jnp.arange(block, dtype=jnp.int32)
    panels = [(lo, min(n, lo + PANEL)) for lo in range(0, n, PANEL)]  # see dense.dense_order

    def one_block(x):
        words, item_next, row_time, device, steps, rows_from = x
        if successors is None:
            rows, base = table, rows_from
        else:  # this block's own rows, [block · R, ⌈N/32⌉ + 1]
            rows = jax.vmap(lambda *f: _item_rows(n, r - n, *f))(*rows_from)
            rows, base = rows.reshape(-1, rows.shape[-1]), lane * r
        tables = [rows[:, lo // 32: -(-hi // 32)] for lo, hi in panels]
        slots = rows[:, -1]
        device = device.T
        on_device = [device[lo:hi] for lo, hi in panels]  # [hi − lo, block] each
        item_next = item_next.reshape(-1)
        # 1-D tables: a gathered [block, 2] would be transposed inside the fused update,
        # at every element (3× slower).
        time_hi, time_lo = row_time[..., 0].reshape(-1), row_time[..., 1].reshape(-1)
        row_of = lax.broadcasted_iota(jnp.int32, (2 * d, block), 0)

        def step(s, carry):
            parts, free, order = carry  # parts: per panel [hi − lo, block]; free [2D, block]
            best = jnp.min(jnp.stack([jnp.min(part, axis=0) for part in parts]), axis=0)
            rank = jnp.where(best < 1 << k, best & ((1 << k) - 1), v)  # v: no item left
            packed = item_next[lane * (v + 1) + rank]
            item, next_rank = packed & ((1 << 15) - 1), jnp.right_shift(packed, 15)
            word = jnp.where(next_rank == _NONE, 1 << (2 * k + 1), next_rank)
            is_op = item < n
            tensor = (item - n) // (d - 1)
            row = jnp.where(is_op, item, jnp.minimum(n + tensor, r - 1))
            own = lane * r + row
            hi, lo = time_hi[own], time_lo[own]
            src = jnp.right_shift(hi, 25)
            j = (item - n) % (d - 1)  # the transfer's slot in its tensor
            dev = jnp.where(item == v, d, jnp.where(is_op, src, j + (j >= src)))
            slot = jnp.where(item == v, n, slots[base + row])
            new = []
            for (first, stop), part, words_table, on in zip(panels, parts, tables, on_device):
                succ = expand_bits(words_table[base + row].T, stop - first) & (on == dev[None, :])
                index = lax.broadcasted_iota(jnp.int32, part.shape, 0) + first
                new.append(part - jnp.where(index == slot[None, :], part - word[None, :],
                                            jnp.left_shift(succ, k)))
            # Start: the latest free time of the devices used (unrolled over D: one fusion).
            begin = fp.Fixed(jnp.int32(0), jnp.int32(0))
            for i in range(d):
                used = (dev == i) | (src == i)
                begin = fp.where(used, fp.maximum(begin, fp.Fixed(free[i], free[d + i])), begin)
            end = fp.add(begin, fp.Fixed(hi & ((1 << 25) - 1), lo), TIME_LO_BITS)
            row_device = row_of % d
            used = (((row_device == dev[None, :]) | (row_device == src[None, :]))
                    & (dev[None, :] < d))
            free = jnp.where(used, jnp.where(row_of < d, end.hi[None, :], end.lo[None, :]), free)
            taken = jnp.where(item == v, -1, jnp.where(is_op, item, n + tensor * d + dev))
            return tuple(new), free, lax.dynamic_update_slice(order, taken[None, :], (s, 0))

        state = words.T
        carry = (tuple(state[lo:hi] for lo, hi in panels), jnp.zeros((2 * d, block), jnp.int32),
                 jnp.full((v, block), -1, jnp.int32))
        _, free, order = lax.fori_loop(0, jnp.max(steps), step, carry)
        return order.T, free[:d].T, free[d:].T

    order, free_hi, free_lo = lax.map(one_block, tuple(xs))
    return (order.reshape(-1, v)[:batch],
            fp.Fixed(free_hi.reshape(-1, d)[:batch], free_lo.reshape(-1, d)[:batch]))


def dense_multi_schedule(start: MultiStart, items: jnp.ndarray, free: fp.Fixed,
                         num_items_all: int) -> Schedule:
    """One chromosome's :class:`Schedule` over the loop's ``V = N + T·D`` items from its
    :func:`dense_multi_order` row (``items [N + T·(D−1)]``, ``free [D]``): the loop's exactly."""
    v = num_items_all
    order = jnp.concatenate([items, jnp.full(v - items.shape[0], -1, jnp.int32)])
    scheduled = order >= 0
    position = jnp.full(v + 1, -1, jnp.int32).at[jnp.where(scheduled, order, v)].set(
        jnp.arange(v, dtype=jnp.int32))[:v]
    makespan = fp.masked_max(free, jnp.ones(free.hi.shape, bool), axis=0)
    return Schedule(order, position, jnp.sum(scheduled, dtype=jnp.int32),
                    fp.to_float(makespan, start.time_unit, TIME_LO_BITS), start.runtime_bound)
