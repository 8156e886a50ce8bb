"""The cost model: chromosome → placement, schedule, peak memory and runtime (SPEC §2–§4, §8).

``evaluate`` is pure and written for one chromosome on one padded graph; ``evaluate_population``
and ``evaluate_batch`` are its ``vmap``s. ``score`` turns an evaluation into the scalar an
optimizer minimizes. Host-side wrappers live in :mod:`gsched.costmodel.host`.

The static keyword ``scheduler`` picks the schedule: ``"list"`` (SPEC §2–§4, the priority list
schedule of :mod:`gsched.costmodel.schedule`, the default) or ``"priority"`` / ``"fifo"`` (SPEC
§8.2's event-driven schedulers, :mod:`gsched.costmodel.dynamic`); every entry point compiles once
per bucket, number of devices and scheduler. On a CPU, with the list scheduler, op buckets of
up to ``dense.DENSE_MAX_OPS`` ops with one device are scheduled by
:mod:`gsched.costmodel.dense`, and up to ``dense.DENSE_MULTI_MAX_OPS`` with ``D ≥ 2`` by
:mod:`gsched.costmodel.dense_multi`, instead of the ready-tree loop (the same results bit for
bit, faster; chosen statically by bucket, ``D`` and backend, so still one compile per bucket;
:func:`evaluate_with_decoder` forces either, for comparisons); there §8.2's event-driven
schedulers use their own loop. The static keyword ``fusion``
turns on SPEC §8.3 (chromosomes ``N`` keys longer; :mod:`gsched.costmodel.fusion` contracts each
chromosome's graph before scheduling). SPEC §8.1's roofline parameters and §8.3's
``fusion_capacity`` are dynamic (``CostParams``) and apply to every scheduler.
On a GPU every scheduler (any ``D``) runs as one fused Pallas kernel (same results bit for
bit): from ``LANES_MIN_CHROMOSOMES`` chromosomes per call with one chromosome per lane
(``decoder="pallas_lanes"``, the fastest on an H200 there): the list scheduler's
:mod:`gsched.costmodel.pallas_lanes`, §8.2's :mod:`gsched.costmodel.pallas_lanes_dynamic`;
below (on buckets up to ``SMALL_SLOTS``) with one per program: the list kernel with its lanes
in memory (``"pallas_memory"``, :mod:`gsched.costmodel.pallas_memory`), §8.2's register
kernel (``"pallas"``, :mod:`gsched.costmodel.pallas_dynamic`). The others only when asked
for: the list register kernel (``"pallas"``, :mod:`gsched.costmodel.pallas_decode`) and the
kernels with SPEC §3's memory accounted inside them (``"pallas_fused"``, ``"pallas_lanes_fused"``:
:mod:`gsched.costmodel.pallas_peaks`; slower than the walk after the kernel on an H200). The list
scheduler's kernel for TPUs (:mod:`gsched.costmodel.pallas_tpu`, Mosaic, SPEC §3 accounted
inside) likewise only when asked for (``decoder="pallas_tpu"``): on a TPU "auto" runs the loop.
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp

from gsched.core.padding import PaddedGraph
from gsched.costmodel.dense import (
    dense_applies,
    dense_order,
    dense_schedule,
    initial_words,
    successor_bits,
)
from gsched.costmodel.dense_multi import (
    SUCCESSOR_FIELDS,
    dense_multi_order,
    dense_multi_schedule,
    item_rows,
    multi_start,
)
from gsched.costmodel.dynamic import dynamic_init, dynamic_result, dynamic_step
from gsched.costmodel.fusion import contract, fusion_roots
from gsched.costmodel.memory import (
    multi_device_peak_memory,
    peak_memory,
    single_device_peak_memory,
)
from gsched.costmodel.pallas_decode import KERNEL_CHUNK, pallas_applies, slot_bound
from gsched.costmodel.pallas_dynamic import fused_schedule_and_memory
from gsched.costmodel.params import (
    OBJECTIVES,
    CostParams,
    Objective,
    check_chunk,
    check_fusion,
    check_scheduler,
)
from gsched.costmodel.schedule import (
    LOOP_CHUNK,
    decode_placement,
    schedule_init,
    schedule_result,
    schedule_step,
)


class Evaluation(NamedTuple):
    """Everything the cost model says about one chromosome (padded shapes)."""

    placement: jnp.ndarray  # [N] int32 device per op
    order: jnp.ndarray  # [V] int32 item per step (−1 after the last); see ``item_to_tuple``
    num_steps: jnp.ndarray  # [] int32
    device_peaks: jnp.ndarray  # [D] float32
    peak_memory: jnp.ndarray  # [] float32
    runtime: jnp.ndarray  # [] float32
    feasible: jnp.ndarray  # [] bool: every device peak ≤ capacity
    excess: jnp.ndarray  # [] float32: Σ_d max(0, peak_d − capacity)
    runtime_bound: jnp.ndarray  # [] float32: an upper bound on any schedule's runtime
    # Dynamic schedulers only (``None`` for "list"): per item (padded item ids, like ``order``)
    start: jnp.ndarray | None = None  # [V] float32 start time, −1 for items that never run
    end: jnp.ndarray | None = None  # [V] float32 end time, −1 for items that never run
    # Fusion only (``None`` without): the root of each op's fusion group, −1 for padding
    fusion: jnp.ndarray | None = None  # [N] int32


def _lift(fn, graph_batched: tuple[bool, ...]):
    """vmaps ``fn(graph, pinned, params, x)`` over leading axes of ``x``; at each level the
    graph (and ``pinned``) is batched too when ``graph_batched`` says so (outermost first)."""
    for batched in reversed(graph_batched):
        axis = 0 if batched else None
        fn = jax.vmap(fn, in_axes=(axis, axis, None, 0))
    return fn


def _evaluate(graph: PaddedGraph, pinned, params: CostParams, keys: jnp.ndarray,
              num_devices: int, chunk: int, graph_batched: tuple[bool, ...],
              scheduler: str = "list", fusion: bool = False,
              decoder: str = "auto") -> Evaluation:
    """Evaluates ``keys [*batch, L]``. The schedule's ``while_loop`` runs *outside* the vmaps
    with an unbatched predicate ("any chromosome unfinished"), so the loop state is updated in
    place instead of being copied by a per-iteration select, as vmap-of-while_loop would do.

    With ``fusion`` each chromosome first contracts its graph (:mod:`gsched.costmodel.fusion`);
    the contracted graph, of the same bucket, is what the schedule and the memory walk read.

    On a CPU, with the list scheduler, buckets of up to ``dense.DENSE_MAX_OPS`` ops with one
    device are scheduled by :mod:`gsched.costmodel.dense`, and up to
    ``dense.DENSE_MULTI_MAX_OPS`` with ``D ≥ 2`` by :mod:`gsched.costmodel.dense_multi` (same
    results, faster; a static choice, ``dense.dense_applies``); ``decoder`` ``"dense"`` /
    ``"loop"`` forces one (:func:`evaluate_with_decoder`)."""
    check_scheduler(scheduler)
    check_chunk(chunk)
    fusion = check_fusion(fusion)
    dense = _use_dense(graph.bucket, num_devices, scheduler, decoder)
    dynamic = scheduler != "list"
    base = graph.bucket.chromosome_length(num_devices)
    want = graph.bucket.chromosome_length(num_devices, fusion)
    if keys.shape[-1] != want:
        layout = "N·D + N + T·D + N (fusion on)" if fusion else "N·D + N + T·D"
        raise ValueError(f"chromosome length {keys.shape[-1]} != {want} = {layout} of the "
                         f"padded bucket {tuple(graph.bucket)} with D = {num_devices}")

    def decode(g, pin, prm, k):
        """(placement, the graph to schedule, fusion roots or None) of one chromosome."""
        placement, root = decode_placement(g, k[:base], num_devices, pin), None
        if fusion:  # members keep their (root's) device; transfers are the kernels'
            root = fusion_roots(g, placement.device, k[base:], prm.fusion_capacity)
            g = contract(g, root)
            placement = decode_placement(g, k[:base], num_devices, pin)._replace(
                device=placement.device)
        return placement, g, root

    def evaluation(g, placement, root, schedule, memory, start=None, end=None):
        # Durations whose sum overflows float32 have no exact times (fixedpoint.choose_unit):
        # the runtime is +inf, and so is every time of an item that runs.
        timed = jnp.isfinite(schedule.runtime_bound)
        if start is not None:
            start, end = (jnp.where(timed | (x < 0), x, jnp.inf) for x in (start, end))
        return Evaluation(
            placement=jnp.where(g.op_mask, placement.device, -1),
            order=schedule.order,
            num_steps=schedule.num_steps,
            device_peaks=memory.device_peaks,
            peak_memory=memory.peak_memory,
            runtime=jnp.where(timed, schedule.runtime, jnp.inf),
            feasible=memory.feasible,
            excess=memory.excess,
            runtime_bound=schedule.runtime_bound,
            start=start,
            end=end,
            fusion=None if root is None else jnp.where(g.op_mask, root, -1),
        )

    graph, params = jax.tree.map(jnp.asarray, (graph, params))
    if dense and num_devices == 1:
        return _evaluate_dense(graph, pinned, params, keys, graph_batched, fusion, base, decode,
                               evaluation)
    if dense:
        return _evaluate_dense_multi(graph, pinned, params, keys, num_devices, graph_batched,
                                     fusion, base, decode, evaluation)
    kernel = _fused_decoder(decoder, scheduler, math.prod(keys.shape[:-1]),
                            slot_bound(*graph.bucket, num_devices))
    if kernel:  # one fused kernel per chromosome, vmapped into a grid
        chunk = KERNEL_CHUNK if chunk is None else chunk

        def fused(g, pin, prm, k):
            k = jnp.asarray(k, jnp.float32)
            placement, program, root = decode(g, pin, prm, k)
            # SPEC §3 accounted in the kernel, or walked after it inside its width's branch
            walk = kernel not in ACCOUNTING_STATE
            (schedule, start, end), memory = fused_schedule_and_memory(
                program, k[:base], placement, prm, num_devices, scheduler, chunk,
                state=KERNEL_STATE[kernel] if walk else ACCOUNTING_STATE[kernel], walk=walk)
            return evaluation(g, placement, root, schedule, memory, start, end)

        return _lift(fused, graph_batched)(graph, pinned, params, keys)

    chunk = LOOP_CHUNK if chunk is None else chunk

    def init(g, pin, prm, k):
        k = jnp.asarray(k, jnp.float32)
        placement, g, root = decode(g, pin, prm, k)
        init_loop = dynamic_init if dynamic else schedule_init
        return (placement, g, root), init_loop(g, k[:base], placement, prm, num_devices)

    def step(g, pin, prm, tables_and_state):
        tables, state = tables_and_state
        if dynamic:
            return tables, dynamic_step(tables, state, scheduler, chunk)
        return tables, schedule_step(tables, state, num_devices, chunk)

    def finish(g, pin, prm, x):
        (placement, program, root), (tables, state) = x
        start = end = None
        if dynamic:
            schedule, start, end = dynamic_result(tables, state)
        else:
            schedule = schedule_result(tables, state)
        memory = peak_memory(program, placement, schedule, prm.capacity, num_devices)
        return evaluation(g, placement, root, schedule, memory, start, end)

    aux, loop = _lift(init, graph_batched)(graph, pinned, params, keys)
    batched_step = _lift(step, graph_batched)
    loop = jax.lax.while_loop(lambda x: ~jnp.all(x[1].done),
                              lambda x: batched_step(graph, pinned, params, x), loop)
    return _lift(finish, graph_batched)(graph, pinned, params, (aux, loop))


def _evaluate_dense(graph: PaddedGraph, pinned, params: CostParams, keys: jnp.ndarray,
                    graph_batched: tuple[bool, ...], fusion: bool, base: int, decode,
                    evaluation) -> Evaluation:
    """:func:`_evaluate` with one device and the list scheduler, by :mod:`gsched.costmodel.dense`:
    per chromosome (vmapped) the placement, fusion and initial words; then the dense loop on
    the flattened batch; the memory walk per graph with its chromosomes explicit (per
    chromosome with fusion); then per chromosome the schedule and the evaluation."""
    n = graph.bucket.num_ops
    batch = keys.shape[:-1]

    def init(g, pin, prm, k):
        k = jnp.asarray(k, jnp.float32)
        placement, program, root = decode(g, pin, prm, k)
        words, item_at_rank = initial_words(program, k[:base])
        # Without fusion the program is the graph itself: not kept per chromosome, so that
        # everything derived from it stays per graph under the vmaps.
        return ((placement, program if fusion else None, root),
                (words, item_at_rank, jnp.sum(program.op_mask, dtype=jnp.int32)))

    aux, (words, item_at_rank, steps) = _lift(init, graph_batched)(graph, pinned, params, keys)

    def flat(x):
        return x.reshape((-1,) + x.shape[len(batch):])

    if fusion:  # each chromosome has its own contracted graph
        program = aux[1]
        steps_taken = dense_order(flat(words), flat(item_at_rank), flat(steps), pairs=tuple(
            flat(x) for x in (program.pair_mask, program.pair_producer, program.pair_consumer)))
    else:  # one table per graph
        table, row_base = _graph_tables(successor_bits, graph, graph_batched, batch)
        steps_taken = dense_order(flat(words), flat(item_at_rank), flat(steps), table=table,
                                  row_base=row_base)
    position, order = (x.reshape(batch + (n,)) for x in steps_taken)
    memory = _per_graph(functools.partial(single_device_peak_memory, capacity=params.capacity),
                        graph, aux[1], graph_batched, batch, order, position)

    def finish(g, pin, prm, x):
        (placement, program, root), position, order, memory = x
        program = g if program is None else program
        schedule = dense_schedule(program, placement, prm, position, order)
        return evaluation(g, placement, root, schedule, memory)

    return _lift(finish, graph_batched)(graph, pinned, params, (aux, position, order, memory))


def _per_graph(fn, graph: PaddedGraph, programs: PaddedGraph | None,
               graph_batched: tuple[bool, ...], batch: tuple[int, ...], *xs):
    """``fn(graph, *xs)`` with the chromosomes of each graph explicit: ``xs`` (leading axes
    ``batch``, graph-batched ones first) regrouped per graph, or, when every chromosome has its
    own graph (``programs``, fusion), per chromosome (one each, vmapped); the result with
    leading axes ``batch`` again (the memory walks, :mod:`gsched.costmodel.memory`)."""
    lead = sum(graph_batched)
    if programs is not None:
        graphs, lead, per_graph = jax.tree.map(
            lambda x: x.reshape((-1,) + x.shape[len(batch):]), programs), 1, (-1, 1)
        fn = jax.vmap(fn)
    else:
        graphs, per_graph = graph, batch[:lead] + (-1,)
        for _ in range(lead):
            fn = jax.vmap(fn)
    out = fn(graphs, *jax.tree.map(lambda x: x.reshape(per_graph + x.shape[len(batch):]), xs))
    return jax.tree.map(lambda x: x.reshape(batch + x.shape[lead + 1:]), out)


def _graph_tables(rows_of, graph: PaddedGraph, graph_batched: tuple[bool, ...],
                  batch: tuple[int, ...]) -> tuple[jnp.ndarray, jnp.ndarray]:
    """``rows_of(graph) [R, W]`` of every graph, stacked ``[G·R, W]``, and the row where each
    chromosome's graph starts, ``[B]`` (the batch flattened; graph-batched axes must lead)."""
    lead = sum(graph_batched)  # graph-batched axes, then the chromosomes'
    if tuple(graph_batched) != (True,) * lead + (False,) * (len(batch) - lead):
        raise ValueError(f"graph-batched axes must lead, got {graph_batched}")
    table, graph_index = rows_of, jnp.zeros(batch, jnp.int32)
    for axis in range(lead):
        table = jax.vmap(table)
        graph_index = graph_index * batch[axis] + jax.lax.broadcasted_iota(jnp.int32, batch, axis)
    table = table(graph)
    return (table.reshape(-1, table.shape[-1]),
            (graph_index * table.shape[-2]).reshape(-1))


