"""``python -m gsched.workloads build --out DIR ...`` (gsched/workloads/build.py)."""

import sys

from gsched.workloads.build import main

sys.exit(main())
