"""SPEC §3's peak memory kept inside the list kernel with its lanes in memory (decoder
``"pallas_fused"``): the schedule and its memory accounting in one kernel.

The other fused decoders schedule in a kernel, then walk the schedule's memory in plain JAX
(:func:`~gsched.costmodel.memory.peak_memory`, vmapped: every copy's interval scattered, a
prefix sum over every step and device; 4.9 of 58.5 ms per 16,384 chromosomes at 500 ops,
D = 2 on an H100 in session 13). Here :func:`~gsched.costmodel.pallas_memory.
memory_list_kernel` keeps the accounting as it schedules, the way SPEC §3 states it: per device
a live sum and a peak (``2·D`` fixed-point scalars, the walks' unit and limbs), and per tensor
copy ``(t, d)`` the number of its reads still to come (``C = T·D`` int32 in the program's
memory, copied from :func:`peak_tables`' counts at the start). A step of item ``i`` on device
``d`` (a transfer's: its destination), :func:`account`,

1. adds what ``i`` makes resident (an op's outputs, a transfer's tensor) to ``live_d``, samples
   ``live_d + temporary(i)`` into ``peak_d``, and takes back what nothing reads where it was
   made (``dead``: an op's outputs without a reader on its device);
2. counts one read off each copy ``i`` reads (an op's inputs, on its own device; a transfer's
   tensor, on the source device: the item's source device either way); a copy whose count
   reaches 0 leaves that device's live sum.

Everything an item's row says for this is the graph's, not the chromosome's: what an item
makes resident, its temporary memory and its dead outputs (a tensor read anywhere is read on
its producer's device: by a consumer there or by the transfer to another), and the tensors it
reads, as a CSR table like the successor entries (each item's first ``chunk`` in its row, the
rest in a range of the kernel's entry table, :func:`~gsched.costmodel.schedule.
inline_columns`); the copy read is the tensor's on the item's source device (an op's own
device), a row column already. So per chromosome the prologue only gathers a per-graph table
by slot and counts the reads (one scatter), and most steps load nothing but their row and the
counts and sizes of the tensors they read. An item's reads are distinct copies (a graph's
(tensor, consumer) edges are distinct: SPEC §1, checked by ``make_graph``, kept by fusion's
contraction), so, as for the successor walk, no load in a step reads a store of the same
step. The sums are the same integers as the walk's, so the peaks are
identical bit for bit. :func:`account` reads and writes through :class:`Scalars`, so the TPU
kernel (:mod:`gsched.costmodel.pallas_tpu`) runs the same accounting on its scalar memory, and
the kernel with one chromosome per lane (:mod:`gsched.costmodel.pallas_lanes`, decoder
``"pallas_lanes_fused"``) on ``[32]`` vectors, each lane its own chromosome's counts.
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as plt

from gsched.core import fixedpoint as fp
from gsched.core.padding import PaddedGraph
from gsched.costmodel.memory import MEMORY_LO_BITS, item_allocations, memory_units
from gsched.costmodel.schedule import Placement, count_at_most, inline_columns

COPY_BLOCK = 32  # counts copied into the kernel's memory this many at a time
PEAK_COLUMNS = 6  # allocated hi, lo, temporary hi, lo, dead hi, lo; then the read columns


class PeakOffsets(NamedTuple):
    """Where :func:`peak_tables`' regions start in the kernel's entry table (static)."""

    reads: int  # [E + chunk] the tensors the ops read (−1: none), CSR by op
    size_hi: int  # [T] each tensor's size, limbs
    size_lo: int  # [T]
    counts: int  # [C_p] each copy's reads (C_p: C = T·D rounded up to COPY_BLOCK), 0 past C
    num_counts: int  # C_p, the kernel's count scratch


def item_columns(graph: PaddedGraph, size: fp.Fixed, temp: fp.Fixed, num_devices: int,
                 chunk: int) -> tuple[jnp.ndarray, jnp.ndarray, jnp.ndarray]:
    """Per graph, from :func:`~gsched.costmodel.memory.memory_units`' sizes and temporary
    memories: ``(columns [V, 6 + chunk + 2], reads [E + chunk], reader [E])`` — by item the
    :data:`PEAK_COLUMNS` (what it makes resident, its temporary memory, what it frees at once;
    fixed point in that unit) and its read columns (the tensors it reads: ``X(t, ·)`` reads
    ``t``, an op its inputs); the ops' reads in CSR by op (−1: none) and the op of each."""
    n, t, d = graph.op_mask.shape[0], graph.tensor_mask.shape[0], num_devices
    c = t * d
    read = jnp.zeros(t, bool).at[graph.edge_tensor].max(graph.edge_mask)
    with jax.enable_x64(True):
        allocated = fp.from_int64(item_allocations(graph, size, d), MEMORY_LO_BITS)
        unread = jnp.zeros(n, jnp.int64).at[graph.tensor_producer].add(
            jnp.where(read, 0, fp.to_int64(size, MEMORY_LO_BITS)))
        dead = fp.from_int64(jnp.pad(unread, (0, c)), MEMORY_LO_BITS)
    temporary = fp.Fixed(*(jnp.pad(x, (0, c)) for x in temp))
    consumer = jnp.where(graph.edge_mask, graph.edge_consumer, n)
    by_consumer = jnp.argsort(consumer, stable=True)
    consumer, tensor = consumer[by_consumer], graph.edge_tensor[by_consumer]
    reads = jnp.pad(jnp.where(consumer < n, tensor, -1), (0, chunk), constant_values=-1)
    last = count_at_most(consumer, n)  # each op's run in the reads: [first, last)
    first = jnp.pad(last[:-1], (1, 0))
    op_reads = inline_columns(reads, first, last, chunk)  # [N, chunk + 2]
    transfer_reads = jnp.full((c, chunk + 2), -1, jnp.int32).at[:, chunk:].set(0).at[:, 0].set(
        jnp.repeat(jnp.arange(t, dtype=jnp.int32), d))  # its tensor inline, an empty range
    columns = jnp.concatenate([
        jnp.stack([x for value in (allocated, temporary, dead) for x in value], axis=1),
        jnp.concatenate([op_reads, transfer_reads])], axis=1)
    return columns, reads, jnp.minimum(consumer, n - 1)


