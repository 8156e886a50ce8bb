"""SPEC §8.2's event-driven ``"priority"`` / ``"fifo"`` schedulers on a CPU: the event-driven
kernel's step (:mod:`gsched.costmodel.pallas_dynamic`) in plain JAX, chromosomes in blocks.

:mod:`gsched.costmodel.dynamic`'s loop makes every iteration — a start or a window of
successor entries — a dense pass over all ``V = N + T·D`` items of every chromosome at once
(``[P, V]``, several reductions over the minor axis). Here the inputs are the event-driven
kernel's (:func:`~gsched.costmodel.pallas_dynamic.dynamic_inputs`: the ``V_p`` running items
by slot, their §2 rank; only the successor entries that fire), and chromosomes go in blocks of
:data:`BLOCK`, laid out ``[V_p, BLOCK]`` (chromosomes minor, as :mod:`gsched.costmodel.dense`
does for the list scheduler: a reduction over the slots is vectorized across the block, and the
block's arrays are reused at every step). Times are exact fixed-point values held as one
int64 each (``hi · 2**TIME_LO_BITS + lo``), and the passes over the slots read one array,
``avail``: per slot ``ready · 2**b + stream`` once it is known (all its dependencies
started), a time above every other while it is not or once it has started (``b`` bits of a
stream). Each stream's free time is held as ``free · 2**b + stream`` too, and its ``low``, the
smallest ``avail`` of its slots, is kept per chromosome. A step is:

1. one reduction over the slots: ``low`` of the stream that started an item in the previous
   step (the only one an item left; a slot that becomes known lowers its stream's ``low`` as
   it is walked). The stream and start are then the minimum over the ``2·D`` streams of
   ``max(low, free)`` (ties go to the smaller stream, §8.2's rule), not a pass over the slots
   that selects each slot's stream's free time (``2·D − 1`` selects per slot);
2. one reduction for the item: the smallest slot (= §2 rank) of that stream with ``avail`` at
   most the start, or for ``"fifo"`` the smallest slot whose ``avail`` is the stream's
   ``low``, i.e. the smallest ``(ready, slot)`` (§8.2 reads a program input's ready time as
   −∞; an input is ready at 0 and has its stream's smallest slots, so ``(0, slot)`` already
   puts it first, as in the lane kernel);
3. a gather of its row per chromosome (duration, successors), its stream's new free time,
   and scatters of ``BLOCK`` elements per successor column: a firing successor loses a
   dependency (``word``), has its ready time raised to the end (``ready``), and enters
   ``avail`` (and its stream's ``low``) when it has no dependency left; the successors past
   the row's inline ones are walked ``chunk`` at a time while any chromosome of the block has
   some.

Each reduction first folds :data:`FOLD` slices of the slots elementwise, which XLA:CPU fuses
with the ops that make them (reducing ``[V_p, BLOCK]`` directly, it writes the whole masked
array for its reduction to read back). Bit for bit the loop's schedule
(``tests/test_dense_dynamic.py``); ``O(V_p)`` per step like the loop and the kernel, with
fewer items and far fewer passes than the loop (``docs/benchmarks.md``, ``docs/design.md``).
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
from jax import lax

from gsched.core import fixedpoint as fp
from gsched.costmodel.dense import in_blocks
from gsched.costmodel.pallas_decode import NEVER
from gsched.costmodel.schedule import TIME_LO_BITS

BLOCK = 128  # chromosomes per block (the minor axis of the loop's arrays)
FOLD = 8  # slices of the slots folded elementwise before a reduction over them (4 and 8
# tie on 2 cores at 500 ops; 32 made XLA:CPU's fused loop 25x slower)


@dataclasses.dataclass(frozen=True)
class WholeBatch:
    """A kernel layout (:func:`~gsched.costmodel.pallas_decode.batched_kernel`'s ``layout``)
    for :func:`block_schedule`, plain JAX: the "kernel" takes the whole batch's arrays."""

    def __call__(self, kernel, width: int, k: int, interpret: bool, per_step: int, tail: int,
                 params: dict):
        del width, k, interpret, per_step, tail, params
        return kernel


def block_schedule(word: jnp.ndarray, rows: jnp.ndarray, successor: jnp.ndarray,
                   count: jnp.ndarray, stream: jnp.ndarray, *,
                   fifo: bool, chunk: int, k: int, num_devices: int
                   ) -> tuple[jnp.ndarray, jnp.ndarray, jnp.ndarray, jnp.ndarray]:
    """The event-driven schedules of a batch, the register kernel's inputs and outputs
    (:func:`~gsched.costmodel.pallas_dynamic.dynamic_inputs`): ``word [B, W]`` (unstarted
    dependencies ``<< k`` | slot; :data:`~gsched.costmodel.pallas_decode.NEVER` past the
    running items), ``rows [B, W, 4 + chunk]`` (duration hi, lo, ``chunk`` inline successor
    slots, the range of the rest in ``successor [B, Q + chunk]``), ``count [B]`` running items,
    ``stream [B, W]`` (``2·num_devices`` streams) → ``order``, ``start hi``,
    ``start lo`` ``[B, W]`` by step and ``tail [B, 4]`` (makespan hi, lo, steps taken, 0)."""
    batch, width = word.shape
    block = min(BLOCK, batch)
    fill = jnp.full(width, NEVER, jnp.int32)
    xs = (in_blocks(word, fill, block), in_blocks(rows, -1, block),
          in_blocks(successor, -1, block), in_blocks(count, 0, block),
          in_blocks(stream, 0, block))

    def one_block(x):
        word, rows, successor, count, stream = x
        with jax.enable_x64(True):
            return _schedule(word.T, rows.transpose(1, 0, 2), successor.T, count, stream.T,
                             fifo=fifo, chunk=chunk, k=k, num_streams=2 * num_devices)

    order, start_hi, start_lo, tail = lax.map(one_block, xs)
    return tuple(x.reshape((-1,) + x.shape[2:])[:batch]
                 for x in (order, start_hi, start_lo, tail))


def _schedule(word, rows, successor, count, stream, *, fifo, chunk, k, num_streams):
    """One block of :func:`block_schedule` on lane-minor arrays (``[W, B]``; ``rows [W, B, C]``,
    ``successor [Q, B]``), under ``jax.enable_x64``."""
    width, block = word.shape
    lane = jnp.arange(block, dtype=jnp.int32)
    slot = lax.broadcasted_iota(jnp.int32, (width, block), 0)
    bits = max(1, (num_streams - 1).bit_length())  # of a stream
    # The ready time of a slot not known: above every time an int32 ``hi`` can hold (up to
    # 64 devices; above every time below 2**TIME_VALUE_BITS, the exact ones, for any number).
    unknown_time = 1 << (62 - bits)
    unknown = unknown_time << bits
    flat_rows = rows.reshape(width * block, -1)
    streams = jnp.arange(num_streams, dtype=jnp.int32)[:, None]

    def lowest_on(avail, on_stream, which):
        """``[B]``: the smallest ``avail`` among the slots on stream ``which [B]``, ``unknown``
        where there is none (``on_stream [W, B]``: each slot's)."""
        return _min_over_slots(jnp.where(on_stream == which[None, :], avail, unknown))

    def walk(word, ready, avail, low, targets, end, active):
        """Firing successor slots ``targets [S, B]`` (−1: none) lose a dependency and have
        their ready time raised to ``end [B]``; those left with none become known (and
        count in their stream's ``low``)."""
        at = jnp.where((targets >= 0) & active[None, :], targets, width)
        index = (at.reshape(-1), jnp.broadcast_to(lane, at.shape).reshape(-1))
        word = word.at[index].add(-(1 << k), mode="drop", unique_indices=True)
        ready = ready.at[index].max(jnp.broadcast_to(end, at.shape).reshape(-1), mode="drop",
                                    unique_indices=True)
        # Gathered after the updates (a target out of range reads a clamped, dropped row).
        known = word.at[index].get(mode="clip") < (1 << k)
        time = jnp.where(known, ready.at[index].get(mode="clip"), unknown_time)
        on = stream.at[index].get(mode="clip")
        value = jnp.left_shift(time, bits) | on.astype(jnp.int64)
        avail = avail.at[index].set(value, mode="drop", unique_indices=True)
        # Each stream's new low: a min over the targets per stream (cheaper than a scatter).
        on = jnp.where(at < width, on.reshape(at.shape), num_streams)  # dropped: no stream
        low = jnp.minimum(low, jnp.min(jnp.where(on[None] == streams[:, :, None],
                                                 value.reshape(at.shape)[None], unknown),
                                       axis=1))
        return word, ready, avail, low

    def step(s, carry):
        word, ready, avail, low, dirty, free, latest, order, start_out = carry
        on_stream = avail & ((1 << bits) - 1)
        low = jnp.where(streams == dirty[None, :], lowest_on(avail, on_stream, dirty)[None, :],
                        low)
        key = jnp.min(jnp.maximum(low, free), axis=0)  # [B]
        active = key < unknown
        start = jnp.right_shift(key, bits)
        on = (key & ((1 << bits) - 1)).astype(jnp.int32)
        if fifo:  # a program input's ready time is read as −∞, but it is ready at 0 and has
            # the smallest slots of its stream (§2 ranks inputs first): (0, slot) orders it first
            first = jnp.take_along_axis(low, on[None, :], axis=0)  # the stream's lowest
            candidate = avail == first
        else:  # the stream's known slots ready by the start (unknown ones are later)
            candidate = (on_stream == on[None, :]) & (avail <= key[None, :])
        best = _min_over_slots(jnp.where(candidate, slot, width))  # [B]
        best = jnp.where(active, best, 0)
        row = flat_rows[best * block + lane]  # [B, C]
        end = start + fp.to_int64(fp.Fixed(row[:, 0], row[:, 1]), TIME_LO_BITS)
        free = jnp.where((streams == on[None, :]) & active[None, :],
                         jnp.left_shift(end, bits)[None, :] | streams, free)
        latest = jnp.where(active, jnp.maximum(latest, end), latest)
        order = order.at[s].set(jnp.where(active, best, -1))
        start_out = start_out.at[s].set(jnp.where(active, start, 0))
        avail = avail.at[jnp.where(active, best, width), lane].set(unknown, mode="drop",
                                                                  unique_indices=True)
        word, ready, avail, low = walk(word, ready, avail, low, row[:, 2:2 + chunk].T, end,
                                       active)

        def window(c):
            q, *state = c
            at = q[None, :] + jnp.arange(chunk, dtype=jnp.int32)[:, None]  # [chunk, B]
            targets = jnp.where(at < last[None, :], successor[jnp.minimum(
                at, successor.shape[0] - 1), lane[None, :]], -1)
            return (q + chunk, *walk(*state, targets, end, active))

        first_entry, last = row[:, 2 + chunk], row[:, 3 + chunk]
        last = jnp.where(active, last, first_entry)
        _, word, ready, avail, low = lax.while_loop(lambda c: jnp.any(c[0] < last), window,
                                                    (first_entry, word, ready, avail, low))
        # The started item leaves its stream: that stream's lowest is found again next step.
        return word, ready, avail, low, on, free, latest, order, start_out

    zero = jnp.zeros(block, jnp.int64)
    known = word < (1 << k)  # ready at 0
    avail = jnp.left_shift(jnp.where(known, 0, unknown_time).astype(jnp.int64), bits) | stream
    free = jnp.broadcast_to(streams.astype(jnp.int64), (num_streams, block))  # all free at 0
    low = jnp.stack([lowest_on(avail, stream, jnp.full(block, j, jnp.int32))
                     for j in range(num_streams)])
    carry = (word, jnp.zeros((width, block), jnp.int64), avail, low,
             jnp.full(block, num_streams, jnp.int32), free, zero,
             jnp.full((width, block), -1, jnp.int32), jnp.zeros((width, block), jnp.int64))
    *_, latest, order, start = lax.fori_loop(0, jnp.max(count), step, carry)
    taken = jnp.sum(order >= 0, axis=0, dtype=jnp.int32)
    makespan, start = fp.from_int64(latest, TIME_LO_BITS), fp.from_int64(start.T, TIME_LO_BITS)
    tail = jnp.stack([makespan.hi, makespan.lo, taken, jnp.zeros(block, jnp.int32)], axis=1)
    return order.T, start.hi, start.lo, tail


def _min_over_slots(x: jnp.ndarray) -> jnp.ndarray:
    """``min(x, axis=0)`` of ``x [W, B]``, its first :data:`FOLD` levels as elementwise
    minima of slices, which fuse with the ops that make ``x`` (XLA:CPU otherwise writes the
    whole of ``x`` for its reduction to read back)."""
    width = x.shape[0]
    if width % FOLD:
        return jnp.min(x, axis=0)
    part = x.reshape(FOLD, width // FOLD, x.shape[1])
    return jnp.min(functools.reduce(jnp.minimum, [part[i] for i in range(FOLD)]), axis=0)
