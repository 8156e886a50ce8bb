"""How ``topoformer_brkga``'s default concentration was chosen, on fresh graphs.

``python -m eval.hybrid_concentration --help``; the program is :mod:`gsched.harness.hybrid_concentration`.
"""

import sys

from gsched.harness.hybrid_concentration import main

if __name__ == "__main__":
    sys.exit(main())
