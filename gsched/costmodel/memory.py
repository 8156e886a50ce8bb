"""Per-device peak memory of a schedule (SPEC §3), vectorized over steps.

Every resident copy of a tensor (on its producer's device, or on a transfer's destination)
occupies its device over an interval of steps ``[made resident, last reader on that device]``
(a copy with no reader there lives for its first step only). The usage sampled at a step of
device ``d`` is the sum of the copies on ``d`` whose interval covers that step plus the
step's temporary memory, so all samples come from one difference array and one prefix sum per
device — in exact fixed point (``gsched.core.fixedpoint``), since float32 prefix sums of GB-sized
allocations and frees would cancel catastrophically.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from gsched.core import fixedpoint as fp
from gsched.core.padding import PaddedGraph
from gsched.costmodel.schedule import Placement, Schedule

MEMORY_LO_BITS = 12
MEMORY_VALUE_BITS = 41


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
    unit = fp.choose_unit(jnp.sum(size) + jnp.max(temporary), MEMORY_VALUE_BITS)
    return (unit, fp.from_float(size, unit, MEMORY_LO_BITS),
            fp.from_float(temporary, unit, MEMORY_LO_BITS))


def peak_memory(graph: PaddedGraph, placement: Placement, schedule: Schedule,
                capacity: jnp.ndarray, num_devices: int) -> MemoryProfile:
    """Peak memory per device of ``schedule`` (one chromosome, no batch axis)."""
    n, t, d = graph.op_mask.shape[0], graph.tensor_mask.shape[0], num_devices
    steps = schedule.order.shape[0]
    device, exists = placement.device, placement.transfer_exists
    position = schedule.position
    op_position = position[:n]
    xfer_position = position[n:].reshape(t, d)
    producer = graph.tensor_producer
    producer_device = device[producer]
    on_producer = jnp.arange(d)[None, :] == producer_device[:, None]  # [T, D]
    resident = graph.tensor_mask[:, None] & (on_producer | exists)

    # Interval of each copy (t, d): [start, free].
    start = jnp.where(on_producer, op_position[producer][:, None], xfer_position)
    consumer_reads = jnp.full((t, d), -1, jnp.int32).at[
        graph.edge_tensor, device[graph.edge_consumer]].max(
        jnp.where(graph.edge_mask, op_position[graph.edge_consumer], -1))
    last_transfer = jnp.max(jnp.where(exists, xfer_position, -1), axis=1)
    last_read = jnp.maximum(consumer_reads, jnp.where(on_producer, last_transfer[:, None], -1))
    free = jnp.maximum(start, last_read)

    unit, size, temp = memory_units(graph)

    # Difference arrays over [D, steps + 1] (+1 column: the step after the last).
    width = steps + 1
    row = jnp.arange(d)[None, :] * width
    begin = jnp.where(resident, row + start, d * width).reshape(-1)
    end = jnp.where(resident, row + free + 1, d * width).reshape(-1)

    def live_sum(limb):
        per_copy = jnp.broadcast_to(limb[:, None], (t, d)).reshape(-1)
        diff = (jnp.zeros(d * width + 1, jnp.int32).at[begin].add(per_copy)
                .at[end].add(-per_copy))
        return jnp.cumsum(diff[:-1].reshape(d, width), axis=1)[:, :steps]

    order = schedule.order
    scheduled = order >= 0
    step_op = jnp.where(scheduled & (order < n), order, n)
    step_device = jnp.where(order < n, device[jnp.minimum(order, n - 1)],
                            (order - n) % d)
    step_temp_hi = jnp.concatenate([temp.hi, jnp.zeros(1, jnp.int32)])[step_op]
    step_temp_lo = jnp.concatenate([temp.lo, jnp.zeros(1, jnp.int32)])[step_op]
    usage = fp.normalize(fp.Fixed(live_sum(size.hi) + step_temp_hi[None, :],
                                  live_sum(size.lo) + step_temp_lo[None, :]), MEMORY_LO_BITS)
    sampled = scheduled[None, :] & (step_device[None, :] == jnp.arange(d)[:, None])
    peaks = fp.masked_max(usage, sampled, axis=1)
    return _profile(peaks, unit, capacity)


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
    limbs = jnp.stack([size.hi, size.lo], axis=-1)  # [T, 2], 0 for padding
    outputs = jnp.zeros((n + 1, 2), jnp.int32).at[producer].add(limbs)  # row n: none
    temporary = jnp.concatenate([jnp.stack([temp.hi, temp.lo], axis=-1),
                                 jnp.zeros((1, 2), jnp.int32)])
    # Frees after step ``free``, at row p·(S + 1) + free + 1 of a flat [P·(S + 1) + 1, 2]
    # (row S of each chromosome, after its last step, and the last row are never read).
    row = jnp.arange(population, dtype=jnp.int32)[:, None] * (steps + 1)
    end = jnp.where(graph.tensor_mask, row + free + 1, population * (steps + 1))
    freed = jnp.zeros((population * (steps + 1) + 1, 2), jnp.int32).at[end.reshape(-1)].add(
        jnp.broadcast_to(limbs, (population, t, 2)).reshape(-1, 2))
    freed = freed[:-1].reshape(population, steps + 1, 2)[:, :steps]
    scheduled = order >= 0
    step_op = jnp.where(scheduled, order, n)
    usage = jnp.cumsum(outputs[step_op] - freed, axis=1) + temporary[step_op]  # [P, S, 2]
    usage = fp.normalize(fp.Fixed(usage[..., 0], usage[..., 1]), MEMORY_LO_BITS)
    peaks = fp.masked_max(usage, scheduled, axis=1)
    return jax.vmap(_profile, in_axes=(0, None, None))(
        fp.Fixed(peaks.hi[:, None], peaks.lo[:, None]), unit, capacity)


def _profile(peaks: fp.Fixed, unit: jnp.ndarray, capacity: jnp.ndarray) -> MemoryProfile:
    """The profile from exact per-device peaks ``[D]``."""
    device_peaks = fp.to_float(peaks, unit, MEMORY_LO_BITS)
    capacity = jnp.asarray(capacity, jnp.float32)
    bounded = capacity / unit < 2.0 ** (MEMORY_VALUE_BITS + 1)
    cap = fp.from_float(jnp.where(bounded, capacity, 0.0), unit, MEMORY_LO_BITS)
    feasible = ~bounded | ~jnp.any(fp.greater(peaks, cap))
    excess = jnp.sum(jnp.maximum(device_peaks - jnp.where(bounded, capacity, jnp.inf), 0.0))
    return MemoryProfile(device_peaks, jnp.max(device_peaks), feasible, excess)
