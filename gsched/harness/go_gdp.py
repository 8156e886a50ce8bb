"""GDP's and GO's results tables at CPU scale (issue #14 §4).

**Graphs** (``graphs()``): the small inference programs of :mod:`gsched.workloads` imported at
the HLO level with H100 costs, for the papers' families whose graph fits the 256-op bucket —
RNNLM, GNMT, Transformer-XL, Inception, WaveNet (AmoebaNet's 391 ops need the 512 bucket,
where the O(V²) event-driven schedulers of SPEC §8.2 are too slow on this CPU, issue #16).
Pre-training also uses ResNet and GPT.

**Pre-training** (GO Fig. 5, GDP "batch"): ``train/configs/{gdp,go}_workloads.toml`` train on
every family but ``HELD_OUT`` (Transformer-XL) and validate on it; run once, the exports are
reused (``<runs>/<method>/policy``; ``runs/go_gdp`` by default, not committed).

**Rows**, each per graph, D and method, ``budget`` evaluations per graph for the searches:

* placement (GDP Table 1; FIFO scheduler, no fusion): TF default, human expert, METIS, BRKGA
  over placement, HDP (:mod:`gsched.policies.hdp`, trained on the graph alone for the budget:
  GDP Table 1's learned baseline) with its own learning rate 0.1 and with ``HDP_RATE`` (the
  rate ``eval.go_controls`` chose on the GDP config's validation graphs), GDP-one (an
  untrained network fine-tuned on the graph alone for the budget: GDP's per-graph training),
  and at ``PRETRAINED_D`` GDP zero-shot (pre-trained, greedy) and GDP fine-tuned
  (``FINETUNE_STEPS`` PPO iterations);
* joint (GO Table 3 / Fig. 6; priority scheduler with fusion): METIS without fusion (Table 3's
  normalization) and with XLA-style greedy fusion, SA and BRKGA over everything, GO-one per
  task set (pl, pl+sch, pl+sch+fu: the untasked parts take the defaults of
  :mod:`gsched.policies.go.actions`), and at
  ``PRETRAINED_D`` GO zero-shot and fine-tuned.

``python -m eval.go_gdp [--budget 500] [--devices 4] [--out docs/results/go_gdp]``: rows go
to ``results.jsonl`` as they finish (an interrupted run resumes), then ``README.md`` is written.
A row's policy (pre-trained or untrained) is made when the row first needs it: rows already in
``results.jsonl`` train nothing.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from pathlib import Path

import jax

from gsched import methods
from gsched.core.graph import Graph
from gsched.costmodel.params import CostParams, check_cost_params
from gsched.harness.go_baselines import LINK_BANDWIDTH, LINK_LATENCY, PRESET
from gsched.importers import import_jax, preset
from gsched.infra.config import load_config
from gsched.infra.progress import log, read_jsonl
from gsched.policies.go import training
from gsched.policies.go.checkpoint import (
    POLICY_DIR,
    PolicySpec,
    network_template,
    save_policy,
)

FAMILIES = ("rnnlm", "gnmt", "transformer_xl", "inception", "wavenet")
HELD_OUT = "transformer_xl"
PRETRAINED_D = 4
FINETUNE_STEPS = 10
HDP_RATE = 0.01  # docs/results/go_controls: chosen on gdp_small's validation graphs
CONFIGS = {"gdp": Path("train/configs/gdp_workloads.toml"),
           "go": Path("train/configs/go_workloads.toml")}
ONE_TASKS = {"gdp": (("placement",),),
             "go": (("placement",), ("placement", "schedule"),
                    ("placement", "schedule", "fusion"))}
SETTINGS = {"gdp": ("fifo", False), "go": ("priority", True)}


@dataclasses.dataclass(frozen=True)
class Row:
    label: str
    table: str  # "gdp" (placement) or "go" (joint)
    method: str
    options: tuple = ()
    fusion: bool | None = None  # None: the table's setting (SETTINGS)
    policy: tuple = ()  # ("pretrained",) or ("untrained", tasks): its checkpoint (row_options)


def graphs() -> dict[str, Graph]:
    """The workload graphs by family (module docstring)."""
    from gsched import workloads  # builds JAX programs: only here

    out = {}
    for name in FAMILIES:
        fn, args = workloads.program(name, "small", "inference")
        out[name] = import_jax(fn, *args, level="hlo", device=PRESET)
    return out


def cost_params() -> CostParams:
    """The link and device costs of every row (GO's baselines' settings)."""
    device = preset(PRESET)
    return check_cost_params(LINK_LATENCY, LINK_BANDWIDTH, hbm_bandwidth=device.hbm_bandwidth,
                             launch_overhead=device.launch_overhead)


def pretrained(method: str, runs: Path) -> Path:
    """The pre-trained policy export of ``method`` (trained here unless it exists)."""
    run = runs / method
    if not (run / POLICY_DIR).exists():
        argv = ["--config", str(CONFIGS[method]), "--run-dir", str(run)]
        argv.append("--resume" if (run / "checkpoints").exists() else "--overwrite")
        training.main(argv, prog=f"python -m train.{method}")
    return run / POLICY_DIR


def _untrained(method: str, tasks: tuple[str, ...], devices: int, runs: Path) -> Path:
    """An export of an untrained network (the start of the "one" rows) for ``tasks``."""
    config = load_config(CONFIGS[method], training.TrainConfig)
    scheduler, fusion = SETTINGS[method]
    space = dataclasses.replace(config.space, tasks=tasks, num_devices=devices)
    spec = PolicySpec(config.network, space, config.ppo, scheduler, fusion)
    path = runs / f"untrained_{method}_{'+'.join(tasks)}_d{devices}"
    if not path.exists():
        save_policy(path, network_template(spec, jax.random.key(0)), spec,
                    {"step": 0, "untrained": True})
    return path


def rows(devices: int, budget: int) -> list[Row]:
    """The rows of one D (module docstring)."""
    result = [Row("TF default (one device)", "gdp", "tf_default"),
              Row("human expert", "gdp", "human_expert"),
              Row("METIS", "gdp", "metis"),
              Row("BRKGA pl", "gdp", "brkga", (("genes", "placement"),)),
              Row("HDP pl", "gdp", "hdp"),
              Row(f"HDP pl, learning rate {HDP_RATE:g}", "gdp", "hdp",
                  (("learning_rate", HDP_RATE),))]
    for method in ("gdp", "go"):
        ppo = load_config(CONFIGS[method], training.TrainConfig).ppo
        one_steps = (budget - 2 * ppo.rounds) // (ppo.samples * ppo.rounds)
        for tasks in ONE_TASKS[method]:
            label = f"{method.upper()}-one {'+'.join(_short(t) for t in tasks)}"
            result.append(Row(label, method, method, (("finetune_steps", one_steps),),
                              policy=("untrained", tasks)))
        if method == "gdp":
            result += [Row("METIS, no fusion", "go", "metis", fusion=False),
                       Row("METIS + greedy fusion", "go", "metis"),
                       Row("SA pl+sch+fu", "go", "annealing", (("chains", 32),)),
                       Row("BRKGA pl+sch+fu", "go", "brkga")]
        if devices == PRETRAINED_D:
            result += [Row(f"{method.upper()} zero-shot", method, method,
                           policy=("pretrained",)),
                       Row(f"{method.upper()} fine-tuned ({FINETUNE_STEPS} it.)", method, method,
                           (("finetune_steps", FINETUNE_STEPS),), policy=("pretrained",))]
    return result


def row_options(row: Row, devices: int, runs: Path) -> dict:
    """``row``'s method options, with its policy's checkpoint (trained or saved here unless
    it exists under ``runs``)."""
    options = dict(row.options)
    if row.policy == ("pretrained",):
        options["checkpoint"] = str(pretrained(row.method, runs))
    elif row.policy:
        options["checkpoint"] = str(_untrained(row.method, row.policy[1], devices, runs))
    return options


def _short(task: str) -> str:
    return {"placement": "pl", "schedule": "sch", "fusion": "fu"}[task]


def _key(graph: str, devices: int, label: str) -> str:
    return f"{graph}|{devices}|{label}"


def run(out: Path, budget: int = 500, devices: tuple[int, ...] = (PRETRAINED_D,), seed: int = 0,
        runs: Path = Path("runs/go_gdp")) -> list[dict]:
    """Runs every (D, row, graph); resumes from ``results.jsonl``. Returns the records in
    row order (then any other D's from the file), whatever order the file holds them in."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / "results.jsonl"
    done = {r["key"]: r for r in read_jsonl(path)} if path.exists() else {}
    named = graphs()
    cost = cost_params()
    start = time.perf_counter()
    ordered = {}
    for d in devices:
        for row in rows(d, budget):
            scheduler, fusion = SETTINGS[row.table]
            fusion = fusion if row.fusion is None else row.fusion
            options = None
            for name, graph in named.items():
                key = _key(name, d, row.label)
                if key in done:
                    ordered[key] = done[key]
                    continue
                options = row_options(row, d, runs) if options is None else options
                outcome = methods.optimize(row.method, [graph], num_devices=d, budget=budget,
                                           objective="runtime", cost_params=cost, seed=seed,
                                           options=options, scheduler=scheduler,
                                           fusion=fusion)
                result = outcome.results[0]
                record = {"key": key, "graph": name, "num_ops": graph.num_ops, "devices": d,
                          "row": row.label, "table": row.table, "method": row.method,
                          "runtime": result["runtime"], "evals": result["evals_used"],
                          "seconds": outcome.wall_seconds, "held_out": name == HELD_OUT}
                done[key] = ordered[key] = record
                with path.open("a") as f:
                    f.write(json.dumps(record) + "\n")
                log(f"D={d} {row.label} {name}: {result['runtime']:.4g} µs, "
                    f"{outcome.wall_seconds:.1f} s; elapsed "
                    f"{(time.perf_counter() - start) / 60:.1f} min")
            methods.release_compiled(only_if_crowded=True)
    return list(ordered.values()) + [r for k, r in done.items() if k not in ordered]


def report(records: list[dict], budget: int) -> str:
    """The Markdown tables (step time and search time per row, graph and D)."""
    by = {r["key"]: r for r in records}
    names = list(dict.fromkeys(r["graph"] for r in records))
    ops = {r["graph"]: r["num_ops"] for r in records}
    lines = ["# GDP and GO at CPU scale: step time under SPEC §8", "",
             f"Objective: runtime (µs) on the {PRESET.upper()} preset, copies over a "
             f"{LINK_BANDWIDTH:.3g} bytes/µs link with {LINK_LATENCY} µs latency. Searches and "
             f"the \"one\" rows: {budget} cost-model evaluations per graph; zero-shot rows: the "
             f"greedy rounds only. Pre-trained policies: D = {PRETRAINED_D}, held-out family "
             f"`{HELD_OUT}` (*); every other graph was a training graph. Cells: step time "
             "(µs), then search seconds (excluding compilation). Generated by "
             "`python -m eval.go_gdp`.", ""]
    for d in sorted({r["devices"] for r in records}):
        for table, title in (("gdp", "placement (FIFO, no fusion)"),
                             ("go", "placement + scheduling + fusion (priority scheduler, "
                                    "fusion)")):
            labels = list(dict.fromkeys(r["row"] for r in records
                                        if r["devices"] == d and r["table"] == table))
            lines += [f"## D = {d}: {title}", "",
                      "| method | " + " | ".join(
                          f"{n}{' (*)' if n == HELD_OUT else ''} ({ops[n]} ops)"
                          for n in names) + " |",
                      "| --- | " + " | ".join("---:" for _ in names) + " |"]
            for label in labels:
                cells = []
                for n in names:
                    r = by.get(_key(n, d, label))
                    cells.append("—" if r is None else
                                 f"{r['runtime']:.4g} ({r['seconds']:.1f} s)")
                lines.append(f"| {label} | " + " | ".join(cells) + " |")
            lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=int, default=500)
    parser.add_argument("--devices", default=str(PRETRAINED_D),
                        help="comma-separated device counts (pre-trained rows only at "
                             f"{PRETRAINED_D})")
    parser.add_argument("--out", type=Path, default=Path("docs/results/go_gdp"))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--runs", type=Path, default=Path("runs/go_gdp"),
                        help="pre-training runs and untrained exports (default runs/go_gdp)")
    args = parser.parse_args(argv)
    devices = tuple(int(x) for x in args.devices.split(","))
    records = run(args.out, args.budget, devices, args.seed, args.runs)
    (args.out / "README.md").write_text(report(records, args.budget) + "\n")
    log(f"wrote {args.out / 'README.md'}")


if __name__ == "__main__":
    main()