def _evaluate_dense_multi(graph: PaddedGraph, pinned, params: CostParams, keys: jnp.ndarray,
                          num_devices: int, graph_batched: tuple[bool, ...], fusion: bool,
                          base: int, decode, evaluation) -> Evaluation:
    """:func:`_evaluate` with ``D ≥ 2`` and the list scheduler, by
    :mod:`gsched.costmodel.dense_multi`: per chromosome (vmapped) the placement, fusion and the
    schedule's start; the dense loop on the flattened batch; SPEC §3's memory walk per graph
    with its chromosomes explicit (per chromosome with fusion); then per chromosome the
    :class:`Schedule` and the evaluation."""
    batch = keys.shape[:-1]

    def init(g, pin, prm, k):
        k = jnp.asarray(k, jnp.float32)
        placement, program, root = decode(g, pin, prm, k)
        start = multi_start(program, k[:base], placement, prm, num_devices)
        # Without fusion the program is the graph itself (kept per graph, see _evaluate_dense).
        rows = tuple(getattr(program, f) for f in SUCCESSOR_FIELDS) if fusion else ()
        return (placement, program if fusion else None, root), start, rows

    aux, start, rows = _lift(init, graph_batched)(graph, pinned, params, keys)

    def flat(x):
        return x.reshape((-1,) + x.shape[len(batch):])

    start = jax.tree.map(flat, start)
    if fusion:  # each chromosome has its own contracted graph
        items, free = dense_multi_order(start, num_devices,
                                        successors=tuple(flat(x) for x in rows))
    else:
        table, row_base = _graph_tables(item_rows, graph, graph_batched, batch)
        items, free = dense_multi_order(start, num_devices, table=table, row_base=row_base)
    start, items, free = jax.tree.map(lambda x: x.reshape(batch + x.shape[1:]),
                                      (start, items, free))
    num_items = graph.bucket.num_ops + graph.bucket.num_tensors * num_devices

    memory = _per_graph(functools.partial(multi_device_peak_memory, capacity=params.capacity),
                        graph, aux[1], graph_batched, batch, aux[0], items)

    def finish(g, pin, prm, x):
        (placement, _, root), start, items, free, memory = x
        schedule = dense_multi_schedule(start, items, free, num_items)
        return evaluation(g, placement, root, schedule, memory)

    return _lift(finish, graph_batched)(graph, pinned, params, (aux, start, items, free, memory))


