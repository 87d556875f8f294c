"""How much one question may ask for: a simulation's window and listing, a plan's slots,
a page of the history.

Apart from the simulator (`simulate.py`) and what it imports, so that the
command line states them in its help without loading it.
"""

from __future__ import annotations

from datetime import timedelta

MAX_WINDOW = timedelta(days=366)
"""The longest window simulated: a year (and a leap day)."""
DEFAULT_LIMIT = 10_000
"""Runs listed when the caller does not say."""
MAX_LIMIT = 100_000
"""The most runs one answer may list."""
MAX_PLAN = 1_000
"""The most slots one plan lists (the console shows ten)."""
MOST_ROWS = 2**63 - 1
"""The largest row count or offset a history database takes (a signed 64-bit integer)."""
