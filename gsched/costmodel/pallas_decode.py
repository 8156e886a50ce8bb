"""The list schedule (SPEC §2, §4) as one fused Pallas kernel per chromosome, for accelerators.

The ready-tree loop of :mod:`gsched.costmodel.schedule` runs as an XLA ``while_loop`` whose body
is ~30 small kernels; on a GPU each is a launch, paid at every step. Here the whole schedule of
one chromosome is one program instance of a ``pallas_call`` (batched with ``jax.vmap``, which
turns the population into the kernel's grid): the ready set, the ready times and the device
free times live in the kernel as loop-carried vectors, and nothing leaves it until the makespan
is known. Any ``D``; the list scheduler only.

Plain JAX prepares each chromosome's inputs from the pieces the loop decoder's
:func:`~gsched.costmodel.schedule.schedule_init` is made of (fixed-point durations, devices,
in-degrees, CSR successor entries, SPEC §2's ranking), keeps only the successor entries that
fire under the chromosome's placement (:func:`active_entries`: ~40 % of them at 500 ops,
D = 2), and turns the kernel's outputs into a :class:`Schedule` with
:func:`~gsched.costmodel.schedule.schedule_from_positions`, as the loop's own result does, so
both decoders share every rule but the loop itself. Inside the kernel, everything is indexed
by *slot*: the rank among the items that can run (real ops and existing transfers; absent
transfer slots are most of ``V = N + T·D`` at ``D ≥ 2``), ``V_p`` slots: the static bound
``N + min(E, T·(D − 1))`` rounded up to a power of two, as Triton wants for every tensor. Only
those are ranked (:func:`ranked_slots`): the loop's ranking sorts all ``V`` items.

* ``word [V_p]``: ``(unfinished dependencies << k) | slot`` for an item that can still run
  (``k`` = bits of a slot), :data:`NEVER` for unused slots and items already scheduled, so the
  ready item with the largest priority is ``min(word)`` (ready words are ``< 2**k``);
* ``ready [V_p]`` (hi, lo): exact fixed-point ready times; the ``D`` devices' free times are
  scalars (hi, lo), so a step's start is scalar selects, not a reduction.

A step takes the minimum word and that lane's ready time (one
:func:`~gsched.costmodel.pallas_lexmin.lexmin` reduction, made at the end of the previous
step), writes its slot to the ``order`` output (a scalar store, never read back), reads the
item's row with scalar loads (device, source device, duration, its first
``chunk`` firing successor slots and the range of the rest: :func:`successor_columns`),
computes its start and end (SPEC §4), and walks its firing successors: the row's, then the
rest ``chunk`` at a time, each compared against the lane index, the compares or-ed into one
``[V_p]`` mask, so decrementing in-degrees and raising ready times are vector selects instead
of scatters. A hit lane's ready time is set to the end, not compared with it: every item's
predecessors use the item's device (an op's same-device producers and its incoming transfers;
a transfer's one producer), and the end times of the items using a device grow with the step
(each starts once the device is free), so the last hit is the latest end. Most items have at
most ``chunk`` firing successors (~80–90 % at 500 ops, chunk 2), so most steps load nothing
that waits for the row. Per step that is ``O(V_p)`` work plus
``O((2·chunk + 3) · V_p)`` per window of entries, ``O((V_p + Q) · V_p)`` per chromosome (``Q``
firing entries). So the kernel is compiled at up to three widths (``V_p``, ``V_p / 2``,
``V_p / 4``: :func:`lane_widths`) and a call runs the narrowest that holds every chromosome's
running items (often about 40 % of the static bound at ``D ≥ 2``), chosen once per call by a
``lax.switch`` around the prologue and the kernel (:func:`at_running_width`): the prologue's
``[V_p]`` arrays are built at that width too.
"""

from __future__ import annotations

import dataclasses
import functools
import operator
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as plt

from gsched.core import fixedpoint as fp
from gsched.core.batching import batch_switch, flat_batch
from gsched.core.padding import PaddedGraph
from gsched.costmodel.pallas_lexmin import lexmin
from gsched.costmodel.pallas_lexmin import lowers as lexmin_lowers
from gsched.costmodel.memory import MemoryProfile, memory_profile, peak_memory
from gsched.costmodel.pallas_lanes import (
    ChromosomePerLane,
    lanes_list_kernel,
    list_lanes_memory,
)
from gsched.costmodel.pallas_memory import MEMORY_NUM_WARPS, memory_list_kernel
from gsched.costmodel.pallas_peaks import peak_offsets, peak_tables
from gsched.costmodel.pallas_tpu import (
    TpuProgramPerChromosome,
    check_smem,
    smem_words,
    tpu_list_kernel,
)
from gsched.costmodel.params import CostParams
from gsched.costmodel.schedule import (
    Placement,
    Schedule,
    count_at_most,
    decode_placement,
    entry_items,
    first_items,
    fixed_durations,
    inclusive_count,
    inline_columns,
    item_devices,
    kernel_step_times,
    item_priorities,
    op_indegrees,
    rank_items,
    schedule_from_positions,
)

