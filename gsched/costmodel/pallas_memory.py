"""The list schedule's fused kernel with its lanes in memory and a two-level minimum.

:mod:`gsched.costmodel.pallas_decode`'s kernel keeps every lane's state (word, ready time) in
registers and makes a step ``O(V_p)`` vector work: the minimum over all lanes, a compare of
every lane against each successor. That is ``O(V_p²)`` per chromosome, and the state decides
how many programs an SM holds (~126 registers per thread at 1,024 lanes: 8 programs,
``eval.kernel_registers``). This kernel, for the same inputs and bit for bit the same outputs,
keeps the lanes in global memory (three outputs used as scratch: 12 KiB per program at 1,024
lanes, cache-resident) as ``R`` rows of ``L`` lanes (:func:`row_shape`, ``R·L =
V_p``, ``L ≈ √V_p``), and only each row's minimum in registers: ``[R]`` words with the ready
time of the lane holding each. A step

1. takes the smallest row minimum (one :func:`~gsched.costmodel.pallas_lexmin.lexmin` over
   ``R`` lanes) and the item's row of the ``rows`` table, as the register kernel does;
2. retires the item: its word becomes :data:`~gsched.costmodel.pallas_decode.NEVER` (a scalar
   store), and its row's minimum is recomputed from that row (one ``[L]`` load, one ``lexmin``);
3. walks its firing successors with scalar loads and stores: each loses a dependency and its
   ready time is set to the item's end (every predecessor of an item ends on the item's
   device, and those ends grow with the step: :func:`~gsched.costmodel.pallas_decode.
   walk_successors`' ``ends_grow``); a successor's word only decreases, so its row's minimum
   becomes the new word if that is smaller: a select over ``[R]``, no row reload.

Either order of 2 and 3's memory accesses within a step gives the same minima (3 only lowers
words and is merged into the minima after 2), so only steps must be ordered: one barrier per
step (``bar.sync``, which orders the block's global accesses) on a GPU; an item's firing
successors are distinct and never the item itself, so no load in a step reads a store of the
same step. Per step that is ``O(R + L + Q_i·R)`` vector work instead of ``O(V_p)``
(``Q_i`` the item's firing successors), ``O(V_p^1.5)`` per chromosome, a few registers per lane
of ``[R]``: one warp per program by default, and the SM's limit of 32 blocks, not registers,
bounds the programs in flight. Steps wait on memory (the row, then the successors' words)
instead of on wide vector work; which is faster on a given GPU is measured, not assumed
(``eval.tune_kernel --states registers,memory``): on an H200 (2026-11-28, whole evaluations at
500 ops, ``D = 2``) it is slightly slower than the register kernel and both are beaten by
:mod:`gsched.costmodel.pallas_lanes` at 16,384 chromosomes; with fewer (512, 2026-11-29) it was
the fastest list kernel, so "auto" picks it below ``evaluate.LANES_MIN_CHROMOSOMES`` per call.
"""

from __future__ import annotations

import functools
import math

import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as plt

from gsched.core import fixedpoint as fp
from gsched.costmodel.pallas_lexmin import lexmin
from gsched.costmodel.pallas_peaks import PeakOffsets, account, start_counts, triton_scalars
from gsched.costmodel.schedule import kernel_step_times

MEMORY_NUM_WARPS = 1  # default warps per program: the kernel's vectors are [R] and [L] ≈ √V_p


def row_shape(width: int) -> tuple[int, int]:
    """``(R, L)``: ``width`` lanes as ``R`` rows of ``L``, powers of two with ``L`` the next one
    at or above ``√width`` and at least ``min(width, 32)`` (a warp's threads)."""
    lanes = max(min(width, 32), 1 << math.ceil(math.log2(math.sqrt(width))))
    return width // lanes, lanes


