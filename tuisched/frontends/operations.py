"""What each CLI verb does (their grammar and their exit codes are in `verbs.py`).

The verbs speak to the running scheduler through `BlockingControl` over its
control socket: no event loop, no aiohttp, no events, so a verb answers in a
few tens of milliseconds. `trigger --wait` follows an event stream and is in
`following.py`. `logs`, and `backfill --dry-run`, read the files the scheduler
left when none runs, through the same seam over `OfflineControl`.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, TextIO

from tuisched.domain.errors import (
    OtherConfigurationError,
    RunRefusedError,
    ScheduleError,
    SchedulerNotRunningError,
    TuischedError,
    UnknownJobError,
    one_line,
)
from tuisched.domain.runs import RunRecord, RunState
from tuisched.domain.schedule.duration import format_age
from tuisched.domain.text import counted
from tuisched.domain.views import (
    BackfillPlan,
    HistoryQuery,
    MissedChoice,
    MissedSlots,
    Pause,
    PauseKind,
    RunStatus,
    SchedulerState,
    SchedulerStatus,
)
from tuisched.frontends.exits import EX_USAGE, unavailable
from tuisched.frontends.lookup import config_path
from tuisched.frontends.refusals import say_refused
from tuisched.frontends.table import write_table
from tuisched.runtime.control import BlockingControl, control_socket, describe_client

if TYPE_CHECKING:
    from zoneinfo import ZoneInfo

FOLLOW_SECONDS = 0.5
"""How often `logs -f` asks for more output."""


Verb = Callable[[BlockingControl, argparse.Namespace], int]


def _verb(verb: Verb, *, when_none: str = "") -> Callable[[argparse.Namespace], int]:
    """A verb against the running scheduler: exit 69 with one line when there is none
    (ending with `when_none`, where the reason it needs one is not plain)."""

    def run(args: argparse.Namespace) -> int:
        try:
            with _remote(args) as control:
                return verb(control, args)
        except SchedulerNotRunningError as error:
            if when_none and not isinstance(error, OtherConfigurationError):
                error = SchedulerNotRunningError(f"{error}; {when_none}")
            return unavailable(error)

    return run


def _remote(args: argparse.Namespace) -> BlockingControl:
    """The scheduler running on the configuration's state (SchedulerNotRunningError if none)."""
    config = config_path(args)
    return BlockingControl.connect(
        control_socket(config), client=describe_client("command line"), config=config
    )


# --- the verbs ----------------------------------------------------------------------


@_verb
def status(control: BlockingControl, args: argparse.Namespace) -> int:
    """`status`: the scheduler at a glance, and each run in progress."""
    scheduler = control.status()
    runs = _runs_in_progress(control, scheduler)
    now, zone = datetime.now(UTC), _zone(scheduler.timezone)
    if args.json:
        json.dump(_status_json(scheduler, runs, now, zone), sys.stdout, indent=2)
        print()
        return 0
    up = ""
    if scheduler.started_at is not None:
        up = f", up {format_age(now - scheduler.started_at)}"
    print(f"scheduler {scheduler.state} on {scheduler.node}, pid {scheduler.pid}{up}")
    print(f"config {scheduler.config_path}")
    print(f"jobs {scheduler.jobs}  groups {scheduler.groups}  running {scheduler.running}  "
          f"queued {scheduler.queued}  waiting {scheduler.waiting}")  # fmt: skip
    pauses = scheduler.pauses
    print("paused: " + (", ".join(str(p) for p in pauses) if pauses else "nothing"))
    if scheduler.cluster:
        print(f"cluster: {scheduler.cluster}")
    if runs:
        print()
        _print_runs(runs, now, zone, nodes=bool(scheduler.cluster))
    return 0


def _runs_in_progress(
    control: BlockingControl, scheduler: SchedulerStatus
) -> tuple[RunStatus, ...]:
    """The runs in progress (running, queued, waiting; in a cluster every node's), or none
    while the scheduler starts or once it has stopped."""
    if scheduler.state not in (SchedulerState.RUNNING, SchedulerState.STOPPING):
        return ()
    try:
        return control.runs()
    except SchedulerNotRunningError:  # it stopped since it said it ran
        return ()


