"""The event-driven ``"priority"`` / ``"fifo"`` schedulers of SPEC §8.2, exact and jittable.

Each device ``d`` has two *streams*: compute (its ops; stream ``d``) and copy-in (the transfers
``X(·, d)`` into it; stream ``D + d``), so stream index order is exactly §8.2's tie rule
"compute before copy-in, then the smaller device". Transfers are asynchronous: ``X(t, d)``
occupies only stream ``D + d`` and needs only ``t`` ready on its source. Items and their ids
are those of the list scheduler (:mod:`gsched.costmodel.schedule`): op ``j < N``, transfer
``X(t, d)`` = ``N + t·D + d``; ``V = N + T·D``; durations are :func:`~gsched.costmodel.schedule.
item_durations` (SPEC §8.1 roofline for ops). Decisions follow ``tests/reference_exec.py``
(its decision 10 in particular).

The loop (one ``lax.while_loop``, outside the ``vmap`` over chromosomes and graphs, as for the
list schedule) keeps per item, indexed by *item id*, a row ``node [V + 1, 3]``:

* column 0: the number of the item's dependencies not started yet; an item is *known* (its
  ready time is final) when it reaches 0; once the item starts at step ``k`` it becomes
  ``−1 − k`` (so the start order is recovered at the end). Items that never run (padded ops,
  absent transfers) start at 1 and are never decremented; row ``V`` is a scratch row;
* columns 1–2: the ready time as an exact fixed-point ``(hi, lo)`` (``gsched.core.fixedpoint``,
  the list scheduler's time unit) — the latest end among its started dependencies; once the
  item starts it is overwritten with the item's *start* time.

One loop iteration does what the list scheduler's does: if the current item's successor
entries are all walked, start the next item; then walk ``chunk`` entries of the current item
(its CSR successor list from :func:`~gsched.costmodel.schedule.entry_items`; an entry counts
only when its item runs on the device the current item activates, exactly as in the list
schedule), decrementing dependency counts and raising ready times to the current item's end.
Since an item's ready time is known "once all its dependencies have started", walking at start
time is exactly §8.2.

Choosing the next item is a dense pass over the ``V`` items (``O(V)`` per started item, so
``O(V²)`` per evaluation; correctness first): with ``f(i)`` the free time of item ``i``'s
stream, the stream to run next and its start time are the lexicographic minimum of
``(max(f(i), ready(i)), stream(i))`` over known items ``i`` (the smallest ``max(free, smallest
ready)`` of a stream is the smallest ``max(free, ready(i))`` over its items). The candidates are
the known items of that stream with ``ready ≤ start``, and the item started is the minimum over
them of

* ``"priority"``: the item's §2 rank (:func:`~gsched.costmodel.schedule.rank_items`: program
  inputs first by op index, then largest priority, then op before transfer and smaller index —
  exactly §8.2 + §1 + §2's ties);
* ``"fifo"``: ``(ready time, rank)``, with a program input's ready time read as −∞ (a ready
  input is taken first on its stream, inputs by op index).

Every time is an exact fixed-point value, so the decisions (which stream, which item) are those
of exact arithmetic on the float32-rounded durations; with durations that are exact in float32
(integer costs and sizes, power-of-two bandwidths) they are exactly SPEC's. Start times are
nondecreasing along the steps, and the start order is the schedule order that §3's peak-memory
walk (:func:`gsched.costmodel.memory.peak_memory`) reads. The runtime is the latest end; the
list scheduler's bound ``Σ durations`` still bounds it (a non-delay schedule never leaves every
stream idle before its end).
"""

from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp
from jax import lax

from gsched.core import fixedpoint as fp
from gsched.core.padding import PaddedGraph
from gsched.costmodel.params import CostParams
from gsched.costmodel.schedule import (
    TIME_LO_BITS,
    Placement,
    Schedule,
    entry_items,
    first_items,
    fixed_durations,
    item_devices,
    item_priorities,
    op_indegrees,
    rank_items,
    schedule_from_positions,
)

_BIG = jnp.iinfo(jnp.int32).max


class DynamicTables(NamedTuple):
    """Per-chromosome tables of the event loop (no batch axis)."""

    entry: jnp.ndarray  # [Q, 2] int32: item, activation device (−1 never) of each entry
    item_row: jnp.ndarray  # [V, 6] int32 by item: stream, duration hi, lo, entries start, end,
    #                        device that activates its successors
    stream: jnp.ndarray  # [V] int32 stream of each item
    rank: jnp.ndarray  # [V] int32 §2 rank (program inputs first)
    is_input: jnp.ndarray  # [V] bool program-input ops
    item_at_rank: jnp.ndarray  # [V] int32
    time_unit: jnp.ndarray  # [] float32
    runtime_bound: jnp.ndarray  # [] float32 Σ durations


