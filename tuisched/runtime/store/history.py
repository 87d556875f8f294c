"""The history a configuration names: whether there is one, and opening it.

Apart from the runtime's wiring, so that a reader of what a stopped scheduler
left (`OfflineControl`: `tuisched jobs`, `history`, `logs`) loads the store and
not the engine.
"""

from __future__ import annotations

from tuisched.domain.model import Config
from tuisched.runtime.store.database import HistoryStore


def has_history(config: Config) -> bool:
    """Whether there is a history to read; a default database that was never made is none.

    Readers check it first so that looking does not create a database.
    """
    return bool(config.settings.history) or (config.settings.state_dir / "history.db").exists()


def open_history(config: Config, *, password: str | None = None) -> HistoryStore:
    """The history store the configuration names (default: state_dir/history.db);
    `password` for a PostgreSQL one that asks for it (blocking: call it off the loop)."""
    if config.settings.history:
        return HistoryStore.open(config.settings.history, password=password)
    return HistoryStore.open_sqlite(config.settings.state_dir / "history.db")
