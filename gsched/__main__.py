import sys

from gsched.infra.distributed import one_device_per_core

one_device_per_core()  # before JAX starts: a batch of graphs runs one schedule loop per core

from gsched.cli import main  # noqa: E402

sys.exit(main())
