"""GDP's and GO's results tables at CPU scale: ``python -m eval.go_gdp [--budget 500]
[--devices 4] [--out docs/results/go_gdp] [--runs runs/go_gdp]`` (see
:mod:`gsched.harness.go_gdp`)."""

from gsched.harness.go_gdp import main

if __name__ == "__main__":
    main()
