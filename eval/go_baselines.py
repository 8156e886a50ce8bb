"""GO / GDP baseline step-time table (docs/results/go_baselines/).

``python -m eval.go_baselines --help``; the program is :mod:`gsched.harness.go_baselines`.
"""

from gsched.harness.go_baselines import main

if __name__ == "__main__":
    main()
