"""Ablation tables (Table 3 of REGAL and of NTO) from a sweep's rows and the training runs.

* **REGAL Table 3** (:func:`regal_table3`): which action groups are learned. Per row, the mean
  % improvement over BRKGA 5K on the test graphs, the fraction of graphs matching or beating
  it, the best validation improvement and its step, the training wall time; and the learning
  curves (:func:`plot_regal_curves`).
* **NTO Table 3** (:func:`topoformer_table3`): the Topoformer's encoder. Rows are the
  checkpoints of the sweep config's ``topoformer`` entries, columns the % gap from a reference
  entry per decoding mode (mean ± standard error over the graphs where both are feasible),
  the encoder, its parameters, the training steps and wall time; and the validation curves
  (:func:`plot_topoformer_curves`).

The plots import matplotlib (the ``eval`` extra) only when they are drawn.
"""

from __future__ import annotations

import math
from pathlib import Path

import equinox as eqx
import jax
import numpy as np

from gsched.harness.config import read_spec
from gsched.harness.report import Entry, per_graph, tables
from gsched.harness.results import read_rows
from gsched.infra.checkpoint import read_checkpoint_metadata
from gsched.infra.progress import log, read_metrics
from gsched.infra.train_loop import METRICS_FILE
from gsched.policies.topoformer.checkpoint import (
    DEFAULT_CHECKPOINT,
    MODEL_DIR,
    load_model,
)

# --- REGAL Table 3: learned action groups ---------------------------------------------------

REGAL_REFERENCE = ("brkga", 5000)
# (sweep label, run directory name, learned groups, REGAL Table 3's Test column for the row).
REGAL_ROWS = [
    ("regal_p", "placement", "placement", "−0.2 %"),
    ("regal_s", "scheduling", "scheduling", "3.65 %"),
    ("regal_ps", "placement_scheduling", "placement + scheduling", "3.56 %"),
    ("regal_pe", "placement_elite", "placement + elite bias", "−1.1 %"),
    ("regal_se", "scheduling_elite", "scheduling + elite bias", "1.4 %"),
    ("regal_pse", "placement_scheduling_elite", "placement + scheduling + elite bias",
     "1.88 %"),
]


def regal_table3(folder: Path) -> tuple[str, dict[str, list[dict]]]:
    """The Table 3 markdown of ``folder`` (its ``results.jsonl`` and ``metrics/<row>.jsonl``)
    and each row's training metrics, by learned groups. A row without sweep rows or metrics is
    skipped with a note."""
    rows = read_rows(folder / "results.jsonl")
    (section, stats), = tables(rows, REGAL_REFERENCE).items()  # one dataset, objective and D
    lines = [f"# REGAL Table 3: learned action groups ({section[0]}, {section[1]}, "
             f"D = {section[2]})", "",
             "| learned groups | test: mean % over BRKGA 5K | ≥ BRKGA 5K | best valid % (step) "
             "| train wall time | paper Test |", "| --- | --- | --- | --- | --- | --- |"]
    curves = {}
    for label, run, groups, paper in REGAL_ROWS:
        path = folder / "metrics" / f"{run}.jsonl"
        entry = stats.get((label, REGAL_REFERENCE[1]))
        if entry is None or not path.exists():
            log(f"{label}: no sweep rows or no {path}, row skipped")
            continue
        metrics = read_metrics(path)
        valid = [m for m in metrics if "val/improvement_pct" in m]
        best = max(valid, key=lambda m: m["val/reward"])
        minutes = metrics[-1]["elapsed"] / 60
        lines.append(f"| {groups} | {entry.improvement_mean:+.2f} | "
                     f"{100 * entry.match_or_beat:.0f} % | "
                     f"{best['val/improvement_pct']:+.2f} ({best['step']}) | "
                     f"{minutes:.0f} min | {paper} |")
        curves[groups] = metrics
    return "\n".join(lines) + "\n", curves


def plot_regal_curves(curves: dict[str, list[dict]], path: Path) -> None:
    """Train reward and validation improvement against the step, one line per row."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    for groups, metrics in curves.items():
        ax1.plot([m["step"] for m in metrics], [m["reward"] for m in metrics], label=groups)
        valid = [m for m in metrics if "val/improvement_pct" in m]
        ax2.plot([m["step"] for m in valid], [m["val/improvement_pct"] for m in valid],
                 marker="o", label=groups)
    ax1.set(xlabel="step", ylabel="train reward −o/o_BRKGA (mean of logged steps)",
            title="training reward (200-evaluation rollouts)")
    ax2.axhline(0, color="gray", linewidth=0.8)
    ax2.set(xlabel="step", ylabel="% improvement over uniform BRKGA",
            title="validation (12 graphs, 800 evaluations, greedy)")
    for ax in (ax1, ax2):
        ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# --- NTO Table 3: the Topoformer's encoder -------------------------------------------------

VALIDATION_KEY = "val/ratio_to_xla_list"


def ablation_entries(config_path: str | Path) -> dict[str, dict[str, Entry]]:
    """``{checkpoint: {decode: (label, budget)}}`` of the sweep config's ``topoformer``
    entries, in config order (the shipped default model as ``""``)."""
    spec = read_spec(config_path)
    rows: dict[str, dict[str, Entry]] = {}
    for method in spec.methods:
        if method.name != "topoformer":
            continue
        label = "topoformer" if method.label is None else method.label
        budgets = method.budgets if method.budgets is not None else spec.budgets or ()
        if len(budgets) != 1:
            raise ValueError(f"topoformer entry {label!r}: give one budget per ablation entry, "
                             f"got {list(budgets)!r}")
        decode = method.options.get("decode", "beam")
        rows.setdefault(method.options.get("checkpoint", ""), {})[decode] = (label, budgets[0])
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


def topoformer_table3(config_path: str | Path, results: str | Path, reference: Entry
                      ) -> tuple[str, dict[str, dict]]:
    """The Table 3 markdown and the per-checkpoint summaries (:func:`run_summary`)."""
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


def plot_topoformer_curves(summaries: dict[str, dict], path: Path) -> bool:
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