NEVER = (1 << 31) - 1  # the word of an item that cannot, or can no longer, be taken
KERNEL_CHUNK = 2  # successor entries per inner iteration by default: within 1 % of the
# fastest (1) on an H100 at 500 ops, D = 2 for both kernels, 1.35x (list) and 1.2x (priority)
# chunk 8 at equal warps (docs/benchmarks.md, "Fused-kernel tuning")


def pallas_applies(backend: str | None = None) -> bool:
    """Whether the "auto" decoder schedules with a fused kernel, whatever the scheduler (this
    module's for the list scheduler, :mod:`gsched.costmodel.pallas_dynamic`'s for the §8.2
    ones): on a GPU (``backend``, default JAX's default backend; a static choice). Not on a
    TPU: Mosaic TPU rejects the kernels' 1-D blocks (it tiles the last two dimensions by
    8 × 128). Not where this JAX's Pallas cannot lower :func:`~gsched.costmodel.pallas_lexmin.
    lexmin` for Triton (:func:`~gsched.costmodel.pallas_lexmin.lowers`)."""
    if (backend or jax.default_backend()) != "gpu":
        return False
    return lexmin_lowers()


def slot_bound(num_ops: int, num_tensors: int, num_edges: int, num_devices: int) -> int:
    """``V_p``: the most items that run, ``N + min(E, T·(D − 1))`` (an existing ``X(t, d)`` has
    its own edge from ``t`` to a consumer on ``d``), rounded up to a power of two."""
    return pl.next_power_of_2(num_ops + min(num_edges, num_tensors * (num_devices - 1)))


class Slots(NamedTuple):
    """One chromosome's items as the kernels index them: by *slot*, the rank among the items
    that run (real ops, existing transfers), ``V_p`` of them (module docstring)."""

    item: jnp.ndarray  # [V_p] int32 the item in each slot (0 past the running items)
    slot: jnp.ndarray  # [V] int32 by item: its slot, −1 if it never runs
    word: jnp.ndarray  # [V_p] int32 (in-degree << k) | slot, NEVER past the running items
    count: jnp.ndarray  # [] int32 items that run
    successor: jnp.ndarray  # [Q + chunk] int32 firing successor slots (active_entries), −1 tail
    first: jnp.ndarray  # [V_p] int32 each slot's range in ``successor``
    last: jnp.ndarray  # [V_p] int32


def ranked_slots(graph: PaddedGraph, keys: jnp.ndarray, placement: Placement,
                 num_devices: int, width: int | None = None) -> tuple[jnp.ndarray, ...]:
    """One chromosome's slots (``keys``: the SPEC §2 part): SPEC §2's priority order (program
    inputs first, ties by item index), the loops' ranking restricted to the items that run:
    only those ``V_p`` are sorted, not all ``V = N + T·D``. Returns ``(item [V_p], slot [V],
    word [V_p], count [])`` as in :class:`Slots`, and ``k`` (static). ``width``: ``V_p`` if
    not :func:`slot_bound`'s, a power of two the caller knows holds the running items
    (:func:`at_running_width`)."""
    n, t, e = graph.op_mask.shape[0], graph.tensor_mask.shape[0], graph.edge_mask.shape[0]
    v = n + t * num_devices
    # Dependencies in the extended graph: a transfer waits for its producer.
    indegree = jnp.concatenate([op_indegrees(graph, placement), jnp.ones(t * num_devices,
                                                                         jnp.int32)])
    # At most N + min(E, T·(D − 1)) items run (an existing X(t, d) has its own edge
    # (t, consumer on d)), often a fraction of V = N + T·D.
    runs = jnp.concatenate([graph.op_mask, placement.transfer_exists.reshape(-1)])
    vp = width or slot_bound(n, t, e, num_devices)
    k = max(1, (vp - 1).bit_length())
    if (e + 1) << k > NEVER:
        raise ValueError(f"{vp} item slots and {e} edges overflow the kernel's 31-bit words")
    lane = jnp.arange(vp, dtype=jnp.int32)
    count = running_items(graph, placement)
    real = lane < count
    # The running items by item index, then sorted. Padding lanes get the lowest priority,
    # 0, and come after every real item of that priority (ties by lane = by item index).
    item = jnp.zeros(vp, jnp.int32).at[jnp.where(runs, inclusive_count(runs) - 1, vp)].set(
        jnp.arange(v, dtype=jnp.int32), mode="drop")
    priority = jnp.where(real, item_priorities(keys, n, num_devices)[item], 0.0)
    _, by_priority = rank_items(priority, real & first_items(graph, num_devices)[item])
    item = item[by_priority]
    slot = jnp.full(v, -1, jnp.int32).at[jnp.where(real, item, v)].set(lane, mode="drop")
    word = jnp.where(real, jnp.left_shift(indegree[item], k) | lane, NEVER)
    return item, slot, word, count, k


