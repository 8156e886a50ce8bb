"""Train a Topoformer: ``python -m train.topoformer --config train/configs/topoformer_small.toml
[--run-dir DIR] [--resume | --overwrite] [key=value ...]``.

The trainer itself (configs, data, validation, export) is :mod:`gsched.policies.topoformer.training`.
"""

from gsched.policies.topoformer.training import main

if __name__ == "__main__":
    raise SystemExit(main())
