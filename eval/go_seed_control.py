"""The control for policy-seeded BRKGA (``gdp`` / ``go`` with ``--decode brkga``): the same
seeding from METIS's solution.

``python -m eval.go_seed_control --help``; the program is :mod:`gsched.harness.go_seed_control`.
"""

import sys

from gsched.harness.go_seed_control import main

if __name__ == "__main__":
    sys.exit(main())
