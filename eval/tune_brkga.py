"""Grid search for the tuned BRKGA settings (REGAL §4.2) on training graphs.

``python -m eval.tune_brkga --help``; the program is :mod:`gsched.harness.tune_brkga`.
"""

import sys

from gsched.harness.tune_brkga import main

if __name__ == "__main__":
    sys.exit(main())
