"""The history a configuration names: whether there is one, and opening it.

Apart from the runtime's wiring, so that a reader of what a stopped scheduler
left (`OfflineControl`: `tuisched jobs`, `history`, `logs`) loads the store and
not the engine.
"""

from __future__ import annotations

from tuisched.domain.model import Config
from tuisched.runtime.store.database import HistoryStore
from tuisched.runtime.store.schema import BUSY_TIMEOUT_MS


def has_history(config: Config) -> bool:
    """Whether there is a history to read; a default database that was never made is none.

    Readers check it first so that looking does not create a database.
    """
    return bool(config.settings.history) or (config.settings.state_dir / "history.db").exists()


def open_history(
    config: Config, *, password: str | None = None, busy_ms: int = BUSY_TIMEOUT_MS
) -> HistoryStore:
    """The history store the configuration names (default: state_dir/history.db);
    `password` for a PostgreSQL one that asks for it (blocking: call it off the loop);
    `busy_ms`: how long a SQLite one waits for another process's lock."""
    if config.settings.history:
        return HistoryStore.open(config.settings.history, password=password)
    return HistoryStore.open_sqlite(config.settings.state_dir / "history.db", busy_ms=busy_ms)
