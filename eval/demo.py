"""BRKGA against random search on built-in graphs, equal budgets (``make demo``).

``python -m eval.demo --help``; the program is :mod:`gsched.harness.demo`.
"""

import sys

from gsched.harness.demo import main

if __name__ == "__main__":
    sys.exit(main())
