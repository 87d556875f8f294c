"""`python -m tuisched`."""

import sys

from tuisched.frontends.cli import main

sys.exit(main())
