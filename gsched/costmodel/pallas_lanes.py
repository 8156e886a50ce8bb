"""The list schedule's fused kernel with one chromosome per lane and a bit-set ready tree.

The other list kernels (:mod:`gsched.costmodel.pallas_decode`, :mod:`gsched.costmodel.
pallas_memory`) give each chromosome a program and spread its slots over the lanes, so a step
is vector work over the slots: ``O(V_p)`` (or ``O(√V_p)``) per step and a chain of block-wide
reductions. This kernel turns the layout around, as the CPU loop's batch is laid out: a
program holds a block of chromosomes, one per lane (one per thread), and each lane runs its
chromosome's schedule with scalar-sized work per step, as the loop decoder's ready tree does
(:mod:`gsched.costmodel.schedule`):

* the ready set is a tree of 32-bit words over the slots (bit ``j`` of word ``i`` of level 0:
  slot ``32·i + j`` is ready; a level-``l + 1`` bit: that word of level ``l`` is not zero;
  :func:`tree_levels`), in global memory, and its last word, ``top``, in a register. The ready
  slot of best rank is the lowest set bit, found from ``top`` down with one load per level
  (one at ``V_p ≤ 1,024``), the count of trailing zeros being a ``population_count``;
* each slot's state is four int32 in global memory, ``(word, ready hi, ready lo, 0)``: one
  32-byte sector holds what a successor update reads and writes. ``word`` counts unfinished
  dependencies as :mod:`gsched.costmodel.pallas_decode` does (``(count << k) | slot``); a
  successor whose count reaches zero sets its bit (and, when its word was empty, the bit above);
* the ``D`` devices' free times are per-lane registers.

A step per lane: find and clear the best ready slot, read its row (the same ``rows`` table as
the other list kernels: device, source device, duration, inline successors and the range of
the rest) and its ready time, compute the start and end (SPEC §4,
:func:`~gsched.costmodel.schedule.kernel_step_times`), store the slot in ``order``, and walk
the firing successors (the row's ``chunk``, then the rest ``chunk`` at a time while any lane of
the block has some; a group's words are loaded before its stores, so their round trips
overlap): each loses a dependency and has its ready time set to the end (the list kernels'
``ends_grow`` rule: every predecessor of an item ends on the item's device, and those ends
grow with the step). That is ``O(levels + successors)`` loads and stores per step,
``O(V_p · log₃₂ V_p + Q)`` per chromosome instead of ``O(V_p²)``; no reduction over slots, one
over the block per window of successors (is any lane still walking). Every lane's data is its
own, so the lanes need no synchronization: a barrier per step only keeps Triton from mapping
one lane to two threads between steps. ``order`` is stored step-major, ``[V_p, P]``, so a
step's stores from a warp are contiguous. With ``peaks`` the step also accounts SPEC §3's
memory (:func:`~gsched.costmodel.pallas_peaks.account` on the lanes' vectors; decoder
``"pallas_lanes_fused"``).

The kernel's memory is the whole work: at 500 ops, ``D = 2`` (1,024 slots) a chromosome has
16 KiB of state, 32 KiB of rows and a few KiB of successors, of which a step touches ~6
scattered 32-byte sectors. It is the fastest list kernel on an H200 (2026-11-29, session 36):
at 500 ops, ``D = 2``, 14.1 ms per 16,384 chromosomes for the schedule against the register
kernel's 28.4 ms (58× faster at 10,000 ops, 2026-11-28), so "auto" picks it on a GPU. Two
variants measured slower there (docs/benchmarks.md): one 32-byte row per slot holding the
state and the row together (session 29; whole evaluations 0.63×, its successors past two all
walked from the entry table), and, measured with those rows, fewer programs than blocks
(``programs``: 0.99× at 264 programs down to 0.45× at 33; all blocks at once stays the
default).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Callable

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as plt

from gsched.core import fixedpoint as fp
from gsched.costmodel.pallas_peaks import PEAK_COLUMNS, PeakOffsets, Scalars, account
from gsched.costmodel.schedule import kernel_step_times

LANES_NUM_WARPS = 1  # default warps per program: 32 chromosomes, one per thread
STATE_WORDS = 4  # a slot's state: word, ready hi, ready lo, unused (one 16-byte group)
BITS = 32


def tree_levels(width: int) -> tuple[int, ...]:
    """Words per level of the ready tree over ``width`` slots in memory, level 0 first: each
    level has a bit per word of the one below, until one word (``top``, in a register) covers
    the last level."""
    levels = [-(-width // BITS)]
    while levels[-1] > BITS:
        levels.append(-(-levels[-1] // BITS))
    return tuple(levels)


def trailing_zeros(x: jnp.ndarray) -> jnp.ndarray:
    """The index of the lowest set bit of each int32 (32 for 0)."""
    return lax.population_count((x & -x) - 1)


def pack_bits(flags: jnp.ndarray) -> jnp.ndarray:
    """``[..., n]`` booleans → ``[..., ⌈n / 32⌉]`` int32 words, bit ``j`` of word ``i`` =
    flag ``32·i + j``."""
    n = flags.shape[-1]
    words = -(-n // BITS)
    flags = jnp.pad(flags, [(0, 0)] * (flags.ndim - 1) + [(0, words * BITS - n)])
    bits = flags.reshape(*flags.shape[:-1], words, BITS).astype(jnp.int32) << jnp.arange(
        BITS, dtype=jnp.int32)
    return lax.reduce(bits, jnp.int32(0), lax.bitwise_or, (bits.ndim - 1,))


def ready_tree(word: jnp.ndarray, k: int) -> tuple[jnp.ndarray, jnp.ndarray]:
    """A batch's initial ready trees: ``word [B, V_p]`` (``(dependencies << k) | slot``) →
    ``(levels [B, Σ tree_levels(V_p)]`` in memory, level 0 first, ``top [B]``)."""
    level = pack_bits(word < (1 << k))
    levels = [level]
    for _ in tree_levels(word.shape[1])[1:]:
        level = pack_bits(level != 0)
        levels.append(level)
    return jnp.concatenate(levels, axis=1), pack_bits(level != 0)[:, 0]


def lanes_list_kernel(rows_ref, successor_ref, top_ref, count_ref, *refs, num_devices: int,
                      chunk: int, k: int, lane: jnp.ndarray, barrier: bool,
                      peaks: PeakOffsets | None = None):
    """A block of chromosomes' list schedules, one per lane (``lane [block]``: their indices in
    the batch, :class:`ChromosomePerLane`'s). Whole-batch refs:
    ``rows [P, V_p, C]``, ``successor [P, Q]``, ``top`` and ``count [P]``, then the ``state
    [P, 4·V_p]`` and ``tree [P, Σ tree_levels(V_p)]`` inputs (aliased to the last outputs,
    their memory, used through those) → ``order [V_p, P]`` (the slot taken at each step),
    ``tail [4, P]`` (makespan hi, lo, steps taken, 0), ``state``, ``tree``. ``barrier``: one
    per step (a GPU; compiled, every tensor has one layout, a thread per lane, so it only
    guards against a compiler that would map them otherwise).

    ``peaks``: also account SPEC §3's memory (:func:`~gsched.costmodel.pallas_peaks.account`,
    one lane per chromosome): the rows go on with its columns, ``successor`` holds its
    regions at ``peaks``, a ``counts [P, C_p]`` input and output (the copies' reads left,
    aliased as the state) follow the tree's, and ``tail`` goes on with each device's peak
    (hi, lo) at rows ``4 + 2·d`` (``[4 + 2·D, P]``)."""
    n = 2 if peaks is None else 3  # the state, tree (and counts) inputs
    order_ref, tail_ref, state_ref, tree_ref, *counts_ref = refs[n:]
    width = order_ref.shape[0]
    offsets, at = [], 0
    for words in tree_levels(width):
        offsets.append(at)
        at += words
    zero = jnp.zeros_like(lane)

    def take(top, active):
        """Finds and clears each active lane's best ready slot → ``(slot, top)``."""
        index = jnp.where(active, trailing_zeros(top), 0)
        found = []  # (level, word index, word), top level first
        for level in reversed(range(len(offsets))):
            word = tree_ref[lane, offsets[level] + index]
            found.append((level, index, word))
            index = index * BITS + jnp.where(active, trailing_zeros(word), 0)
        empty = active
        for level, position, word in reversed(found):  # level 0 up: clear the lowest bit
            cleared = word & (word - 1)
            plt.store(tree_ref.at[lane, offsets[level] + position], cleared, mask=empty)
            empty = empty & (cleared == 0)
        return index, jnp.where(empty, top & (top - 1), top)

    def mark(top, target, valid):
        """Sets ready slot ``target`` (where ``valid``) in the tree → ``top``."""
        index = jnp.where(valid, target, 0)
        for offset in offsets:
            at = offset + jnp.right_shift(index, 5)
            word = tree_ref[lane, at]
            plt.store(tree_ref.at[lane, at], word | jnp.left_shift(1, index & (BITS - 1)),
                      mask=valid)
            valid = valid & (word == 0)
            index = jnp.right_shift(index, 5)
        return top | jnp.where(valid, jnp.left_shift(1, index), 0)

    def lower(top, targets, valids, end):
        """Successors ``targets`` (where ``valids``) each lose a dependency, ready at ``end``.
        An item's firing successors are distinct slots, so their words are all loaded before
        any store: the group's round trips to memory overlap instead of following each
        other."""
        valids = [valid & (target >= 0) for target, valid in zip(targets, valids)]
        at = [STATE_WORDS * jnp.where(valid, target, 0) for target, valid in zip(targets, valids)]
        words = [state_ref[lane, a] - (1 << k) for a in at]
        for target, valid, a, word in zip(targets, valids, at, words):
            for i, value in enumerate((word, end.hi, end.lo)):
                plt.store(state_ref.at[lane, a + i], value, mask=valid)
            top = mark(top, target, valid & (word < (1 << k)))
        return top

    def step(carry):
        s, top, taken, free, memory = carry
        active = top != 0
        slot, top = take(top, active)
        plt.store(order_ref.at[s, lane], slot, mask=active)
        columns = [rows_ref[lane, slot, column] for column in range(rows_ref.shape[2])]
        device, source, duration_hi, duration_lo, *inline, first, last = columns[:6 + chunk]
        if peaks is not None:
            memory = account_lanes(successor_ref, counts_ref[0], lane, columns[6 + chunk:],
                                   device, source, active, memory, num_devices, peaks)
        at = STATE_WORDS * slot
        ready = fp.Fixed(state_ref[lane, at + 1], state_ref[lane, at + 2])
        end, after = kernel_step_times(ready, free, device, source,
                                       fp.Fixed(duration_hi, duration_lo), num_devices)
        free = tuple(fp.where(active, x, y) for x, y in zip(after, free))
        top = walk_lanes(successor_ref, lane, (*inline, first, last), active, top,
                         functools.partial(lower, end=end))
        if barrier:
            plt.debug_barrier()
        return s + 1, top, taken + active.astype(jnp.int32), free, memory

    most = jnp.max(count_ref[lane])  # steps of the block's longest schedule
    nothing = tuple(fp.Fixed(zero, zero) for _ in range(num_devices))
    _, _, taken, free, memory = lax.while_loop(
        lambda c: c[0] < most, step,
        (jnp.int32(0), top_ref[lane], zero, nothing,
         () if peaks is None else tuple((x, x) for x in nothing)))  # (live, peak) per device
    makespan = functools.reduce(fp.maximum, free)
    for row, value in enumerate((makespan.hi, makespan.lo, taken, zero)):
        tail_ref[row, lane] = value
    for d, (_, peak) in enumerate(memory):
        tail_ref[4 + 2 * d, lane] = peak.hi
        tail_ref[5 + 2 * d, lane] = peak.lo


