"""SPEC §8.2's event-driven ``"priority"`` / ``"fifo"`` schedulers as one fused Pallas kernel per
chromosome, for accelerators: what :mod:`gsched.costmodel.pallas_decode` does for the list
scheduler, on the same slots, inputs and successor walk.

The loop of :mod:`gsched.costmodel.dynamic` makes one dense ``O(V)`` pass per started item over
every item; here the pass is over the ``V_p`` running items' lanes, inside one program
instance, with the loop state in registers: per lane the ``word`` (unstarted dependencies and
slot, as in the list kernel; an item is *known* when its word is below ``2**k``), the ready time
and the free time of the item's stream (hi, lo), and, loaded once, the item's stream and whether
it is a program input. A step is the loop's decision, in the same order:

1. the stream to run next and its start: the lexicographic minimum of ``(max(free, ready),
   stream)`` over known lanes (one :func:`~gsched.costmodel.pallas_lexmin.lexmin` reduction,
   carried from the previous step);
2. the candidates, the known items of that stream with ``ready ≤ start``; the one started is
   the smallest slot (= §2 rank: ``"priority"``) or the smallest ``(ready, slot)`` with a
   program input's ready time read as −∞ (``"fifo"``);
3. its slot and start are written to the ``order`` / ``start`` outputs (scalar stores), its
   duration and successor range read with scalar loads; its stream's lanes get its end as their
   free time; its firing successors are walked (:func:`~gsched.costmodel.pallas_decode.
   walk_successors`: the loop walks them at start time too, §8.2's "ready once all
   dependencies have started").

Plain JAX prepares the inputs from the pieces :func:`~gsched.costmodel.dynamic.dynamic_init`
is made of (durations, devices, in-degrees; the slots of the list kernel) and turns the outputs
into the loop's :class:`~gsched.costmodel.dynamic.DynamicSchedule` with
:func:`~gsched.costmodel.dynamic.timed_schedule`, as the loop's own result does: bit for bit
the loop's results. Per step
``O(V_p)`` work (about 30 vector operations and two reductions), ``O(V_p²)`` per
chromosome like the loop, but without its per-step kernel launches.
"""

from __future__ import annotations

import jax.numpy as jnp
from jax import lax

from gsched.core import fixedpoint as fp
from gsched.core.padding import PaddedGraph
from gsched.costmodel.dense_dynamic import WholeBatch, block_schedule
from gsched.costmodel.dynamic import DynamicSchedule, item_streams, timed_schedule
from gsched.costmodel.pallas_lanes import ChromosomePerLane
from gsched.costmodel.pallas_lanes_dynamic import dynamic_lanes_memory, lanes_dynamic_kernel
from gsched.costmodel.pallas_lexmin import BIG, lexmin
from gsched.costmodel.params import CostParams
from gsched.costmodel.memory import MemoryProfile, memory_profile
from gsched.costmodel.pallas_decode import (
    KERNEL_CHUNK,
    NEVER,
    ProgramPerChromosome,
    at_running_width,
    batched_kernel,
    list_inputs,
    pallas_schedule,
    pallas_schedule_and_memory,
    positions,
    slot_tables,
    successor_columns,
    walk_successors,
    walked,
    with_peak_tables,
)
from gsched.costmodel.schedule import (
    TIME_LO_BITS,
    Placement,
    first_items,
    fixed_durations,
    item_devices,
)


def dynamic_inputs(graph: PaddedGraph, keys: jnp.ndarray, placement: Placement,
                   params: CostParams, num_devices: int, chunk: int, width: int | None = None):
    """The event-driven kernel's prologue for one chromosome → ``(slots, k, rows
    [V_p, 4 + chunk], lanes, durations [V], time unit, runtime bound)``; ``rows`` by slot:
    duration hi, lo, then :func:`~gsched.costmodel.pallas_decode.successor_columns`;
    ``lanes``: each slot's stream, program-input flag and source device (the register kernel
    reads the first two; the lane kernel carries stream and source in its rows); ``width``:
    ``V_p`` (:func:`~gsched.costmodel.pallas_decode.ranked_slots`)."""
    n, d = graph.op_mask.shape[0], num_devices
    duration, unit, runtime_bound = fixed_durations(graph, placement, params, d)
    device, source, activation = item_devices(graph, placement, d)
    slots, k = slot_tables(graph, keys, placement, activation, d, chunk, width)
    item = slots.item
    rows = jnp.concatenate([jnp.stack([duration.hi[item], duration.lo[item]], axis=1),
                            successor_columns(slots, chunk)], axis=1)
    lanes = (item_streams(device, n, d)[item],
             first_items(graph, d)[item].astype(jnp.int32), source[item])
    return slots, k, rows, lanes, duration, unit, runtime_bound


