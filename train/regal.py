"""Train a REGAL policy: ``python -m train.regal --config train/configs/regal_small.toml
[--run-dir DIR] [--resume | --overwrite] [key=value ...]``.

The trainer itself (configs, data, validation, export) is :mod:`gsched.policies.regal.training`.
Run as a program, it asks XLA for one CPU device per core first (unless ``XLA_FLAGS`` sets a
count), so that on a CPU each step's batch is split over the cores, one BRKGA loop per core,
with the same results as on one device.
"""

from gsched.infra.distributed import one_device_per_core
from gsched.policies.regal.training import main

if __name__ == "__main__":
    one_device_per_core()
    raise SystemExit(main())
