"""The step-time table of GO's and GDP's classical baselines (issue #13 §3), at CPU scale.

Every row is a method of the registry run with ``objective="runtime"`` under SPEC §8 (roofline
kernels of a device preset, the event-driven schedulers, fusion where the row says so) on a batch
of graphs, for D = 2 / 4 / 8; and again with the static list scheduler of SPEC §4 (same method,
same genes and fusion), so the table shows how much dynamic scheduling changes each.

Rows (``ROWS``): TF default, human expert, METIS (each FIFO, no fusion; METIS also with XLA-style
greedy fusion), simulated annealing over placements and over everything, BRKGA over placement
only ("pl", FIFO), placement + priorities ("pl+sch", the priority scheduler) and everything
("pl+sch+fu"). Searches spend ``budget`` evaluations per graph (annealing in 32 parallel chains:
the event-driven schedulers are O(V²) per evaluation and batch far better than they iterate).

Graphs (``graphs()``): a synthetic layered graph (always), the small inference programs of the
RNNLM, GNMT and Transformer-XL from :mod:`gsched.workloads` (compiled HLO, H100 costs), and
MobileNet's training graph from ``../shared/benchmarks/moccasin`` when present — all within one
256-op bucket, since the event-driven schedulers cost O(V²) per evaluation on a 2-core CPU.

``python -m eval.go_baselines [--budget 1000] [--out docs/results/go_baselines]``: rows are
appended to ``results.jsonl`` as they finish (an interrupted run resumes), then ``README.md`` is
written from them.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from pathlib import Path

import numpy as np

from gsched import methods
from gsched.core.graph import Graph
from gsched.costmodel.params import check_cost_params
from gsched.formats import load_graph
from gsched.generators import layered_graph
from gsched.importers import import_jax, preset
from gsched.infra.progress import log, read_jsonl

SHARED_MOCCASIN = Path(__file__).resolve().parents[2].parent / "shared" / "benchmarks" / "moccasin"
DEVICE_COUNTS = (2, 4, 8)
PRESET = "h100"
# Device-to-device copies (not in the presets, which describe one device): NVLink 4 at about
# 450 GB/s per direction = 4.5e5 bytes per µs, with 2 µs of latency per copy.
LINK_BANDWIDTH = 4.5e5
LINK_LATENCY = 2.0


@dataclasses.dataclass(frozen=True)
class Row:
    label: str
    method: str
    scheduler: str  # the dynamic scheduler of the row (it is also run under "list")
    fusion: bool
    options: tuple = ()


ROWS = (
    Row("TF default (one device)", "tf_default", "fifo", False),
    Row("human expert (scopes)", "human_expert", "fifo", False),
    Row("METIS", "metis", "fifo", False),
    Row("METIS + XLA greedy fusion", "metis", "fifo", True),
    Row("SA pl", "annealing", "fifo", False, (("chains", 32), ("genes", "placement"))),
    Row("SA pl+sch+fu", "annealing", "priority", True, (("chains", 32),)),
    Row("BRKGA pl", "brkga", "fifo", False, (("genes", "placement"),)),
    Row("BRKGA pl+sch", "brkga", "priority", False, (("genes", "placement+schedule"),)),
    Row("BRKGA pl+sch+fu", "brkga", "priority", True),
)


def graphs(seed: int = 0) -> dict[str, Graph]:
    """The table's graphs by name (see the module docstring)."""
    rng = np.random.default_rng(seed)
    dev = preset(PRESET)
    synthetic = layered_graph(200, rng)
    # Roofline-scale costs: flops of ~1e6–1e8 per op on the preset, sizes as generated.
    synthetic = synthetic.replace(compute_cost=synthetic.compute_cost
                                  / synthetic.compute_cost.max() * 1e8 / dev.peak_flops)
    out = {"layered_200": synthetic}
    from gsched import workloads  # heavy (builds JAX programs): only here

    for name, size, mode in (("rnnlm", "small", "inference"), ("gnmt", "small", "inference"),
                             ("transformer_xl", "small", "inference")):
        fn, args = workloads.program(name, size, mode)
        out[f"{name}_{size}_{mode}"] = import_jax(fn, *args, level="hlo", device=PRESET)
    mobilenet = SHARED_MOCCASIN / "MobileNet_512_224_224_3_train_nx.json"
    if mobilenet.exists():
        out["mobilenet_train"] = load_graph(mobilenet)
    return out


def _key(graph: str, devices: int, row: Row, scheduler: str) -> str:
    return f"{graph}|{devices}|{row.label}|{scheduler}"


