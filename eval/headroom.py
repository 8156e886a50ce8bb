"""Peak-memory headroom over BRKGA 5K per graph (issue #15 §2): docs/results/regal_headroom/.

    python -m eval.headroom [--max-graphs 16] [--runs runs/headroom/results.jsonl]
        [--out docs/results/regal_headroom]

Resumable: batches already in ``--runs`` are not rerun. The program is
:mod:`gsched.harness.headroom`.
"""

import sys

from gsched.harness.headroom import main

if __name__ == "__main__":
    sys.exit(main())
