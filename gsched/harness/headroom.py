"""How much is left to learn? Peak-memory headroom per graph (issue #15 §2).

A learned search can only beat BRKGA 5K on a graph where BRKGA 5K is not already optimal.
For every graph of a dataset this measures, with ``D`` devices and the peak-memory objective
(SPEC §3, no transfer cost, no capacity):

* uniform BRKGA at several budgets (200 = REGAL's training rollouts, 1K, 5K = the reference,
  50K), one seed, every graph of a dataset in one batch;
* the **single-op lower bound** (:func:`gsched.baselines.dp.peak_memory_lower_bound`, which
  the depth-first DP prunes with): whatever the placement and order, the device running op
  ``j`` holds ``j``'s inputs, outputs and temporary memory at once, so no schedule's peak is
  below ``max_j need(j)``. A value equal to it is optimal.

:func:`summarize` turns the rows into one line per dataset: how often BRKGA 5K is provably
optimal, how far it is from the bound (an upper bound on any method's gain over it), and how
much BRKGA 50K gains over it (a gain that is known to exist). ``python -m eval.headroom``
runs it on REGAL's training distribution, the held-out synthetic test sets and candidate
training distributions, and writes ``docs/results/regal_headroom/``.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from gsched.baselines.dp import peak_memory_lower_bound
from gsched.core.graph import Graph
from gsched.harness.benchmarks import machine_description
from gsched.harness.config import load_config
from gsched.harness.statistics import bootstrap_interval
from gsched.infra.progress import log, read_jsonl
from gsched.methods import optimize
from gsched.policies.regal.training import DataConfig, TrainConfig, training_graphs

BUDGETS = (200, 1000, 5000, 50_000)
REFERENCE = 5000  # the budget every gain is measured against (REGAL's BRKGA 5K)


def datasets() -> dict[str, list[Graph]]:
    """The graph sets measured: REGAL's ``make train`` distribution (training split of
    ``train/configs/regal_small.toml``'s data), the sweeps' held-out synthetic test sets, and
    two larger candidate training distributions (training splits, same generator)."""

    def train_split(min_ops: int, max_ops: int) -> list[Graph]:
        data = DataConfig(num_graphs=60, min_ops=min_ops, max_ops=max_ops, seed=0)
        return training_graphs(TrainConfig(data=data))[0]

    def sweep(name: str) -> list[Graph]:
        return list(load_config(Path("eval/configs") / f"{name}.toml").datasets[0].graphs)

    return {
        "train 20–40 ops (make train)": train_split(20, 40),
        "synthetic test (40–120 ops)": sweep("synthetic"),
        "synthetic_large (150–400 ops)": sweep("synthetic_large"),
        "train 60–160 ops (candidate)": train_split(60, 160),
        "train 150–300 ops (candidate)": train_split(150, 300),
    }


def run(out: Path, *, max_graphs: int, num_devices: int = 2,
        budgets: Sequence[int] = BUDGETS) -> list[dict]:
    """Measures every dataset × budget batch missing from ``out`` (JSON lines, appended; one
    row per graph and budget, plus one ``budget = 0`` row per graph with the lower bound)."""
    rows = read_jsonl(out) if out.exists() else []
    done = {(r["dataset"], r["budget"]) for r in rows}
    for name, graphs in datasets().items():
        graphs = sorted(graphs, key=lambda g: g.num_ops)[:max_graphs]
        todo = [b for b in (0, *budgets) if (name, b) not in done]
        for budget in todo:
            start = time.perf_counter()
            if budget == 0:
                values = [peak_memory_lower_bound(g) for g in graphs]
            else:
                outcome = optimize("brkga", graphs, num_devices=num_devices, budget=budget,
                                   objective="peak_memory", seed=0)
                values = [r["value"] for r in outcome.results]
            new = [{"dataset": name, "graph": g.name, "num_ops": g.num_ops, "budget": budget,
                    "devices": num_devices, "value": float(v)} for g, v in zip(graphs, values)]
            with out.open("a") as f:
                f.writelines(json.dumps(r) + "\n" for r in new)
            rows += new
            log(f"{name}: {'lower bound' if budget == 0 else f'BRKGA {budget}'} on "
                f"{len(graphs)} graphs in {time.perf_counter() - start:.1f} s")
    return rows


def summarize(rows: Sequence[dict]) -> list[dict]:
    """Per dataset (in first-seen order): graphs; % of graphs where BRKGA 5K equals the lower
    bound (provably optimal); the mean % gain over BRKGA 5K that the bound allows, and % of
    graphs where a gain of ≥ 2 % over it is possible at all (bound ≤ 0.98 × BRKGA 5K); mean
    % gain of BRKGA 50K over 5K and % of graphs where it gains ≥ 2 %; mean % gain of BRKGA 5K over
    BRKGA 200 (the headroom a policy guiding 200-evaluation rollouts can be rewarded for).
    Gains are ``100 (o_5K − o) / o_5K``."""
    by = {}
    for r in rows:
        by.setdefault(r["dataset"], {}).setdefault(r["graph"], {})[r["budget"]] = r["value"]
    out = []
    for name, graphs in by.items():
        cells = [v for v in graphs.values() if REFERENCE in v and 0 in v]
        if not cells:
            continue

        def gain(v, budget):
            return 100 * (v[REFERENCE] - v[budget]) / v[REFERENCE]

        bound_gain = [gain(v, 0) for v in cells]
        line = {"dataset": name, "graphs": len(cells),
                "optimal_5k": float(100 * np.mean([v[REFERENCE] <= v[0] for v in cells])),
                "bound_gain": float(np.mean(bound_gain)),
                "possible_2pct": float(100 * np.mean([g >= 2 for g in bound_gain]))}
        if all(50_000 in v for v in cells):
            gains = [gain(v, 50_000) for v in cells]
            line["gain_50k"] = float(np.mean(gains))
            line["gain_50k_2pct"] = float(100 * np.mean([g >= 2 for g in gains]))
        if all(200 in v for v in cells):  # 5K over 200: the opposite sign of gain(v, 200)
            line["gain_200"] = float(-np.mean([gain(v, 200) for v in cells]))
        out.append(line)
    return out


def markdown(rows: Sequence[dict], command: str) -> str:
    """The summary table (:func:`summarize`) and one per-graph table per dataset."""
    def fmt(x):
        return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.1f}"

    lines = ["| dataset | graphs | BRKGA 5K provably optimal (%) | largest possible gain over "
             "5K, mean (%) | graphs where ≥ 2 % over 5K is possible (%) | BRKGA 50K over 5K (%) "
             "| graphs where 50K gains ≥ 2 % (%) | BRKGA 5K over 200 (%) |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for s in summarize(rows):
        lines.append(f"| {s['dataset']} | {s['graphs']} | {fmt(s['optimal_5k'])} | "
                     f"{fmt(s['bound_gain'])} | {fmt(s['possible_2pct'])} | "
                     f"{fmt(s.get('gain_50k'))} | {fmt(s.get('gain_50k_2pct'))} | "
                     f"{fmt(s.get('gain_200'))} |")
    lines += ["", f"Command: `{command}`", ""]
    by: dict[str, dict[str, dict]] = {}
    for r in rows:
        by.setdefault(r["dataset"], {}).setdefault(r["graph"], {"num_ops": r["num_ops"]})[
            r["budget"]] = r["value"]
    budgets = sorted({r["budget"] for r in rows} - {0})
    for name, graphs in by.items():
        lines += [f"### {name}", "", "| graph | ops | lower bound | "
                  + " | ".join(f"BRKGA {b:,}" for b in budgets) + " | 5K / bound |",
                  "| --- | ---: | ---: | " + " | ".join("---:" for _ in budgets) + " | ---: |"]
        for graph, v in sorted(graphs.items(), key=lambda kv: kv[1]["num_ops"]):
            ratio = (f"{v[REFERENCE] / v[0]:.4f}" if REFERENCE in v and v.get(0) else "—")
            lines.append(f"| {graph} | {v['num_ops']} | {v.get(0, float('nan')):,.0f} | "
                         + " | ".join(f"{v[b]:,.0f}" if b in v else "—" for b in budgets)
                         + f" | {ratio} |")
        lines.append("")
    return "\n".join(lines)


POLICIES = ("regal", "regal_headroom_group", "regal_headroom_baseline")  # the sweep's labels


def policies_markdown(rows: Sequence[dict], methods: Sequence[str] = POLICIES) -> str:
    """A policies table: :func:`compare_policies` of ``methods`` (the first is the row the
    others are paired with) as markdown, titled by the rows' objective."""
    objectives = " / ".join(dict.fromkeys(r["objective"] for r in rows))
    lines = [f"# REGAL {objectives} policies against BRKGA 5K and `{methods[0]}` "
             "(written by eval.headroom --policies)", "",
             "| dataset | policy | seeds × graphs | gain over BRKGA 5K (%), mean ± std over "
             f"seeds | ≥ BRKGA 5K (%) | ≥ +2 % (%) | vs {methods[0]} (points, 95 % bootstrap) "
             f"| graphs better than {methods[0]} |", "| --- | --- | --- | ---: | ---: | ---: "
             "| --- | ---: |"]
    for c in compare_policies(rows, methods, baseline=methods[0]):
        versus = (f"{c['vs_baseline']:+.2f} [{c['vs_low']:+.2f}, {c['vs_high']:+.2f}]"
                  if "vs_baseline" in c else "—")
        better = f"{c['vs_graphs_better']} / {c['graphs']}" if "vs_baseline" in c else "—"
        lines.append(f"| {c['dataset']} | {c['method']} | {c['seeds']} × {c['graphs']} | "
                     f"{c['gain']:+.2f} ± {c['gain_std']:.2f} | {c['at_least']:.0f} | "
                     f"{c['over_2pct']:.0f} | {versus} | {better} |")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m eval.headroom", description=__doc__)
    parser.add_argument("--runs", type=Path, default=Path("runs/headroom/results.jsonl"))
    parser.add_argument("--out", type=Path, default=Path("docs/results/regal_headroom"))
    parser.add_argument("--max-graphs", type=int, default=16)
    parser.add_argument("--policies", type=Path, default=None,
                        help="only write a policies table (compare_policies) of this sweep's "
                             "rows, e.g. results.jsonl of eval/configs/regal_headroom.toml")
    parser.add_argument("--labels", default=",".join(POLICIES),
                        help="with --policies: the methods compared, the first paired with "
                             "the others (default: %(default)s)")
    parser.add_argument("--name", default="policies.md", help="with --policies: the file name")
    args = parser.parse_args(argv)
    if args.policies is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        table = policies_markdown(read_jsonl(args.policies), args.labels.split(","))
        (args.out / args.name).write_text(table)
        return 0
    args.runs.parent.mkdir(parents=True, exist_ok=True)
    rows = run(args.runs, max_graphs=args.max_graphs)
    args.out.mkdir(parents=True, exist_ok=True)
    command = f"python -m eval.headroom --max-graphs {args.max_graphs}"
    (args.out / "tables.md").write_text(
        "# Peak-memory headroom over BRKGA 5K (D = 2, written by eval.headroom)\n\n"
        + "\n".join(f"{line}" for line in machine_description()) + "\n\n"
        + markdown(rows, command))
    (args.out / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return 0


def compare_policies(rows: Sequence[dict], methods: Sequence[str], *, reference: str = "brkga",
                     baseline: str = "regal", bootstrap: int = 10_000) -> list[dict]:
    """Sweep rows (``eval.sweep``, several seeds) → per dataset and method: the mean % gain
    over ``reference`` (per seed, mean over graphs; then mean and sample std over seeds), the
    % of (graph, seed) pairs at least as good as it and ≥ 2 % better; and against
    ``baseline`` the paired difference in points (seeds averaged within a graph) with a 95 %
    bootstrap interval over graphs."""
    value: dict = {}
    for r in rows:
        value[(r["dataset"], r["graph"], r["seed"], r["method"])] = r["value"]
    rng = np.random.default_rng(0)
    out = []
    for dataset in dict.fromkeys(r["dataset"] for r in rows):
        cells = sorted({(g, s) for d, g, s, m in value if d == dataset})

        def gains(method):  # {(graph, seed): % over the reference}
            return {(g, s): 100 * (value[(dataset, g, s, reference)]
                                   - value[(dataset, g, s, method)])
                    / value[(dataset, g, s, reference)]
                    for g, s in cells if (dataset, g, s, method) in value
                    and (dataset, g, s, reference) in value}

        base = gains(baseline)
        for method in methods:
            own = gains(method)
            if not own:
                continue
            seeds = sorted({s for _, s in own})
            per_seed = [np.mean([x for (_, s), x in own.items() if s == seed]) for seed in seeds]
            line = {"dataset": dataset, "method": method, "seeds": len(seeds),
                    "graphs": len({g for g, _ in own}), "gain": float(np.mean(per_seed)),
                    "gain_std": float(np.std(per_seed, ddof=1)) if len(seeds) > 1 else 0.0,
                    "at_least": float(100 * np.mean([x >= 0 for x in own.values()])),
                    "over_2pct": float(100 * np.mean([x >= 2 for x in own.values()]))}
            shared = sorted(set(own) & set(base))
            if method != baseline and shared:
                graphs = sorted({g for g, _ in shared})
                diff = np.array([np.mean([own[k] - base[k] for k in shared if k[0] == g])
                                 for g in graphs])
                low, high = bootstrap_interval(diff, rng, bootstrap)
                line.update(vs_baseline=float(diff.mean()), vs_low=low, vs_high=high,
                            vs_graphs_better=int(np.sum(diff > 0)))
            out.append(line)
    return out
