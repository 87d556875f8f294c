"""The run history: every run's record, kept in SQLite (default) or PostgreSQL (cluster).

One schema and one implementation for both databases, written with SQLAlchemy
Core (no ORM, no dialect-specific SQL). Times are stored as UTC and come back
as aware UTC datetimes, whatever the database does with time zones.

Two layers:

- `HistoryStore` is synchronous and used from one thread at a time.
- `AsyncHistory` puts a store behind one writer thread for the asyncio engine:
  it takes every pending operation at once and commits them in one transaction,
  which is what keeps the history ahead of thousands of runs a second.

The state directory helpers live here too: `prepare_state_dir` makes the folder
private to the user (0700), and the files created in it are 0600 (SPEC R20a).

Errors of the database never leave the store raw: they become HistoryError
and its subclasses (`tuisched.domain.errors` draws the tree).
"""

from typing import TYPE_CHECKING

from tuisched.domain.errors import HistoryError, UnknownRunError
from tuisched.runtime.lazy import lazy_names
from tuisched.runtime.store.database import HistoryStore
from tuisched.runtime.store.schema import ABANDONED_REASON, SCHEMA_VERSION, UTCDateTime
from tuisched.runtime.store.statedir import InstanceLock, create_private_file, prepare_state_dir

if TYPE_CHECKING:
    from tuisched.runtime.store.writer import AsyncHistory

_HOMES = {"AsyncHistory": "tuisched.runtime.store.writer"}
"""Names loaded when first used (PEP 562): a reader of the history (`tuisched history`
with no scheduler) loads no writer thread or journal."""

__all__ = [
    "ABANDONED_REASON",
    "SCHEMA_VERSION",
    "AsyncHistory",
    "HistoryError",
    "HistoryStore",
    "InstanceLock",
    "UTCDateTime",
    "UnknownRunError",
    "create_private_file",
    "prepare_state_dir",
]


__getattr__, __dir__ = lazy_names(__name__, _HOMES)