def evaluate(graph: PaddedGraph, keys: jnp.ndarray, params: CostParams = CostParams(),
             *, num_devices: int, pinned: jnp.ndarray | None = None,
             chunk: int | None = None, scheduler: str = "list",
             fusion: bool = False) -> Evaluation:
    """Decodes and scores one chromosome ``keys`` (``[N·D + N + T·D]``, padded layout, ``+ N``
    fusion keys with ``fusion``).

    ``scheduler``: ``"list"`` (SPEC §2–§4), ``"priority"`` or ``"fifo"`` (SPEC §8.2; the
    evaluation then also holds each item's ``start`` and ``end`` time). ``fusion``: SPEC §8.3
    (the evaluation then holds each op's group ``root``; a fused kernel is the item of its
    root). ``chunk``: successor entries walked per iteration of the schedule loop or kernel
    (static; results never depend on it; ``None``: the decoder's default, ``LOOP_CHUNK`` for
    the loops, ``KERNEL_CHUNK`` for the fused kernels). Pure and traceable;
    prefer :func:`evaluate_population` / :func:`evaluate_batch` for many chromosomes
    (``jax.vmap`` of this function works but copies the loop state every step).
    """
    return _evaluate(graph, pinned, params, keys, num_devices, chunk, (), scheduler, fusion)


