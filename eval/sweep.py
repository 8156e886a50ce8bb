"""Evaluation sweeps: datasets × objectives × devices × methods × budgets × seeds (issue #3).

    python -m eval.sweep --config eval/configs/NAME.toml [--out DIR] [--resume] [--shards K]

Every method runs through :func:`gsched.methods.optimize`, one batch of ``batch_size`` graphs
at a time; the rows (one per dataset, graph, objective, devices, method, seed and budget) are
appended to ``DIR/results.jsonl`` after every batch (default ``DIR = runs/sweeps/<config
stem>``). ``--resume`` skips the cells already there with the current cell hash; ``--shards``
splits each batch (its graphs, else each graph's chromosomes) over that many local devices
(default all; on a CPU one device per core unless ``XLA_FLAGS`` sets a count). Under
``jax.distributed`` each process runs its share and writes ``results.p{i}.jsonl``. The library
is :mod:`gsched.harness` (config, units, results, run); the config format, resume and
multi-process use are in ``docs/harness.md``, example
configs in ``eval/configs/``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from gsched.harness.config import load_config
from gsched.harness.run import run_sweep
from gsched.infra.distributed import one_device_per_core


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m eval.sweep",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", required=True, help="TOML sweep config")
    parser.add_argument("--out", help="results folder (default runs/sweeps/<config stem>)")
    parser.add_argument("--resume", action="store_true",
                        help="continue the sweep in --out, skipping finished cells")
    parser.add_argument("--shards", type=int,
                        help="local devices each batch is split over (default: all)")
    args = parser.parse_args(argv)
    try:
        config = load_config(args.config)
        out = Path(args.out or Path("runs/sweeps") / config.name)
        rows = run_sweep(config, out, resume=args.resume, shards=args.shards)
    except ValueError as err:  # ConfigError, FormatError, bad settings, existing results
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(json.dumps({"results": str(out), "rows": len(rows)}))
    return 0


if __name__ == "__main__":
    one_device_per_core()  # before JAX starts: each batch split over the cores by default
    sys.exit(main())