def _print_runs(runs: Sequence[RunStatus], now: datetime, zone: ZoneInfo, *, nodes: bool) -> None:
    """The runs in progress as a table: started in the scheduler's zone, with its offset."""
    heading = ["RUN ID", "JOB", "STATE", "PID", "STARTED", "ELAPSED"]
    rows = [[*heading, "NODE"] if nodes else heading]
    for progress in runs:
        run, started = progress.run, progress.run.started_at
        row = [
            run.run_id, run.job, run.state.value, str(run.pid) if run.pid else "-",
            started.astimezone(zone).isoformat(" ", "seconds") if started else "-",
            format_age(now - started) if started else "-",
        ]  # fmt: skip
        rows.append([*row, run.node or "-"] if nodes else row)
    write_table(rows, sys.stdout)


def _status_json(
    status: SchedulerStatus, runs: Sequence[RunStatus], now: datetime, zone: ZoneInfo
) -> dict[str, object]:
    return {
        "state": status.state.value, "node": status.node, "pid": status.pid,
        "started_at": status.started_at.astimezone(zone).isoformat() if status.started_at else None,
        "config": str(status.config_path), "jobs": status.jobs, "groups": status.groups,
        "running": status.running, "queued": status.queued, "waiting": status.waiting,
        "paused": [{"kind": p.kind.value, "name": p.name} for p in status.pauses],
        "cluster": status.cluster or None,
        "runs": [_run_json(progress, now, zone) for progress in runs],
    }  # fmt: skip


def _run_json(progress: RunStatus, now: datetime, zone: ZoneInfo) -> dict[str, object]:
    """A run in progress, its times as `history --json` gives them (the scheduler's zone)."""
    run, started = progress.run, progress.run.started_at
    elapsed = max((now - started).total_seconds(), 0.0) if started else None
    return {
        "run_id": run.run_id, "job": run.job, "state": run.state.value,
        "trigger": run.trigger.value, "pid": run.pid, "node": run.node or None,
        "slot": run.slot.astimezone(zone).isoformat() if run.slot else None,
        "queued_at": run.queued_at.astimezone(zone).isoformat(),
        "started_at": started.astimezone(zone).isoformat() if started else None,
        "elapsed": round(elapsed, 3) if elapsed is not None else None,
        "status": progress.live_status, "waits_for": list(progress.waits_for),
    }  # fmt: skip


def _pausing(*, paused: bool) -> Verb:
    def verb(control: BlockingControl, args: argparse.Namespace) -> int:
        if args.all:
            pause = Pause(kind=PauseKind.ALL)
        elif args.group:
            pause = Pause(kind=PauseKind.GROUP, name=args.group)
        else:
            pause = Pause(kind=PauseKind.JOB, name=args.job)
        control.set_paused(pause, paused=paused)
        print(f"{'paused' if paused else 'resumed'} {pause}")
        return 0

    return verb


pause = _verb(_pausing(paused=True))
resume = _verb(_pausing(paused=False))


def trigger(args: argparse.Namespace) -> int:
    """`trigger`: the run's id at once; with --wait, its output and its end (an event
    stream, which `following` reads with the console's client). A run the scheduler
    refuses is said in one line (exit 1); --json gives a run, or the refusal, as
    JSON with the times of `history --json`."""
    if args.wait:
        from tuisched.frontends.following import trigger_and_wait  # noqa: PLC0415

        return trigger_and_wait(args)
    return _verb(_trigger_now)(args)


def _trigger_now(control: BlockingControl, args: argparse.Namespace) -> int:
    try:
        run = control.run_now(args.job, queue=args.queue)
    except RunRefusedError as error:
        zone = _zone(control.status().timezone) if args.json else None
        return say_refused(error, zone, queued=args.queue)
    if args.json:
        from tuisched.frontends.history import run_as_json  # noqa: PLC0415  (zoneinfo)

        print(json.dumps(run_as_json(run, _zone(control.status().timezone))))
    else:
        print(run.run_id)
    return 0