def any_lane(flags: jnp.ndarray) -> jnp.ndarray:
    """Whether any lane of the block is flagged (the loops of a kernel with one chromosome per
    lane run while any lane still has work)."""
    return jnp.max(flags.astype(jnp.int32)) > 0


def walk_lanes(successor_ref, lane: jnp.ndarray, columns, active: jnp.ndarray, carry, lower):
    """Inside a kernel with one chromosome per lane: each active lane's firing successors, from
    its item's :func:`~gsched.costmodel.pallas_decode.successor_columns` (``columns``: the
    ``chunk`` inline slots, then the range of the rest in its row of ``successor_ref [P,
    Q]``), the rest ``chunk`` at a time while any lane of the block has some.
    ``lower(carry, targets, valids)`` applies a group of successor slots (the inline ones,
    then each window's; ``valids``: each is one) → ``carry``."""
    *inline, first, last = columns
    carry = lower(carry, inline, [active] * len(inline))
    last = jnp.where(active, last, first)

    def window(c):
        q, carry = c
        within = [q + j < last for j in range(len(inline))]
        targets = [successor_ref[lane, jnp.where(w, q + j, 0)] for j, w in enumerate(within)]
        return q + len(inline), lower(carry, targets, within)

    return lax.while_loop(lambda c: any_lane(c[0] < last), window, (first, carry))[1]