def pallas_dynamic_schedule(graph: PaddedGraph, keys: jnp.ndarray, placement: Placement,
                            params: CostParams, num_devices: int, scheduler: str,
                            chunk: int = KERNEL_CHUNK, interpret: bool | None = None,
                            num_warps: int | None = None,
                            state: str = "registers") -> DynamicSchedule:
    """One chromosome's ``"priority"`` or ``"fifo"`` schedule (no batch axis; ``jax.vmap``
    makes the population the kernel's grid), bit for bit the loop's :class:`DynamicSchedule`.
    Arguments as :func:`~gsched.costmodel.pallas_decode.pallas_schedule`'s; ``state``:
    ``"registers"`` (this module's kernel), ``"lanes"`` (one chromosome per lane,
    :mod:`gsched.costmodel.pallas_lanes_dynamic`) or ``"dense"`` (its step in plain JAX, for
    CPUs: :mod:`gsched.costmodel.dense_dynamic`)."""
    return at_running_width(_dynamic_schedule, graph, keys, placement, params, num_devices,
                            scheduler=scheduler, chunk=chunk, interpret=interpret,
                            num_warps=num_warps, state=state)[0]


def dynamic_schedule_and_memory(graph: PaddedGraph, keys: jnp.ndarray, placement: Placement,
                                params: CostParams, num_devices: int, scheduler: str,
                                chunk: int = KERNEL_CHUNK, interpret: bool | None = None,
                                num_warps: int | None = None, state: str = "lanes",
                                walk: bool = False) -> tuple[DynamicSchedule, MemoryProfile]:
    """:func:`pallas_dynamic_schedule` and SPEC §3's memory of its schedule: the schedule and
    its :class:`~gsched.costmodel.memory.MemoryProfile`, bit for bit the loop's and
    :func:`~gsched.costmodel.memory.peak_memory`'s. The kernel with one chromosome per lane
    (``state`` ``"lanes"``) accounts the memory as it schedules (decoder
    ``"pallas_lanes_fused"``); with ``walk``, the kernel at ``state`` only schedules and the
    walk follows it in the same branch of the width switch
    (:func:`~gsched.costmodel.pallas_decode.walked`)."""
    if walk:
        return at_running_width(walked(_dynamic_schedule, lambda s: s.schedule), graph, keys,
                                placement, params, num_devices, scheduler=scheduler,
                                chunk=chunk, interpret=interpret, num_warps=num_warps,
                                state=state)
    if state != "lanes":
        raise ValueError(f"only the 'lanes' kernel accounts memory for {scheduler!r}, not the "
                         f"{state!r} kernel")
    return at_running_width(_dynamic_schedule, graph, keys, placement, params, num_devices,
                            scheduler=scheduler, chunk=chunk, interpret=interpret,
                            num_warps=num_warps, state="lanes", peaks=True)