_STATIC = ("num_devices", "chunk", "scheduler", "fusion")


@functools.partial(jax.jit, static_argnames=_STATIC)
def evaluate_population(graph: PaddedGraph, keys: jnp.ndarray,
                        params: CostParams = CostParams(), *, num_devices: int,
                        pinned: jnp.ndarray | None = None, chunk: int | None = None,
                        scheduler: str = "list", fusion: bool = False) -> Evaluation:
    """``keys [P, L]`` on one graph → an :class:`Evaluation` with leading axis ``[P]``.

    ``pinned`` (``[N]`` int32, −1 = free) fixes ops to devices; ``scheduler`` and ``fusion`` as
    in :func:`evaluate` (static: one compile per bucket, ``num_devices``, scheduler and fusion).
    """
    return _evaluate(graph, pinned, params, keys, num_devices, chunk, (False,), scheduler,
                     fusion)


# Splitting each call's chromosomes over a mesh costs a hand-off between the devices per call:
# BRKGA 5K on one graph over the 2-core CPU's two cores (90 chromosomes per generation, 45 per
# core) ran 0.47x on 30 ops, 0.64-0.74x on 60 (64-op bucket), 1.02-1.17x on 100 (128),
# 1.14-1.41x on 200 (256), 1.13-1.30x on 500 (512) the unsplit search's speed, and compiling
# took ~0-2 s longer: docs/benchmarks.md, session 39.
POPULATION_SPLIT_MIN_OPS = 256


