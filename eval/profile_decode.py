"""Where an evaluation's time goes, stage by stage, for the decoder the backend uses.

Times prefixes of one population's evaluation (each its own jitted function, so XLA cannot drop the
work: every prefix returns what it computed): the placement decode; the placement and the loop
decoder's set-up (``schedule_init``, or ``dynamic_init`` for SPEC §8.2's schedulers: ranks of all
items, durations, CSR tables); the placement and the fused kernels' inputs, in three growing
prefixes: the running items ranked (``ranked_slots``), + the firing successor entries compacted
(``slot_tables``), + durations and the kernel's rows (``list_inputs`` / ``dynamic_inputs``), and for
the list scheduler those + the accounting inputs of the kernel that keeps SPEC §3's memory itself
(``pallas_peaks.peak_tables``), and the placement + the vmapped SPEC §3 walk the other decoders run
after their schedule, alone (over the steps of the kernels' width that runs, as the fused decoders
walk; items in index order: its work does not depend on the order); on a GPU, the kernel inputs and
the fused kernel with its result conversion (the register kernel, then the kernel with one
chromosome per lane, then that + the walk inside its branch of the width switch, as
``evaluate_population`` runs it on a GPU), and the whole ``pallas_lanes_fused`` (and for the list
scheduler ``pallas_fused``) schedule and memory; and the whole ``evaluate_population`` (+ SPEC §3's
memory walk; on a CPU with the loop or dense decoders). Differences to the first row are the
set-ups' costs, to the kernel's row the memory walk's. Beside each time, the bytes per evaluation
that XLA's cost analysis of the compiled prefix counts (its fusions' operands and results, on this
backend's fusion decisions; a Pallas kernel's own traffic is not counted): with a GPU's memory
bandwidth, a floor on the plain-JAX stages' time that needs no GPU::

    python -m eval.profile_decode --sizes 500 --devices 1,2 --population 16384
    python -m eval.profile_decode --sizes 500 --devices 2 --scheduler priority
    python -m eval.profile_decode --sizes 500 --devices 1,2,4 --population 1024  # CPU

``--compile-for`` compiles each stage instead of timing it, for this machine's CPU or for a GPU
described by XLA's target text (``eval/gpu_targets/``; JAX's CUDA plugin compiles for it
without the GPU, kernels included, ``docs/benchmarks.md``), and prints its launches and the
bytes per evaluation they touch at most (:mod:`gsched.harness.launches`): XLA GPU's own fusion
decisions where no GPU is lent::

    JAX_SKIP_CUDA_CONSTRAINTS_CHECK=1 JAX_PLATFORMS=cpu PYTHONPATH=.:CUDA_PLUGIN_DIR \
      python -m eval.profile_decode --sizes 500 --compile-for eval/gpu_targets/h100.pbtxt
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from typing import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from gsched.core.padding import bucket_for, pad_graph, pad_keys
from gsched.costmodel.evaluate import evaluate_population
from gsched.costmodel.dynamic import dynamic_init
from gsched.costmodel.memory import peak_memory
from gsched.costmodel.pallas_decode import (
    KERNEL_CHUNK,
    graph_lane_widths,
    lane_width_index,
    pallas_applies,
    ranked_slots,
    running_items,
    slot_tables,
)
from gsched.costmodel.pallas_dynamic import (
    fused_inputs,
    fused_schedule,
    fused_schedule_and_memory,
)
from gsched.costmodel.pallas_peaks import peak_tables
from gsched.costmodel.params import CostParams
from gsched.costmodel.schedule import (
    Schedule,
    decode_placement,
    item_devices,
    schedule_init,
)
from gsched.generators import random_computation_graph
from gsched.harness.benchmarks import parse_int_list
from gsched.harness.launches import Launch, launches, target_device
from gsched.infra.distributed import shapes_on
from gsched.infra.progress import log

PARAMS = CostParams(latency=0.1, bandwidth=16384.0)


def _timed(fn, *args, repeats: int) -> tuple[float, float, float]:
    """(compile + first call s, median steady-state call s, bytes its compiled program
    accesses by XLA's cost analysis: NaN where it gives none)."""
    fn = jax.jit(fn)
    t0 = time.perf_counter()
    jax.block_until_ready(fn(*args))
    first = time.perf_counter() - t0
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - t0)
    # Compiled once: the call above cached the executable this lowering finds.
    return first, statistics.median(times), _bytes_accessed(fn.lower(*args).compile())


def _bytes_accessed(compiled) -> float:
    """What XLA's cost analysis says ``compiled`` reads and writes in all (its fusions'
    operands and results; a Pallas kernel's own traffic is not in it), NaN if it says nothing."""
    analysis = compiled.cost_analysis()
    if isinstance(analysis, (list, tuple)):  # older JAX: one dict per program
        analysis = analysis[0] if analysis else None
    return float((analysis or {}).get("bytes accessed", float("nan")))