def slot_tables(graph: PaddedGraph, keys: jnp.ndarray, placement: Placement,
                activation: jnp.ndarray, num_devices: int, chunk: int,
                width: int | None = None) -> tuple[Slots, int]:
    """The inputs both kernels share, of one chromosome (``keys``: the SPEC §2 part;
    ``activation [V]``: :func:`~gsched.costmodel.schedule.item_devices`' third), and ``k``, the
    bits of a slot (static): :func:`ranked_slots` (at ``width``) and their
    :func:`active_entries`."""
    item, slot, word, count, k = ranked_slots(graph, keys, placement, num_devices, width)
    # ``chunk`` inert entries at the end: every window [q, q + chunk) inside the table is in
    # bounds.
    successor, first, last = active_entries(graph, placement, slot, activation, num_devices,
                                            spare=chunk)
    return Slots(item, slot, word, count, successor, first[item], last[item]), k


def successor_columns(slots: Slots, chunk: int) -> jnp.ndarray:
    """``[V_p, chunk + 2]`` by slot, the kernels' row columns for the successor walk: the first
    ``chunk`` firing successor slots (−1 past the item's last), then the range of the rest
    (``first + chunk``, ``last``; empty for most items). A step reads them with the item's
    other row columns, so an item with at most ``chunk`` firing entries walks them without a
    load that waits for its range (:func:`~gsched.costmodel.schedule.inline_columns`)."""
    return inline_columns(slots.successor, slots.first, slots.last, chunk)


def active_entries(graph: PaddedGraph, placement: Placement, slot: jnp.ndarray,
                   activation: jnp.ndarray, num_devices: int, spare: int = 0
                   ) -> tuple[jnp.ndarray, jnp.ndarray, jnp.ndarray]:
    """The successor entries a started item actually walks, compacted (one chromosome).

    The loop decoders' table (:func:`~gsched.costmodel.schedule.entry_items`) lists, for each
    op, its consumer ops and ``X(t, d)`` for each of its tensors and *every* device, and shares
    one list (the consumers of ``t``) between the ``D`` transfers of ``t``; an entry only fires
    when its activation device is the started item's device (SPEC §4), ~40 % of them at
    500 ops, D = 2. Here each item's firing entries are contiguous and alone: op entries whose
    activation device is their op's, then the consumers of ``t`` once per device ``d``, those on
    ``d`` kept for ``X(t, d)`` if it exists. Which entries fire depends only on the placement,
    so nothing is lost; their order within an item does not matter (the walk's updates
    commute).

    ``slot`` / ``activation [V]``: each item's slot (−1 if it never runs) and activation
    device. Returns ``(successor [Q + spare], first [V], last [V])``: the slots of the firing
    entries (−1 in the unused tail, ``spare`` entries more than ``Q = E + T·D + E``, which is
    enough: every consumer entry fires for one device), and each item's range in it.
    """
    n, t, e, d = (graph.op_mask.shape[0], graph.tensor_mask.shape[0],
                  graph.edge_mask.shape[0], num_devices)
    base = e + t * d  # the op entries; the consumer entries follow
    entry_item, start, end = entry_items(graph, d)  # the entries' items; ranges by item
    entry_activation = activation[entry_item]
    # Each entry's owner: an op for the op entries, a tensor for the consumer entries (none
    # past the last range): the ranges ending at or before it (the ends ascend).
    owner_op = count_at_most(end[:n], base)
    owner_device = jnp.concatenate([placement.device, jnp.full(1, -2, jnp.int32)])[owner_op]
    owner_tensor = count_at_most(graph.tensor_consumer_end, e)
    exists = jnp.concatenate([placement.transfer_exists, jnp.zeros((1, d), bool)])[owner_tensor]
    fires = jnp.concatenate([
        entry_activation[:base] == owner_device,
        ((entry_activation[base:] == jnp.arange(d, dtype=jnp.int32)[:, None])
         & exists.T).reshape(-1)])  # [base + D·E]: op entries, then consumers per device
    position = inclusive_count(fires)
    before = jnp.concatenate([jnp.zeros(1, jnp.int32), position])  # firing entries before each
    item = jnp.concatenate([entry_item[:base], jnp.tile(entry_item[base:], d)])
    size = entry_item.shape[0]
    successor = jnp.full(size + spare, -1, jnp.int32).at[
        jnp.where(fires, position - 1, size + spare)].set(slot[item], mode="drop")
    # X(t, d)'s consumers are in the copy for device d.
    shift = jnp.concatenate([jnp.zeros(n, jnp.int32),
                             jnp.tile(jnp.arange(d, dtype=jnp.int32) * e, t)])
    return successor, before[start + shift], before[end + shift]