@functools.partial(jax.jit, static_argnames=_STATIC)
def evaluate_batch(graphs: PaddedGraph, keys: jnp.ndarray, params: CostParams = CostParams(),
                   *, num_devices: int, pinned: jnp.ndarray | None = None,
                   chunk: int | None = None, scheduler: str = "list",
                   fusion: bool = False) -> Evaluation:
    """``graphs`` with leading axis ``[B]``, ``keys [B, P, L]`` → leading axes ``[B, P]``.

    ``pinned``, if given, is ``[B, N]``; ``scheduler`` and ``fusion`` as in :func:`evaluate`.

    Traced under a mesh (``jax.set_mesh``, as :func:`gsched.optimize` does with ``mesh``), the
    work is split over the mesh's first axis with ``shard_map``: the graphs when ``B`` divides
    evenly, else each graph's chromosomes when ``P`` does and the bucket has at least
    :data:`POPULATION_SPLIT_MIN_OPS` ops (one graph, say): each device runs its own schedule
    loop on its share, with no per-step communication (on a CPU with one XLA device per core,
    one loop per core). The results are the same.
    """
    mesh = jax.sharding.get_abstract_mesh()
    if not mesh.empty:
        size = mesh.shape[mesh.axis_names[0]]
        split = ("graphs" if graphs.op_mask.shape[0] % size == 0 else
                 "population" if keys.shape[1] % size == 0
                 and graphs.bucket.num_ops >= POPULATION_SPLIT_MIN_OPS else None)
        if split:
            pinned = jnp.full(graphs.op_mask.shape, -1, jnp.int32) if pinned is None else pinned
            return _shard_mapped(mesh, mesh.axis_names[0], split, (True, False), num_devices,
                                 chunk, scheduler, fusion)(graphs, keys, params, pinned)
    return _evaluate(graphs, pinned, params, keys, num_devices, chunk, (True, False),
                     scheduler, fusion)


