"""BRKGA wall-time benchmark (``make bench``): seconds per graph for BRKGA 5K.

REGAL's C++ BRKGA took 0.89 s per graph for 5,000 evaluations. This measures
:func:`gsched.search.brkga.run_batch` (π = 100, π_e = 10, π_c = 80, ρ = 0.7, uniform genes) on a
batch of ``B`` different REGAL-style random graphs (seeds ``0..B−1``) of each size, D = 2,
peak-memory objective, one jitted call per batch through :func:`gsched.methods.optimize`
(with ``--shard``, split over all local devices, on a CPU one per core): compile time apart, then the
median of the timed calls divided by ``B`` (amortized seconds per graph). Results go to a section of
``docs/benchmarks.md`` (see :func:`gsched.harness.benchmarks.write_section`)::

    python -m eval.bench_brkga                            # 200 and 500 ops, B = 8, 5K evals
    python -m eval.bench_brkga --sizes 200 --batch 1000   # on an accelerator
    python -m eval.bench_brkga --quick --output /tmp/x.md # smoke run
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path
from typing import Sequence

import jax

from gsched.core.padding import bucket_for
from gsched.generators import random_computation_graph
from gsched.harness.benchmarks import (
    DEFAULT_OUTPUT,
    parse_int_list,
    section_header,
    write_section,
)
from gsched.infra.distributed import one_device_per_core
from gsched.infra.progress import log
from gsched.methods import optimize


def measure(num_ops: int, batch: int, budget: int, num_devices: int, repeats: int,
            mesh: jax.sharding.Mesh | None) -> dict:
    """``gsched.optimize("brkga", ...)`` on ``batch`` graphs: compile time as it reports it,
    then the median wall time of ``repeats`` runs (new seeds, same executable). With ``mesh``
    the batch is split over its devices (one per CPU core, see ``main``): its graphs, or each
    generation's chromosomes when the graphs do not divide evenly."""
    graphs = [random_computation_graph(num_ops, seed) for seed in range(batch)]
    bucket = bucket_for(graphs)
    runs = [optimize("brkga", graphs, num_devices=num_devices, budget=budget, seed=seed,
                     mesh=mesh) for seed in range(repeats + 1)]
    median = statistics.median(run.wall_seconds for run in runs[1:])
    return {"num_ops": num_ops, "bucket": f"{bucket.num_ops}/{bucket.num_tensors}/"
            f"{bucket.num_edges}", "batch": batch, "shards": 1 if mesh is None else mesh.size,
            "compile_s": runs[0].compile_seconds, "median_s": median,
            "per_graph_s": median / batch, "evals_per_s": batch * budget / median}


def render(rows: list[dict], header: list[str], budget: int, num_devices: int) -> str:
    lines = header + [
        "",
        f"BRKGA with REGAL's defaults, {budget:,} evaluations per graph, D = {num_devices}, "
        "peak memory; a batch of B different `random_computation_graph(N, seed)` graphs "
        "(seeds 0..B−1) in one jitted call. *s/graph* = median call time / B (REGAL's C++: "
        "0.89 s per graph).",
        "",
        "| N ops | bucket N/T/E | B | devices | compile s | s/call | s/graph | evals/s |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    lines += [f"| {r['num_ops']:,} | {r['bucket']} | {r['batch']:,} | {r['shards']} | "
              f"{r['compile_s']:.1f} | "
              f"{r['median_s']:.2f} | {r['per_graph_s']:.3f} | {r['evals_per_s']:,.0f} |"
              for r in rows]
    return "\n".join(lines)


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m eval.bench_brkga", description=__doc__.split(
        "\n\n")[0])
    p.add_argument("--sizes", type=parse_int_list, default=(200, 500), help="graph sizes (ops)")
    p.add_argument("--batch", type=int, default=8, help="graphs per jitted call")
    p.add_argument("--budget", type=int, default=5000, help="evaluations per graph")
    p.add_argument("--devices", type=int, default=2, help="number of devices D")
    p.add_argument("--repeats", type=int, default=2, help="timed calls after the first")
    p.add_argument("--shard", action="store_true",
                   help="split the batch over all local devices (one per CPU core): each runs "
                        "its own schedule loop on its graphs, or on its share of each "
                        "generation's chromosomes when the graphs do not divide evenly; see "
                        "docs/benchmarks.md")
    p.add_argument("--quick", action="store_true", help="tiny smoke run (sizes 30, B 2, 300)")
    p.add_argument("--output", type=Path, default=DEFAULT_OUTPUT)
    args = p.parse_args(argv)
    if args.quick:
        args.sizes, args.batch, args.budget, args.repeats = (30,), 2, 300, 1
    if min(args.sizes) < 1 or args.batch < 1 or args.budget < 1 or args.repeats < 1:
        p.error("sizes, --batch, --budget and --repeats must be >= 1")
    return args


def main(argv: Sequence[str] | None = None) -> list[dict]:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    one_device_per_core()  # so that --shard can split the batch over them
    backend, kind = jax.default_backend(), jax.devices()[0].device_kind
    devices = jax.local_devices()
    mesh = jax.sharding.Mesh(devices, ("graphs",)) if args.shard and len(devices) > 1 else None
    title = f"BRKGA {args.budget:,}-evaluation wall time — {backend.upper()} ({kind})" + (
        "" if mesh is None else ", batch split over the local devices") + (
        ", quick smoke run" if args.quick else "")
    header = section_header("eval.bench_brkga", argv)
    rows = []
    for n in args.sizes:
        log(f"[bench] BRKGA {args.budget} evals, {n} ops, batch {args.batch}: compiling and "
            "timing…")
        rows.append(measure(n, args.batch, args.budget, args.devices, args.repeats, mesh))
        log(f"[bench]     {rows[-1]['per_graph_s']:.3f} s/graph, compile "
            f"{rows[-1]['compile_s']:.1f} s")
    body = render(rows, header, args.budget, args.devices)
    write_section(args.output, title, body)
    print(f"## {title}\n\n{body}")
    return rows

