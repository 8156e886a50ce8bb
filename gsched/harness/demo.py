"""The main job on a built-in default (``make demo``): BRKGA vs random search, equal budgets.

Generates a small REGAL-style synthetic test set (topology-disjoint split of
:func:`gsched.synthetic_dataset`), then optimizes every graph as one batch with random search
and with BRKGA (REGAL defaults) on the same evaluation budget, for two tasks:

* ``runtime``: D = 2 devices, transfers cost ``latency + size / bandwidth`` and a per-device
  capacity (the zero-shot REGAL task);
* ``peak_memory``: D = 2 devices, REGAL's task.

Prints progress, a per-graph table and the SPEC §7 metric "% improvement of BRKGA over random
search" (arithmetic and geometric means). Finishes in a few minutes on a 2-core CPU.

    python -m eval.demo [--graphs 10] [--ops 40 120] [--evals 2000] [--seed 0]
"""

from __future__ import annotations

import argparse
import math
import time

import jax
import numpy as np

from gsched.core.padding import batch_graphs, bucket_for
from gsched.costmodel.params import check_cost_params
from gsched.costmodel.tasks import TASKS, fraction_capacity, total_tensor_size
from gsched.generators import synthetic_dataset
from gsched.infra.progress import log
from gsched.search.random import run_batch as random_search_batch


def _timed(fn):
    """Runs ``fn()`` twice: the first call compiles; returns (result, compile s, run s)."""
    start = time.perf_counter()
    jax.block_until_ready(fn())
    first = time.perf_counter() - start
    start = time.perf_counter()
    out = jax.block_until_ready(fn())
    run = time.perf_counter() - start
    return out, max(first - run, 0.0), run


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m eval.demo", description=__doc__.split("\n\n")[0])
    parser.add_argument("--graphs", type=int, default=10, help="graphs generated (test split ≈ 1/5)")
    parser.add_argument("--ops", type=int, nargs=2, default=(40, 120), help="op-count range")
    parser.add_argument("--evals", type=int, default=2000, help="evaluation budget per graph")
    parser.add_argument("--devices", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.graphs < 5 or args.evals < 1 or args.devices < 1:
        parser.error("need --graphs >= 5, --evals >= 1, --devices >= 1")

    data = synthetic_dataset("regal", args.graphs * 5, tuple(args.ops), args.seed)
    graphs = data["test"][: args.graphs]
    bucket = bucket_for(graphs)
    padded = batch_graphs(graphs, bucket)
    log(f"{len(graphs)} test graphs ({min(g.num_ops for g in graphs)}–"
         f"{max(g.num_ops for g in graphs)} ops), bucket {tuple(bucket)}, D={args.devices}, "
         f"budget {args.evals} evaluations per graph and method")
    key = jax.random.key(args.seed)
    for objective, task in TASKS.items():
        capacity = fraction_capacity(task.capacity_fraction, map(total_tensor_size, graphs))
        params = check_cost_params(task.latency, task.bandwidth, capacity)
        common = dict(num_devices=args.devices, budget=args.evals, objective=objective,
                      cost_params=params)
        log(f"[{objective}] random search …")
        rand, rc, rr = _timed(lambda: random_search_batch(key, padded, **common))
        log(f"[{objective}]   compile {rc:.1f} s, run {rr:.1f} s "
             f"({len(graphs) * args.evals / rr:,.0f} evals/s); BRKGA …")
        brkga, bc, br = _timed(lambda: brkga.run_batch(key, padded, **common))
        log(f"[{objective}]   compile {bc:.1f} s, run {br:.1f} s "
             f"({len(graphs) * args.evals / br:,.0f} evals/s)")
        r, b = np.asarray(rand.best_value), np.asarray(brkga.best_value)
        feasible = np.asarray(brkga.best_evaluation.feasible)
        improvement = 100 * (r - b) / r
        print(f"\n## {objective}, D={args.devices}, {args.evals} evaluations"
              + (f", capacity {capacity:.3g} B" if capacity else ""))
        print("Values are the scores minimized (for an infeasible runtime solution, a penalty "
              "above every feasible runtime, SPEC §4).\n")
        print("| graph | ops | random search | BRKGA | BRKGA improvement % | BRKGA feasible |")
        print("|---|---|---|---|---|---|")
        for g, rv, bv, imp, ok in zip(graphs, r, b, improvement, feasible):
            print(f"| {g.name} | {g.num_ops} | {rv:.6g} | {bv:.6g} | {imp:+.2f} | {bool(ok)} |")
        geo = 100 * (1 - math.exp(float(np.mean(np.log(b / r)))))
        print(f"\nMean improvement of BRKGA over random search: {improvement.mean():+.2f} % "
              f"(arithmetic), {geo:+.2f} % (geometric); BRKGA at least as good on "
              f"{np.mean(b <= r):.0%} of graphs.")
    return 0