class DynamicState(NamedTuple):
    """The loop state of one chromosome's event-driven schedule."""

    cursor: jnp.ndarray  # [] int32 next entry of the current item to walk
    cursor_end: jnp.ndarray  # [] int32 end of the current item's entries
    current_device: jnp.ndarray  # [] int32 device the current item activates
    current_end: fp.Fixed  # [] end time of the current item
    node: jnp.ndarray  # [V + 1, 3] int32 by item (module docstring); row V is scratch
    free: jnp.ndarray  # [2·D, 2] int32 stream free times (hi, lo)
    step: jnp.ndarray  # [] int32 items started so far
    done: jnp.ndarray  # [] bool no item left to start


class DynamicSchedule(NamedTuple):
    """The event-driven schedule of one chromosome: a :class:`Schedule` plus times."""

    schedule: Schedule
    start: jnp.ndarray  # [V] float32 start time of each item, −1 if it never runs
    end: jnp.ndarray  # [V] float32 end time of each item, −1 if it never runs


def dynamic_init(graph: PaddedGraph, keys: jnp.ndarray, placement: Placement,
                 params: CostParams, num_devices: int) -> tuple[DynamicTables, DynamicState]:
    """Tables and the initial loop state of one chromosome (no batch axis)."""
    n, t, d = graph.op_mask.shape[0], graph.tensor_mask.shape[0], num_devices
    v = n + t * d
    duration, unit, runtime_bound = fixed_durations(graph, placement, params, d)

    # Dependencies in the extended graph (as the list scheduler counts them; a transfer
    # depends on its producer).
    op_indegree = op_indegrees(graph, placement)
    # Padded ops never become known (absent transfers are never activated: count stays 1).
    op_indegree = jnp.where(graph.op_mask, op_indegree, 1)
    indegree = jnp.concatenate([op_indegree, jnp.ones(t * d, jnp.int32)])

    first = first_items(graph, d)
    rank, item_at_rank = rank_items(item_priorities(keys, n, d), first)
    entry_item, entry_start, entry_end = entry_items(graph, d)
    item_device, _, activation = item_devices(graph, placement, d)
    stream = item_streams(item_device, n, d)
    tables = DynamicTables(
        entry=jnp.stack([entry_item, activation[entry_item]], axis=1),
        item_row=jnp.stack([stream, duration.hi, duration.lo, entry_start, entry_end,
                            item_device], axis=1),
        stream=stream, rank=rank, is_input=first, item_at_rank=item_at_rank,
        time_unit=unit, runtime_bound=runtime_bound,
    )
    zero = jnp.int32(0)
    state = DynamicState(
        cursor=zero, cursor_end=zero, current_device=zero, current_end=fp.Fixed(zero, zero),
        node=jnp.zeros((v + 1, 3), jnp.int32).at[:v, 0].set(indegree),
        free=jnp.zeros((2 * d, 2), jnp.int32), step=zero, done=jnp.bool_(False),
    )
    return tables, state


def item_streams(item_device: jnp.ndarray, num_ops: int, num_devices: int) -> jnp.ndarray:
    """``[V]`` each item's stream (§8.2): an op's device ``d``, a transfer to ``d``'s
    ``D + d`` (each device's copy engine)."""
    is_op = jnp.arange(item_device.shape[0]) < num_ops
    return jnp.where(is_op, item_device, num_devices + item_device)


def _lexmin(mask: jnp.ndarray, *columns: jnp.ndarray) -> tuple[jnp.ndarray, ...]:
    """Lexicographic minimum of ``columns`` (int32 ``[V]`` each) over ``mask``; returns the
    minimizing value of each column and the mask of the items that attain it."""
    out = []
    for col in columns:
        m = jnp.min(jnp.where(mask, col, _BIG))
        mask = mask & (col == m)
        out.append(m)
    return (*out, mask)