def _shard_mapped(mesh, axis: str, split: str, batched: tuple[bool, ...], num_devices: int,
                  chunk: int, scheduler: str, fusion: bool, decoder: str = "auto"):
    """``(graph, keys, params, pinned) -> Evaluation`` as a ``shard_map`` over ``mesh``'s
    ``axis`` (``batched`` as in :func:`_evaluate`): ``split`` ``"graphs"`` splits the leading
    axis of the graphs, their pinned ops and the keys (a batch of graphs); ``"population"``
    the keys' last batch axis, the chromosomes, with the graphs replicated. Each device runs
    its own schedule loop on its share."""
    spec = jax.sharding.PartitionSpec
    graph_spec = spec(axis) if split == "graphs" else spec()
    keys_spec = spec(axis) if split == "graphs" else spec(*(None,) * (len(batched) - 1), axis)

    def local(graph, keys, params, pinned):
        return _evaluate(graph, pinned, params, keys, num_devices, chunk, batched, scheduler,
                         fusion, decoder)

    return jax.shard_map(local, mesh=mesh, in_specs=(graph_spec, keys_spec, spec(), graph_spec),
                         out_specs=keys_spec, check_vma=False)


@functools.cache
def _sharded_population_fn(mesh: jax.sharding.Mesh, axis: str, num_devices: int, chunk: int,
                           scheduler: str, fusion: bool, decoder: str = "auto"):
    return jax.jit(_shard_mapped(mesh, axis, "population", (False,), num_devices, chunk,
                                 scheduler, fusion, decoder))


def evaluate_population_sharded(graph: PaddedGraph, keys: jnp.ndarray,
                                params: CostParams = CostParams(), *, num_devices: int,
                                mesh: jax.sharding.Mesh, axis: str | None = None,
                                pinned: jnp.ndarray | None = None,
                                chunk: int | None = None, scheduler: str = "list",
                                fusion: bool = False) -> Evaluation:
    """:func:`evaluate_population` with the population split over ``mesh``'s devices.

    Each device runs its own schedule loop on its share (no per-step communication), so on a
    CPU with ``--xla_force_host_platform_device_count=<cores>`` every core works on separate
    chromosomes. ``P`` must be divisible by the mesh size along ``axis`` (default: the mesh's
    first axis). Compiles once per (mesh, bucket, number of devices, scheduler, fusion).
    """
    return _sharded(graph, keys, params, num_devices, mesh, axis, pinned, chunk, scheduler, fusion,
                    "auto")


def _sharded(graph, keys, params, num_devices, mesh, axis, pinned, chunk, scheduler, fusion,
             decoder) -> Evaluation:
    check_scheduler(scheduler)
    fusion = check_fusion(fusion)
    _use_dense(graph.bucket, num_devices, scheduler, decoder)  # validates
    axis = axis or mesh.axis_names[0]
    if keys.shape[0] % mesh.shape[axis]:
        raise ValueError(f"population {keys.shape[0]} is not divisible by the {mesh.shape[axis]} "
                         f"devices of mesh axis {axis!r}")
    pinned = jnp.full(graph.op_mask.shape, -1, jnp.int32) if pinned is None else pinned
    fn = _sharded_population_fn(mesh, axis, num_devices, chunk, scheduler, fusion, decoder)
    return fn(graph, keys, jax.tree.map(jnp.asarray, params), pinned)


DECODERS = ("auto", "dense", "loop", "pallas", "pallas_memory", "pallas_lanes", "pallas_fused",
            "pallas_lanes_fused", "pallas_tpu")
# they need scheduler="list"
LIST_ONLY_DECODERS = ("pallas_memory", "pallas_fused", "pallas_tpu")
KERNEL_STATE = {"pallas": "registers", "pallas_memory": "memory",
                "pallas_lanes": "lanes",
                "dense": "dense"}  # then SPEC §3 walked (peak_memory); "dense": §8.2's only
ACCOUNTING_STATE = {"pallas_fused": "memory", "pallas_lanes_fused": "lanes",
                    "pallas_tpu": "tpu"}  # SPEC §3 in the kernel
# What replaces the loop on each backend (the CPU's otherwise), checked and timed against it:
# the fused kernels on a GPU; on a TPU, where "auto" keeps the loop until timed, the TPU kernel
# and the dense decodes; the dense decodes on a CPU.
BACKEND_DECODERS = {"gpu": ("pallas", "pallas_memory", "pallas_lanes", "pallas_fused",
                            "pallas_lanes_fused"),
                    "tpu": ("pallas_tpu", "dense"), "cpu": ("dense",)}


