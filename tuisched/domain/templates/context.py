"""What alert templates see (SPEC R11): plain values only, never live objects."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from tuisched.domain.model import (
    AlertEvent,
    Job,
)
from tuisched.domain.runs import Result, RunRecord, RunState, Trigger
from tuisched.domain.schedule.duration import format_elapsed
from tuisched.domain.templates.sandbox import (
    _AnyKey,
    _Fields,
)

# --- the context -----------------------------------------------------------------------


def _iso(moment: datetime | None, tz: ZoneInfo) -> str:
    return "" if moment is None else moment.astimezone(tz).isoformat()


def _elapsed(duration: timedelta | None) -> str:
    return "" if duration is None else format_elapsed(duration)


_SCALARS = (str, int, float, bool, type(None))


def _scalar(value: object) -> object:
    """`value` if it is exactly a plain scalar, else a plain copy or its text.

    A subclass of `bool`, `int`, `float` or `str` (an enum member, a string
    with methods of its own) becomes a value of the base type, so no object
    with methods of its own enters a template.
    """
    if type(value) in _SCALARS:
        return value
    try:
        if isinstance(value, int):  # bool cannot be subclassed
            return int.__int__(value)
        if isinstance(value, float):
            return float.__float__(value)
        text = value if isinstance(value, str) else str(value)
        return str.__str__(text)  # an exact str even from a subclass
    except Exception:  # a python job's object whose __str__ fails must not stop the alert
        return f"<unprintable {type(value).__name__}>"


def _plain(value: object) -> object:
    """A plain copy of one `message_data` value: a scalar, or a tuple of scalars for a list."""
    if isinstance(value, list | tuple):
        return tuple(_scalar(item) for item in value)
    return _scalar(value)


def plain_data(message_data: Mapping[str, object]) -> dict[str, object]:
    """A plain copy of a python job's `message_data`; a missing key renders as ""."""
    return _AnyKey({str(key): _plain(value) for key, value in message_data.items()})


def _run_fields(run: RunRecord, tz: ZoneInfo) -> _Fields:
    return _Fields(
        "run",
        {
            "run_id": run.run_id,
            "slot": _iso(run.slot, tz),
            "started_at": _iso(run.started_at, tz),
            "ended_at": _iso(run.ended_at, tz),
            "duration": _elapsed(run.duration),
            "exit_code": run.exit_code,
            "status": run.status,
            "result": "" if run.result is None else run.result.value,
            "output_tail": run.output_tail,
            "reason": run.reason,
        },
    )


def alert_context(
    *,
    job: Job,
    event: str,
    run: RunRecord,
    message_data: Mapping[str, object],
    hostname: str,
    tz: ZoneInfo,
) -> dict[str, object]:
    """The render context of SPEC R11 for one alert, made of plain values only.

    Args:
        job: the job the run belongs to.
        event: `success`, `failed` or `not_started`.
        run: the run's record; its times are shown in `tz`.
        message_data: a python job's data (copied; values that are not plain
            scalars or lists of them become their text).
        hostname: the scheduler's host name.
        tz: the zone times are written in (ISO 8601 with offset).
    """
    job_fields = {"name": job.name, "description": job.description, "groups": tuple(job.groups)}
    return {
        "job": _Fields("job", job_fields),
        "event": str(event),
        "run": _run_fields(run, tz),
        "message_data": plain_data(message_data),
        "hostname": hostname,
    }


_SAMPLE_SLOT = datetime(2026, 1, 5, 6, 0)  # noqa: DTZ001  (made aware in the job's zone below)
_SAMPLE_OUTCOMES: Mapping[str, tuple[RunState, Result, int | None, str]] = {
    AlertEvent.SUCCESS: (RunState.SUCCESS, Result.COMPLETED, 0, "exit 0: done"),
    AlertEvent.FAILED: (RunState.FAILED, Result.COMPLETED, 1, "exit 1: disk full"),
    AlertEvent.NOT_STARTED: (RunState.NOT_STARTED, Result.DEPENDENCY, None, ""),
}


def sample_run(job_name: str, event: str, tz: ZoneInfo) -> RunRecord:
    """A realistic fake run of `job_name` ending with `event`, for checking templates."""
    state, result, exit_code, status = _SAMPLE_OUTCOMES.get(
        event, _SAMPLE_OUTCOMES[AlertEvent.FAILED]
    )
    slot = _SAMPLE_SLOT.replace(tzinfo=tz)
    started = None if state is RunState.NOT_STARTED else slot + timedelta(seconds=2)
    return RunRecord(
        run_id="0123456789ab",
        job=job_name,
        slot=slot,
        trigger=Trigger.SCHEDULE,
        state=state,
        queued_at=slot,
        result=result,
        status=status,
        exit_code=exit_code,
        started_at=started,
        ended_at=slot + timedelta(seconds=67),
        reason="upstream 'export' failed" if state is RunState.NOT_STARTED else "",
        output_tail="copying files\nlast line of output\n",
    )


def sample_context(job: Job, event: str, tz: ZoneInfo) -> dict[str, object]:
    """The context of a realistic fake run of `job`, to check templates at validation.

    `message_data` is empty and accepts any key (rendering ""), so a template
    written for a python job's data (`{{ message_data.rows }}`) validates.
    """
    run = sample_run(job.name, event, tz)
    return alert_context(
        job=job, event=event, run=run, message_data={}, hostname="scheduler-host", tz=tz
    )