def dynamic_step(tables: DynamicTables, s: DynamicState, scheduler: str,
                 chunk: int) -> DynamicState:
    """One loop iteration for one chromosome: if the current item's entries are all walked,
    start the next item (§8.2); then walk ``chunk`` entries of the current item. A finished
    chromosome is left unchanged."""
    v = tables.stream.shape[0]
    node, free = s.node, s.free
    indegree = node[:v, 0]
    ready = fp.Fixed(node[:v, 1], node[:v, 2])
    known = indegree == 0
    want = (s.cursor >= s.cursor_end) & ~s.done
    has_known = jnp.any(known)
    take = want & has_known

    # The stream and start time: lexicographic min of (max(free, ready), stream).
    stream_free = free[tables.stream]  # [V, 2]
    earliest = fp.maximum(ready, fp.Fixed(stream_free[:, 0], stream_free[:, 1]))
    start_hi, start_lo, stream, _ = _lexmin(known, earliest.hi, earliest.lo, tables.stream)
    start = fp.Fixed(start_hi, start_lo)
    candidate = known & (tables.stream == stream) & ~fp.greater(ready, start)
    if scheduler == "priority":
        (best_rank, _) = _lexmin(candidate, tables.rank)
    else:
        fifo_hi = jnp.where(tables.is_input, -1, ready.hi)
        fifo_lo = jnp.where(tables.is_input, 0, ready.lo)
        *_, best_rank, _ = _lexmin(candidate, fifo_hi, fifo_lo, tables.rank)
    item = tables.item_at_rank[jnp.clip(best_rank, 0, v - 1)]
    row = tables.item_row[item]
    end = fp.add(start, fp.Fixed(row[1], row[2]), TIME_LO_BITS)
    stream = jnp.clip(stream, 0, free.shape[0] - 1)
    free = jnp.where(take, free.at[stream].set(jnp.stack([end.hi, end.lo])), free)
    cursor = jnp.where(take, row[3], s.cursor)
    cursor_end = jnp.where(take, row[4], s.cursor_end)
    current_device = jnp.where(take, row[5], s.current_device)
    current_end = fp.where(take, end, s.current_end)

    # Walk entries of the current item (window as in the list scheduler).
    num_entries = tables.entry.shape[0]
    width = min(chunk, num_entries)
    window = jnp.minimum(cursor, num_entries - width)
    entry = lax.dynamic_slice_in_dim(tables.entry, window, width)  # [width, 2]
    position = window + jnp.arange(width, dtype=jnp.int32)
    succ = entry[:, 0]
    active = ((position >= cursor) & (position < cursor_end)
              & (entry[:, 1] == current_device))
    old = node[succ]  # [width, 3]
    raised = fp.maximum(fp.Fixed(old[:, 1], old[:, 2]), current_end)
    rows = jnp.concatenate([jnp.where(active, succ, v), jnp.where(take, item, v)[None]])
    values = jnp.concatenate([
        jnp.stack([old[:, 0] - 1, raised.hi, raised.lo], axis=1),
        jnp.stack([-1 - s.step, start.hi, start.lo])[None]])
    node = node.at[rows].set(values)
    return DynamicState(
        cursor=window + width, cursor_end=cursor_end, current_device=current_device,
        current_end=current_end, node=node, free=free,
        step=s.step + take.astype(jnp.int32), done=s.done | (want & ~has_known),
    )


def dynamic_result(tables: DynamicTables, final: DynamicState) -> DynamicSchedule:
    """The schedule (start order, runtime) and per-item start/end times of a finished loop."""
    v = tables.stream.shape[0]
    indegree = final.node[:v, 0]
    return timed_schedule(jnp.where(indegree < 0, -1 - indegree, -1), final.step,
                          fp.Fixed(final.free[:, 0], final.free[:, 1]),
                          fp.Fixed(final.node[:v, 1], final.node[:v, 2]),
                          fp.Fixed(tables.item_row[:, 1], tables.item_row[:, 2]),
                          tables.time_unit, tables.runtime_bound)


def timed_schedule(position: jnp.ndarray, num_steps: jnp.ndarray, free: fp.Fixed,
                   begin: fp.Fixed, duration: fp.Fixed, unit: jnp.ndarray,
                   runtime_bound: jnp.ndarray, order: jnp.ndarray | None = None
                   ) -> DynamicSchedule:
    """:func:`~gsched.costmodel.schedule.schedule_from_positions` (``order`` too) with each
    item's start and end time (``begin`` / ``duration [V]``, fixed point; −1 for items never
    started)."""
    started = position >= 0
    finish = fp.add(begin, duration, TIME_LO_BITS)
    return DynamicSchedule(
        schedule_from_positions(position, num_steps, free, unit, runtime_bound, order),
        jnp.where(started, fp.to_float(begin, unit, TIME_LO_BITS), -1.0),
        jnp.where(started, fp.to_float(finish, unit, TIME_LO_BITS), -1.0),
    )
