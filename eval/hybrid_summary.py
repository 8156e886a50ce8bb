"""The hybrid's comparison with both parents, from a sweep's results table:

    python -m eval.hybrid_summary runs/hybrid/sweep/results.jsonl

Per dataset and entry (method label, budget): the mean % gap from a reference (approx_dp_10k
where the dataset has it, else the best value any entry found), the mean % improvement over
BRKGA 5K, the share of graphs where the entry is ≤ / < BRKGA 5K, and the mean wall seconds
per graph (compilation excluded). One seed: a graph's value is its single run. The tables are
:func:`gsched.harness.hybrid.parents_summary`.
"""

import argparse
import sys

from gsched.harness.hybrid import parents_summary
from gsched.harness.results import read_rows
from gsched.infra.progress import log


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m eval.hybrid_summary",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("results", help="a results .jsonl file or sweep folder")
    args = parser.parse_args(argv)
    sys.stdout.write(parents_summary(read_rows(args.results, log)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
