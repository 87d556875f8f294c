"""An edit of a job, seen ahead before it is saved (SPEC R25).

`edit_impact` compares the job as it stands with the job the edit would give
(both from validated configurations): its next slots side by side, in the
job's zone; what each clock change of the coming year does to the new
schedule (`tuisched.domain.schedule.dst`); and the dependencies the edit
touches, in words:

- each job that names it in `after` (it starts when this one finishes) or in
  `requires` (its next run needs one of this job's slots: which one, before
  and after the edit);
- when the edit changes the job's own `after`, `requires` or schedule, what
  its next run will now wait for.

Pure: everything comes in as arguments, `now` included.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from zoneinfo import ZoneInfo

from tuisched.domain.config.dependencies import required_slot
from tuisched.domain.config.excerpt import dependants
from tuisched.domain.config.keys import SELF
from tuisched.domain.errors import ScheduleError
from tuisched.domain.model import Config, Job, ManualSchedule, Schedule
from tuisched.domain.schedule.describe import plan_notes, trigger_words
from tuisched.domain.schedule.dst import dst_warnings
from tuisched.domain.schedule.slots import next_slot, next_slots
from tuisched.domain.views import EditImpact

SLOTS = 5
"""Slots shown on each side by default."""
NEW_JOB = "a new job: no runs yet"


def edit_impact(
    live: Config,
    name: str,
    edited: Config | None,
    *,
    now: datetime,
    count: int = SLOTS,
    problems: Sequence[str] = (),
) -> EditImpact:
    """What replacing (or adding) job `name` would change.

    Args:
        live: The configuration in force.
        name: The edited job.
        edited: The configuration the edit gives, validated; None when the edit does
            not validate (then `problems` says why, and there are no new slots).
        now: The instant the slots are counted from.
        count: How many slots to show on each side.
        problems: What saving the edit would meet.
    """
    old = live.jobs.get(name)
    new = edited.jobs.get(name) if edited is not None else None
    before, before_note = _slots(old, now, count) if old is not None else ((), NEW_JOB)
    if new is not None:
        after, after_note = _slots(new, now, count)
    else:
        after, after_note = (), _not_valid(problems)
    shown = new or old
    return EditImpact(
        job=name,
        timezone=shown.timezone.key if shown is not None else live.settings.timezone.key,
        before=before, after=after, before_note=before_note, after_note=after_note,
        dst=dst_warnings(new.schedule, now) if new is not None and new.schedule else (),
        dependencies=_dependencies(edited or live, name, old, new, now),
        problems=tuple(problems),
    )  # fmt: skip


def _not_valid(problems: Sequence[str]) -> str:
    if not problems:
        return "no slots: the edit does not validate"
    more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
    return f"not valid yet: {_message(problems[0])}{more}"


def _message(problem: str) -> str:
    """A problem without its `FILE:LINE: job 'NAME': ` prefix (the form says which job)."""
    _, found, message = problem.partition("': ")
    return message if found else problem


def _slots(job: Job, now: datetime, count: int) -> tuple[tuple[datetime, ...], str]:
    """The job's next `count` slots in its zone, and why they will not run (or are none)."""
    schedule = _slotted(job)
    slots: tuple[datetime, ...] = ()
    if schedule is not None:
        slots = tuple(slot.astimezone(job.timezone) for slot in next_slots(schedule, now, count))
    return slots, "; ".join(plan_notes(job, paused=False, slots=len(slots)))


def _slotted(job: Job | None) -> Schedule | None:
    """The job's schedule when it has slots (not manual, not `after` a job)."""
    if job is None or job.after is not None or isinstance(job.schedule, ManualSchedule):
        return None
    return job.schedule


# --- dependencies ----------------------------------------------------------------------


def _dependencies(
    config: Config, name: str, old: Job | None, new: Job | None, now: datetime
) -> tuple[str, ...]:
    """The dependants of job `name`, then what the job itself will wait for."""
    lines = [
        _dependant_line(config.jobs[other], name, old, new, now)
        for other in dependants(config, name)
    ]
    if new is not None and _own_changed(old, new):
        lines += _own_lines(config, new, now)
    return tuple(lines)


def _dependant_line(
    dependant: Job, name: str, old: Job | None, new: Job | None, now: datetime
) -> str:
    """What dependant `dependant` gets from job `name` after the edit."""
    if dependant.after is not None and dependant.after.job == name:
        return f"{dependant.name} runs {trigger_words(dependant)}"
    slot = next_slot(dependant.schedule, now) if dependant.schedule is not None else None
    if slot is None:
        return f"{dependant.name} requires {name} (it has no future slot)"
    at = _when(slot, dependant.timezone)
    was = _required(dependant, old, slot)
    if new is None:  # the edit does not validate: say what holds today
        return f"{dependant.name} requires {name}: its run at {at} needs {was}"
    will = _required(dependant, new, slot)
    own_slot = f"{name}'s slot "  # said once: "will need export's slot 03:30 (was 02:30)"
    change = "unchanged" if was == will else f"was {was.removeprefix(own_slot)}"
    return f"{dependant.name} requires {name}: its run at {at} will need {will} ({change})"


def _required(dependant: Job, upstream: Job | None, slot: datetime) -> str:
    """Which of `upstream`'s slots `dependant`'s run at `slot` needs, in words."""
    if upstream is None:
        return "nothing (no such job)"
    schedule = _slotted(upstream)
    if schedule is None or dependant.schedule is None:
        return f"a slot {upstream.name} does not have ({trigger_words(upstream)})"
    try:
        found = required_slot(dependant.schedule, schedule, slot)
    except ScheduleError:
        return "nothing (its schedule has no cycle)"
    if found is None:
        return f"a slot of {upstream.name} that never comes"
    return f"{upstream.name}'s slot {_when(found, upstream.timezone)}"


def _own_changed(old: Job | None, new: Job) -> bool:
    """Whether the edit changes what the job waits for (its trigger or its requires)."""
    if not (new.after or new.requires):
        return False
    if old is None:
        return True
    return (old.after, old.requires, old.schedule) != (new.after, new.requires, new.schedule)


def _own_lines(config: Config, job: Job, now: datetime) -> list[str]:
    """What the edited job will wait for: its trigger job, and its next run's requirements."""
    lines = []
    if job.after is not None:
        lines.append(f"{job.name} will run {trigger_words(job)}")
    schedule = _slotted(job)
    slot = next_slot(schedule, now) if schedule is not None else None
    if not job.requires or slot is None:
        return lines
    at = _when(slot, job.timezone)
    for upstream in job.requires:
        if upstream in (SELF, job.name):
            lines.append(f"{job.name}'s run at {at} will wait for its own previous slot")
            continue
        need = _required(job, config.jobs.get(upstream), slot)
        lines.append(f"{job.name}'s run at {at} will wait for {need}")
    return lines


def _when(moment: datetime, zone: ZoneInfo) -> str:
    """`2026-05-08 04:10 CEST`: the slot in the job's zone, as the form lists slots."""
    return moment.astimezone(zone).strftime("%Y-%m-%d %H:%M %Z")
