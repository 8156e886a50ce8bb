"""SPEC §8.2's event-driven schedulers with one chromosome per lane and a binary heap per stream.

:mod:`gsched.costmodel.pallas_dynamic` gives each chromosome a program and makes every decision
a pass over all its slots (``O(V_p)`` per step, ``O(V_p²)`` per chromosome). This kernel has
:mod:`gsched.costmodel.pallas_lanes`' layout — a program holds a block of chromosomes, one per
lane (thread) — and makes a decision in ``O(streams + log V_p)``, with each lane's structures in
its own global memory:

* each slot's state is a 16-byte group, ``(word, ready hi, ready lo, stream)``: the
  dependency count and ready time a successor update reads and writes, and the item's stream,
  which a successor that becomes known needs (its row, with the duration and successors, is
  read only when it starts);
* each stream has a binary min-heap of its known, unstarted items keyed by ``(ready, slot)``
  (16-byte entries: ready hi, lo, slot, unused); the per-stream heap sizes, the ready time at
  each heap's root and the streams' free times are per-lane registers (``2·D`` streams).

A step, per lane, is the loop's decision (:mod:`gsched.costmodel.dynamic`) in the same order.
The stream and start are the lexicographic minimum of ``(max(free, smallest ready), stream)``
over streams with known items: one compare per stream on registers. Then

* ``"fifo"``: the started item is the root of the stream's heap — the smallest ``(ready,
  slot)``. A program input's ready time reads as −∞ in SPEC; it needs nothing here: inputs have
  no dependencies (ready 0, the least time) and the smallest slots (§2 ranks them first), so
  ``(0, slot)`` already puts them first;
* ``"priority"``: the smallest slot among the stream's known items with ``ready ≤ start``. Each
  stream has a second heap, keyed by slot alone, of its *released* items. The pending heap's
  items with ``ready ≤ start`` move to it, and the started item is its root. A released item
  stays a candidate: its ready time is at most that start, the stream's next starts are later,
  so once a stream has released items its next start is its free time.

Then the item's row (stream, source device, duration, successor columns), its end,
its stream's free time, and the walk of its firing successors, each losing a dependency and
having its ready time raised to the end; one that becomes known is pushed on its stream's heap
(pending for ``"priority"``) with its final ready time. A push or a pop is a sift over the
heap's levels; every lane's sift runs while any lane of the block still sifts (one reduction
over the block's lanes per level), as the successor windows do. Per chromosome that is
``O(V_p · log V_p + Q)``. Outputs as the event-driven kernel's, step-major (``[V_p, P]``):
the slot started at each step and its start (hi, lo); the tail is the makespan (hi, lo) and the
steps taken. Decoder ``"pallas_lanes"`` with ``scheduler="priority"`` / ``"fifo"``; with
``peaks`` the kernel also accounts SPEC §3's memory in start order, as the list lane kernel
does (:func:`~gsched.costmodel.pallas_lanes.account_lanes`; decoder ``"pallas_lanes_fused"``).
Checked bit for bit on an H200 (2026-11-28; again 2026-11-29, 500 ops, ``D = 2``, with and
without fusion) and timed there against :mod:`gsched.costmodel.pallas_dynamic`'s register
kernel (session 36, 500 ops, ``D = 2``, 16,384 chromosomes): whole evaluations 2.7×
(``"priority"``: 710,058 against 259,798 per second) and 3.7× (``"fifo"``: 880,860 against
235,399), so "auto" runs it on a GPU (docs/benchmarks.md).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental.pallas import triton as plt

from gsched.core import fixedpoint as fp
from gsched.costmodel.pallas_lanes import account_lanes, any_lane, walk_lanes
from gsched.costmodel.pallas_peaks import PeakOffsets
from gsched.costmodel.schedule import TIME_LO_BITS

STATE_WORDS = 4  # a slot's state: word, ready hi, ready lo, stream (one 16-byte group)
ENTRY_WORDS = 4  # a heap entry: ready hi, ready lo, slot, unused (one 16-byte group)


def heap_entries(width: int, fifo: bool) -> int:
    """Heap entries per chromosome at ``width`` slots: each running item is in one stream's
    heap (``"fifo"``; the streams' heaps side by side), and with ``"priority"`` also in one
    released heap (a second ``width`` entries)."""
    return width if fifo else 2 * width


def dynamic_lanes_memory(word, rows, successor, count, *, k: int, num_devices: int,
                         fifo: bool, peaks: PeakOffsets | None = None):
    """The kernel's inputs of a padded batch (``word [B, V_p]``, ``rows [B, V_p, C]`` with
    each slot's stream in column 0, ``successor``, ``count [B]``): ``(rows, successor, base,
    size, count)`` — ``base`` and ``size``: per stream, where its heaps start and how many
    items they hold, ``[B, 2·D]`` — and its memory,
    ``(state [B, 4·V_p], heap [B, 4·H])`` (:func:`heap_entries`; with ``peaks``, then the
    copies' read counts from the entry table). The items known at the start (no dependencies:
    ready at 0) fill their stream's heap by slot, which is heap order; with ``"priority"`` they
    start released (their ready time is at most any start)."""
    batch, width = word.shape
    streams = 2 * num_devices
    stream = rows[:, :, 0]
    runs = jnp.arange(width, dtype=jnp.int32) < count[:, None]
    on = (stream[:, :, None] == jnp.arange(streams, dtype=jnp.int32)) & runs[:, :, None]
    base = jnp.cumsum(jnp.sum(on, axis=1, dtype=jnp.int32), axis=1, dtype=jnp.int32)
    base = jnp.pad(base[:, :-1], ((0, 0), (1, 0)))  # [B, 2·D] exclusive
    known = on & (word < (1 << k))[:, :, None]
    size = jnp.sum(known, axis=1, dtype=jnp.int32)
    position = jnp.sum(jnp.where(known, jnp.cumsum(known, axis=1, dtype=jnp.int32) - 1
                                 + base[:, None, :], 0), axis=2)
    entries = heap_entries(width, fifo)
    at = jnp.where(jnp.any(known, axis=2), position + (0 if fifo else width), entries)
    slot = jnp.broadcast_to(jnp.arange(width, dtype=jnp.int32), (batch, width))
    heap = jax.vmap(lambda a, s: jnp.zeros((entries, ENTRY_WORDS), jnp.int32).at[a, 2].set(
        s, mode="drop"))(at, slot).reshape(batch, -1)
    zeros = jnp.zeros_like(word)
    state = jnp.stack([word, zeros, zeros, stream], axis=-1).reshape(batch, -1)
    counts = () if peaks is None else (
        successor[:, peaks.counts:peaks.counts + peaks.num_counts],)
    return (rows, successor, base, size, count), (state, heap, *counts)


def lanes_dynamic_kernel(rows_ref, successor_ref, base_ref, size_ref, count_ref, *refs,
                         num_devices: int, fifo: bool, chunk: int, k: int, lane: jnp.ndarray,
                         barrier: bool, peaks: PeakOffsets | None = None):
    """A block of chromosomes' ``"priority"`` / ``"fifo"`` schedules, one per lane (``lane
    [block]``: their indices in the batch, :class:`~gsched.costmodel.pallas_lanes.
    ChromosomePerLane`'s).
    Whole-batch refs: ``rows [P, V_p, 4 + chunk + 2]`` (stream, source device, duration hi,
    lo, successor columns by slot), ``successor [P, Q]``, ``base`` / ``size [P, 2·D]`` and
    ``count [P]`` (:func:`dynamic_lanes_memory`), the state and heap inputs (aliased to the
    last outputs, used through those) → ``order``, ``start`` hi, lo ``[V_p, P]`` by step,
    ``tail [4, P]`` (makespan hi, lo, steps taken, 0), ``state``, ``heap``. ``barrier``: one
    per step (a GPU), as :func:`~gsched.costmodel.pallas_lanes.lanes_list_kernel`'s.

    ``peaks``: also account SPEC §3's memory in start order, as the list lane kernel does
    (:func:`~gsched.costmodel.pallas_peaks.account`): the rows go on with its columns,
    ``successor`` holds its regions, a ``counts`` input and output follow the heap's, and
    ``tail`` goes on with each device's peak (``[4 + 2·D, P]``)."""
    n = 2 if peaks is None else 3  # the state, heap (and counts) inputs
    order_ref, start_hi_ref, start_lo_ref, tail_ref, state_ref, heap_ref, *counts_ref = refs[n:]
    width = order_ref.shape[0]
    streams = 2 * num_devices
    released_at = 0 if fifo else width  # where the released heaps start
    zero = jnp.zeros_like(lane)
    base = [base_ref[lane, s] for s in range(streams)]

    def pick(values, index):
        """Each lane's ``values[index]`` (a list of per-stream vectors)."""
        return functools.reduce(lambda acc, s: jnp.where(index == s, values[s], acc),
                                range(1, streams), values[0])

    def put(values, index, value, valid):
        """``values`` with ``values[index] = value`` where ``valid``."""
        return [jnp.where(valid & (index == s), value, x) for s, x in enumerate(values)]

    def pick_time(times, index):
        """:func:`pick` for a list of per-stream fixed-point times."""
        return fp.Fixed(pick([t.hi for t in times], index), pick([t.lo for t in times], index))

    def put_time(times, index, value, valid):
        """:func:`put` for a list of per-stream fixed-point times."""
        return [fp.where(valid & (index == s), value, t) for s, t in enumerate(times)]

    def load(at):
        """The heap entry at ``at`` (per lane): (ready hi, ready lo, slot)."""
        return tuple(heap_ref[lane, ENTRY_WORDS * at + i] for i in range(3))

    def store(at, entry, valid):
        at = ENTRY_WORDS * jnp.where(valid, at, 0)
        for i, x in enumerate(entry):
            plt.store(heap_ref.at[lane, at + i], x, mask=valid)

    def less(a, b):
        """``a < b`` for (hi, lo, slot) keys."""
        return fp.greater(fp.Fixed(b[0], b[1]), fp.Fixed(a[0], a[1])) | (
            (a[0] == b[0]) & (a[1] == b[1]) & (a[2] < b[2]))

    def push(heap, size, entry, valid):
        """Sifts ``entry`` up into the heap at ``heap`` holding ``size`` → its new size."""
        def up(carry):
            i, moving = carry
            parent = jnp.right_shift(i - 1, 1)
            above = load(heap + jnp.where(moving, parent, 0))
            moving = moving & less(entry, above)
            store(heap + i, above, moving)
            i = jnp.where(moving, parent, i)
            return i, moving & (i > 0)

        i, _ = lax.while_loop(lambda c: any_lane(c[1]), up, (size, valid & (size > 0)))
        store(heap + i, entry, valid)
        return size + valid.astype(jnp.int32)

    def pop(heap, size, valid):
        """Takes the root of the heap at ``heap`` holding ``size`` → ``(root, size)``."""
        root = load(heap)
        size = size - valid.astype(jnp.int32)
        last = load(heap + jnp.where(valid, size, 0))

        def down(carry):
            i, moving = carry
            left = 2 * i + 1
            right = left + 1
            a = load(heap + jnp.where(moving & (left < size), left, 0))
            b = load(heap + jnp.where(moving & (right < size), right, 0))
            use_b = (right < size) & less(b, a)
            child = tuple(jnp.where(use_b, y, x) for x, y in zip(a, b))
            moving = moving & (left < size) & less(child, last)
            store(heap + i, child, moving)
            return jnp.where(moving, jnp.where(use_b, right, left), i), moving

        i, _ = lax.while_loop(lambda c: any_lane(c[1]), down, (zero, valid & (size > 0)))
        store(heap + i, last, valid & (size > 0))
        return root, size

    def root_time(heap, size):
        """The ready time at the root of a heap (meaningless where it is empty)."""
        entry = load(jnp.where(size > 0, heap, 0))
        return fp.Fixed(entry[0], entry[1])

    def lower(carry, targets, valids, end):
        """Successors ``targets`` (where ``valids``) each lose a dependency and have their
        ready time raised to ``end``; one that becomes known joins its stream's (pending)
        heap. An item's firing successors are distinct slots, so their states are all loaded
        before any store or push (those touch no other successor's state): the group's round
        trips to memory overlap."""
        sizes, tops = carry
        valids = [valid & (target >= 0) for target, valid in zip(targets, valids)]
        at = [STATE_WORDS * jnp.where(valid, target, 0) for target, valid in zip(targets, valids)]
        states = [[state_ref[lane, a + i] for i in range(STATE_WORDS)] for a in at]
        for target, valid, a, (word, hi, lo, stream) in zip(targets, valids, at, states):
            word = word - (1 << k)
            ready = fp.maximum(fp.Fixed(hi, lo), end)
            for i, x in enumerate((word, ready.hi, ready.lo)):
                plt.store(state_ref.at[lane, a + i], x, mask=valid)
            known = valid & (word < (1 << k))
            size = pick(sizes, stream)
            top = pick_time(tops, stream)
            top = fp.where((size == 0) | fp.greater(top, ready), ready, top)
            size = push(pick(base, stream), size, (ready.hi, ready.lo, target), known)
            sizes, tops = put(sizes, stream, size, known), put_time(tops, stream, top, known)
        return sizes, tops

    def step(carry):
        s, free, sizes, tops, released_sizes, latest, taken, memory = carry
        # The stream and start: min (max(free, smallest ready), stream) over known items.
        found, on, start = zero != 0, zero, fp.Fixed(zero, zero)
        for stream in range(streams):
            begin = fp.maximum(free[stream], tops[stream])
            has = sizes[stream] > 0
            if not fifo:  # released items are ready by the stream's free time
                begin = fp.where(released_sizes[stream] > 0, free[stream], begin)
                has = has | (released_sizes[stream] > 0)
            better = has & (~found | fp.greater(start, begin))
            found, on, start = found | has, jnp.where(better, stream, on), fp.where(
                better, begin, start)
        heap, size = pick(base, on), pick(sizes, on)
        if fifo:
            entry, size = pop(heap, size, found)
        else:
            def release(c):
                size, released_size, moving = c
                entry, size = pop(heap, size, moving)
                released_size = push(released_at + heap, released_size,
                                     (zero, zero, entry[2]), moving)
                return size, released_size, moving & due(size)

            def due(size):
                time = root_time(heap, size)
                return found & (size > 0) & ~fp.greater(time, start)

            size, released_size, _ = lax.while_loop(
                lambda c: any_lane(c[2]), release, (size, pick(released_sizes, on), due(size)))
            entry, released_size = pop(released_at + heap, released_size, found)
            released_sizes = put(released_sizes, on, released_size, found)
        sizes = put(sizes, on, size, found)
        tops = put_time(tops, on, root_time(heap, size), found)
        slot = jnp.where(found, entry[2], 0)
        for ref, value in ((order_ref, slot), (start_hi_ref, start.hi), (start_lo_ref, start.lo)):
            plt.store(ref.at[s, lane], value, mask=found)
        columns = [rows_ref[lane, slot, column] for column in range(rows_ref.shape[2])]
        _, source, duration_hi, duration_lo, *inline, first, last = columns[:6 + chunk]
        if peaks is not None:  # on the item's device: a copy's destination
            device = jnp.where(on < num_devices, on, on - num_devices)
            memory = account_lanes(successor_ref, counts_ref[0], lane, columns[6 + chunk:],
                                   device, source, found, memory, num_devices, peaks)
        end = fp.add(start, fp.Fixed(duration_hi, duration_lo), TIME_LO_BITS)
        free = put_time(free, on, end, found)
        latest = fp.where(found, fp.maximum(latest, end), latest)
        sizes, tops = walk_lanes(successor_ref, lane, (*inline, first, last), found,
                                 (sizes, tops), functools.partial(lower, end=end))
        if barrier:
            plt.debug_barrier()
        return (s + 1, free, sizes, tops, released_sizes, latest,
                taken + found.astype(jnp.int32), memory)

    most = jnp.max(count_ref[lane])  # steps of the block's longest schedule
    nothing = fp.Fixed(zero, zero)
    sizes = [size_ref[lane, s] for s in range(streams)]
    empty = [zero] * streams
    memory = () if peaks is None else ((nothing, nothing),) * num_devices  # (live, peak)
    carry = (jnp.int32(0), [nothing] * streams, empty if not fifo else sizes,
             [nothing] * streams, sizes if not fifo else empty, nothing, zero, memory)
    *_, latest, taken, memory = lax.while_loop(lambda c: c[0] < most, step, carry)
    for row, value in enumerate((latest.hi, latest.lo, taken, zero)):
        tail_ref[row, lane] = value
    for d, (_, peak) in enumerate(memory):
        tail_ref[4 + 2 * d, lane] = peak.hi
        tail_ref[5 + 2 * d, lane] = peak.lo