def memory_list_kernel(word_ref, rows_ref, successor_ref, order_ref, tail_ref, state_ref,
                       ready_hi_ref, ready_lo_ref, *counts_ref, num_devices: int, chunk: int,
                       k: int, barrier: bool, never: int, peaks: PeakOffsets | None = None):
    """One chromosome's list schedule, as :func:`~gsched.costmodel.pallas_decode._list_kernel`
    (same inputs and ``order`` / ``tail`` outputs) with the lanes' words and ready times in the
    scratch outputs ``state``, ``ready_hi``, ``ready_lo [V_p]`` and their rows' minima in
    registers (module docstring). ``barrier``: order the steps' memory accesses (a GPU; Pallas'
    interpreter runs them in order); ``never``: the word of a retired or unused slot.

    ``peaks``: also account SPEC §3's memory (:mod:`gsched.costmodel.pallas_peaks`): the rows
    go on with that module's columns, ``successor_ref`` holds its regions at ``peaks``, one more
    scratch output ``counts [C_p]`` follows, and ``tail`` goes on with each device's peak (hi,
    lo) at ``4 + 2·d``."""
    vp = word_ref.shape[0]
    num_rows, lanes = row_shape(vp)
    shift = lanes.bit_length() - 1
    row_index = lax.broadcasted_iota(jnp.int32, (num_rows,), 0)
    lane = lax.broadcasted_iota(jnp.int32, (lanes,), 0)
    zeros = jnp.zeros((num_rows,), jnp.int32)

    def start_row(row, least):
        """Copies row ``row`` of the words, zeroes its ready times, takes its minimum: one row
        at a time, so no vector is wider than a row."""
        at = pl.ds(row * lanes, lanes)
        word = word_ref[at]
        state_ref[at] = word
        ready_hi_ref[at] = jnp.zeros((lanes,), jnp.int32)
        ready_lo_ref[at] = jnp.zeros((lanes,), jnp.int32)
        return jnp.where(row_index == row, jnp.min(word), least)

    minima = (lax.fori_loop(0, num_rows, start_row, zeros), zeros, zeros)  # ready times 0
    if peaks is not None:
        start_counts(successor_ref, counts_ref[0], peaks)
    if barrier:
        plt.debug_barrier()

    def lower(minima, target, end):
        """A firing successor ``target`` (−1: none) loses a dependency, ready at ``end``;
        its row's minimum follows."""
        valid = target >= 0
        at = jnp.maximum(target, 0)
        new = state_ref[at] - (1 << k)
        plt.store(state_ref.at[at], new, mask=valid)
        plt.store(ready_hi_ref.at[at], end.hi, mask=valid)
        plt.store(ready_lo_ref.at[at], end.lo, mask=valid)
        take = valid & (row_index == jnp.right_shift(at, shift)) & (new < minima[0])
        return tuple(jnp.where(take, x, m) for x, m in zip((new, end.hi, end.lo), minima))

    def step(carry):
        s, best, start_hi, start_lo, minima, free, memory = carry
        slot = best & ((1 << k) - 1)
        order_ref[s] = slot  # a scalar store, never read back
        columns = [rows_ref[slot, column] for column in range(rows_ref.shape[1])]
        device, source, duration_hi, duration_lo, *inline, first, last = columns[:6 + chunk]
        if peaks is not None:  # first: its loads need only the row, none of what follows
            memory = account(triton_scalars(successor_ref), triton_scalars(counts_ref[0]),
                             columns[6 + chunk:], device, source, memory,
                             num_devices=num_devices, at=peaks)
        end, after = kernel_step_times(fp.Fixed(start_hi, start_lo), free, device, source,
                                       fp.Fixed(duration_hi, duration_lo), num_devices)
        # Retire the item; its row's minimum from the row, the item left out.
        row = jnp.right_shift(slot, shift)
        base = row * lanes
        at = pl.ds(base, lanes)
        row_word = jnp.where(lane == slot - base, never, state_ref[at])
        state_ref[slot] = never
        least = lexmin([row_word], [ready_hi_ref[at], ready_lo_ref[at]])
        minima = tuple(jnp.where(row_index == row, x, m) for x, m in zip(least, minima))
        for target in inline:
            minima = lower(minima, target, end)

        def rest(carry):
            q, minima = carry
            for j in range(chunk):
                minima = lower(minima, jnp.where(q + j < last, successor_ref[q + j], -1), end)
            return q + chunk, minima

        _, minima = lax.while_loop(lambda c: c[0] < last, rest, (first, minima))
        if barrier:
            plt.debug_barrier()
        return (s + 1, *lexmin([minima[0]], [minima[1], minima[2]]), minima, after, memory)

    zero = jnp.int32(0)
    nothing = tuple(fp.Fixed(zero, zero) for _ in range(num_devices))
    taken, *_, free, memory = lax.while_loop(
        lambda c: c[1] < (1 << k), step,
        (zero, *lexmin([minima[0]], [zeros, zeros]), minima, nothing,
         () if peaks is None else tuple((x, x) for x in nothing)))  # (live, peak) per device
    makespan = functools.reduce(fp.maximum, free)
    tail_ref[0] = makespan.hi
    tail_ref[1] = makespan.lo
    tail_ref[2] = taken
    tail_ref[3] = zero
    for d, (_, peak) in enumerate(memory):
        tail_ref[4 + 2 * d] = peak.hi
        tail_ref[5 + 2 * d] = peak.lo