@_verb
def stop(control: BlockingControl, args: argparse.Namespace) -> int:
    """`stop`: a run in progress, or every run of a job."""
    runs = [progress.run for progress in control.runs()]
    chosen = [r for r in runs if r.run_id == args.target] or [
        r for r in runs if r.job == args.target
    ]
    if not chosen and control.status().cluster:  # another node's run, maybe not seen here yet
        control.stop_run(args.target, kill=args.kill)
        print(json.dumps([{"run_id": args.target}]) if args.json else f"stopping {args.target}")
        return 0
    if not chosen:
        raise TuischedError(f"no run in progress is '{args.target}' or of a job by that name")
    for run in chosen:
        control.stop_run(run.run_id, kill=args.kill)
        if not args.json:
            print(f"{'killing' if args.kill else 'stopping'} {run.job}#{run.run_id}")
    if args.json:
        print(json.dumps([{"run_id": run.run_id, "job": run.job} for run in chosen]))
    return 0


@_verb
def reload(control: BlockingControl, args: argparse.Namespace) -> int:
    """`reload`: the file on disk put in force, with its report (exit 1: refused)."""
    pending = control.pending_edit()
    if not pending.present:
        _report(
            args,
            "unchanged",
            "the file on disk is the configuration in force: nothing to reload",
            (),
        )
        return 0
    if control.reload():
        summary = pending.summary or "no job, group or setting changed"
        _report(args, "reloaded", f"reloaded: {summary}", pending.details)
        return 0
    problems = control.pending_edit().details
    _report(args, "refused", "refused: the file on disk is not valid; nothing changed", problems)
    return 1


def _report(args: argparse.Namespace, outcome: str, summary: str, lines: Sequence[str]) -> None:
    """What `reload` did: a summary and its lines (on stderr when refused), or JSON."""
    if args.json:
        print(json.dumps({"outcome": outcome, "summary": summary, "lines": list(lines)}))
        return
    out = sys.stderr if outcome == "refused" else sys.stdout
    print(summary, file=out)
    for line in lines:
        print(f"  {line}", file=out)


def logs(args: argparse.Namespace) -> int:
    """`logs`: a run's output, from the scheduler or the files it left; -f follows it."""
    return _through_any_control(args, _print_logs)


def _through_any_control(args: argparse.Namespace, verb: Verb) -> int:
    """`verb` through the scheduler running here, else through the files it left."""
    try:
        control = _remote(args)
    except OtherConfigurationError:  # its files are another configuration's too
        raise
    except SchedulerNotRunningError:
        control = _offline(args)
    with control:
        return verb(control, args)


def _offline(args: argparse.Namespace) -> BlockingControl:
    """The seam over the files the scheduler left (its history and its runs' output)."""
    from tuisched.runtime.control import offline_control, read_config  # noqa: PLC0415  (no scheduler runs)

    text, config = read_config(config_path(args))
    return BlockingControl.over(offline_control(config, text))


def _print_logs(control: BlockingControl, args: argparse.Namespace) -> int:
    run_id = args.run or _newest_run(control, args.job)
    if run_id is None:
        return _no_run(control, args)
    chunk = control.output(run_id)
    if chunk.job != args.job:  # a run id names its job: say which, print nothing of it
        raise TuischedError(
            f"run {run_id} is a run of job '{chunk.job}', not of '{args.job}' "
            f"(tuisched logs {chunk.job} --run {run_id})"
        )
    printed = False
    while True:
        for line in chunk.lines:
            print(line)
        printed = printed or bool(chunk.lines)
        sys.stdout.flush()
        if not (args.follow and (chunk.running or _not_yet(chunk.run))):
            break
        time.sleep(FOLLOW_SECONDS)
        chunk = control.output(run_id, offset=chunk.next_offset)
    run = chunk.run
    if run is not None and run.state in _NEVER_RAN and not printed:
        return _never_ran(run)
    return 0


