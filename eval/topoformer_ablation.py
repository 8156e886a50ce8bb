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
(``val/ratio_to_xla_list`` against the step, one line per row). The table is
:func:`gsched.harness.ablations.topoformer_table3`.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from gsched.harness.ablations import plot_topoformer_curves, topoformer_table3
from gsched.harness.report import parse_reference
from gsched.infra.progress import log


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
        text, summaries = topoformer_table3(args.config, args.results,
                                            parse_reference(args.reference))
    except (OSError, ValueError, KeyError) as err:  # ConfigError is a ValueError
        print(f"error: {err}", file=sys.stderr)
        return 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "table3.md").write_text(text)
    if not plot_topoformer_curves(summaries, out / "learning_curves.png"):
        log("learning curves skipped: they need matplotlib (pip install -e .[eval])")
    print(json.dumps({"table": str(out / "table3.md")}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
