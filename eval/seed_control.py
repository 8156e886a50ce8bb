"""The control for Topoformer-seeded BRKGA: the same seeding from XLA's default scheduler's order.

``python -m eval.seed_control --help``; the program is :mod:`gsched.harness.seed_control`.
"""

import sys

from gsched.harness.seed_control import main

if __name__ == "__main__":
    sys.exit(main())