_NEVER_RAN = {
    RunState.NOT_STARTED: "did not start",
    RunState.MISSED: "never ran",
    RunState.QUEUED: "has not started yet",
    RunState.WAITING: "has not started yet",
}
"""What `logs` says of a run that has no output because no process of it ran."""


def _not_yet(run: RunRecord | None) -> bool:
    """Whether `run` is still to start (`logs -f` waits for it)."""
    return run is not None and run.state in (RunState.QUEUED, RunState.WAITING)


def _never_ran(run: RunRecord) -> int:
    """Say in one line why `run` has no output (its reason, state and result); status 1."""
    why = one_line(run.reason or run.status)
    result = f", {run.result}" if run.result is not None else ""
    code = f", exit {run.exit_code}" if run.exit_code is not None else ""
    print(
        f"tuisched: run {run.job}#{run.run_id} {_NEVER_RAN[run.state]}"
        f"{': ' + why if why else ''} ({run.state}{result}{code})",
        file=sys.stderr,
    )
    return 1


def _no_run(control: BlockingControl, args: argparse.Namespace) -> int:
    """`logs JOB` for a job without runs: one that has none yet, or no job by that name."""
    if control.jobs((args.job,)):
        print(f"tuisched: job '{args.job}' has no run yet", file=sys.stderr)
        return 1
    from tuisched.domain.config.values import nearest  # noqa: PLC0415  (only to fail)

    hint = nearest(args.job, frozenset(job.name for job in control.jobs()))
    raise TuischedError(f"{UnknownJobError(args.job)} in {config_path(args)}{hint}")


def _newest_run(control: BlockingControl, job: str) -> str | None:
    """The job's newest run that started, else its newest run of any kind (which `logs`
    says did not start), else None."""
    live = [s.run for s in control.runs() if s.run.job == job and s.run.started_at]
    if live:
        return max(live, key=lambda run: run.started_at or datetime.min.replace(tzinfo=UTC)).run_id
    past = control.history(HistoryQuery(job=job, limit=50))
    launched = [run for run in past if run.started_at is not None]  # skipped runs have none
    newest = launched or past
    return newest[0].run_id if newest else None


# --- the downtime ledger (SPEC R25) ---------------------------------------------------------


def _missed(control: BlockingControl, args: argparse.Namespace) -> int:
    """`missed`: each job's missed slots."""
    entries = control.missed()
    if args.json:
        print(json.dumps([_missed_json(entry) for entry in entries], indent=2))
        return 0
    if not entries:
        print("no job missed a slot since the scheduler was last down or paused")
        return 0
    for entry in entries:
        zone = _zone(entry.timezone)
        first = entry.slots[0].astimezone(zone).isoformat() if entry.slots else "-"
        last = entry.slots[-1].astimezone(zone).isoformat() if entry.slots else "-"
        earlier = f" (first listed; {entry.earlier} earlier)" if entry.earlier else ""
        print(f"{entry.job}: {entry.count} missed, {first}{earlier} .. {last}")
        print(f"  policy: {entry.policy}")
        print(f"  {entry.decided or 'waits for a decision: tuisched missed decide'}")
    return 0


missed = _verb(
    _missed,
    when_none="missed slots are listed by a running scheduler (it records those of its "
    "downtime when it starts)",
)


def _zone(name: str) -> ZoneInfo:
    """The zone `name` (loaded by the verbs that print local times only)."""
    from zoneinfo import ZoneInfo  # noqa: PLC0415

    return ZoneInfo(name)


def _missed_json(entry: MissedSlots) -> dict[str, object]:
    zone = _zone(entry.timezone)
    return {
        "job": entry.job, "count": entry.count, "earlier": entry.earlier,
        "slots": [slot.astimezone(zone).isoformat() for slot in entry.slots],
        "first": entry.slots[0].astimezone(zone).isoformat() if entry.slots else None,
        "last": entry.slots[-1].astimezone(zone).isoformat() if entry.slots else None,
        "misfire": entry.misfire, "policy": entry.policy,
        "pending": entry.pending, "decided": entry.decided or None,
    }  # fmt: skip


