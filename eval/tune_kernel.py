"""The fused decode kernels' knobs, timed: successor entries per inner iteration (``chunk``),
Triton warps per program (``num_warps``), the list lane kernel's programs (``--programs``:
fewer programs than blocks of chromosomes keep fewer chromosomes' memory in flight) and where
the kernel keeps its lanes (``--states registers,memory,lanes``:
:mod:`gsched.costmodel.pallas_decode`'s kernel,
:mod:`gsched.costmodel.pallas_memory`'s (the list scheduler only) or
:mod:`gsched.costmodel.pallas_lanes`', one chromosome per lane; for ``--scheduler priority`` /
``fifo``, :mod:`gsched.costmodel.pallas_dynamic`'s and :mod:`gsched.costmodel.
pallas_lanes_dynamic`'s), on one graph's population.

Times the schedule alone (placement, ``schedule_init`` or ``dynamic_init``, the kernel and its
result, as ``eval.profile_decode``'s third stage), every variant on the same keys, interleaved
round by round so that all see the same load, and checks every variant's schedule bit for bit
against the first one. Warps ``0`` means the kernel's default
(:func:`~gsched.costmodel.pallas_decode.default_num_warps`; one warp for the memory and lane
kernels: the latter's programs hold 32 chromosomes per warp).
``--whole`` times whole evaluations instead (``evaluate_with_decoder`` with each state's decoder,
``"pallas"``, ``"pallas_memory"`` or ``"pallas_lanes"``: the schedule and SPEC §3's memory walk,
warps at the default): the one entry point every commit since the kernels has, so two trees'
evaluations can be timed in one call (``eval/device_session.sh``'s ``ab_whole``).
On a CPU the kernel runs in Pallas' interpreter: correct, but its timings mean nothing for a
GPU (use it to try the program on a small graph)::

    python -m eval.tune_kernel --size 500 --devices 2 --chunks 1,2,4,8 --warps 0,1,2,8 \\
        --population 16384 --output docs/benchmarks.md
    python -m eval.tune_kernel --size 10000 --states registers,memory --chunks 2 \\
        --population 512
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from gsched.core.padding import bucket_for, pad_graph, pad_keys
from gsched.costmodel.evaluate import evaluate_with_decoder
from gsched.costmodel.pallas_decode import default_num_warps
from gsched.costmodel.pallas_lanes import LANES_NUM_WARPS
from gsched.costmodel.pallas_memory import MEMORY_NUM_WARPS
from gsched.costmodel.pallas_dynamic import fused_schedule
from gsched.costmodel.params import CostParams
from gsched.costmodel.schedule import decode_placement
from gsched.generators import random_computation_graph
from gsched.harness.benchmarks import (
    mismatches,
    parse_int_list,
    publish_section,
    section_header,
)
from gsched.infra.progress import log

PARAMS = CostParams(latency=0.1, bandwidth=16384.0)


def schedule_fn(num_devices: int, base: int, scheduler: str, chunk: int,
                num_warps: int | None, state: str = "registers", programs: int | None = None):
    """``(graph, keys [P, L], params) → DynamicSchedule`` with these knobs, jitted."""

    def fn(graph, keys, params):
        def one(k):
            k = k[:base]
            return fused_schedule(graph, k, decode_placement(graph, k, num_devices), params,
                                  num_devices, scheduler, chunk, num_warps=num_warps,
                                  state=state, programs=programs)
        return jax.vmap(one)(keys)

    return jax.jit(fn)


def evaluation_fn(num_devices: int, scheduler: str, chunk: int, state: str):
    """``(graph, keys [P, L], params) → Evaluation``: the whole evaluation by the decoder of
    ``state`` (:data:`STATE_DECODERS`), jitted."""

    def fn(graph, keys, params):
        return evaluate_with_decoder(graph, keys, params, num_devices=num_devices, chunk=chunk,
                                     scheduler=scheduler, decoder=STATE_DECODERS[state])

    return jax.jit(fn)


STATE_DECODERS = {"registers": "pallas", "memory": "pallas_memory", "lanes": "pallas_lanes"}
STATE_NAMES = {"registers": "lanes in registers", "memory": "lanes in memory",
               "lanes": "a chromosome per lane"}


def _name(variant: tuple[str, int, int, int]) -> str:
    """``"a chromosome per lane, chunk 2, warps default, programs 64"``."""
    state, chunk, warps, programs = variant
    return (f"{STATE_NAMES[state]}, chunk {chunk}, warps {warps or 'default'}"
            + (f", programs {programs}" if programs else ""))


def _warps_rule() -> str:
    """The default warps (:func:`default_num_warps`) at the widths a table reader needs."""
    return ", ".join(f"{default_num_warps(w)} at {w:,} lanes" for w in (1024, 2048, 4096))


def main(argv: Sequence[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else list(argv)
    p = argparse.ArgumentParser(prog="python -m eval.tune_kernel",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--size", type=int, default=500, help="ops of random_computation_graph")
    p.add_argument("--devices", type=int, default=2)
    p.add_argument("--scheduler", choices=("list", "priority", "fifo"), default="list")
    p.add_argument("--states", default="registers",
                   help="comma-separated: registers, memory (the list scheduler only), lanes")
    p.add_argument("--chunks", type=parse_int_list, default=(1, 2, 4, 8))
    p.add_argument("--warps", type=parse_int_list, default=(0,),
                   help="Triton warps per program; 0: the kernel's default")
    p.add_argument("--programs", type=parse_int_list, default=(0,),
                   help="the list lane kernel's most programs, each running its blocks of "
                        "chromosomes in turn; 0: a program per block (other states: 0 only)")
    p.add_argument("--population", type=int, default=16384)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--output", type=Path, default=None, help="Markdown file for the section")
    p.add_argument("--section-title", default="Fused-kernel tuning")
    p.add_argument("--whole", action="store_true",
                   help="time whole evaluations (evaluate_with_decoder; warps must be 0)")
    args = p.parse_args(argv)
    if args.whole and any(args.warps + args.programs):
        p.error("--whole runs the decoders at their defaults: --warps 0 --programs 0")
    if any(args.programs) and args.scheduler != "list":
        p.error("--programs applies to the list lane kernel: --scheduler list")

    graph = random_computation_graph(args.size, 0)
    bucket = bucket_for(graph)
    d = args.devices
    padded = jax.tree.map(jnp.asarray, pad_graph(graph, bucket))
    rng = np.random.default_rng(0)
    keys = jnp.asarray(pad_keys(rng.random((args.population, graph.chromosome_length(d)),
                                           np.float32), graph, bucket, d))
    params = jax.tree.map(jnp.asarray, PARAMS)
    variants = [(s, c, w, g) for s in args.states.split(",") for c in args.chunks
                for w in args.warps for g in (args.programs if s == "lanes" else (0,))]
    log(f"[tune] backend {jax.default_backend()} ({jax.devices()[0].device_kind}), "
        f"{args.size} ops, D = {d}, P = {args.population}, {len(variants)} variants")

    fns, first_s, reference = {}, {}, None
    for v in variants:
        state, c, w, g = v
        fns[v] = (evaluation_fn(d, args.scheduler, c, state) if args.whole else
                  schedule_fn(d, bucket.chromosome_length(d), args.scheduler, c, w or None,
                              state, g or None))
        t0 = time.perf_counter()
        out = jax.block_until_ready(fns[v](padded, keys, params))
        first_s[v] = time.perf_counter() - t0
        if reference is None:
            reference = out
        elif bad := mismatches(reference, out):
            raise SystemExit(f"{_name(v)}: the result differs from {_name(variants[0])}'s: "
                             f"{'; '.join(bad)}")
        log(f"[tune] {_name(v)}: first call {first_s[v]:.1f} s, identical")
    times = {v: [] for v in variants}
    for r in range(args.repeats):
        for v in variants:
            t0 = time.perf_counter()
            jax.block_until_ready(fns[v](padded, keys, params))
            times[v].append(time.perf_counter() - t0)
        log(f"[tune] round {r + 1}/{args.repeats} done")

    steps = np.asarray(reference.num_steps if args.whole else reference.schedule.num_steps)
    rows = ["| kernel | chunk | warps | programs | compile s | ms/call | evals/s | µs/eval |",
            "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    best = None
    for v in variants:
        state, c, w, g = v
        median = statistics.median(times[v])
        rate = args.population / median
        best = max(best or (0, None), (rate, v))
        warps = str(w) if w else "default"
        rows.append(f"| {STATE_NAMES[state]} | {c} | {warps} | {g or 'one per block'} | "
                    f"{first_s[v] - median:.1f} | "
                    f"{1e3 * median:.1f} | {rate:,.0f} | {1e6 * median / args.population:.2f} |")
        log(f"[tune] {_name(v)}: {1e3 * median:.1f} ms/call, {rate:,.0f} evals/s")
    body = "\n".join([
        *section_header("eval.tune_kernel", argv), "",
        (f"Whole {args.scheduler} evaluations (evaluate_with_decoder: placement, the fused "
         f"kernel's schedule and SPEC §3's memory) " if args.whole else
         f"The {args.scheduler} schedule alone (placement, its tables, the fused kernel and its "
         f"result) ") +
        f"of `random_computation_graph({args.size}, 0)` (bucket {bucket.num_ops}/"
        f"{bucket.num_tensors}/{bucket.num_edges}), D = {d}, P = {args.population} uniform "
        f"random chromosomes ({int(steps.min())}–{int(steps.max())} items scheduled each); "
        f"median of {args.repeats} interleaved rounds after one warm-up call. Every variant's "
        f"result is bit for bit the first one's. *warps* default: {_warps_rule()} "
        f"(registers), {MEMORY_NUM_WARPS} (memory), {LANES_NUM_WARPS} (lanes: 32 chromosomes "
        f"per warp). *programs*: the lane kernel's grid, each program running its blocks of "
        f"32 · warps chromosomes in turn (one per block: all blocks at once, as far as the GPU "
        f"holds them).",
        *(["", "On a CPU the kernel ran in Pallas' interpreter: these timings say nothing about "
              "a GPU."] if jax.default_backend() == "cpu" else []),
        "", *rows, "",
        f"Fastest: {_name(best[1])} ({best[0]:,.0f} evals/s).",
        ""])
    publish_section(args.output, args.section_title, body, "tune")


if __name__ == "__main__":
    main()
