"""BRKGA 5K wall-time benchmark (``make bench``), written to ``docs/benchmarks.md``.

``python -m eval.bench_brkga --help``; the program is :mod:`gsched.harness.brkga_bench`.
"""

from gsched.harness.brkga_bench import main

if __name__ == "__main__":
    main()