def peak_tables(graph: PaddedGraph, placement: Placement, item: jnp.ndarray, num_devices: int,
                chunk: int) -> tuple[jnp.ndarray, jnp.ndarray, jnp.ndarray]:
    """One chromosome's accounting inputs for the slots' items ``item [V_p]``:
    ``(columns [V_p, 6 + chunk + 2], table [E + chunk + 2·T + C_p], unit)`` —
    :func:`item_columns` by slot; the entry table's regions (:class:`PeakOffsets`, from the
    table's start: the ops' reads, the tensors' sizes, each copy's reads, copy ``(t, d)`` at
    ``t·D + d``); the graph's memory unit. Only the counts depend on the placement."""
    t, e, d = graph.tensor_mask.shape[0], graph.edge_mask.shape[0], num_devices
    c = t * d
    unit, size, temp = memory_units(graph)
    columns, reads, reader = item_columns(graph, size, temp, num_devices, chunk)
    # Each copy's reads: an op's on its device (as the kernel counts them), and a transfer's
    # on the producer's.
    device = placement.device
    copy = jnp.where(reads[:e] >= 0, reads[:e] * d + device[reader], c)
    readers = jnp.zeros(c + 1, jnp.int32).at[copy].add(1)[:c] \
        .at[jnp.arange(t, dtype=jnp.int32) * d + device[graph.tensor_producer]].add(
        jnp.sum(placement.transfer_exists, axis=1, dtype=jnp.int32))
    table = jnp.concatenate([reads, size.hi, size.lo, jnp.pad(readers, (0, -c % COPY_BLOCK))])
    return columns[item], table, unit


