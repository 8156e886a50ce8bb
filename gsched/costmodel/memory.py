"""Per-device peak memory of a schedule (SPEC §3), vectorized over steps.

Every resident copy of a tensor (on its producer's device, or on a transfer's destination)
occupies its device over an interval of steps ``[made resident, last reader on that device]``
(a copy with no reader there lives for its first step only). The usage sampled at a step of
device ``d`` is the sum of the copies on ``d`` whose interval covers that step plus the
step's temporary memory, so all samples come from one difference array and one prefix sum per
device — in exact fixed point (``gsched.core.fixedpoint``), since float32 prefix sums of GB-sized
allocations and frees would cancel catastrophically. The sums run on one int64 integer per
value (``fp.to_int64``, under ``jax.enable_x64``) rather than on two int32 limbs with a carry:
the same integers, half the scatters and prefix sums (1.0–1.3× the limbs' walks on the CPU).
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from gsched.core import fixedpoint as fp
from gsched.core.padding import PaddedGraph
from gsched.costmodel.dense import in_blocks
from gsched.costmodel.schedule import Placement, Schedule

MEMORY_LO_BITS = 12
MEMORY_VALUE_BITS = 41
LANES = 64  # devices × chromosomes per block of multi_device_peak_memory
UNROLL = 16  # steps per iteration of its loop


class MemoryProfile(NamedTuple):
    device_peaks: jnp.ndarray  # [D] float32
    peak_memory: jnp.ndarray  # [] float32
    feasible: jnp.ndarray  # [] bool, every device peak ≤ capacity
    excess: jnp.ndarray  # [] float32, Σ_d max(0, peak_d − capacity)


def memory_units(graph: PaddedGraph) -> tuple[jnp.ndarray, fp.Fixed, fp.Fixed]:
    """The graph's fixed-point memory unit (Σ sizes + max temporary memory < 2^41 units) and,
    in it, the tensor sizes ``[T]`` and temporary memories ``[N]`` (padding: 0). Every exact
    memory computation (this module, Topoformer's decoder) uses it, so all round alike."""
    size = jnp.where(graph.tensor_mask, graph.tensor_size, 0.0)
    temporary = jnp.where(graph.op_mask, graph.temporary_memory, 0.0)
    unit = fp.choose_unit(fp.ordered_sum(size) + jnp.max(temporary), MEMORY_VALUE_BITS)
    return (unit, fp.from_float(size, unit, MEMORY_LO_BITS),
            fp.from_float(temporary, unit, MEMORY_LO_BITS))


def item_allocations(graph: PaddedGraph, size: fp.Fixed, num_devices: int) -> jnp.ndarray:
    """``[V]`` int64 (call under ``jax.enable_x64(True)``): what each item makes resident, in
    :func:`memory_units`' fixed point (``size``: its tensor sizes) — an op its outputs, a
    transfer ``X(t, ·)`` its tensor."""
    copy = fp.to_int64(size, MEMORY_LO_BITS)  # [T], 0 for padding
    return jnp.concatenate([jnp.zeros(graph.op_mask.shape[0], jnp.int64).at[
        graph.tensor_producer].add(copy), jnp.repeat(copy, num_devices)])


def peak_memory(graph: PaddedGraph, placement: Placement, schedule: Schedule,
                capacity: jnp.ndarray, num_devices: int,
                max_steps: int | None = None) -> MemoryProfile:
    """Peak memory per device of ``schedule`` (one chromosome, no batch axis). ``max_steps``
    (static): a bound on its steps known to the caller (a fused kernel's width), so
    the walk spans that many steps instead of ``V``; every item's step must be below it."""
    n, t, d = graph.op_mask.shape[0], graph.tensor_mask.shape[0], num_devices
    steps = schedule.order.shape[0] if max_steps is None else min(max_steps,
                                                                  schedule.order.shape[0])
    device = placement.device
    resident, start, free = _intervals(graph, placement, schedule.position)
    unit, size, temp = memory_units(graph)

    order = schedule.order[:steps]
    scheduled = order >= 0
    step_op = jnp.where(scheduled & (order < n), order, n)
    step_device = jnp.where(order < n, device[jnp.minimum(order, n - 1)],
                            (order - n) % d)
    sampled = scheduled[None, :] & (step_device[None, :] == jnp.arange(d)[:, None])
    # One difference array over [D, steps + 1] (+1 column: the step after the last), in int64.
    width = steps + 1
    row = jnp.arange(d)[None, :] * width
    begin = jnp.where(resident, row + start, d * width).reshape(-1)
    end = jnp.where(resident, row + free + 1, d * width).reshape(-1)
    with jax.enable_x64(True):
        per_copy = jnp.broadcast_to(fp.to_int64(size, MEMORY_LO_BITS)[:, None], (t, d)).reshape(-1)
        diff = jnp.zeros(d * width + 1, jnp.int64).at[jnp.concatenate([begin, end])].add(
            jnp.concatenate([per_copy, -per_copy]))
        step_temp = jnp.concatenate([fp.to_int64(temp, MEMORY_LO_BITS),
                                     jnp.zeros(1, jnp.int64)])[step_op]
        usage = jnp.cumsum(diff[:-1].reshape(d, width), axis=1)[:, :steps] + step_temp[None, :]
        peaks = fp.from_int64(jnp.max(jnp.where(sampled, usage, 0), axis=1), MEMORY_LO_BITS)
    return memory_profile(peaks, unit, capacity)


def _intervals(graph: PaddedGraph, placement: Placement, position: jnp.ndarray):
    """``(resident, start, free)``, each ``[T, D]``, of one chromosome's copies ``(t, d)`` given
    the step of each item, ``position [V]``: whether the copy exists, and its interval of steps
    ``[start, free]``."""
    n, t = graph.op_mask.shape[0], graph.tensor_mask.shape[0]
    d = placement.transfer_exists.shape[-1]
    device, exists = placement.device, placement.transfer_exists
    op_position = position[:n]
    xfer_position = position[n:].reshape(t, d)
    producer = graph.tensor_producer
    producer_device = device[producer]
    on_producer = jnp.arange(d)[None, :] == producer_device[:, None]  # [T, D]
    resident = graph.tensor_mask[:, None] & (on_producer | exists)
    start = jnp.where(on_producer, op_position[producer][:, None], xfer_position)
    consumer_reads = jnp.full((t, d), -1, jnp.int32).at[
        graph.edge_tensor, device[graph.edge_consumer]].max(
        jnp.where(graph.edge_mask, op_position[graph.edge_consumer], -1))
    last_transfer = jnp.max(jnp.where(exists, xfer_position, -1), axis=1)
    last_read = jnp.maximum(consumer_reads, jnp.where(on_producer, last_transfer[:, None], -1))
    return resident, start, jnp.maximum(start, last_read)


def multi_device_peak_memory(graph: PaddedGraph, placement: Placement, order: jnp.ndarray,
                             capacity: jnp.ndarray) -> MemoryProfile:
    """:func:`peak_memory` of ``P`` schedules on one graph, the same values bit for bit, with
    less work: ``placement``'s fields with a leading ``[P]`` and ``order [P, S]``, the item
    taken at each step (−1 after the last; any ``S`` that holds every schedule, e.g. the dense
    decoder's ``N + T·(D−1)``). The profile has a leading axis ``[P]`` (``device_peaks [P, D]``).

    Chromosomes go in blocks of ``B = LANES // D`` (``lax.map``), laid out step-major with the
    block's chromosomes minor. Per block: each item's step (one scatter) and each copy's
    interval, as in :func:`peak_memory`; the frees scattered by step into one
    ``[S + 1, D·B]`` int64 array (lane ``d·B + b``); each step's allocation (its op's
    outputs or its transfer's tensor, per graph) gathered by step onto the step's device; then
    a loop over the steps of the block's longest schedule, :data:`UNROLL` at a time, carries
    every device's live sum and peak. The sums are the same integers in the same fixed point
    as :func:`peak_memory`'s, so the peaks are identical. Small blocks keep each iteration's
    kernels on one thread (XLA:CPU splits a costlier kernel over its threads, and that
    hand-off at every iteration cost more than it shared: the walk ran 1.4–1.7× slower with
    ``D·B = 128``, measured on 2 cores)."""
    n, t = graph.op_mask.shape[0], graph.tensor_mask.shape[0]
    population, steps = order.shape
    d = placement.transfer_exists.shape[-1]
    v = n + t * d
    block = max(1, min(population, LANES // d))
    width = steps + (-steps % UNROLL)
    unit, size, temp = memory_units(graph)
    with jax.enable_x64(True):  # per graph; the blocks read them under the same mode
        copy = fp.to_int64(size, MEMORY_LO_BITS)  # [T], 0 for padding
        none = jnp.zeros(1, jnp.int64)  # index V: no item
        allocated = jnp.concatenate([item_allocations(graph, size, d), none])  # [V + 1]
        temporary = jnp.concatenate([fp.to_int64(temp, MEMORY_LO_BITS),
                                     jnp.zeros(t * d, jnp.int64), none])
    lane = jnp.arange(d, dtype=jnp.int32) * block + jnp.arange(block, dtype=jnp.int32)[:, None]
    step = jnp.broadcast_to(jnp.arange(width, dtype=jnp.int32), (block, width))
    row = jnp.arange(block, dtype=jnp.int32)[:, None] * (v + 1)

    def one_block(x):
        device, exists, order = x  # [B, N], [B, T, D], [B, W]
        item = jnp.where(order >= 0, order, v)
        position = jnp.full(block * (v + 1), -1, jnp.int32).at[(row + item).reshape(-1)].set(
            step.reshape(-1)).reshape(block, v + 1)[:, :v]
        resident, _, free = jax.vmap(functools.partial(_intervals, graph))(
            Placement(device, exists), position)  # [B, T, D]
        step_device = jnp.where(item < n, jnp.take_along_axis(device, jnp.minimum(item, n - 1), 1),
                                jnp.where(item < v, (item - n) % d, d))  # d: no item
        here = step_device.T[:, None, :] == jnp.arange(d)[:, None]  # [W, D, B]
        item = item.T  # [W, B]
        longest = jnp.max(jnp.sum(order >= 0, axis=1))
        with jax.enable_x64(True):
            # Frees after step ``free``, at row free + 1 (row W, after the last step, never read).
            freed = jnp.zeros((width + 1, d * block), jnp.int64).at[
                jnp.where(resident, free + 1, width), lane[:, None, :]].add(
                jnp.broadcast_to(copy[None, :, None], (block, t, d)))
            diff = (jnp.where(here, allocated[item][:, None, :], 0)
                    - freed[:width].reshape(width, d, block))  # [W, D, B]
            step_temp = temporary[item]  # [W, B]

            def chunk(i, carry):  # UNROLL steps
                live, peak = carry  # [D, B] each
                change, extra, sampled = (lax.dynamic_slice_in_dim(x, i * UNROLL, UNROLL)
                                          for x in (diff, step_temp, here))
                for j in range(UNROLL):
                    live = live + change[j]
                    peak = jnp.where(sampled[j], jnp.maximum(peak, live + extra[j]), peak)
                return live, peak

            zero = jnp.zeros((d, block), jnp.int64)
            peak = lax.fori_loop(0, -(-longest // UNROLL), chunk, (zero, zero))[1]
            # [B, D]; usage ≥ 0, so 0 where nothing is sampled
            return tuple(fp.from_int64(peak.T, MEMORY_LO_BITS))

    xs = (in_blocks(placement.device, 0, block), in_blocks(placement.transfer_exists, False, block),
          in_blocks(jnp.pad(order, ((0, 0), (0, width - steps)), constant_values=-1), -1, block))
    peak_hi, peak_lo = (x.reshape(-1, d)[:population] for x in lax.map(one_block, xs))
    return jax.vmap(memory_profile, in_axes=(0, None, None))(fp.Fixed(peak_hi, peak_lo), unit,
                                                             capacity)


def single_device_peak_memory(graph: PaddedGraph, order: jnp.ndarray, op_position: jnp.ndarray,
                              capacity: jnp.ndarray) -> MemoryProfile:
    """:func:`peak_memory` of ``P`` one-device schedules of ops only on one graph, the same values
    bit for bit, with less work: ``order [P, S]`` the op at each step (−1 after the last),
    ``op_position [P, N]`` the step of each op (−1 for ops never scheduled). The profile has a
    leading axis ``[P]`` (``device_peaks [P, 1]``).

    Every tensor lives on the one device from its producer's step to its last reader's, so
    the allocations of a step are its op's outputs (summed per op once per graph, gathered by
    step instead of scattered) and only the frees are scattered by step; chromosomes are
    explicit (not vmapped), so the last reads are one scatter of whole rows. The sums are the
    same integers in the same fixed point as :func:`peak_memory`'s, so the peaks are
    identical."""
    n, t = graph.op_mask.shape[0], graph.tensor_mask.shape[0]
    population, steps = order.shape
    producer = graph.tensor_producer
    start = op_position[:, producer]  # [P, T]
    reads = jnp.where(graph.edge_mask, op_position[:, graph.edge_consumer], -1)  # [P, E]
    last_read = jnp.full((t, population), -1, jnp.int32).at[graph.edge_tensor].max(reads.T)
    free = jnp.maximum(start, last_read.T)  # [P, T]

    unit, size, temp = memory_units(graph)
    # Frees after step ``free``, at p·(S + 1) + free + 1 of a flat [P·(S + 1) + 1] (index S of
    # each chromosome, after its last step, and the last one are never read).
    row = jnp.arange(population, dtype=jnp.int32)[:, None] * (steps + 1)
    end = jnp.where(graph.tensor_mask, row + free + 1, population * (steps + 1))
    scheduled = order >= 0
    step_op = jnp.where(scheduled, order, n)
    with jax.enable_x64(True):
        size = fp.to_int64(size, MEMORY_LO_BITS)  # [T], 0 for padding
        outputs = jnp.zeros(n + 1, jnp.int64).at[producer].add(size)  # n: none
        temporary = jnp.concatenate([fp.to_int64(temp, MEMORY_LO_BITS), jnp.zeros(1, jnp.int64)])
        freed = jnp.zeros(population * (steps + 1) + 1, jnp.int64).at[end.reshape(-1)].add(
            jnp.broadcast_to(size, (population, t)).reshape(-1))
        freed = freed[:-1].reshape(population, steps + 1)[:, :steps]
        usage = jnp.cumsum(outputs[step_op] - freed, axis=1) + temporary[step_op]  # [P, S]
        peaks = fp.from_int64(jnp.max(jnp.where(scheduled, usage, 0), axis=1), MEMORY_LO_BITS)
    return jax.vmap(memory_profile, in_axes=(0, None, None))(
        fp.Fixed(peaks.hi[:, None], peaks.lo[:, None]), unit, capacity)


def memory_profile(peaks: fp.Fixed, unit: jnp.ndarray, capacity: jnp.ndarray) -> MemoryProfile:
    """The profile from exact per-device peaks ``[D]`` in the graph's memory unit
    (:func:`memory_units`, limbs of :data:`MEMORY_LO_BITS` bits)."""
    device_peaks = fp.to_float(peaks, unit, MEMORY_LO_BITS)
    capacity = jnp.asarray(capacity, jnp.float32)
    bounded = capacity / unit < 2.0 ** (MEMORY_VALUE_BITS + 1)
    cap = fp.from_float(jnp.where(bounded, capacity, 0.0), unit, MEMORY_LO_BITS)
    feasible = ~bounded | ~jnp.any(fp.greater(peaks, cap))
    excess = jnp.sum(jnp.maximum(device_peaks - jnp.where(bounded, capacity, jnp.inf), 0.0))
    return MemoryProfile(device_peaks, jnp.max(device_peaks), feasible, excess)
