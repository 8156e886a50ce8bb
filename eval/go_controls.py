"""Controls for a GDP / GO policy on fresh graphs of its training config (or its validation graphs).

``python -m eval.go_controls --help``; the program is :mod:`gsched.harness.go_controls`.
"""

from gsched.harness.go_controls import main

if __name__ == "__main__":
    main()