def list_inputs(graph: PaddedGraph, keys: jnp.ndarray, placement: Placement,
                params: CostParams, num_devices: int, chunk: int, width: int | None = None):
    """The list kernel's prologue for one chromosome → ``(slots, k, rows [V_p, 6 + chunk],
    time unit, runtime bound)``; ``rows`` by slot: device, source device, duration hi, lo, then
    :func:`successor_columns`; ``width``: ``V_p`` (:func:`ranked_slots`)."""
    duration, unit, runtime_bound = fixed_durations(graph, placement, params, num_devices)
    device, source, activation = item_devices(graph, placement, num_devices)
    slots, k = slot_tables(graph, keys, placement, activation, num_devices, chunk, width)
    rows = jnp.concatenate([jnp.stack([device[slots.item], source[slots.item],
                                       duration.hi[slots.item], duration.lo[slots.item]],
                                      axis=1), successor_columns(slots, chunk)], axis=1)
    return slots, k, rows, unit, runtime_bound


def positions(slots: Slots, order: jnp.ndarray, taken: jnp.ndarray
              ) -> tuple[jnp.ndarray, jnp.ndarray]:
    """A kernel's ``order [V_p]`` (the slot taken at each step ``< taken``; unwritten after)
    by item → ``(position [V]``: each item's step, −1 if never taken; ``items [V]``: the item
    taken at each step, −1 past ``taken``), :func:`~gsched.costmodel.schedule.
    schedule_from_positions`' two views of the order. The items by step are a gather of the
    kernel's order: one scatter by item (the positions), not a second one back by step."""
    vp, v = order.shape[0], slots.slot.shape[0]
    step = jnp.arange(vp, dtype=jnp.int32)
    done = step < taken
    slot = jnp.where(done, order, 0)
    items = jnp.where(done, slots.item[slot], -1)
    position = jnp.full(v, -1, jnp.int32).at[jnp.where(done, items, v)].set(step, mode="drop")
    # A width can exceed V (a power of two), but no more than V items are taken.
    items = jnp.pad(items, (0, max(0, v - vp)), constant_values=-1)[:v]
    return position, items


def pallas_schedule(graph: PaddedGraph, keys: jnp.ndarray, placement: Placement,
                    params: CostParams, num_devices: int, chunk: int = KERNEL_CHUNK,
                    interpret: bool | None = None, num_warps: int | None = None,
                    state: str = "registers", programs: int | None = None) -> Schedule:
    """One chromosome's list schedule (no batch axis; ``jax.vmap`` makes the population the
    kernel's grid), bit for bit the loop decoder's :class:`Schedule`.

    ``keys``: the SPEC §2 part of the padded chromosome; ``chunk``: successor entries per inner
    iteration; ``interpret``: run the kernel in Pallas' interpreter (default: on a CPU, where
    nothing else runs it); ``num_warps``: Triton warps per program (default
    :func:`default_num_warps` of the width run); ``state``: where the kernel keeps its lanes,
    ``"registers"`` (this module's kernel), ``"memory"``
    (:mod:`gsched.costmodel.pallas_memory`'s) or ``"lanes"`` (one chromosome per lane,
    :mod:`gsched.costmodel.pallas_lanes`); ``programs``: the lane kernel's most programs
    (:class:`~gsched.costmodel.pallas_lanes.ChromosomePerLane`; default one per block)."""
    check_scheduling_state(state)
    if programs is not None and state != "lanes":
        raise ValueError(f"programs applies to the 'lanes' kernel, not {state!r}")
    return at_running_width(_list_schedule, graph, keys, placement, params, num_devices,
                            chunk=chunk, interpret=interpret, num_warps=num_warps,
                            state=state, programs=programs)[0]


def check_scheduling_state(state: str, purpose: str = "") -> None:
    """Raises unless ``state`` names a list kernel that schedules alone, SPEC §3 left to a walk
    (``purpose``: what the message says it was wanted for)."""
    if state not in ("registers", "memory", "lanes"):
        raise ValueError(f"unknown kernel state {state!r}{purpose}; expected 'registers', "
                         "'memory' or 'lanes'")


