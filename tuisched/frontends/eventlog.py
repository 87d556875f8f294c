"""Turns bus events into log records: human-readable lines or JSON objects."""

from __future__ import annotations

import json
import logging
import logging.handlers
import queue
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from tuisched.domain.events import (
    ConfigChangedOnDisk,
    ConfigLoaded,
    ConfigRejected,
    Event,
    RunAbandoned,
    RunEvent,
    RunFinished,
    RunNotStarted,
    RunOutputWritten,
    RunQueued,
    RunStarted,
    SchedulerStarted,
    SchedulerStopped,
    SchedulerStopping,
    SlotMissed,
)
from tuisched.domain.runs import RunRecord, RunState, Trigger
from tuisched.domain.schedule.duration import format_elapsed
from tuisched.domain.text import counted, plain_text

log = logging.getLogger("tuisched.events")


def _slot(run: RunRecord, tz: ZoneInfo) -> str:
    if run.slot is None:
        return run.trigger.value
    slot = f"slot {run.slot.astimezone(tz).isoformat(timespec='seconds')}"
    return f"backfill {slot}" if run.trigger is Trigger.BACKFILL else slot


def describe_event(event: Event, tz: ZoneInfo) -> tuple[int, str] | None:
    """The log level and message for `event`, or None for events not logged."""
    match event:
        case RunQueued() | RunOutputWritten():
            return None
        case RunStarted(run=run):
            pid = f", pid {run.pid}" if run.pid else ""
            return logging.INFO, f"{run.job}#{run.run_id} started ({_slot(run, tz)}{pid})"
        case RunFinished(run=run):
            level = logging.INFO if run.state is RunState.SUCCESS else logging.WARNING
            took = f" in {format_elapsed(run.duration)}" if run.duration is not None else ""
            result = run.result.value if run.result else "?"
            return level, f"{run.job}#{run.run_id} {run.state.value} ({result}){took}: {run.status}"
        case RunNotStarted(run=run):
            return (
                logging.WARNING,
                f"{run.job}#{run.run_id} NOT_STARTED ({_slot(run, tz)}): {run.reason}",
            )
        case SlotMissed(run=run):
            return logging.WARNING, f"{run.job} MISSED {_slot(run, tz)}: {run.reason}"
        case RunAbandoned(run=run):
            return logging.WARNING, f"{run.job}#{run.run_id} ABANDONED: {run.reason}"
        case SchedulerStarted(node=node, jobs=jobs, config_path=path):
            return logging.INFO, f"scheduler started on {node}: {counted(jobs, 'job')} from {path}"
        case SchedulerStopping(reason=reason, running=running):
            return (
                logging.INFO,
                f"scheduler stopping ({reason}); {counted(running, 'run')} in progress",
            )
        case SchedulerStopped():
            return logging.INFO, "scheduler stopped"
        case ConfigLoaded(path=path, jobs=jobs, groups=groups, origin=origin, diff=diff):
            what = {"edit": "changed", "undo": "restored"}.get(origin, "loaded")
            counts = f"{counted(jobs, 'job')}, {counted(groups, 'group')}"
            text = f"configuration {what} from {path}: {counts}"
            if diff is not None and not diff.empty:
                text += f" ({diff.summary()})\n  " + "\n  ".join(diff.lines())
            return logging.INFO, text
        case ConfigChangedOnDisk(path=path, diff=diff, problems=problems):
            if problems:
                lines = "\n  ".join(str(p) for p in problems)
                return logging.WARNING, f"{path} changed on disk and is not valid:\n  {lines}"
            assert diff is not None  # noqa: S101  (a valid edit has a diff)
            details = "\n  ".join(diff.lines())
            return logging.WARNING, (
                f"{path} changed on disk ({diff.summary()}); send SIGHUP to apply it:\n  {details}"
            )
        case ConfigRejected(problems=problems):
            lines = "\n  ".join(str(p) for p in problems)
            return logging.ERROR, f"configuration rejected; nothing changed:\n  {lines}"
    return None