def _dynamic_schedule(graph: PaddedGraph, keys: jnp.ndarray, placement: Placement,
                      params: CostParams, *, width: int, num_devices: int, scheduler: str,
                      chunk: int, interpret: bool | None, num_warps: int | None, state: str,
                      peaks: bool = False):
    """``(schedule, memory profile or None)`` of the event-driven kernel at ``state`` and
    ``width`` (with ``peaks``, the lane kernel accounting as it schedules)."""
    if scheduler not in ("priority", "fifo"):
        raise ValueError(f"the event-driven kernel runs 'priority' or 'fifo', got {scheduler!r}")
    slots, k, rows, lanes, duration, unit, runtime_bound = dynamic_inputs(
        graph, keys, placement, params, num_devices, chunk, width)
    fifo = scheduler == "fifo"
    table, lane_state = slots.successor, ()
    stream, is_input, source = lanes
    if state == "lanes":  # each slot's stream and source device go with its row
        rows = jnp.concatenate([stream[:, None], source[:, None], rows], axis=1)
        peak_kwargs = {}
        if peaks:
            rows, table, peak_kwargs, memory_unit = with_peak_tables(
                graph, placement, slots.item, rows, table, num_devices, chunk)
        run = batched_kernel(lanes_dynamic_kernel, 3, k, chunk, interpret,
                             ChromosomePerLane(dynamic_lanes_memory, num_warps),
                             num_devices=num_devices, fifo=fifo, **peak_kwargs)
    elif state == "registers" and not peaks:
        run = batched_kernel(_dynamic_kernel, 3, k, chunk, interpret,
                             ProgramPerChromosome(num_warps), fifo=fifo)
        lane_state = (stream[None], is_input[None])
    elif state == "dense" and not peaks:
        run = batched_kernel(block_schedule, 3, k, chunk, interpret, WholeBatch(), fifo=fifo,
                             num_devices=num_devices)
        lane_state = (stream[None],)
    else:
        raise ValueError(f"no {state!r} event-driven kernel" + (" accounts memory" * peaks))
    order, start_hi, start_lo, tail = (x[0] for x in run(
        slots.word[None], rows[None], table[None], slots.count[None], *lane_state))
    taken = tail[2]
    position, items = positions(slots, order, taken)  # by item; by step
    at = jnp.maximum(position, 0)
    begin = fp.Fixed(jnp.where(position >= 0, start_hi[at], 0),
                     jnp.where(position >= 0, start_lo[at], 0))
    schedule = timed_schedule(position, taken, fp.Fixed(tail[:1], tail[1:2]), begin, duration,
                              unit, runtime_bound, order=items)
    if not peaks:
        return schedule, None
    return schedule, memory_profile(fp.Fixed(tail[4::2], tail[5::2]), memory_unit,
                                    params.capacity)


def fused_schedule(graph: PaddedGraph, keys: jnp.ndarray, placement: Placement,
                   params: CostParams, num_devices: int, scheduler: str, chunk: int = KERNEL_CHUNK,
                   interpret: bool | None = None, num_warps: int | None = None,
                   state: str = "registers", programs: int | None = None) -> DynamicSchedule:
    """The fused kernel of ``scheduler``: :func:`pallas_dynamic_schedule` for ``"priority"`` /
    ``"fifo"``, :func:`~gsched.costmodel.pallas_decode.pallas_schedule` for ``"list"`` (its
    schedule with ``start`` / ``end`` None: the list scheduler keeps no times). ``state``:
    ``"memory"`` runs the list scheduler's :mod:`gsched.costmodel.pallas_memory` kernel (the
    list scheduler only); ``"lanes"`` the one-chromosome-per-lane kernels
    (:mod:`gsched.costmodel.pallas_lanes`, :mod:`gsched.costmodel.pallas_lanes_dynamic`);
    ``programs``: the list lane kernel's most programs (:func:`~gsched.costmodel.
    pallas_decode.pallas_schedule`)."""
    if scheduler == "list":
        return DynamicSchedule(pallas_schedule(graph, keys, placement, params, num_devices,
                                               chunk, interpret, num_warps, state, programs),
                               None, None)
    if programs is not None:
        raise ValueError(f"programs applies to the list lane kernel, not {scheduler!r}")
    check_event_driven_state(state, scheduler)
    return pallas_dynamic_schedule(graph, keys, placement, params, num_devices, scheduler,
                                   chunk, interpret, num_warps, state)


def check_event_driven_state(state: str, scheduler: str) -> None:
    """Raises unless ``state`` names a kernel that schedules ``"priority"`` / ``"fifo"``
    (``"registers"``, ``"lanes"`` or ``"dense"``; the others run the list scheduler only)."""
    if state not in ("registers", "lanes", "dense"):
        raise ValueError(f"the {state!r} kernel runs the list scheduler only, not {scheduler!r}")


def fused_schedule_and_memory(graph: PaddedGraph, keys: jnp.ndarray, placement: Placement,
                              params: CostParams, num_devices: int, scheduler: str,
                              chunk: int = KERNEL_CHUNK, interpret: bool | None = None,
                              num_warps: int | None = None, state: str = "memory",
                              walk: bool = False) -> tuple[DynamicSchedule, MemoryProfile]:
    """The fused kernel of ``scheduler`` and SPEC §3's memory of its schedule: the list
    scheduler's :func:`~gsched.costmodel.pallas_decode.pallas_schedule_and_memory` at ``state``
    (its schedule with ``start`` / ``end`` None), :func:`dynamic_schedule_and_memory` for
    ``"priority"`` / ``"fifo"``. The kernel accounts the memory as it schedules (for
    ``"priority"`` / ``"fifo"`` only ``state`` ``"lanes"`` does), or with ``walk`` the kernel
    at ``state`` (:func:`fused_schedule`'s) only schedules and the walk follows it inside the
    width switch, over the width's steps."""
    if scheduler == "list":
        schedule, memory = pallas_schedule_and_memory(graph, keys, placement, params,
                                                      num_devices, chunk, interpret, num_warps,
                                                      state, walk)
        return DynamicSchedule(schedule, None, None), memory
    if walk:
        check_event_driven_state(state, scheduler)
    return dynamic_schedule_and_memory(graph, keys, placement, params, num_devices, scheduler,
                                       chunk, interpret, num_warps, state, walk)


