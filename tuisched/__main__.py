"""`python -m tuisched`."""

import sys

from tuisched.cli import main

sys.exit(main())