def account_lanes(successor_ref, counts_ref, lane: jnp.ndarray, columns, device, source,
                  active: jnp.ndarray, memory, num_devices: int, peaks: PeakOffsets):
    """Inside a kernel with one chromosome per lane: SPEC §3's accounting of each active
    lane's started item (:func:`~gsched.costmodel.pallas_peaks.account`; ``columns``: its row
    from the :data:`~gsched.costmodel.pallas_peaks.PEAK_COLUMNS` on, ``successor_ref`` the
    entry table, ``counts_ref`` the copies' read counts, ``[P, ·]`` each) → ``memory``. An
    idle lane accounts nothing: no device, no reads."""
    *read, read_first, read_last = columns[PEAK_COLUMNS:]
    reads = [*(jnp.where(active, tensor, -1) for tensor in read), read_first,
             jnp.where(active, read_last, read_first)]
    return account(lane_scalars(successor_ref, lane), lane_scalars(counts_ref, lane),
                   columns[:PEAK_COLUMNS] + reads, jnp.where(active, device, -1), source,
                   memory, num_devices=num_devices, at=peaks, walking=any_lane)


def lane_scalars(ref, lane: jnp.ndarray) -> Scalars:
    """:class:`~gsched.costmodel.pallas_peaks.Scalars` of each lane's own row of a ``[P, n]``
    ref: ``load(i)`` and ``store(i, value, valid)`` take an index per lane."""
    return Scalars(lambda i: ref[lane, i],
                   lambda i, value, valid: plt.store(ref.at[lane, i], value, mask=valid))


