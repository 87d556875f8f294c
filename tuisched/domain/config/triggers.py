"""A job's trigger source: a `schedule` (every, cron, at, manual) or an `after` dependency."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from zoneinfo import ZoneInfo

from tuisched.domain.config.hints import cron_hint, schedule_hint
from tuisched.domain.config.keys import AFTER_KEYS, SCHEDULE_KEYS
from tuisched.domain.config.values import Values
from tuisched.domain.config.yamlsource import Entry, Map, Scalar, Value
from tuisched.domain.errors import CronError, ScheduleError
from tuisched.domain.model import (
    After,
    AtSchedule,
    CronSchedule,
    EverySchedule,
    ManualSchedule,
    Outcome,
    Schedule,
)
from tuisched.domain.schedule.cron import CronExpr
from tuisched.domain.schedule.slots import localize, parse_every


class TriggerReader:
    """Reads a job's `schedule` or `after`, recording problems in `values`."""

    def __init__(self, values: Values) -> None:
        self.values = values

    def trigger(
        self, fields: dict[str, Entry], entry: Entry, zone: ZoneInfo
    ) -> tuple[Schedule | None, After | None]:
        has_schedule, has_after = "schedule" in fields, "after" in fields
        if has_schedule and has_after:
            self.values.problem(
                fields["after"].key_line,
                "a job has exactly one trigger source: 'schedule' or 'after', not both",
            )
            return None, None
        if not has_schedule and not has_after:
            self.values.problem(
                entry.key_line,
                "a job needs a trigger source: 'schedule' or 'after' "
                "(write 'schedule: manual' for a job run only by hand)",
            )
            return None, None
        if has_after:
            return None, self._after(fields["after"].value)
        return self._schedule(fields["schedule"].value, zone), None

    def _after(self, value: Value) -> After | None:
        if isinstance(value, Scalar):
            job = self.values.text(value, "after")
            return After(job=job) if job else None
        fields = self.values.mapping(value, "after", AFTER_KEYS)
        if fields is None:
            return None
        if "job" not in fields:
            self.values.problem(value.line, "after needs 'job' (the job to follow)")
            return None
        kwargs: dict[str, object] = {}
        self.values.put(kwargs, fields, "job", self.values.text, prefix="after")
        self.values.put(kwargs, fields, "on", self.values.enum(Outcome), prefix="after")
        self.values.put(kwargs, fields, "delay", self.values.duration, prefix="after")
        if None in kwargs.values():
            return None
        return After(**kwargs)  # type: ignore[arg-type]

    def _schedule(self, value: Value, zone: ZoneInfo) -> Schedule | None:
        if isinstance(value, Scalar) and value.text == "manual":
            return ManualSchedule(tz=zone)
        if not isinstance(value, Map):
            hint = schedule_hint(value.text) if isinstance(value, Scalar) else ""
            self.values.problem(
                value.line,
                f"schedule must be a mapping with every, cron or at, or the word 'manual'{hint}",
            )
            return None
        fields = self.values.mapping(value, "schedule", SCHEDULE_KEYS)
        if fields is None:
            return None
        forms = [key for key in ("every", "cron", "at") if key in fields]
        if len(forms) != 1:
            found = " and ".join(forms) if forms else "none"
            self.values.problem(
                value.line, f"schedule needs exactly one of every, cron or at; found {found}"
            )
            return None
        start = self.values.opt(fields, "start", self._instant(zone), "schedule.start")
        stop = self.values.opt(fields, "stop", self._instant(zone), "schedule.stop")
        if start is not None and stop is not None and start > stop:
            self.values.problem(
                fields["start"].value.line,
                f"schedule.start {start.isoformat()} is after schedule.stop {stop.isoformat()}",
            )
            return None
        return self._schedule_form(forms[0], fields, value.line, (start, stop), zone)

    def _schedule_form(
        self,
        form: str,
        fields: dict[str, Entry],
        line: int,
        window: tuple[datetime | None, datetime | None],
        zone: ZoneInfo,
    ) -> Schedule | None:
        start, stop = window
        form_value = fields[form].value
        if form == "at":
            for key in ("start", "stop"):
                if key in fields:
                    self.values.problem(fields[key].key_line, f"'{key}' does not apply to 'at'")
            at = self._instant(zone)(form_value, "schedule.at")
            return AtSchedule(at=at, tz=zone) if at is not None else None
        text = self.values.text(form_value, f"schedule.{form}")
        if text is None:
            return None
        try:
            if form == "cron":
                return CronSchedule(expr=CronExpr.parse(text), start=start, stop=stop, tz=zone)
            step, unit = parse_every(text)
        except (CronError, ScheduleError) as error:
            said = str(error).removeprefix(f"{form}: ")  # "schedule.cron: cron: ..." once
            hint = cron_hint(text) if form == "cron" else ""
            self.values.problem(form_value.line, f"schedule.{form}: {said}{hint}")
            return None
        if start is None:
            if "start" not in fields:
                self.values.problem(line, "an 'every' schedule needs 'start' (its first slot)")
            return None
        return EverySchedule(step=step, unit=unit, start=start, stop=stop, tz=zone)

    def _instant(self, zone: ZoneInfo) -> Callable[[Value, str], datetime | None]:
        def read(value: Value, what: str) -> datetime | None:
            moment = self.values.local_datetime(value, what)
            if moment is None:
                return None
            if moment.tzinfo is not None:
                return moment.astimezone(zone)
            return localize(moment, zone)

        return read