def pallas_schedule_and_memory(graph: PaddedGraph, keys: jnp.ndarray, placement: Placement,
                               params: CostParams, num_devices: int, chunk: int = KERNEL_CHUNK,
                               interpret: bool | None = None, num_warps: int | None = None,
                               state: str = "memory", walk: bool = False
                               ) -> tuple[Schedule, MemoryProfile]:
    """:func:`pallas_schedule` and SPEC §3's memory of its schedule: the schedule and its
    :class:`~gsched.costmodel.memory.MemoryProfile`, bit for bit :func:`pallas_schedule`'s and
    :func:`~gsched.costmodel.memory.peak_memory`'s.

    The kernel accounts the memory as it schedules (:mod:`gsched.costmodel.pallas_peaks`) at
    ``state`` ``"memory"``, the Triton kernel with its lanes in memory
    (:mod:`gsched.costmodel.pallas_memory`), ``"tpu"``, the Mosaic TPU kernel
    (:mod:`gsched.costmodel.pallas_tpu`: its words in vector registers, the rest in scalar
    memory), or ``"lanes"``, the Triton kernel with one chromosome per lane
    (:mod:`gsched.costmodel.pallas_lanes`). With ``walk`` the kernel at ``state``
    (:func:`pallas_schedule`'s) only schedules, and the walk follows it in the same branch of
    the width switch (:func:`walked`)."""
    if walk:
        check_scheduling_state(state, " to walk after")
        return at_running_width(walked(_list_schedule), graph, keys, placement, params,
                                num_devices, chunk=chunk, interpret=interpret,
                                num_warps=num_warps, state=state)
    if state not in ("memory", "tpu", "lanes"):
        raise ValueError(f"unknown accounting kernel {state!r}; expected 'memory', 'tpu' or "
                         "'lanes'")
    return at_running_width(_list_schedule, graph, keys, placement, params, num_devices,
                            chunk=chunk, interpret=interpret, num_warps=num_warps, state=state,
                            peaks=True)


def walked(branch, steps_of=lambda schedule: schedule):
    """A kernel's width branch (``branch(graph, keys, placement, params, width=, num_devices=,
    **static) → (schedule, None)``) followed by SPEC §3's walk of its schedule
    (``steps_of(schedule)``: its :class:`Schedule`) → ``(schedule, memory profile)``. Inside
    the branch the walk spans the width's steps, not the widest's (``peak_memory``'s
    ``max_steps``: every chromosome of the call runs at most ``width`` items)."""
    def run(graph, keys, placement, params, *, width: int, num_devices: int, **static):
        schedule, _ = branch(graph, keys, placement, params, width=width,
                             num_devices=num_devices, **static)
        return schedule, peak_memory(graph, placement, steps_of(schedule), params.capacity,
                                     num_devices, max_steps=width)
    return run


def _list_schedule(graph: PaddedGraph, keys: jnp.ndarray, placement: Placement,
                   params: CostParams, *, width: int, num_devices: int, chunk: int,
                   interpret: bool | None, num_warps: int | None, state: str,
                   peaks: bool = False, programs: int | None = None):
    """``(schedule, memory profile or None)`` of the list kernel at ``state`` and ``width``
    (with ``peaks``, the kernel accounting as it schedules; the TPU kernel always does;
    ``programs``: the lane kernel's, :class:`~gsched.costmodel.pallas_lanes.
    ChromosomePerLane`)."""
    slots, k, rows, unit, runtime_bound = list_inputs(graph, keys, placement, params,
                                                      num_devices, chunk, width)
    table, peak_kwargs = slots.successor, {}
    if peaks:
        rows, table, peak_kwargs, memory_unit = with_peak_tables(
            graph, placement, slots.item, rows, table, num_devices, chunk)
    # The copies' read counts: the accounting kernels' scratch (the lane kernel's own memory).
    counts = (peak_kwargs["peaks"].num_counts,) if peaks else ()
    if state == "registers":
        layout = ProgramPerChromosome(num_warps)
        kernel, static = _list_kernel, {}
    elif state == "lanes":
        layout = ChromosomePerLane(list_lanes_memory, num_warps, programs)
        kernel, static = lanes_list_kernel, peak_kwargs
    elif state == "tpu":
        if not _interpreted(interpret):
            check_smem(smem_words(slots.word.shape[0], rows.shape[1], table.shape[0],
                                  peak_kwargs["tail"], counts))
        layout = TpuProgramPerChromosome(scratch=2, fixed_scratch=counts)
        kernel, static = tpu_list_kernel, dict(never=NEVER, **peak_kwargs)
    else:
        layout = ProgramPerChromosome(num_warps or MEMORY_NUM_WARPS, scratch=3,
                                      fixed_scratch=counts)
        kernel, static = memory_list_kernel, dict(barrier=not _interpreted(interpret),
                                                  never=NEVER, **peak_kwargs)
    run = batched_kernel(kernel, 1, k, chunk, interpret, layout, num_devices=num_devices,
                         **static)
    order, tail = (x[0] for x in run(slots.word[None], rows[None], table[None],
                                     slots.count[None]))
    taken = tail[2]
    # The makespan (hi, lo) as the one end time: the last end is its maximum.
    position, items = positions(slots, order, taken)
    schedule = schedule_from_positions(position, taken, fp.Fixed(tail[:1], tail[1:2]), unit,
                                       runtime_bound, order=items)
    if not peaks:
        return schedule, None
    return schedule, memory_profile(fp.Fixed(tail[4::2], tail[5::2]), memory_unit,
                                    params.capacity)


