"""REGAL Table 3 (action-subset ablation) from the sweep rows and the training metrics.

    python -m eval.regal_ablation docs/results/regal_ablation

Reads, in that folder, ``results.jsonl`` (``eval/configs/regal_ablation.toml``'s sweep) and
``metrics/<row>.jsonl`` (each row's ``runs/regal_ablation/<row>/metrics.jsonl``), and writes
``table3.md`` (per row: mean % improvement over BRKGA 5K on the test graphs, the fraction of
graphs matching or beating it, the best validation improvement and its step, the training wall
time) and ``learning_curves.png`` (train reward and validation improvement against the step).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from eval.report import tables
from eval.sweep import read_rows
from gsched.training import read_metrics

REFERENCE = ("brkga", 5000)
# (sweep label, run directory name, learned groups, REGAL Table 3's Test column for the row).
ROWS = [
    ("regal_p", "placement", "placement", "−0.2 %"),
    ("regal_s", "scheduling", "scheduling", "3.65 %"),
    ("regal_ps", "placement_scheduling", "placement + scheduling", "3.56 %"),
    ("regal_pe", "placement_elite", "placement + elite bias", "−1.1 %"),
    ("regal_se", "scheduling_elite", "scheduling + elite bias", "1.4 %"),
    ("regal_pse", "placement_scheduling_elite", "placement + scheduling + elite bias",
     "1.88 %"),
]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path)
    folder = parser.parse_args(argv).folder
    rows = read_rows(folder / "results.jsonl")
    (section, stats), = tables(rows, REFERENCE).items()  # one dataset, objective and D
    lines = [f"# REGAL Table 3: learned action groups ({section[0]}, {section[1]}, "
             f"D = {section[2]})", "",
             "| learned groups | test: mean % over BRKGA 5K | ≥ BRKGA 5K | best valid % (step) "
             "| train wall time | paper Test |", "| --- | --- | --- | --- | --- | --- |"]
    curves = {}
    for label, run, groups, paper in ROWS:
        path = folder / "metrics" / f"{run}.jsonl"
        entry = stats.get((label, REFERENCE[1]))
        if entry is None or not path.exists():
            print(f"{label}: no sweep rows or no {path}, row skipped", file=sys.stderr)
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
    (folder / "table3.md").write_text("\n".join(lines) + "\n")
    _plot(curves, folder / "learning_curves.png")
    return 0


def _plot(curves: dict[str, list[dict]], path: Path) -> None:
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


if __name__ == "__main__":
    sys.exit(main())