@_verb
def decide_missed(control: BlockingControl, args: argparse.Namespace) -> int:
    """`missed decide`: run the latest, all, or skip them."""
    if bool(args.job) == bool(args.all):
        print("tuisched: name one JOB or --all", file=sys.stderr)
        return EX_USAGE
    decided = control.decide_missed(args.job, MissedChoice(args.choice))
    if args.json:
        print(json.dumps([_missed_json(entry) for entry in decided], indent=2))
        return 0
    for entry in decided:
        print(f"{entry.job}: {entry.decided}")
    return 0


# --- backfill of a window (SPEC R24) ------------------------------------------------------


def backfill(args: argparse.Namespace) -> int:
    """`backfill`: a window's unrun slots, or with --dry-run the list of them."""
    if args.dry_run:  # a listing needs no running scheduler: the files it left do
        return _through_any_control(args, _backfill_verb)
    return _verb(_backfill_verb)(args)


def _backfill_verb(control: BlockingControl, args: argparse.Namespace) -> int:
    found = control.jobs((args.job,))
    if not found:
        raise UnknownJobError(args.job)
    zone = _zone(found[0].timezone)
    now = datetime.now(UTC).replace(microsecond=0)
    try:
        start, end = _moment(args.start, zone, now, "--from"), _moment(args.end, zone, now, "--to")
        plan = control.backfill(args.job, start, end, dry_run=args.dry_run)
    except ScheduleError as error:
        print(f"tuisched: backfill: {one_line(str(error))}", file=sys.stderr)
        return EX_USAGE
    if args.json:
        print(json.dumps(_backfill_json(plan), indent=2))
    else:
        _print_backfill(plan, sys.stdout)
    return 0


def _moment(text: str, zone: ZoneInfo, now: datetime, option: str) -> datetime:
    """A window's end: ISO 8601 (without an offset: in `zone`, DST as slots are), a duration
    before `now`, or `now`."""
    from tuisched.domain.stats import parse_instant  # noqa: PLC0415  (schedule math: backfill only)

    try:
        return parse_instant(text, now, zone, option)
    except TuischedError as error:
        raise ScheduleError(str(error)) from None


def _print_backfill(plan: BackfillPlan, out: TextIO) -> None:
    zone = _zone(plan.timezone)
    window = f"{plan.start.astimezone(zone).isoformat()} to {plan.end.astimezone(zone).isoformat()}"
    if plan.dry_run:
        out.write(f"backfill of {plan.job} from {window} (excluded) would run "
                  f"{_slots(len(plan.slots))}, {plan.order}:\n")  # fmt: skip
    else:
        out.write(f"backfill of {plan.job} from {window} (excluded): {_slots(len(plan.slots))} "
                  f"queued, {plan.order}; see `tuisched history {plan.job}`\n")  # fmt: skip
    out.writelines(f"  run       {slot.astimezone(zone).isoformat()}\n" for slot in plan.slots)
    out.writelines(
        f"  left out  {left.slot.astimezone(zone).isoformat()}  {left.reason}\n"
        for left in plan.left_out
    )
    out.writelines(f"note: {note}\n" for note in plan.notes)


def _slots(count: int) -> str:
    return counted(count, "slot")


def _backfill_json(plan: BackfillPlan) -> dict[str, object]:
    zone = _zone(plan.timezone)
    return {
        "job": plan.job, "dry_run": plan.dry_run,
        "from": plan.start.astimezone(zone).isoformat(),
        "to": plan.end.astimezone(zone).isoformat(),
        "slots": [slot.astimezone(zone).isoformat() for slot in plan.slots],
        "left_out": [
            {"slot": left.slot.astimezone(zone).isoformat(), "reason": left.reason}
            for left in plan.left_out
        ],
        "notes": list(plan.notes), "order": plan.order,
    }  # fmt: skip