def run(out: Path, budget: int = 1000, seed: int = 0) -> list[dict]:
    """Runs every (D, row, scheduler) on the batch of graphs; resumes from ``results.jsonl``."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / "results.jsonl"
    done = {r["key"]: r for r in read_jsonl(path)} if path.exists() else {}
    named = graphs(seed)
    names, batch = list(named), list(named.values())
    dev = preset(PRESET)
    cost = check_cost_params(LINK_LATENCY, LINK_BANDWIDTH, hbm_bandwidth=dev.hbm_bandwidth,
                             launch_overhead=dev.launch_overhead)
    jobs = [(d, row, s) for d in DEVICE_COUNTS for row in ROWS for s in (row.scheduler, "list")]
    start = time.perf_counter()
    for i, (d, row, scheduler) in enumerate(jobs):
        if all(_key(n, d, row, scheduler) in done for n in names):
            continue
        outcome = methods.optimize(row.method, batch, num_devices=d, budget=budget,
                                   objective="runtime", cost_params=cost, seed=seed,
                                   options=dict(row.options), scheduler=scheduler,
                                   fusion=row.fusion)
        with path.open("a") as f:
            for name, result in zip(names, outcome.results):
                record = {"key": _key(name, d, row, scheduler), "graph": name,
                          "num_ops": result["num_ops"], "devices": d, "row": row.label,
                          "method": row.method, "scheduler": scheduler, "fusion": row.fusion,
                          "runtime": result["runtime"], "evals": result["evals_used"],
                          "fused_ops": sum(r != j for j, r in enumerate(result.get("fusion", [])))}
                done[record["key"]] = record
                f.write(json.dumps(record) + "\n")
        elapsed = time.perf_counter() - start
        log(f"[{i + 1}/{len(jobs)}] D={d} {row.label} ({scheduler}): "
            f"{outcome.wall_seconds:.1f} s + {outcome.compile_seconds:.1f} s compile; "
            f"elapsed {elapsed / 60:.1f} min")
        methods.release_compiled(only_if_crowded=True)
    return list(done.values())


def report(records: list[dict], budget: int) -> str:
    """The Markdown table: per D, step time (µs) of each row under its dynamic scheduler, and
    the change from the static list schedule of the same method."""
    by = {r["key"]: r for r in records}
    names = list(dict.fromkeys(r["graph"] for r in records))  # first-seen order
    lines = ["# GO / GDP baselines: step time under SPEC §8 (CPU scale)", "",
             f"Objective: runtime (step time, µs) on the {PRESET.upper()} preset (roofline "
             f"kernels), copies over a {LINK_BANDWIDTH:.3g} bytes/µs link with "
             f"{LINK_LATENCY} µs latency, no memory limit. Searches: {budget} cost-model "
             "evaluations per graph, seed 0. Each cell: the row's dynamic scheduler "
             "(`fifo` or `priority`, SPEC §8.2), then in brackets the change against the same "
             "method run under the static list scheduler of SPEC §4 (negative = dynamic "
             "scheduling is faster). Generated by `python -m eval.go_baselines`.", ""]
    ops = {r["graph"]: r["num_ops"] for r in records}
    for d in DEVICE_COUNTS:
        lines += [f"## D = {d}", "",
                  "| method | scheduler | fusion | " + " | ".join(
                      f"{n} ({ops[n]} ops)" for n in names) + " |",
                  "| --- | --- | --- | " + " | ".join("---:" for _ in names) + " |"]
        for row in ROWS:
            cells = []
            for n in names:
                dyn = by.get(_key(n, d, row, row.scheduler))
                static = by.get(_key(n, d, row, "list"))
                if dyn is None:
                    cells.append("—")
                    continue
                change = ""
                if static is not None and static["runtime"] > 0:
                    change = f" ({100 * (dyn['runtime'] / static['runtime'] - 1):+.1f}%)"
                cells.append(f"{dyn['runtime']:.4g}{change}")
            lines.append(f"| {row.label} | {row.scheduler} | {'yes' if row.fusion else 'no'} | "
                         + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=int, default=1000,
                        help="cost-model evaluations per graph for the searches (default 1000)")
    parser.add_argument("--out", type=Path, default=Path("docs/results/go_baselines"))
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    records = run(args.out, args.budget, args.seed)
    (args.out / "README.md").write_text(report(records, args.budget) + "\n")
    log(f"wrote {args.out / 'README.md'}")