def peak_offsets(start: int, num_edges: int, num_tensors: int, num_devices: int,
                 chunk: int) -> PeakOffsets:
    """The regions of :func:`peak_tables`' table placed at ``start`` of the entry table."""
    size_hi = start + num_edges + chunk
    copies = num_tensors * num_devices
    return PeakOffsets(start, size_hi, size_hi + num_tensors, size_hi + 2 * num_tensors,
                       copies + -copies % COPY_BLOCK)


class Scalars(NamedTuple):
    """Scalar access to a kernel's ref, as its backend does it: ``load(i)`` and
    ``store(i, value, valid)`` (nothing stored where ``valid`` is False)."""

    load: Callable
    store: Callable


def triton_scalars(ref) -> Scalars:
    """:class:`Scalars` of a 1-D ref in a Triton kernel (a masked store)."""
    return Scalars(lambda i: ref[i], lambda i, value, valid: plt.store(ref.at[i], value,
                                                                       mask=valid))


def start_counts(table_ref, counts_ref, at: PeakOffsets):
    """Inside the kernel, before its first step: the copies' read counts into the scratch
    ``counts_ref [C_p]``, :data:`COPY_BLOCK` at a time."""

    def copy(i, _):
        counts_ref[pl.ds(i * COPY_BLOCK, COPY_BLOCK)] = table_ref[
            pl.ds(at.counts + i * COPY_BLOCK, COPY_BLOCK)]

    lax.fori_loop(0, at.num_counts // COPY_BLOCK, copy, None)


def account(table: Scalars, counts: Scalars, columns, device, source, memory, *,
            num_devices: int, at: PeakOffsets, walking: Callable = lambda more: more):
    """Inside the kernel, one step's SPEC §3 accounting (module docstring): ``table`` and
    ``counts``, the entry table and the copies' read counts (:class:`Scalars`); ``columns``,
    the item's row from its :data:`PEAK_COLUMNS` on (scalars); ``device``, where its usage is
    sampled (−1: nowhere), ``source``, where what it reads is (row columns); ``memory``, the
    devices' ``(live, peak)`` fixed-point scalars → the same after the step. The values may
    also be vectors, one item per lane (:mod:`gsched.costmodel.pallas_lanes`): ``walking``
    then turns the lanes' "reads left" into the loop's one predicate."""
    allocated, temporary, dead = (fp.Fixed(*columns[i:i + 2]) for i in range(0, 6, 2))
    *inline, first, last = columns[PEAK_COLUMNS:]
    chunk = len(inline)
    live, peak = (list(x) for x in zip(*memory))
    for d in range(num_devices):
        here = device == d
        live[d] = fp.where(here, fp.add(live[d], allocated, MEMORY_LO_BITS), live[d])
        used = fp.add(live[d], temporary, MEMORY_LO_BITS)
        peak[d] = fp.where(here, fp.maximum(peak[d], used), peak[d])
        live[d] = fp.where(here, fp.subtract(live[d], dead, MEMORY_LO_BITS), live[d])

    def read(live, tensor):
        """One read of ``tensor``'s copy on ``source`` (−1: none); the copy leaves after its
        last."""
        valid = tensor >= 0
        tensor = jnp.maximum(tensor, 0)
        copy = tensor * num_devices + source
        left = counts.load(copy) - 1
        counts.store(copy, left, valid)
        size = fp.Fixed(table.load(at.size_hi + tensor), table.load(at.size_lo + tensor))
        gone = valid & (left == 0)
        return [fp.where(gone & (source == d), fp.subtract(live[d], size, MEMORY_LO_BITS),
                         live[d]) for d in range(num_devices)]

    for tensor in inline:
        live = read(live, tensor)

    def rest(carry):
        q, live = carry
        for j in range(chunk):
            within = q + j < last
            live = read(live, jnp.where(within, table.load(at.reads + jnp.where(within, q + j,
                                                                               0)), -1))
        return q + chunk, live

    _, live = lax.while_loop(lambda c: walking(c[0] < last), rest, (first, live))
    return tuple(zip(live, peak))