def _use_dense(bucket, num_devices: int, scheduler: str, decoder: str) -> bool:
    """Whether to schedule with :mod:`gsched.costmodel.dense` (``D = 1``) or
    :mod:`gsched.costmodel.dense_multi` (validates ``decoder``)."""
    if decoder not in DECODERS:
        raise ValueError(f"unknown decoder {decoder!r}; expected one of {DECODERS}")
    if decoder in LIST_ONLY_DECODERS and scheduler != "list":
        raise ValueError(f"the {decoder} decoder needs scheduler='list', got {scheduler!r}")
    return (decoder == "dense" and scheduler == "list") or (decoder == "auto" and dense_applies(
        bucket.num_ops, num_devices, scheduler, num_tensors=bucket.num_tensors))


# "auto" on a GPU below this many chromosomes per call, on buckets of at most SMALL_SLOTS
# items (per scheduler): the kernels with one chromosome per program instead of per lane. On
# an H200 at P = 512 (500 ops, D = 1 and 2; 2,000 ops, D = 2) the list kernel with its lanes in
# memory ran 1.4-2.2x the lane kernel's evaluations per second and §8.2's register kernel
# 2.2-2.8x theirs; at P = 4,096 the lane kernels already ran faster than the others do at
# P = 16,384 (docs/benchmarks.md, session 37). The bound between is untimed.
LANES_MIN_CHROMOSOMES = 2048
SMALL_SLOTS = {"list": 8192, "priority": 2048, "fifo": 2048}
# The list scheduler's kernel there (§8.2's: "pallas", the register kernel).
LIST_PER_PROGRAM = "pallas_memory"


def _fused_decoder(decoder: str, scheduler: str, chromosomes: int, slots: int) -> str | None:
    """The fused kernel's decoder to schedule with, or None for the loops: ``decoder`` if it
    names one (interpreted on a CPU; ``"dense"`` with §8.2's schedulers). For "auto" on a GPU
    (any ``D``; ``pallas_applies``): ``"pallas_lanes"``, one chromosome per lane (the list
    scheduler's :mod:`gsched.costmodel.pallas_lanes`: 1.8–2.1× the register kernel's
    evaluations per second at 500 ops, P = 16,384, on an H200, 58× at 10,000 ops; §8.2's
    :mod:`gsched.costmodel.pallas_lanes_dynamic`: 2.7–3.7× at 500 ops); but with fewer than
    ``LANES_MIN_CHROMOSOMES`` ``chromosomes`` in the call (graphs included) and at most
    ``SMALL_SLOTS[scheduler]`` ``slots`` (the bucket's ``V_p``), one chromosome per program:
    ``"pallas_memory"`` (list) or ``"pallas"`` (§8.2's). On a CPU, ``"dense"`` with §8.2's
    (:mod:`gsched.costmodel.dense_dynamic`: the event-driven kernel's step in plain JAX,
    chromosomes in blocks; 7.7–16.5× the loop's throughput at 500 and 2,000 ops on 2 cores).
    On a TPU "auto" keeps the loop: ``"pallas_tpu"`` runs one chromosome after another on a
    core, and no TPU has timed it against the loop yet (docs/design.md). Timings:
    docs/benchmarks.md."""
    if decoder.startswith("pallas") or (decoder == "dense" and scheduler != "list"):
        return decoder
    if decoder != "auto":
        return None
    if not pallas_applies():
        return "dense" if scheduler != "list" and jax.default_backend() == "cpu" else None
    if chromosomes < LANES_MIN_CHROMOSOMES and slots <= SMALL_SLOTS[scheduler]:
        return LIST_PER_PROGRAM if scheduler == "list" else "pallas"
    return "pallas_lanes"


@functools.partial(jax.jit, static_argnames=_STATIC + ("decoder", "batch"))
def _evaluate_decoder(graph, keys, params, pinned, *, num_devices, chunk, scheduler, fusion,
                      decoder, batch):
    return _evaluate(graph, pinned, params, keys, num_devices, chunk,
                     (True, False) if batch else (False,), scheduler, fusion, decoder)


