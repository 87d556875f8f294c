"""Noticing a SQLite history file damaged while the scheduler runs (issue 26).

A file is checked for damage when it is opened; damage that comes later (a
disk that fails, a stray write into the file) is noticed two ways. A read
or write that fails with SQLite's words for it ("database disk image is
malformed", "file is not a database") marks the store damaged at once
(`HistoryStore.mark_damaged`). And since the writer's own connection may
serve pages from its cache for a long time, `keep_checking` looks at the
file itself every `CHECK_EVERY_SECONDS`: `PRAGMA quick_check` on a fresh
read-only connection in the files lane (never the loop, never the writer
thread), cut short after `CHECK_BUDGET_SECONDS` on a large file.

Either way it is said once, in one ERROR line naming the file and what to
do; the writer then keeps the runs' records in memory, as in any outage.
"""

from __future__ import annotations

import functools
import logging
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import quote

from tuisched.domain.errors import HistoryError
from tuisched.runtime.clock import Clock
from tuisched.runtime.store.database import HistoryStore
from tuisched.runtime.store.writer import AsyncHistory
from tuisched.runtime.threads import Lane, in_thread

log = logging.getLogger(__name__)

CHECK_EVERY_SECONDS = 300.0
"""How often the SQLite file is checked for damage while the scheduler runs."""
CHECK_BUDGET_SECONDS = 2.0
"""How long one check may take; a check cut short finds nothing (the next one tries)."""
_PROGRESS_STEPS = 10_000
"""SQLite virtual machine steps between looks at the clock during a check."""
_DAMAGE_WORDS = ("malformed", "not a database", "corrupt")


def check_sqlite_file(
    path: Path,
    budget: float = CHECK_BUDGET_SECONDS,
    monotonic: Callable[[], float] = time.monotonic,
) -> str | None:
    """What is wrong with the SQLite file at `path`, or None when nothing was found
    (healthy, locked, gone, or not checked through within `budget` seconds, read on
    `monotonic`: the runtime's clock, safe from the lane's thread).

    Blocking: call it in a lane. The file is opened read-only and never changed.
    """
    ends = monotonic() + budget
    uri = f"file:{quote(str(path))}?mode=ro"
    try:
        connection = sqlite3.connect(uri, uri=True, timeout=budget, check_same_thread=False)
    except sqlite3.Error:
        return None  # not there, or not readable now: the writer says so if it matters
    try:
        connection.set_progress_handler(lambda: monotonic() > ends, _PROGRESS_STEPS)
        found = [str(row[0]) for row in connection.execute("PRAGMA quick_check(5)")]
    except sqlite3.OperationalError:  # locked, or cut short: nothing known
        return None
    except sqlite3.DatabaseError as error:
        said = str(error)
        return said if any(word in said for word in _DAMAGE_WORDS) else None
    finally:
        connection.close()
    if found == ["ok"]:
        return None
    lines = [part for line in found for part in line.splitlines()]
    return "; ".join(line for line in lines if not line.startswith("***")) or "quick_check failed"


async def keep_checking(history: AsyncHistory, path: Path, clock: Clock) -> None:
    """Check the file every `CHECK_EVERY_SECONDS` until damage is found (then the store
    is marked damaged, which says so) or the task is cancelled."""
    while True:
        await clock.sleep(CHECK_EVERY_SECONDS)
        try:
            said = await in_thread(
                Lane.FILES, check_sqlite_file, path, CHECK_BUDGET_SECONDS, clock.monotonic
            )
            if said is not None:
                await history.call(functools.partial(HistoryStore.mark_damaged, said=said))
                return
        except HistoryError:  # closed meanwhile: the scheduler is stopping
            return
        except Exception:  # a bug must not end the checks for the scheduler's life
            log.exception("checking the history %s for damage failed", path)