def tpu_smem_words(graph: PaddedGraph, num_devices: int, chunk: int = KERNEL_CHUNK) -> int:
    """The SMEM words (:func:`~gsched.costmodel.pallas_tpu.smem_words`) the TPU kernel takes
    per chromosome on ``graph``'s bucket: the shapes of its prologue's tables (static)."""
    def tables(g, keys):
        placement = decode_placement(g, keys, num_devices)
        slots, _, rows, _, _ = list_inputs(g, keys, placement, CostParams(), num_devices, chunk)
        columns, table, _ = peak_tables(g, placement, slots.item, num_devices, chunk)
        return slots.word, rows, columns, slots.successor, table

    keys = jax.ShapeDtypeStruct((graph.bucket.chromosome_length(num_devices),), jnp.float32)
    word, rows, columns, successor, table = jax.eval_shape(tables, graph, keys)
    at = peak_offsets(successor.shape[0], graph.edge_mask.shape[0], graph.tensor_mask.shape[0],
                      num_devices, chunk)
    return smem_words(word.shape[0], rows.shape[1] + columns.shape[1],
                      successor.shape[0] + table.shape[0],
                      accounting_layout(at, num_devices)["tail"], (at.num_counts,))


def accounting_layout(at, num_devices: int) -> dict:
    """The static arguments of an accounting kernel (``batched_kernel``'s keywords): a tail
    of ``4 + 2·D`` (makespan hi, lo, steps, 0, then each device's peak hi, lo) and the table
    regions ``at`` (:class:`~gsched.costmodel.pallas_peaks.PeakOffsets`; the kernels with a
    program per chromosome keep ``at.num_counts`` read counts in scratch)."""
    return dict(tail=4 + 2 * num_devices, peaks=at)


def with_peak_tables(graph: PaddedGraph, placement: Placement, item: jnp.ndarray,
                     rows: jnp.ndarray, table: jnp.ndarray, num_devices: int, chunk: int):
    """An accounting kernel's inputs from a scheduling kernel's (one chromosome; ``item
    [V_p]``: the item in each slot): ``rows`` go on with :func:`~gsched.costmodel.
    pallas_peaks.peak_tables`' columns, the entry ``table`` with its regions → ``(rows, table,
    batched_kernel's keywords (:func:`accounting_layout`), the memory unit)``."""
    columns, peak_table, memory_unit = peak_tables(graph, placement, item, num_devices, chunk)
    at = peak_offsets(table.shape[0], graph.edge_mask.shape[0], graph.tensor_mask.shape[0],
                      num_devices, chunk)
    return (jnp.concatenate([rows, columns], axis=-1),
            jnp.concatenate([table, peak_table], axis=-1), accounting_layout(at, num_devices),
            memory_unit)