def evaluate_with_decoder(graph: PaddedGraph, keys: jnp.ndarray,
                          params: CostParams = CostParams(), *, num_devices: int, decoder: str,
                          batch: bool = False, mesh: jax.sharding.Mesh | None = None,
                          axis: str | None = None, pinned: jnp.ndarray | None = None,
                          chunk: int | None = None, scheduler: str = "list",
                          fusion: bool = False) -> Evaluation:
    """:func:`evaluate_population` (or, with ``batch``, :func:`evaluate_batch`; with ``mesh``,
    :func:`evaluate_population_sharded`) with the schedule's decoder chosen explicitly, for
    comparing them (tests, benchmarks): ``"auto"`` (what the entry points do), ``"loop"`` (the
    ready-tree loop of :mod:`gsched.costmodel.schedule`), ``"dense"``
    (:mod:`gsched.costmodel.dense` with one device, :mod:`gsched.costmodel.dense_multi` with
    ``D ≥ 2``; the list scheduler, at any bucket size; with ``"priority"`` / ``"fifo"``,
    :mod:`gsched.costmodel.dense_dynamic`) or ``"pallas"``
    (:mod:`gsched.costmodel.pallas_decode` for the list scheduler,
    :mod:`gsched.costmodel.pallas_dynamic` for ``"priority"`` / ``"fifo"``; any ``D``; in
    Pallas' interpreter on a CPU, slow there), ``"pallas_memory"`` (the list scheduler's
    kernel with its lanes in memory, :mod:`gsched.costmodel.pallas_memory`),
    ``"pallas_fused"`` (that kernel accounting SPEC §3's memory as it schedules, instead of a
    walk after it: :mod:`gsched.costmodel.pallas_peaks`), ``"pallas_lanes"`` (one chromosome
    per lane: the list scheduler's kernel with a bit-set ready tree,
    :mod:`gsched.costmodel.pallas_lanes`; ``"priority"`` / ``"fifo"`` with a heap per stream,
    :mod:`gsched.costmodel.pallas_lanes_dynamic`), ``"pallas_lanes_fused"`` (that kernel accounting
    SPEC §3 as ``"pallas_fused"`` does) or ``"pallas_tpu"`` (the list scheduler's kernel for
    TPUs, accounting SPEC §3 too: :mod:`gsched.costmodel.pallas_tpu`). Every decoder gives the
    same results; with an event-driven scheduler "loop" runs
    :mod:`gsched.costmodel.dynamic`'s loop."""
    if mesh is not None:
        if batch:
            raise ValueError("a mesh shards one graph's population; batch must be False")
        return _sharded(graph, keys, params, num_devices, mesh, axis, pinned, chunk, scheduler,
                        fusion, decoder)
    return _evaluate_decoder(graph, keys, params, pinned, num_devices=num_devices, chunk=chunk,
                             scheduler=scheduler, fusion=fusion, decoder=decoder, batch=batch)


def score(evaluation: Evaluation, objective: Objective, params: CostParams) -> jnp.ndarray:
    """The value an optimizer minimizes (float32, any batch shape).

    ``peak_memory``: the peak itself (an infeasible peak exceeds the capacity, so it already
    ranks after every feasible one). ``runtime``: the runtime when feasible; otherwise
    ``2·B + 1 + (excess / capacity)·(B + 1)`` with ``B`` the evaluation's runtime bound (≥ any
    runtime), so every feasible solution scores strictly better than every infeasible one and
    a smaller excess scores better (SPEC §4; ties possible only through float32 rounding).
    """
    if objective == "peak_memory":
        return evaluation.peak_memory
    if objective != "runtime":
        raise ValueError(f"unknown objective {objective!r}; expected one of {OBJECTIVES}")
    bound = evaluation.runtime_bound
    ratio = evaluation.excess / jnp.asarray(params.capacity, jnp.float32)
    penalty = 2.0 * bound + 1.0 + ratio * (bound + 1.0)
    return jnp.where(evaluation.feasible, evaluation.runtime, penalty)


def order_keys(graph: PaddedGraph, op_order: jnp.ndarray, placement: jnp.ndarray,
               num_devices: int) -> jnp.ndarray:
    """A chromosome (padded layout) whose decoding gives a chosen placement and op order.

    ``op_order [N]`` lists ops in run order (padded ops anywhere after the real ones),
    ``placement [N]`` their devices. Op priorities fall with position; each transfer gets a
    priority just below its producer's, so transfers run as soon as their producer finishes
    (the convention for scoring explicit orders, e.g. from DP or heuristics). If ``op_order``
    is a topological order the decoded op order equals it exactly; otherwise it differs
    (compare with ``Evaluation.order``). Jittable; all priorities are distinct in float32.
    """
    n = op_order.shape[0]
    position = jnp.zeros(n, jnp.int32).at[op_order].set(jnp.arange(n, dtype=jnp.int32))
    op_priority = (2 * n - 2 * position).astype(jnp.float32) / (2 * n)
    xfer_priority = (2 * n - 2 * position[graph.tensor_producer] - 1).astype(jnp.float32) / (2 * n)
    affinity = jax.nn.one_hot(placement, num_devices, dtype=jnp.float32)
    return jnp.concatenate([affinity.reshape(-1), op_priority,
                            jnp.repeat(xfer_priority, num_devices)])
