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
int64 each (``hi · 2**TIME_LO_BITS + lo``), and the item is chosen from one array, ``avail``:
per slot ``ready · 2**b + stream`` once it is known (all its dependencies started), a time
above every other while it is not or once it has started (``b`` bits of a stream). Each
stream's free time is held as ``free · 2**b + stream`` too. The slots are in groups of about
``√V_p`` (:func:`group_size`), and each chromosome keeps each stream's lowest ``avail`` per
group (``lows [S, G, BLOCK]``, ``S = 2·D`` streams) and over all its slots (``low``). A step
is:

1. the stream and start: the minimum over the streams of ``max(low, free)`` (ties go to the
   smaller stream, §8.2's rule);
2. the item: the smallest slot (= §2 rank) of that stream with ``avail`` at most the start,
   or for ``"fifo"`` at most the stream's ``low`` (its smallest ``(ready, slot)``; §8.2 reads
   a program input's ready time as −∞, but an input is ready at 0 and has its stream's
   smallest slots, so ``(0, slot)`` already puts it first, as in the lane kernel). It is in
   the first group whose lowest on the stream is at most that bound: a reduction over the
   ``G`` groups' lows, then one over that group's slots, ``O(√V_p)`` instead of a pass over
   all ``V_p`` slots. The item leaves its stream: its group's lowest there is found again
   (from the slots just read), and the stream's ``low`` from the groups';
3. a gather of its row per chromosome (duration, successors), its stream's new free time,
   and scatters of ``BLOCK`` elements per inline successor column: a firing successor loses a
   dependency (``word``), has its ready time raised to the end (``ready``), and enters
   ``avail``, its group's and its stream's lows when it has no dependency left. The entries
   past the rows' inline ones are the whole block's one list (each chromosome's range at its
   offset, :data:`ENTRY_SHARE`), walked a window at a time: at 500 ops, ``D = 2`` a step has
   ~23 such entries among 128 chromosomes, 1.2 windows of 32 per step, where ``chunk``
   entries of every chromosome per window (all masked but those that have more) took 1.9
   windows of ``2 × 128``.

Bit for bit the loop's schedule (``tests/test_dense_dynamic.py``); ``O(√V_p)`` per step and
chromosome against the loop's and the register kernel's ``O(V_p)``, with fewer items and far
fewer passes than the loop (``docs/benchmarks.md``, ``docs/design.md``). On a CPU much of a
step's cost is its gathers and scatters (XLA:CPU splits even small ones over its threads), so
against passes over all the slots the gain is 1.5–2.3× at 100 ops, 1.0–1.3× at 500 and
1.3–2.0× at 2,000 (whole evaluations in one process, the same results).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
from jax import lax

from gsched.core import fixedpoint as fp
from gsched.costmodel.dense import in_blocks
from gsched.costmodel.pallas_decode import NEVER
from gsched.costmodel.schedule import TIME_LO_BITS

BLOCK = 128  # chromosomes per block (the minor axis of the loop's arrays)
ENTRY_SHARE = 4  # a step walks the block's successor entries past the rows' inline ones
# BLOCK / ENTRY_SHARE at a time (at 500 ops, D = 2: ~23 entries, 1.2 windows a step)


@dataclasses.dataclass(frozen=True)
class WholeBatch:
    """A kernel layout (:func:`~gsched.costmodel.pallas_decode.batched_kernel`'s ``layout``)
    for :func:`block_schedule`, plain JAX: the "kernel" takes the whole batch's arrays."""

    def __call__(self, kernel, width: int, k: int, interpret: bool, per_step: int, tail: int,
                 params: dict):
        del width, k, interpret, per_step, tail, params
        return kernel


