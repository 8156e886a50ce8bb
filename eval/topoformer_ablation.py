"""NTO Table 3 (Topoformer encoder ablation) from an ablation sweep and its training runs.

    python -m eval.topoformer_ablation --config eval/configs/nto_ablation.toml \
        --results runs/sweeps/nto_ablation --out docs/results/topoformer_ablation \
        [--reference approx_dp_10k:5000]

Rows are the checkpoints of the config's ``topoformer`` entries (``options.checkpoint``, a
training run directory; an entry without one is the shipped default model), columns the % gap
from the reference entry per decoding mode, ``100 (o − o_ref) / o_ref``, as mean ± standard
error over the graphs (both feasible), the encoder, its trainable parameters, the training
steps (best validation step / run) and the training wall time (the run's last
``metrics.jsonl`` ``elapsed``: compilation and validation included). Writes
``OUT/table3.md`` and, with matplotlib, ``OUT/learning_curves.png``
(``val/ratio_to_xla_list`` against the step, one line per row).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tomllib
from pathlib import Path

import equinox as eqx
import jax
import numpy as np

from eval.report import Entry, parse_reference, per_graph
from eval.sweep import read_rows
from gsched.topoformer.method import DEFAULT_CHECKPOINT, MODEL_DIR, load_model
from gsched.training import METRICS_FILE, read_checkpoint_metadata, read_metrics

VALIDATION_KEY = "val/ratio_to_xla_list"


def ablation_entries(config_path: str | Path) -> dict[str, dict[str, Entry]]:
    """``{checkpoint: {decode: (label, budget)}}`` of the config's ``topoformer`` entries, in
    config order (the shipped default model as ``""``)."""
    raw = tomllib.loads(Path(config_path).read_text())
    top_budgets = raw.get("budgets", [])
    rows: dict[str, dict[str, Entry]] = {}
    for method in raw.get("methods", []):
        if method.get("name") != "topoformer":
            continue
        options = method.get("options", {})
        budgets = method.get("budgets", top_budgets)
        if len(budgets) != 1:
            raise ValueError(f"topoformer entry {method.get('label', 'topoformer')!r}: give "
                             f"one budget per ablation entry, got {budgets!r}")
        decode = options.get("decode", "beam")
        rows.setdefault(options.get("checkpoint", ""), {})[decode] = (
            method.get("label", "topoformer"), budgets[0])
    if not rows:
        raise ValueError(f"{config_path}: no topoformer entries")
    return rows


def _model_dir(checkpoint: str) -> Path:
    path = Path(checkpoint) if checkpoint else DEFAULT_CHECKPOINT
    return path / MODEL_DIR if (path / MODEL_DIR).is_dir() else path


def run_summary(checkpoint: str) -> dict:
    """Encoder, parameter count, best step and (for a run directory) its run length, wall
    time and validation curve ``[(step, value)]``."""
    model, config = load_model(_model_dir(checkpoint))
    params = sum(int(np.prod(x.shape)) for x in jax.tree.leaves(eqx.filter(model, eqx.is_array)))
    summary = {"encoder": config.encoder, "params": params,
               "best_step": read_checkpoint_metadata(_model_dir(checkpoint)).get("step"),
               "steps": None, "wall_seconds": math.nan, "curve": []}
    metrics = Path(checkpoint) / METRICS_FILE if checkpoint else None
    if metrics is not None and metrics.exists():
        records = read_metrics(metrics)
        summary |= {"steps": records[-1]["step"] if records else None,
                    "wall_seconds": records[-1]["elapsed"] if records else math.nan,
                    "curve": [(r["step"], r[VALIDATION_KEY]) for r in records
                              if VALIDATION_KEY in r]}
    return summary


def gap_stats(values: dict[str, float], reference: dict[str, float],
              feasible: dict[str, float], ref_feasible: dict[str, float]) -> tuple[float, float]:
    """Mean and standard error of the per-graph % gap ``100 (o − o_ref) / o_ref`` over the
    graphs where both are feasible (NaN where undefined)."""
    graphs = [g for g in sorted(set(values) & set(reference))
              if feasible[g] == 1.0 and ref_feasible[g] == 1.0]
    gaps = np.array([100 * (values[g] - reference[g]) / reference[g] for g in graphs])
    if not gaps.size:
        return math.nan, math.nan
    return float(gaps.mean()), (float(gaps.std(ddof=1) / math.sqrt(gaps.size))
                                if gaps.size > 1 else math.nan)


def _cell(mean: float, error: float) -> str:
    return "—" if math.isnan(mean) else f"{mean:.2f} ± {error:.2f}"


def table3(config_path, results, reference: Entry) -> tuple[str, dict[str, dict]]:
    """The Table 3 markdown and the per-checkpoint summaries."""
    entries = ablation_entries(config_path)
    rows = read_rows(results)
    values, feasible = per_graph(rows, "value"), per_graph(rows, "feasible")
    decodes = sorted({d for per in entries.values() for d in per},
                     key=("greedy", "sample", "beam").index)
    summaries = {c: run_summary(c) for c in entries}
    lines = []
    for (dataset, objective, devices), per_entry in sorted(values.items()):
        if reference not in per_entry:
            raise ValueError(f"reference {reference[0]}:{reference[1]} has no rows in "
                             f"{dataset} ({objective}, D = {devices})")
        ref, ref_ok = per_entry[reference], feasible[(dataset, objective, devices)][reference]
        lines += [f"## {dataset} — {objective}, D = {devices} ({len(ref)} graphs)", "",
                  "| row (checkpoint) | encoder | "
                  + " | ".join(f"{d} gap %" for d in decodes)
                  + " | parameters | steps (best / run) | training wall time |",
                  "|---|---|" + "---:|" * (len(decodes) + 3)]
        for checkpoint, per_decode in entries.items():
            s = summaries[checkpoint]
            gaps = [_cell(*gap_stats(per_entry[per_decode[d]], ref,
                                     feasible[(dataset, objective, devices)][per_decode[d]],
                                     ref_ok))
                    if per_decode.get(d) in per_entry else "—" for d in decodes]
            wall = "—" if math.isnan(s["wall_seconds"]) else f"{s['wall_seconds'] / 60:.1f} min"
            lines.append(f"| {checkpoint or 'shipped default'} | {s['encoder']} | "
                         + " | ".join(gaps)
                         + f" | {s['params']:,} | {s['best_step']} / {s['steps'] or '—'} | "
                         f"{wall} |")
        lines.append("")
    header = [f"# Table 3: encoder ablation (gap from {reference[0]} {reference[1]})", "",
              "Gap = `100 (o − o_ref) / o_ref` per graph: mean ± standard error over the "
              "graphs (as the paper's ±); lower is better. Training wall time includes "
              "compilation and validation.", ""]
    return "\n".join(header + lines), summaries


def plot_curves(summaries: dict[str, dict], path: Path) -> bool:
    """Validation ratio against the step, one line per run; False without matplotlib."""
    try:
        import matplotlib
    except ImportError:
        return False
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for checkpoint, s in summaries.items():
        if s["curve"]:
            steps, values = zip(*s["curve"])
            ax.plot(steps, values, marker="o", markersize=3, label=Path(checkpoint).name)
    ax.set(xlabel="training step", ylabel="validation greedy peak / xla_list peak",
           title="Topoformer encoder ablation: learning curves")
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m eval.topoformer_ablation",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", required=True, help="the ablation sweep config (TOML)")
    parser.add_argument("--results", required=True, help="its sweep folder or results file")
    parser.add_argument("--out", required=True, help="report folder")
    parser.add_argument("--reference", default="approx_dp_10k:5000",
                        help="reference entry METHOD:BUDGET (default approx_dp_10k:5000)")
    args = parser.parse_args(argv)
    try:
        text, summaries = table3(args.config, args.results, parse_reference(args.reference))
    except (OSError, ValueError, KeyError, tomllib.TOMLDecodeError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "table3.md").write_text(text)
    if not plot_curves(summaries, out / "learning_curves.png"):
        print("learning curves skipped: they need matplotlib (pip install -e .[eval])",
              file=sys.stderr)
    print(json.dumps({"table": str(out / "table3.md")}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
