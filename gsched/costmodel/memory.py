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
    device_peaks = fp.to_float(peaks, unit, MEMORY_LO_BITS)

    capacity = jnp.asarray(capacity, jnp.float32)
    bounded = capacity / unit < 2.0 ** (MEMORY_VALUE_BITS + 1)
    cap = fp.from_float(jnp.where(bounded, capacity, 0.0), unit, MEMORY_LO_BITS)
    feasible = ~bounded | ~jnp.any(fp.greater(peaks, cap))
    excess = jnp.sum(jnp.maximum(device_peaks - jnp.where(bounded, capacity, jnp.inf), 0.0))
    return MemoryProfile(device_peaks, jnp.max(device_peaks), feasible, excess)