def group_size(width: int) -> int:
    """Slots per group of a ``width``-slot block (a power of two): ``2**⌈log₂(width) / 2⌉``,
    about ``√width``, so that a step's reductions (over the groups, then within one) are
    ``O(√width)`` per chromosome."""
    return 1 << (width.bit_length() // 2)


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
    bits = max(1, (num_streams - 1).bit_length())  # of a stream
    # The ready time of a slot not known: above every time an int32 ``hi`` can hold (up to
    # 64 devices; above every time below 2**TIME_VALUE_BITS, the exact ones, for any number).
    unknown_time = 1 << (62 - bits)
    unknown = unknown_time << bits
    flat_rows = rows.reshape(width * block, -1)
    streams = jnp.arange(num_streams, dtype=jnp.int32)[:, None]

    entries = max(1, block // ENTRY_SHARE)
    group = group_size(width)
    groups, shift = width // group, group.bit_length() - 1
    in_group = lax.broadcasted_iota(jnp.int32, (group, block), 0)
    group_index = lax.broadcasted_iota(jnp.int32, (groups, block), 0)

    def walk(word, ready, avail, low, lows, at, lanes, end):
        """Firing successor slots ``at [M]`` of chromosomes ``lanes [M]`` (``width``: none)
        lose a dependency and have their ready time raised to ``end [M]``; those left with
        none become known (and count in their stream's ``low`` and their group's ``lows``)."""
        index = (at, lanes)
        word = word.at[index].add(-(1 << k), mode="drop", unique_indices=True)
        ready = ready.at[index].max(end, mode="drop", unique_indices=True)
        # Gathered after the updates (a target out of range reads a clamped, dropped row).
        known = word.at[index].get(mode="clip") < (1 << k)
        time = jnp.where(known, ready.at[index].get(mode="clip"), unknown_time)
        on = stream.at[index].get(mode="clip")
        value = jnp.left_shift(time, bits) | on.astype(jnp.int64)
        avail = avail.at[index].set(value, mode="drop", unique_indices=True)
        on = jnp.where(at < width, on, num_streams)  # dropped: no stream
        lows = lows.at[on, jnp.right_shift(at, shift), lanes].min(value, mode="drop")
        low = low.at[on, lanes].min(value, mode="drop")
        return word, ready, avail, low, lows

    def step(s, carry):
        word, ready, avail, low, lows, free, latest, order, start_out = carry
        key = jnp.min(jnp.maximum(low, free), axis=0)  # [B]
        active = key < unknown
        start = jnp.right_shift(key, bits)
        on = (key & ((1 << bits) - 1)).astype(jnp.int32)
        # The item: the stream's smallest slot with ``avail`` at most ``most`` — its known
        # slots ready by the start (unknown ones are later), or for "fifo" its lowest, the
        # smallest (ready, slot) (§8.2 reads a program input's ready time as −∞, but it is
        # ready at 0 and has the smallest slots of its stream, §2 ranking inputs first). Its
        # group is the first whose lowest on the stream is at most ``most``.
        most = jnp.take_along_axis(low, on[None, :], axis=0)[0] if fifo else key
        column = jnp.take_along_axis(lows, on[None, None, :], axis=0)[0]  # [G, B]
        first = jnp.where(active, jnp.min(jnp.where(column <= most, group_index, groups),
                                          axis=0), 0)
        members = avail[jnp.left_shift(first, shift)[None, :] + in_group, lane[None, :]]
        mine = (members & ((1 << bits) - 1)) == on[None, :]
        within = jnp.min(jnp.where(mine & (members <= most), in_group, group), axis=0)
        best = jnp.where(active, jnp.left_shift(first, shift) + within, 0)
        row = flat_rows[best * block + lane]  # [B, C]
        end = start + fp.to_int64(fp.Fixed(row[:, 0], row[:, 1]), TIME_LO_BITS)
        free = jnp.where((streams == on[None, :]) & active[None, :],
                         jnp.left_shift(end, bits)[None, :] | streams, free)
        latest = jnp.where(active, jnp.maximum(latest, end), latest)
        order = order.at[s].set(jnp.where(active, best, -1))
        start_out = start_out.at[s].set(jnp.where(active, start, 0))
        avail = avail.at[jnp.where(active, best, width), lane].set(unknown, mode="drop",
                                                                  unique_indices=True)
        # The started item leaves its stream: its group's lowest there, then the stream's.
        rest = jnp.min(jnp.where(mine & (in_group != within[None, :]), members, unknown),
                       axis=0)
        lows = lows.at[jnp.where(active, on, num_streams), first, lane].set(
            rest, mode="drop", unique_indices=True)
        left = jnp.min(jnp.where(group_index == first[None, :], rest[None, :], column), axis=0)
        low = jnp.where((streams == on[None, :]) & active[None, :], left[None, :], low)
        inline = row[:, 2:2 + chunk].T  # [chunk, B]
        state = walk(word, ready, avail, low, lows,
                     jnp.where((inline >= 0) & active[None, :], inline, width).reshape(-1),
                     jnp.tile(lane, chunk), jnp.tile(end, chunk))
        # The rest of the items' firing entries: the block's in one list, ``entries`` at a
        # time (a step has a few; the chromosome with the most does not set the windows).
        first_entry, last = row[:, 2 + chunk], row[:, 3 + chunk]
        extra = jnp.where(active, jnp.maximum(last - first_entry, 0), 0)
        offset = jnp.cumsum(extra) - extra  # [B] each chromosome's first position
        total = offset[-1] + extra[-1]

        def window(c):
            done, *state = c
            position = done + lax.broadcasted_iota(jnp.int32, (entries,), 0)
            # Its chromosome: the last whose first position is at most it (one with none
            # shares the next one's first position).
            owner = jnp.sum(offset[None, :] <= position[:, None], axis=1, dtype=jnp.int32) - 1
            entry = first_entry[owner] + position - offset[owner]
            valid = position < total
            at = jnp.where(valid, successor[jnp.where(valid, entry, 0), owner], width)
            return (done + entries, *walk(*state, at, owner, end[owner]))

        word, ready, avail, low, lows = lax.while_loop(
            lambda c: c[0] < total, window, (jnp.int32(0), *state))[1:]
        return word, ready, avail, low, lows, free, latest, order, start_out

    zero = jnp.zeros(block, jnp.int64)
    known = word < (1 << k)  # ready at 0
    avail = jnp.left_shift(jnp.where(known, 0, unknown_time).astype(jnp.int64), bits) | stream
    free = jnp.broadcast_to(streams.astype(jnp.int64), (num_streams, block))  # all free at 0
    lows = jnp.min(jnp.where(stream.reshape(1, groups, group, block) == streams[:, :, None, None],
                             avail.reshape(1, groups, group, block), unknown), axis=2)
    carry = (word, jnp.zeros((width, block), jnp.int64), avail, jnp.min(lows, axis=1), lows,
             free, zero,
             jnp.full((width, block), -1, jnp.int32), jnp.zeros((width, block), jnp.int64))
    *_, latest, order, start = lax.fori_loop(0, jnp.max(count), step, carry)
    taken = jnp.sum(order >= 0, axis=0, dtype=jnp.int32)
    makespan, start = fp.from_int64(latest, TIME_LO_BITS), fp.from_int64(start.T, TIME_LO_BITS)
    tail = jnp.stack([makespan.hi, makespan.lo, taken, jnp.zeros(block, jnp.int32)], axis=1)
    return order.T, start.hi, start.lo, tail