def _fields(event: Event) -> dict[str, Any]:
    fields: dict[str, Any] = {"event": type(event).__name__}
    if isinstance(event, RunEvent):
        run = event.run
        fields.update(
            job=run.job, run_id=run.run_id, state=run.state.value, trigger=run.trigger.value,
            slot=run.slot.isoformat() if run.slot else None,
            result=run.result.value if run.result else None, exit_code=run.exit_code,
        )  # fmt: skip
    return fields


class EventLog:
    """Logs every interesting bus event through `logging` (logger `tuisched.events`)."""

    def __init__(self, tz: ZoneInfo) -> None:
        self.tz = tz

    def write(self, event: Event) -> None:
        """Log `event` if it is worth a line."""
        described = describe_event(event, self.tz)
        if described is not None:
            level, message = described
            # Job statuses and reasons are the job's words: never let them drive a terminal.
            message = plain_text(message)
            log.log(level, message, extra={"fields": _fields(event), "at": event.at})


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, message and the event's fields."""

    def format(self, record: logging.LogRecord) -> str:
        at = getattr(record, "at", None)
        if not isinstance(at, datetime):
            at = datetime.fromtimestamp(record.created, UTC)
        time = at.isoformat()
        payload: dict[str, Any] = {
            "time": time,
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        payload.update(getattr(record, "fields", {}))
        if record.exc_info:
            payload["exception"] = self.formatException(record.exc_info)
        return json.dumps(payload, ensure_ascii=False)


class HumanFormatter(logging.Formatter):
    """`2026-05-07 09:30:00+02:00 INFO    message`, in the scheduler's time zone."""

    def __init__(self, tz: ZoneInfo | None) -> None:
        super().__init__("%(asctime)s %(levelname)-7s %(message)s")
        self.tz = tz

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        """The record's time in `tz` (the machine's zone when None)."""
        return datetime.fromtimestamp(record.created, self.tz or UTC).isoformat(
            sep=" ", timespec="seconds"
        )


def configure_logging(fmt: str, level: int = logging.INFO, tz: ZoneInfo | None = None) -> None:
    """Send tuisched's logs to stderr as `human` lines (times in `tz`) or `json` objects."""
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter() if fmt == "json" else HumanFormatter(tz))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    # APScheduler logs a line per job added and per fire; our events say what matters.
    logging.getLogger("apscheduler").setLevel(logging.WARNING)
    logging.getLogger("watchfiles").setLevel(logging.WARNING)  # "1 change detected" per save


LOG_FILE_BYTES = 10 * 2**20
LOG_FILE_BACKUPS = 5
"""`tuisched.log` is rotated at LOG_FILE_BYTES, keeping this many older files."""


def log_to_file(path: Path, tz: ZoneInfo | None = None) -> Callable[[], None]:
    """Send tuisched's logs to `path` (rotated) as human lines; return what stops that.

    A thread of its own writes the file: a slow or full disk never holds up
    the event loop that logged (the records wait in memory meanwhile).
    """
    handler = logging.handlers.RotatingFileHandler(
        path, maxBytes=LOG_FILE_BYTES, backupCount=LOG_FILE_BACKUPS, encoding="utf-8", delay=True
    )
    handler.setFormatter(HumanFormatter(tz))
    records: queue.SimpleQueue[logging.LogRecord] = queue.SimpleQueue()
    listener = logging.handlers.QueueListener(records, handler)
    root = logging.getLogger()
    root.handlers[:] = [logging.handlers.QueueHandler(records)]
    root.setLevel(logging.INFO)
    logging.getLogger("apscheduler").setLevel(logging.WARNING)
    logging.getLogger("watchfiles").setLevel(logging.WARNING)
    listener.start()

    def stop() -> None:
        listener.stop()  # writes what is queued
        handler.close()

    return stop
