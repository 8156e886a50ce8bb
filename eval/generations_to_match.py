"""REGAL's generations-to-match (REGAL §4): "for the 88.92 % of test set graphs on which REGAL
ties or improves BRKGA, it matches BRKGA on average in 47.8 % fewer generations than BRKGA".

    python -m eval.generations_to_match --config eval/configs/synthetic.toml \
        [--budget 5000] [--seed 0] [--checkpoint PATH] [--out FILE.md]

On every ``brkga`` cell of the sweep config with that budget and seed (its first device count)
BRKGA and REGAL run on the sweep's batches, cost parameters and key; for each graph where
REGAL ties or beats BRKGA, the report gives the generations (and evaluations) each needed to
reach BRKGA's final value. Definitions: :mod:`gsched.harness.generations`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from gsched.harness.generations import curves, report


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", required=True, help="a sweep config (eval/configs/*.toml)")
    parser.add_argument("--budget", type=int, default=5000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--checkpoint", default=None,
                        help="a REGAL policy (default: the shipped one of each objective)")
    parser.add_argument("--out", default=None, help="also write the report to this file")
    args = parser.parse_args(argv)
    header = (f"# REGAL generations-to-match\n\n`python -m eval.generations_to_match --config "
              f"{args.config} --budget {args.budget} --seed {args.seed}"
              + (f" --checkpoint {args.checkpoint}" if args.checkpoint else "") + "`")
    text = report(curves(args.config, args.budget, args.seed, args.checkpoint), args.budget,
                  header)
    print(text)
    if args.out:
        Path(args.out).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