def stages(num_devices: int, chunk: int | None, base: int, scheduler: str = "list",
           kernels: bool = False, interpret: bool | None = None, whole: bool = True,
           width: int = 0):
    """The prefixes (module docstring), each ``(graph, keys, params) -> arrays``; ``base``: the
    SPEC §2 part of a padded chromosome; ``kernels``: with the fused kernels' rows (run with
    ``interpret``); ``whole``: with the whole ``evaluate_population``; ``width``: the index
    of the kernels' width the population runs at (:func:`graph_lane_widths`, widest first),
    whose steps the memory walk spans."""
    init_tables = schedule_init if scheduler == "list" else dynamic_init
    kernel_chunk = KERNEL_CHUNK if chunk is None else chunk

    def placement(g, keys, prm):
        return jax.vmap(lambda k: decode_placement(g, k[:base], num_devices))(keys)

    def init(g, keys, prm):
        def one(k):
            return init_tables(g, k[:base], decode_placement(g, k[:base], num_devices), prm,
                               num_devices)
        return jax.vmap(one)(keys)

    def ranking(g, keys, prm):
        def one(k):
            return ranked_slots(g, k[:base], decode_placement(g, k[:base], num_devices),
                                num_devices)[:4]
        return jax.vmap(one)(keys)

    def tables(g, keys, prm):
        def one(k):
            placement = decode_placement(g, k[:base], num_devices)
            return slot_tables(g, k[:base], placement,
                               item_devices(g, placement, num_devices)[2], num_devices,
                               kernel_chunk)[0]
        return jax.vmap(one)(keys)

    def slots(g, keys, prm):
        def one(k):
            return fused_inputs(g, k[:base], decode_placement(g, k[:base], num_devices), prm,
                               num_devices, scheduler, kernel_chunk)
        return jax.vmap(one)(keys)

    def schedule(state):
        def fn(g, keys, prm):
            def one(k):
                return fused_schedule(g, k[:base], decode_placement(g, k[:base], num_devices),
                                      prm, num_devices, scheduler, kernel_chunk, interpret,
                                      state=state)
            return jax.vmap(one)(keys)
        return fn

    def peak_inputs(g, keys, prm):
        def one(k):
            placement = decode_placement(g, k[:base], num_devices)
            inputs = fused_inputs(g, k[:base], placement, prm, num_devices, scheduler,
                                  kernel_chunk)
            return inputs, peak_tables(g, placement, inputs[0].item, num_devices, kernel_chunk)
        return jax.vmap(one)(keys)

    def walk(g, keys, prm):  # the order's values do not change the walk's work
        v = g.op_mask.shape[0] + g.tensor_mask.shape[0] * num_devices
        vp = graph_lane_widths(g, num_devices)[width]  # the kernels' bound on the steps
        every = jnp.arange(v, dtype=jnp.int32)
        schedule = Schedule(every, every % vp, jnp.int32(vp), jnp.float32(0), jnp.float32(0))
        return jax.vmap(lambda k: peak_memory(g, decode_placement(g, k[:base], num_devices),
                                              schedule, prm.capacity, num_devices,
                                              max_steps=vp))(keys)

    def fused(state, walk=False):
        def fn(g, keys, prm):
            def one(k):
                placement = decode_placement(g, k[:base], num_devices)
                return fused_schedule_and_memory(g, k[:base], placement, prm, num_devices,
                                                 scheduler, kernel_chunk, interpret,
                                                 state=state, walk=walk)
            return jax.vmap(one)(keys)
        return fn

    def population(g, keys, prm):
        return evaluate_population(g, keys, prm, num_devices=num_devices, chunk=chunk,
                                   scheduler=scheduler)

    rows = [("placement", placement), ("placement + loop set-up", init),
            ("placement + slot ranking", ranking), ("placement + slot tables", tables),
            ("placement + kernel inputs", slots)]
    if scheduler == "list":
        rows += [("placement + kernel inputs + peak tables", peak_inputs),
                 ("placement + memory walk alone", walk)]
    if kernels:
        rows += [("kernel inputs + kernel and result", schedule("registers")),
                 ("kernel inputs + lane kernel and result", schedule("lanes")),
                 ("+ memory walk in the kernel's branch", fused("lanes", walk=True))]
        if scheduler == "list":
            rows.append(("peak tables + kernel with memory (fused)", fused("memory")))
        rows.append(("peak tables + lane kernel with memory", fused("lanes")))
    return rows + ([("+ memory walk = evaluate_population", population)] if whole else [])


