"""Grid search for tuned BRKGA (REGAL §4.2) on REGAL-style training graphs.

For one objective, runs every setting of a grid (:mod:`gsched.search.tuned`) with ``--budget``
evaluations per graph on ``--graphs`` training graphs, scores each setting by the mean over
graphs of value / standard-BRKGA value (standard BRKGA is always in the grid) and writes the
winner, the whole table, the command, date and machine into ``--out`` under the objective's
name (other objectives already in the file are kept).

Training graphs: the *train* split of ``synthetic_dataset("regal", …, --ops, --seed)`` with
the demo's op range (:mod:`gsched.harness.demo`); ``--seed`` defaults to 1, not the demo's and harness's 0, and no
training graph may share a topology with the first 200 graphs of seed 0 (any split). Tasks
(latency, bandwidth, capacity rule) are :data:`gsched.costmodel.tasks.TASKS`, the demo's:
runtime with transfers and a per-device capacity of 0.6 × the smallest total tensor size
among the graphs, peak memory without capacity.

Sizing (REGAL tried 648 settings on 10,000 graphs): on the shared 2-core CPU, with 4–5 other
jobs running, BRKGA ran at ~1,220 evaluations/s on these graphs (16 graphs × 5,000
evaluations, measured before choosing the grid), so one setting costs ~65 s and the default
grid has 8 settings (2 sizes × 2 elite biases × 2 transfer Betas: 640,000 evaluations,
~9–10 min with its 2 compilations). The shipped file's two runs were made at the same time
on an even busier machine (load 12–16): ~520 evaluations/s, ~20 min each (recorded in the
file). Grid flags widen the grid; the cost grows linearly with settings × graphs × budget.

    python -m eval.tune_brkga --objective peak_memory --graphs 16 --budget 5000 \
        --out gsched/search/tuned_brkga.json
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import sys
import time
from pathlib import Path

import jax
import numpy as np

from gsched.costmodel.params import check_cost_params
from gsched.costmodel.tasks import TASKS, fraction_capacity, total_tensor_size
from gsched.generators import synthetic_dataset
from gsched.infra.progress import log
from gsched.search.tuned import TUNED_PATH, Setting, evaluate_grid, make_grid, select

DEFAULT_SIZES = ("100,10,10,1", "50,5,5,1")  # (P, E, M, K): REGAL's standard, and half of it
DEFAULT_ELITE_BIASES = ("0.7", "0.8")
DEFAULT_TRANSFER_BETAS = ("1,1", "2,1")  # (α, β) of transfer genes: uniform, earlier transfers


def _tuples(values, kind, width, name):
    out = []
    for v in values:
        parts = v.split(",")
        if len(parts) != width:
            raise ValueError(f"--{name} entry {v!r} must have {width} comma-separated values")
        out.append(tuple(kind(x) for x in parts))
    return out


def training_graphs(num_graphs: int, ops: tuple[int, int], seed: int, eval_seed: int = 0,
                    eval_count: int = 200):
    """The first ``num_graphs`` train-split graphs of ``seed``; an error if one shares a
    topology with any of the first ``eval_count`` graphs of ``eval_seed`` (the seed of the
    demo's and the harness's synthetic test sets, eval/configs/synthetic.toml)."""
    if seed == eval_seed:
        raise ValueError(f"--seed {seed} is the evaluation seed; tune on other graphs")
    data = synthetic_dataset("regal", math.ceil(num_graphs * 5 / 3) + 5, ops, seed)
    graphs = data["train"][:num_graphs]
    if len(graphs) < num_graphs:
        raise ValueError(f"only {len(graphs)} training graphs generated, {num_graphs} asked")
    evaluation = {g.topology_hash() for part in synthetic_dataset(
        "regal", eval_count, ops, eval_seed).values() for g in part}
    shared = [g.name for g in graphs if g.topology_hash() in evaluation]
    if shared:
        raise ValueError(f"training graphs {shared} share a topology with evaluation graphs")
    return graphs


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = argparse.ArgumentParser(prog="python -m eval.tune_brkga",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--objective", required=True, choices=sorted(TASKS))
    parser.add_argument("--graphs", type=int, default=16)
    parser.add_argument("--budget", type=int, default=5000)
    parser.add_argument("--devices", type=int, default=2)
    parser.add_argument("--ops", type=int, nargs=2, default=(40, 120))
    parser.add_argument("--seed", type=int, default=1, help="training-set seed (demo uses 0)")
    parser.add_argument("--sizes", nargs="+", default=DEFAULT_SIZES, help="P,E,M,K entries")
    parser.add_argument("--elite-biases", nargs="+", default=DEFAULT_ELITE_BIASES)
    parser.add_argument("--transfer-betas", nargs="+", default=DEFAULT_TRANSFER_BETAS,
                        help="alpha,beta entries for the transfer genes")
    parser.add_argument("--out", type=Path, default=TUNED_PATH)
    args = parser.parse_args(argv)
    try:
        grid = make_grid(_tuples(args.sizes, int, 4, "sizes"),
                         [float(x) for x in args.elite_biases],
                         _tuples(args.transfer_betas, float, 2, "transfer-betas"))
        if args.graphs < 1 or args.budget < 1:
            raise ValueError("--graphs and --budget must be >= 1")
        graphs = training_graphs(args.graphs, tuple(args.ops), args.seed)
    except ValueError as err:
        parser.error(str(err))
    if Setting() not in grid:
        grid.insert(0, Setting())  # the baseline every ratio is taken against
    baseline = grid.index(Setting())

    latency, bandwidth, fraction = TASKS[args.objective]
    capacity = fraction_capacity(fraction, map(total_tensor_size, graphs))
    cost_params = check_cost_params(latency, bandwidth, capacity)
    log(f"[{args.objective}] {len(grid)} settings × {len(graphs)} graphs "
         f"({min(g.num_ops for g in graphs)}–{max(g.num_ops for g in graphs)} ops) × "
         f"{args.budget} evaluations, D={args.devices}")
    start = time.perf_counter()
    values = evaluate_grid(jax.random.key(args.seed), graphs, grid, num_devices=args.devices,
                           budget=args.budget, objective=args.objective,
                           cost_params=cost_params, log=log)
    seconds = time.perf_counter() - start
    best, ratios = select(grid, values, values[baseline])
    wins = (values <= values[baseline]).mean(axis=1)
    table = sorted(({**s.to_dict(), "mean_ratio": round(float(r), 6),
                     "geomean_ratio": round(float(np.exp(np.log(v / values[baseline]).mean())), 6),
                     "at_least_as_good": round(float(w), 4)}
                    for s, r, v, w in zip(grid, ratios, values, wins)),
                   key=lambda row: row["mean_ratio"])
    entry = {
        "setting": grid[best].to_dict(),
        "mean_ratio": round(float(ratios[best]), 6),
        "num_devices": args.devices, "budget": args.budget,
        "cost_params": {"latency": latency, "bandwidth": bandwidth, "capacity": capacity},
        "graphs": {"count": len(graphs), "generator": "synthetic_dataset('regal') train split",
                   "ops": list(args.ops), "seed": args.seed},
        "table": table,
        "command": "python -m eval.tune_brkga " + " ".join(argv),
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": f"{platform.platform()}; {os.cpu_count()} CPUs; load average "
                   f"{', '.join(f'{x:.1f}' for x in os.getloadavg())}; JAX {jax.__version__} "
                   f"{jax.default_backend()}",
        "seconds": round(seconds, 1),
        "evaluations_per_second": round(values.size * args.budget / seconds),
    }
    data = json.loads(args.out.read_text()) if args.out.exists() else {}
    data[args.objective] = entry
    args.out.write_text(json.dumps(data, indent=1) + "\n")
    print(json.dumps({k: entry[k] for k in ("setting", "mean_ratio", "seconds")}))
    return 0

