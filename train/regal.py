"""Train a REGAL policy: ``python -m train.regal --config train/configs/regal_small.toml
[--run-dir DIR] [--resume | --overwrite] [key=value ...]``.

The trainer itself (configs, data, validation, export) is :mod:`gsched.policies.regal.training`.
"""

from gsched.policies.regal.training import main

if __name__ == "__main__":
    raise SystemExit(main())