def _width_index(graph, keys, base: int, num_devices: int) -> int:
    """Which of the kernels' width branches (:func:`graph_lane_widths`, widest first) a
    population takes: the narrowest holding its most running items."""
    def count(g, k):
        return running_items(g, decode_placement(g, k[:base], num_devices))

    counts = jax.jit(jax.vmap(count, in_axes=(None, 0)))(graph, keys)
    return int(lane_width_index(counts, graph_lane_widths(graph, num_devices)))


def compiled_launches(fn, args, device) -> list[Launch]:
    """``fn(*args)``'s launches compiled for ``device`` (a shape, not a call: nothing runs)."""
    return launches(jax.jit(fn).trace(*shapes_on(args, device)).lower().compile().as_text())


def launch_summary(found: Sequence[Launch], taken: int, population: int) -> str:
    """One stage's launches per call and the kB per evaluation they touch: those outside the
    conditionals plus those inside the branch ``taken`` of each (the stages' conditionals are
    the kernels' width switch; one without that branch counts its largest); then each branch's
    kB and the ``while`` loops (graph-only set-up whose launches repeat per trip: neither their
    count nor their bytes are in the totals)."""
    outside = [x for x in found if x.branch is None and x.loop is None]
    branches: dict[str, dict[int, list[Launch]]] = {}
    for x in found:
        if x.branch is not None and x.loop is None:
            branches.setdefault(x.branch[0], {}).setdefault(x.branch[1], []).append(x)
    run = outside + [x for sizes in branches.values() for x in sizes.get(
        taken, max(sizes.values(), key=lambda b: sum(y.nbytes for y in b)))]

    def kb(launched) -> str:
        return f"{sum(x.nbytes for x in launched) / population / 1e3:.1f}"

    per_branch = "; ".join("/".join(kb(sizes.get(i, [])) for i in range(max(sizes) + 1))
                           for sizes in branches.values())
    loops = {x.loop for x in found if x.loop is not None}
    return (f"{len(run):4d} launches, {kb(run):>8s} kB/eval ({kb(outside)} outside the switch"
            + (f", branches {per_branch} kB, branch {taken} taken" if branches else "")
            + f"), {len(loops)} while loops "
            f"({sum(x.loop is not None for x in found)} launches in them)")


def main(argv: Sequence[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m eval.profile_decode",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", type=parse_int_list, default=(500,))
    p.add_argument("--devices", type=parse_int_list, default=(1, 2))
    p.add_argument("--population", type=int, default=16384)
    p.add_argument("--chunk", type=int, default=None,
                   help="successor entries per iteration (default: the decoder's own)")
    p.add_argument("--scheduler", choices=("list", "priority", "fifo"), default="list")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--compile-for", default=None, metavar="cpu|TARGET",
                   help="count each stage's launches compiled for this machine's CPU or the GPU "
                        "of a GpuTargetConfigProto text (eval/gpu_targets/h100.pbtxt) "
                        "instead of timing them")
    args = p.parse_args(sys.argv[1:] if argv is None else argv)
    device = None if args.compile_for is None else target_device(args.compile_for)
    on_gpu = device is not None and device.platform == "gpu"
    log(f"[profile] backend {jax.default_backend()} ({jax.devices()[0].device_kind}), "
        f"P = {args.population}, chunk {args.chunk or 'default'}, {args.scheduler} scheduler"
        + ("" if device is None else f", compiled for {device.device_kind}"))
    rng = np.random.default_rng(0)
    for n in args.sizes:
        graph = random_computation_graph(n, 0)
        bucket = bucket_for(graph)
        padded = jax.tree.map(jnp.asarray, pad_graph(graph, bucket))
        for d in args.devices:
            keys = jnp.asarray(pad_keys(rng.random((args.population, graph.chromosome_length(d)),
                                                   np.float32), graph, bucket, d))
            prm = jax.tree.map(jnp.asarray, PARAMS)
            base = bucket.chromosome_length(d)
            kernels = on_gpu or pallas_applies()
            taken = _width_index(padded, keys, base, d)
            rows = stages(d, args.chunk, base, args.scheduler, kernels=kernels,
                          interpret=False if on_gpu else None, whole=not on_gpu, width=taken)
            for name, fn in rows:
                if device is not None:
                    found = compiled_launches(fn, (padded, keys, prm), device)
                    log(f"[profile] {n} ops, D = {d}: {name:38s} "
                        f"{launch_summary(found, taken, args.population)}")
                    continue
                first, median, moved = _timed(fn, padded, keys, prm, repeats=args.repeats)
                log(f"[profile] {n} ops, D = {d}: {name:38s} {1e3 * median:9.2f} ms/call "
                    f"({1e6 * median / args.population:7.2f} µs/eval, "
                    f"{moved / args.population / 1e3:7.1f} kB/eval; first call {first:.1f} s)")


if __name__ == "__main__":
    main()