def lane_widths(vp: int) -> tuple[int, ...]:
    """The kernel widths compiled for ``vp`` slots, widest first: ``vp``, ``vp / 2`` and
    ``vp / 4`` (not below 16). A call runs the narrowest that holds every chromosome's running
    items (:func:`lane_width_index`): the kernel's work per step is linear in its width."""
    return tuple(w for w in (vp, vp // 2, vp // 4) if w == vp or w >= 16)


def lane_width_index(count: jnp.ndarray, widths: tuple[int, ...]) -> jnp.ndarray:
    """Index into ``widths`` (widest first) of the narrowest holding ``max(count)`` slots."""
    most = jnp.max(count)
    return sum((most <= w).astype(jnp.int32) for w in widths[1:])


def graph_lane_widths(graph: PaddedGraph, num_devices: int) -> tuple[int, ...]:
    """:func:`lane_widths` of ``graph``'s bucket: of its :func:`slot_bound`."""
    n, t, e = graph.op_mask.shape[0], graph.tensor_mask.shape[0], graph.edge_mask.shape[0]
    return lane_widths(slot_bound(n, t, e, num_devices))


def running_items(graph: PaddedGraph, placement: Placement) -> jnp.ndarray:
    """``[]`` int32: how many items of one chromosome run (real ops, existing transfers)."""
    return (jnp.sum(graph.op_mask, dtype=jnp.int32)
            + jnp.sum(placement.transfer_exists, dtype=jnp.int32))


def at_running_width(fn, graph: PaddedGraph, keys: jnp.ndarray, placement: Placement,
                     params: CostParams, num_devices: int, **static):
    """``fn(graph, keys, placement, params, width=, num_devices=, **static)`` of one chromosome,
    prologue and kernel, at the narrowest of :func:`lane_widths` that holds the running items
    of every chromosome in the batch: one ``lax.switch`` on the whole batch, whatever vmaps
    are around the call (:func:`~gsched.core.batching.batch_switch`); ``fn`` returns the same
    shapes at every width (by item, not by slot)."""
    widths = graph_lane_widths(graph, num_devices)

    def running(graph, keys, placement, params):
        del keys, params
        return running_items(graph, placement)

    branches = [functools.partial(fn, width=w, num_devices=num_devices, **static)
                for w in widths]
    return batch_switch(running, lambda counts: lane_width_index(counts, widths), branches)(
        graph, keys, placement, jax.tree.map(jnp.asarray, params))


def default_num_warps(width: int) -> int:
    """Triton warps per program at ``width`` lanes: 2 up to 1,024 lanes, then one per 512.

    On an H100 at 500 ops, D = 2 (``eval.tune_kernel``, docs/benchmarks.md) fewer warps were
    faster: 1 and 2 beat Triton's usual 4 by 5–8 % and 4–6 % (list kernel), 2 tied with 4
    (priority), 8 lost 13–14 %; above 1,024 lanes the same lanes per warp is kept (not timed
    there)."""
    return min(16, max(2, width // 512))


@dataclasses.dataclass(frozen=True)
class ProgramPerChromosome:
    """A kernel layout (:func:`batched_kernel`'s ``layout``) for Pallas' Triton backend: one
    program per chromosome, its slots spread over the program's lanes, the batch the grid (a
    ``jax.vmap`` of the call). The kernel's refs: ``word``, ``rows``, ``successor``, the lane
    state, the per-step outputs, ``tail``, then the scratch: ``scratch`` more ``[width]``
    outputs the kernel uses as memory, dropped, and one of each size in ``fixed_scratch``
    (whatever the width); ``num_warps`` (None: :func:`default_num_warps`)."""

    num_warps: int | None = None
    scratch: int = 0
    fixed_scratch: tuple[int, ...] = ()

    def __call__(self, kernel, width: int, k: int, interpret: bool, per_step: int, tail: int,
                 params: dict):
        """``(word [B, width], rows [B, width, C], successor [B, Q], count [B], *lane_state
        [B, width]) → (*per_step outputs [B, width], tail [B, tail])``."""
        del k, params
        call = _pallas_call(kernel, width, per_step, interpret,
                            self.num_warps or default_num_warps(width),
                            (width,) * self.scratch + self.fixed_scratch, tail)

        def run(word, rows, successor, count, *lane_state):
            del count
            return jax.vmap(call)(word, rows, successor, *lane_state)[:per_step + 1]

        return run


@functools.cache
def batched_kernel(kernel, per_step: int, k: int, chunk: int, interpret: bool | None, layout,
                   tail: int = 4, **params):
    """A kernel over a batch: ``(word [B, V_p], rows [B, V_p, C], successor [B, Q + chunk],
    count [B], *lane_state [B, V_p])`` → ``(*per-step outputs [B, V_p], tail [B, tail])``, all
    int32, at the width ``V_p`` of its inputs (:func:`at_running_width` picks it).
    ``kernel(..., chunk=, k=, **params)`` schedules at the width of its refs, its refs in the
    order of its ``layout``: :class:`ProgramPerChromosome` (Triton, a program
    per chromosome), :class:`~gsched.costmodel.pallas_tpu.TpuProgramPerChromosome` (Mosaic TPU)
    or :class:`~gsched.costmodel.pallas_lanes.ChromosomePerLane` (Triton, a chromosome per
    lane), each a hashable ``layout(kernel, width, k, interpret, per_step, tail, params)`` →
    the batched call at that width. A :func:`~gsched.core.batching.flat_batch` function:
    vmapping it (over graphs, or a caller's own ``vmap``) merges the new axis into the batch,
    so the width stays one unbatched choice."""

    def decode(word, rows, successor, count, *lane_state):
        call = layout(functools.partial(kernel, chunk=chunk, k=k, **params), word.shape[1], k,
                      _interpreted(interpret), per_step, tail, params)
        return call(word, rows, successor, count, *lane_state)

    return flat_batch(decode)


def _interpreted(interpret: bool | None) -> bool:
    """Whether a kernel runs in Pallas' interpreter (``None``: on a CPU)."""
    return jax.default_backend() == "cpu" if interpret is None else interpret


def _pallas_call(kernel, width: int, per_step: int, interpret: bool | None, num_warps: int,
                 scratch: tuple[int, ...] = (), tail: int = 4):
    """The ``pallas_call`` of one chromosome at ``width`` lanes: ``per_step`` outputs
    ``[width]``, the tail ``[tail]`` and one more of each size in ``scratch``, int32."""
    backend = jax.default_backend()
    interpret = _interpreted(interpret)
    if not interpret and not lexmin_lowers():
        raise NotImplementedError("this JAX's Pallas Triton backend cannot lower the kernels' "
                                  "lax.reduce (gsched.costmodel.pallas_lexmin); use the loop "
                                  "decoder or interpret=True")
    if not interpret and backend == "tpu":
        raise NotImplementedError("the fused decode kernels are written for Pallas' Triton "
                                  "(GPU) backend; on a TPU use the loop decoder or "
                                  "interpret=True")
    # Triton, not Mosaic GPU; the loop state lives in registers, spread over the warps.
    return pl.pallas_call(
        kernel,
        out_shape=(*[jax.ShapeDtypeStruct((width,), jnp.int32)] * per_step,
                   jax.ShapeDtypeStruct((tail,), jnp.int32),
                   *[jax.ShapeDtypeStruct((size,), jnp.int32) for size in scratch]),
        interpret=interpret,
        compiler_params=None if interpret else plt.CompilerParams(num_warps=num_warps),
        name="gsched_schedule",
    )


def walk_successors(successor_ref, lane: jnp.ndarray, k: int, columns, end: fp.Fixed,
                    word: jnp.ndarray, ready: fp.Fixed, *, ends_grow: bool = False
                    ) -> tuple[jnp.ndarray, fp.Fixed]:
    """Inside a kernel: a started item's firing successor slots, from its row's
    :func:`successor_columns` (``chunk`` slots, then the range of the rest in
    ``successor_ref``, walked ``chunk`` per iteration with scalar loads), each compared against
    the lanes; hit lanes lose a dependency (``word − 2**k``) and have their ready time raised
    to ``end``. ``ends_grow``: a hit lane's ready time is never above ``end``, so it is set,
    not compared (the list kernel: :func:`_list_kernel`)."""
    *inline, first, last = columns
    chunk = len(inline)

    def hits(carry, targets):
        word, ready_hi, ready_lo = carry
        hit = functools.reduce(operator.or_, [lane == target for target in targets])
        later = hit if ends_grow else hit & fp.greater(end, fp.Fixed(ready_hi, ready_lo))
        return (jnp.where(hit, word - (1 << k), word), jnp.where(later, end.hi, ready_hi),
                jnp.where(later, end.lo, ready_lo))

    def body(carry):
        q, *state = carry
        return (q + chunk, *hits(state, [jnp.where(q + j < last, successor_ref[q + j], -1)
                                         for j in range(chunk)]))

    state = hits((word, ready.hi, ready.lo), inline)
    _, word, ready_hi, ready_lo = lax.while_loop(lambda c: c[0] < last, body, (first, *state))
    return word, fp.Fixed(ready_hi, ready_lo)


def _list_kernel(word_ref, rows_ref, successor_ref, order_ref, tail_ref, *, num_devices: int,
                 chunk: int, k: int):
    """One chromosome's list schedule: ``rows [V_p, 6 + chunk]`` (device, source device,
    duration hi, lo, :func:`successor_columns` by slot) → ``order [V_p]`` (the slot taken at
    each step), ``tail`` (makespan hi, lo, steps taken, 0). The devices' free times are
    ``2·D`` scalars: a step's start and its updates are scalar selects, not reductions; the
    one reduction of a step is :func:`~gsched.costmodel.pallas_lexmin.lexmin`'s, the next
    minimum word with its lane's ready time."""
    vp = word_ref.shape[0]
    lane = lax.broadcasted_iota(jnp.int32, (vp,), 0)
    zeros = jnp.zeros((vp,), jnp.int32)

    def step(carry):
        s, best, start_hi, start_lo, word, ready_hi, ready_lo, *free = carry
        free = [fp.Fixed(*free[2 * d:2 * d + 2]) for d in range(num_devices)]
        slot = best & ((1 << k) - 1)
        order_ref[s] = slot  # a scalar store, never read back
        device, source, duration_hi, duration_lo, *columns = (
            rows_ref[slot, column] for column in range(6 + chunk))
        this = lane == slot
        end, free = kernel_step_times(fp.Fixed(start_hi, start_lo), free, device, source,
                                      fp.Fixed(duration_hi, duration_lo), num_devices)
        word, ready = walk_successors(successor_ref, lane, k, columns, end,
                                      jnp.where(this, NEVER, word),
                                      fp.Fixed(ready_hi, ready_lo), ends_grow=True)
        return (s + 1, *lexmin([word], [ready.hi, ready.lo]), word, ready.hi, ready.lo,
                *(x for time in free for x in time))

    word = word_ref[...]
    zero = jnp.int32(0)
    taken, _, _, _, _, _, _, *free = lax.while_loop(
        lambda c: c[1] < (1 << k), step,
        (zero, *lexmin([word], [zeros, zeros]), word, zeros, zeros,
         *[zero] * (2 * num_devices)))
    makespan = functools.reduce(fp.maximum, [fp.Fixed(*free[2 * d:2 * d + 2])
                                             for d in range(num_devices)])
    tail_ref[0] = makespan.hi
    tail_ref[1] = makespan.lo
    tail_ref[2] = taken
    tail_ref[3] = zero
