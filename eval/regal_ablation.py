"""REGAL Table 3 (action-subset ablation) from the sweep rows and the training metrics.

    python -m eval.regal_ablation docs/results/regal_ablation

Reads, in that folder, ``results.jsonl`` (``eval/configs/regal_ablation.toml``'s sweep) and
``metrics/<row>.jsonl`` (each row's ``runs/regal_ablation/<row>/metrics.jsonl``), and writes
``table3.md`` (per row: mean % improvement over BRKGA 5K on the test graphs, the fraction of
graphs matching or beating it, the best validation improvement and its step, the training wall
time) and ``learning_curves.png`` (train reward and validation improvement against the step).
The table is :func:`gsched.harness.ablations.regal_table3`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from gsched.harness.ablations import plot_regal_curves, regal_table3


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path)
    folder = parser.parse_args(argv).folder
    text, curves = regal_table3(folder)
    (folder / "table3.md").write_text(text)
    plot_regal_curves(curves, folder / "learning_curves.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
