import sys

from gsched.cli import main

sys.exit(main())
