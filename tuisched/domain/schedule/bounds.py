"""How much schedule math one question may ask for: a simulation's window and listing.

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
