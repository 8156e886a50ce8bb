"""Reports of a sweep's tidy results (SPEC §7; REGAL Tables 1-2, Figs. 4-5).

    python -m eval.report RESULTS --out docs/results/NAME/ [--reference brkga:5000]

``RESULTS`` is a sweep folder (all its ``results*.jsonl``) or one results file. Writes
``report.md`` (Table 1: quality against the reference entry; Table 2: wall time per graph,
for every dataset, objective and device count) and, with matplotlib (``pip install -e
.[eval]``), ``fig4_improvement_hist.png`` and ``fig5_eval_limit.png``. The numbers are
defined in :mod:`gsched.harness.report` and ``docs/harness.md``.
"""

from __future__ import annotations

import argparse
import sys

from gsched.harness.report import parse_reference, report


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m eval.report",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("results", help="sweep folder or results .jsonl file")
    parser.add_argument("--out", required=True, help="report folder")
    parser.add_argument("--reference", default="brkga:5000",
                        help="reference entry METHOD:BUDGET (default brkga:5000)")
    args = parser.parse_args(argv)
    try:
        path = report(args.results, args.out, parse_reference(args.reference))
    except (OSError, ValueError, KeyError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