def list_lanes_memory(word, rows, successor, count, *, k: int, num_devices: int,
                      peaks: PeakOffsets | None = None):
    """:func:`lanes_list_kernel`'s inputs of a padded batch (``word [B, V_p]``, the list
    kernels' ``rows``, ``successor``, ``count [B]``): ``(rows, successor, top, count)`` and the
    memory it works in, ``(state [B, 4·V_p], tree)`` (:func:`ready_tree`; with ``peaks``,
    then the copies' read counts from the entry table), in :class:`ChromosomePerLane`'s order.
    ``num_devices`` is the kernel's."""
    del num_devices
    tree, top = ready_tree(word, k)
    state = jnp.stack([word] + [jnp.zeros_like(word)] * (STATE_WORDS - 1),
                      axis=-1).reshape(word.shape[0], -1)
    counts = () if peaks is None else (
        successor[:, peaks.counts:peaks.counts + peaks.num_counts],)
    return (rows, successor, top, count), (state, tree, *counts)


@dataclasses.dataclass(frozen=True)
class ChromosomePerLane:
    """A kernel layout (:func:`~gsched.costmodel.pallas_decode.batched_kernel`'s ``layout``):
    one ``pallas_call`` over the batch, a *block* of ``32 · num_warps`` chromosomes at a time
    per program (the batch padded to a multiple with chromosomes that have nothing to run), one
    per lane. ``memory(word, rows, successor, count, k=, **params)`` (:func:`list_lanes_memory`,
    :func:`~gsched.costmodel.pallas_lanes_dynamic.dynamic_lanes_memory`) builds the kernel's
    inputs and the arrays it works in, aliased to its last outputs: the kernel (given
    ``lane [block]``, the block's chromosomes, and ``barrier``) sees those inputs, those arrays
    (unused: their outputs are their memory), the per-step outputs ``[width, P]``
    (step-major), ``tail [tail, P]``, then the arrays.

    ``programs``: at most this many programs, each running blocks ``b``, ``b + programs``,
    ... in turn (default: a program per block). Fewer programs keep fewer chromosomes' memory
    in flight (at 500 ops, ``D = 2``, ~40 KiB each: ~1,300 of them fill a 50 MB L2) at the
    cost of fewer lanes hiding each other's latency; on an H200 the latter decides (slower
    with every count tried, docs/benchmarks.md)."""

    memory: Callable
    num_warps: int | None = None
    programs: int | None = None

    def __call__(self, kernel, width: int, k: int, interpret: bool, per_step: int, tail: int,
                 params: dict):
        """``(word [P, width], rows [P, width, C], successor [P, Q], count [P]) → (*per_step
        outputs [P, width], tail [P, tail])``."""
        num_warps = self.num_warps or LANES_NUM_WARPS
        block = 32 * num_warps
        if self.programs is not None and self.programs < 1:
            raise ValueError(f"programs must be at least 1, got {self.programs}")

        def run(word, rows, successor, count):
            batch = word.shape[0]
            pad = -batch % block
            # Padding chromosomes: every slot waits for a dependency, nothing to run.
            word = jnp.pad(word, ((0, pad), (0, 0)), constant_values=1 << k)
            rows, successor = (jnp.pad(x, [(0, pad)] + [(0, 0)] * (x.ndim - 1))
                               for x in (rows, successor))
            count = jnp.pad(count, (0, pad))
            fixed, arrays = self.memory(word, rows, successor, count, k=k, **params)
            total = batch + pad
            blocks = total // block
            programs = min(self.programs or blocks, blocks)
            inputs = (*fixed, *arrays)
            first = len(fixed)  # the first aliased input
            outputs = (*[jax.ShapeDtypeStruct((width, total), jnp.int32)] * per_step,
                       jax.ShapeDtypeStruct((tail, total), jnp.int32),
                       *(jax.ShapeDtypeStruct(x.shape, jnp.int32) for x in arrays))
            *steps, last = pl.pallas_call(
                functools.partial(blocks_in_turn, kernel, block=block, blocks=blocks,
                                  programs=programs, barrier=not interpret),
                grid=(programs,),
                out_shape=outputs,
                input_output_aliases={first + i: per_step + 1 + i for i in range(len(arrays))},
                interpret=interpret,
                compiler_params=None if interpret else plt.CompilerParams(num_warps=num_warps),
                name="gsched_schedule_lanes",
            )(*inputs)[:per_step + 1]
            return (*(x.T[:batch] for x in steps), last.T[:batch])

        return run


def blocks_in_turn(kernel, *refs, block: int, blocks: int, programs: int, barrier: bool):
    """One program of :class:`ChromosomePerLane`'s grid of ``programs``: ``kernel(*refs,
    lane=, barrier=)`` on its blocks of ``block`` chromosomes, ``program_id``,
    ``program_id + programs``, ... below ``blocks``, one after the other."""
    within = lax.broadcasted_iota(jnp.int32, (block,), 0)
    if programs == blocks:  # one block each
        kernel(*refs, lane=pl.program_id(0) * block + within, barrier=barrier)
        return

    def one(b):
        kernel(*refs, lane=b * block + within, barrier=barrier)
        return b + programs

    lax.while_loop(lambda b: b < blocks, one, pl.program_id(0))
