"""Train a GDP policy with PPO: ``python -m train.gdp --config train/configs/gdp_small.toml
[--run-dir DIR] [--resume | --overwrite] [key=value ...]``.

The trainer itself (configs, data, references, validation, export) is
:mod:`gsched.policies.go.training`.
"""

from gsched.policies.go.training import main

if __name__ == "__main__":
    raise SystemExit(main(prog="python -m train.gdp"))
