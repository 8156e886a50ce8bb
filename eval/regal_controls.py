"""REGAL against its controls (issue #15 §1): docs/results/regal_controls/.

    python -m eval.regal_controls [--seeds 0,1,2] [--max-graphs N]
        [--out docs/results/regal_controls]

Reruns only the (dataset, objective, variant, seed) batches missing from ``--runs`` (default
``runs/regal_controls/results.jsonl``), then writes ``tables.md`` and ``results.jsonl`` in
``--out``. The program is :mod:`gsched.harness.regal_controls`.
"""

import sys

from gsched.harness.regal_controls import main

if __name__ == "__main__":
    sys.exit(main())
