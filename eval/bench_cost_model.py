"""Cost-model throughput benchmark (``make bench``), written to ``docs/benchmarks.md``.

``python -m eval.bench_cost_model --help``; the program is :mod:`gsched.harness.cost_model_bench`.
"""

from gsched.harness.cost_model_bench import main

if __name__ == "__main__":
    main()