def fused_inputs(graph: PaddedGraph, keys: jnp.ndarray, placement: Placement,
                 params: CostParams, num_devices: int, scheduler: str,
                 chunk: int = KERNEL_CHUNK) -> tuple:
    """What :func:`fused_schedule` computes before its kernel (for profiling): the prologue's
    arrays (:func:`~gsched.costmodel.pallas_decode.list_inputs`' or :func:`dynamic_inputs`',
    without the static ``k``)."""
    prologue = list_inputs if scheduler == "list" else dynamic_inputs
    slots, _, *arrays = prologue(graph, keys, placement, params, num_devices, chunk)
    return (slots, *arrays)


def _dynamic_kernel(word_ref, rows_ref, successor_ref, stream_ref, input_ref, order_ref,
                    start_hi_ref, start_lo_ref, tail_ref, *, fifo: bool, chunk: int, k: int):
    """One chromosome's event-driven schedule: ``rows [V_p, 4 + chunk]`` (duration hi, lo,
    successor columns by slot), lanes ``stream`` / ``input [V_p]`` → ``order``, ``start`` hi /
    lo ``[V_p]`` by step, ``tail`` (makespan hi, lo, steps taken, 0)."""
    vp = word_ref.shape[0]
    lane = lax.broadcasted_iota(jnp.int32, (vp,), 0)
    stream = stream_ref[...]
    is_input = input_ref[...] != 0
    zeros = jnp.zeros((vp,), jnp.int32)

    def masked_lexmin(mask, *columns):
        """The lexicographic minimum of ``columns`` over ``mask`` (``BIG``s if empty)."""
        return lexmin([jnp.where(mask, column, BIG) for column in columns])

    def pick(word, ready, free):
        """The next stream and its start: min (max(free, ready), stream) over known lanes."""
        earliest = fp.maximum(ready, free)
        return masked_lexmin(word < (1 << k), earliest.hi, earliest.lo, stream)

    def step(carry):
        s, start_hi, start_lo, on, word, ready_hi, ready_lo, free_hi, free_lo, end_hi, end_lo \
            = carry
        start = fp.Fixed(start_hi, start_lo)
        candidate = ((word < (1 << k)) & (stream == on)
                     & ~fp.greater(fp.Fixed(ready_hi, ready_lo), start))
        keys = (jnp.where(is_input, -1, ready_hi), jnp.where(is_input, 0, ready_lo)) \
            if fifo else ()
        best = masked_lexmin(candidate, *keys, lane)[-1]
        order_ref[s] = best  # scalar stores, never read back
        start_hi_ref[s] = start_hi
        start_lo_ref[s] = start_lo
        duration_hi, duration_lo, *columns = (rows_ref[best, column]
                                              for column in range(4 + chunk))
        end = fp.add(start, fp.Fixed(duration_hi, duration_lo), TIME_LO_BITS)
        word, ready = walk_successors(successor_ref, lane, k, columns, end,
                                      jnp.where(lane == best, NEVER, word),
                                      fp.Fixed(ready_hi, ready_lo))
        mine = stream == on
        free = fp.Fixed(jnp.where(mine, end.hi, free_hi), jnp.where(mine, end.lo, free_lo))
        latest = fp.maximum(fp.Fixed(end_hi, end_lo), end)
        return (s + 1, *pick(word, ready, free), word, ready.hi, ready.lo, free.hi, free.lo,
                latest.hi, latest.lo)

    word = word_ref[...]
    none = fp.Fixed(zeros, zeros)
    zero = jnp.int32(0)
    carry = lax.while_loop(lambda c: c[1] < BIG, step,
                           (zero, *pick(word, none, none), word, zeros, zeros, zeros, zeros,
                            zero, zero))
    tail_ref[0] = carry[-2]  # the makespan: the latest end
    tail_ref[1] = carry[-1]
    tail_ref[2] = carry[0]
    tail_ref[3] = zero
