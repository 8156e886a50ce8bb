"""XLA's schedule as the baseline, and a reality check of the memory model (docs/results/xla/).

``python -m eval.xla_check --help``; the program is :mod:`gsched.harness.xla_check`.
"""

from gsched.harness.xla_check import main

if __name__ == "__main__":
    main()
