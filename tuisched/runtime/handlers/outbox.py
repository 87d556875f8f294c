"""Alerts not delivered yet, kept in the state directory so that the next start sends them.

An alert mail or webhook post is *kept* as soon as it is ready to send (its
message or body is built): what to send, and what the events about it name,
go into `alerts.json` in the state directory. It leaves the file once it is
delivered or given up. So a scheduler that stops, or is killed, with alerts
queued, in flight or waiting for a retry sends them at its next start. That
is at least once: an alert delivered just before a kill -9 may go out again.
A mail whose template was still being rendered at the stop is not kept.

The file is rewritten whole and atomically (temporary file, fsync, rename,
then the folder fsynced) in the files lane, never on the loop; changes made
while a write is under way are written together by the next one. Reading it
refuses a link, a file that is not regular or is larger than
`MAX_FILE_BYTES`, and anything that is not what this module writes: one log
line, and the start goes on without them (the next write replaces the file).
At the next start, alerts kept longer than `MAX_AGE` are dropped, as are all
but the newest `MAX_KEPT`, with one line each.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from tuisched.domain.errors import StateError
from tuisched.domain.schedule.duration import format_duration
from tuisched.domain.text import counted
from tuisched.runtime.clock import Clock
from tuisched.runtime.privatefiles import WriteTrouble, fsync_folder, open_private
from tuisched.runtime.threads import Lane, in_thread

log = logging.getLogger(__name__)

OUTBOX_FILE = "alerts.json"
"""The file in the state directory."""
MAX_AGE = timedelta(hours=24)
"""Alerts kept longer than this are dropped at the next start: the news is stale."""
MAX_KEPT = 200
"""Alerts kept at most; beyond it the oldest are dropped."""
MAX_ALERT_BYTES = 128 * 1024
"""A message or body larger than this is not kept (it is still sent now)."""
MAX_FILE_BYTES = 32 * 1024 * 1024
"""A larger file is not read: nothing this module writes comes near it."""
_VERSION = 1
MAIL = "mail"
WEBHOOK = "webhook"


@dataclass(frozen=True, slots=True, kw_only=True)
class KeptAlert:
    """One alert ready to send: the text to send and what the events about it name."""

    key: str
    """Unique: how a delivery tells the outbox it is done."""
    channel: str
    """`mail` or `webhook`."""
    kept_at: datetime
    job: str
    run_id: str
    alert: str
    """The event it is about: `success`, `failed` or `not_started`."""
    to: tuple[str, ...]
    """The recipients of a mail; the name of the webhook for a post."""
    payload: str
    """The whole mail (headers and body), or the body of the post."""

    @classmethod
    def new(cls, *, channel: str, at: datetime, job: str, run_id: str, alert: str,
            to: tuple[str, ...], payload: str) -> KeptAlert:  # fmt: skip
        """A kept alert with a fresh key."""
        return cls(key=uuid.uuid4().hex, channel=channel, kept_at=at, job=job, run_id=run_id,
                   alert=alert, to=to, payload=payload)  # fmt: skip


class Outbox:
    """The alerts not delivered yet, in memory and in `alerts.json` (see the module)."""

    def __init__(self, path: Path, clock: Clock) -> None:
        """Keep alerts in `path`; nothing is read or written before `load` or `keep`."""
        self._path = path
        self._clock = clock
        self._alerts: dict[str, KeptAlert] = {}
        self._dirty = False
        self._saving: asyncio.Task[None] | None = None
        self._trouble = WriteTrouble(log, str(path))

    def __len__(self) -> int:
        return len(self._alerts)

    def __contains__(self, key: object) -> bool:
        """Whether the alert `key` is kept (not delivered, given up or dropped yet)."""
        return key in self._alerts

    async def load(self) -> list[KeptAlert]:
        """The alerts a previous scheduler kept and that are still worth sending, oldest
        first; they stay kept until `done`. Never raises: a file that cannot be used is
        one log line."""
        try:
            found, problem = await in_thread(Lane.FILES, read_kept, self._path)
        except Exception as error:  # a bug here must not stop the start
            found, problem = [], f"{type(error).__name__}: {error}"
        if problem is not None:
            log.warning("kept alerts %s not used: %s", self._path, problem)
        fresh = _drop_stale(found, self._clock.now())
        self._alerts = {alert.key: alert for alert in fresh}
        if len(fresh) != len(found):
            self._changed()
        return fresh

    def keep(self, alert: KeptAlert) -> bool:
        """Keep `alert` until `done`; False (and a log line) when it is too large to keep."""
        if len(alert.payload) > MAX_ALERT_BYTES:
            log.warning("%s alert for job %r is too large to keep for the next start",
                        alert.alert, alert.job)  # fmt: skip
            return False
        self._alerts[alert.key] = alert
        if len(self._alerts) > MAX_KEPT:
            oldest = next(iter(self._alerts))
            dropped = self._alerts.pop(oldest)
            log.warning("more than %d alerts kept: the oldest (%s for job %r) is dropped",
                        MAX_KEPT, dropped.alert, dropped.job)  # fmt: skip
        self._changed()
        return True

    def done(self, key: str) -> None:
        """The alert `key` was delivered or given up: it is no longer kept."""
        if self._alerts.pop(key, None) is not None:
            self._changed()

    async def close(self) -> None:
        """Wait for the last write (call it once the deliveries were drained), and say
        what is kept."""
        await self._written()
        if self._trouble.failures:  # the last write failed: one more try before the end
            self._changed()
            await self._written()
        if self._alerts and self._trouble.failures:
            log.error("%s not delivered before the stop could not be kept in %s: lost",
                      counted(len(self._alerts), "alert"), self._path)  # fmt: skip
        elif self._alerts:
            log.warning("%s not delivered before the stop kept in %s, to send at the next "
                        "start", counted(len(self._alerts), "alert"), self._path)  # fmt: skip

    async def _written(self) -> None:
        while self._saving is not None:
            await asyncio.shield(self._saving)

    def _changed(self) -> None:
        """Write the file soon (one write at a time; the next one takes every change)."""
        self._dirty = True
        if self._saving is None:
            self._saving = asyncio.get_running_loop().create_task(self._save())

    async def _save(self) -> None:
        try:
            while self._dirty:
                self._dirty = False
                alerts = list(self._alerts.values())
                try:
                    await in_thread(Lane.FILES, write_kept, self._path, alerts)
                except Exception as error:  # a full disk, a planted file: said once
                    self._trouble.failed(error)
                else:
                    self._trouble.succeeded()
        finally:
            self._saving = None


def _drop_stale(found: list[KeptAlert], now: datetime) -> list[KeptAlert]:
    """`found` without the alerts older than `MAX_AGE` and beyond the newest `MAX_KEPT`."""
    fresh = [alert for alert in found if now - alert.kept_at <= MAX_AGE]
    if len(fresh) < len(found):
        stale = counted(len(found) - len(fresh), "kept alert")
        log.warning("%s older than %s dropped, not sent", stale, format_duration(MAX_AGE))
    fresh.sort(key=lambda alert: alert.kept_at)
    if len(fresh) > MAX_KEPT:
        log.warning("%s beyond the newest %d dropped, not sent",
                    counted(len(fresh) - MAX_KEPT, "kept alert"), MAX_KEPT)  # fmt: skip
        fresh = fresh[-MAX_KEPT:]
    return fresh


# --- the file (blocking: in the files lane) ---------------------------------------------


def write_kept(path: Path, alerts: list[KeptAlert]) -> None:
    """Replace `path` with `alerts` atomically; remove it when there are none.

    A link at `path` is replaced, never followed (a rename does not follow it).

    Raises:
        OSError, StateError: the file cannot be written (the old one is left).
    """
    if not alerts:
        path.unlink(missing_ok=True)
        return
    document = {"version": _VERSION, "alerts": [_encoded(alert) for alert in alerts]}
    data = json.dumps(document, ensure_ascii=False).encode("utf-8")
    temp = path.with_name(f".{path.name}.tmp")
    temp.unlink(missing_ok=True)  # a leftover (or a planted link) of an earlier write
    fd = open_private(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        temp.replace(path)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    fsync_folder(path.parent)


def read_kept(path: Path) -> tuple[list[KeptAlert], str | None]:
    """The alerts in `path` (none when it does not exist), and what was wrong with it.

    Never raises for what the file holds: a link, a file that is not regular, too
    large, not JSON or not as written here gives no alerts and the reason. Alerts
    that are not as written here are skipped, and counted in the reason.
    """
    try:
        path.lstat()
    except FileNotFoundError:
        return [], None
    except OSError as error:
        return [], error.strerror or str(error)
    try:
        data = _read_bounded(path)
    except StateError as error:
        return [], str(error)
    except OSError as error:
        return [], error.strerror or str(error)
    if data is None:
        return [], f"larger than {MAX_FILE_BYTES // (1024 * 1024)} MiB"
    try:
        document = json.loads(data)
    except (ValueError, RecursionError):
        return [], "not JSON as tuisched writes it"
    entries = document.get("alerts") if isinstance(document, dict) else None
    if not isinstance(entries, list) or document.get("version") != _VERSION:
        return [], "not a list of alerts as tuisched writes it"
    alerts = [alert for entry in entries if (alert := _decoded(entry)) is not None]
    if len(alerts) < len(entries):
        return (
            alerts,
            f"{len(entries) - len(alerts)} of {counted(len(entries), 'entry', 'entries')} damaged",
        )
    return alerts, None


def _read_bounded(path: Path) -> bytes | None:
    """The bytes of `path`, or None when it is larger than `MAX_FILE_BYTES`."""
    fd = open_private(path, os.O_RDONLY)
    with os.fdopen(fd, "rb") as file:
        if os.fstat(file.fileno()).st_size > MAX_FILE_BYTES:
            return None
        data = file.read(MAX_FILE_BYTES + 1)
    return None if len(data) > MAX_FILE_BYTES else data


def _encoded(alert: KeptAlert) -> dict[str, Any]:
    return {
        "key": alert.key, "channel": alert.channel, "kept_at": alert.kept_at.isoformat(),
        "job": alert.job, "run_id": alert.run_id, "alert": alert.alert, "to": list(alert.to),
        "payload": alert.payload,
    }  # fmt: skip


_TEXT_FIELDS = ("key", "job", "run_id", "alert", "payload")


def _decoded(entry: object) -> KeptAlert | None:
    """The alert `entry` holds, or None when it is not as `_encoded` makes them."""
    if not isinstance(entry, Mapping):
        return None
    texts = [entry.get(name) for name in _TEXT_FIELDS]
    to = entry.get("to")
    if not all(isinstance(text, str) for text in texts) or not isinstance(to, list):
        return None
    if not to or not all(isinstance(item, str) for item in to):
        return None
    if entry.get("channel") not in (MAIL, WEBHOOK):
        return None
    try:
        kept_at = datetime.fromisoformat(str(entry.get("kept_at")))
    except ValueError:
        return None
    if kept_at.tzinfo is None or len(str(entry["payload"])) > MAX_ALERT_BYTES:
        return None
    key, job, run_id, alert, payload = (str(text) for text in texts)
    return KeptAlert(key=key, channel=str(entry["channel"]), kept_at=kept_at, job=job,
                     run_id=run_id, alert=alert, to=tuple(to), payload=payload)  # fmt: skip
