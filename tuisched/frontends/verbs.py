"""CLI verbs against the running scheduler, through its control socket (SPEC R22).

    tuisched status [--json]                        the scheduler at a glance
    tuisched pause JOB | --group G | --all          (and `resume`, the same forms)
    tuisched trigger JOB [--wait]                   run now; --wait follows it to its end
    tuisched stop RUN_ID | JOB [--kill]             stop a run, or every run of a job
    tuisched reload                                 apply the file on disk, with its report
    tuisched logs JOB [--run RUN_ID] [-f]           a run's output; -f follows a live run
    tuisched missed [--json]                        missed slots per job (the downtime ledger)
    tuisched missed decide JOB|--all latest|all|skip  decide them, once
    tuisched backfill JOB --from T --to T [--dry-run] [--json]  run a window's unrun slots

Each finds the scheduler by the configuration's state directory. When none
runs there, they say so in one line and exit 69 (EX_UNAVAILABLE); `logs`
then reads the files the scheduler left. `trigger --wait` exits like
`tuisched run` (0 success, the job's exit code, 124 timed out, 127 could not
launch, 130 stopped).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from datetime import UTC, datetime
from typing import Any, TextIO
from zoneinfo import ZoneInfo

from tuisched.domain.errors import (
    ScheduleError,
    SchedulerNotRunningError,
    TuischedError,
    UnknownJobError,
    one_line,
)
from tuisched.domain.events import Event, RunConcluded, RunEvent, RunOutputWritten
from tuisched.domain.runs import RunRecord, RunState
from tuisched.domain.schedule.duration import format_elapsed
from tuisched.domain.stats import parse_instant
from tuisched.domain.views import (
    BackfillPlan,
    HistoryQuery,
    MissedChoice,
    MissedSlots,
    Pause,
    PauseKind,
    SchedulerStatus,
)
from tuisched.domain.wire import encode
from tuisched.frontends.foreground import exit_status
from tuisched.runtime.control import (
    OfflineControl,
    RemoteControl,
    SchedulerControl,
    control_socket,
    describe_client,
    read_config,
)

EX_UNAVAILABLE = 69
FOLLOW_SECONDS = 0.5
"""How often `logs -f` asks for more output."""


def add_verbs(commands: argparse._SubParsersAction[argparse.ArgumentParser],
              config: argparse.ArgumentParser) -> None:  # fmt: skip
    """Add the verbs to the command line's subcommands."""
    status = commands.add_parser("status", parents=[config], help="the running scheduler")
    status.add_argument("--json", action="store_true", help="print a JSON object")
    status.set_defaults(func=_verb(_status))
    for name, paused in (("pause", True), ("resume", False)):
        verb = commands.add_parser(name, parents=[config], help=f"{name} a job, a group or all")
        which = verb.add_mutually_exclusive_group(required=True)
        which.add_argument("job", metavar="JOB", nargs="?")
        which.add_argument("--group", metavar="GROUP")
        which.add_argument("--all", action="store_true", help="every job")
        verb.set_defaults(func=_verb(_pausing(paused)))
    trigger = commands.add_parser(
        "trigger", parents=[config], help="run JOB now in the running scheduler"
    )
    trigger.add_argument("job", metavar="JOB")
    trigger.add_argument("--wait", action="store_true", help="follow its output to its end")
    trigger.add_argument("--json", action="store_true", help="print the run as a JSON object")
    trigger.set_defaults(func=_verb(_trigger))
    stop = commands.add_parser("stop", parents=[config], help="stop a run, or a job's runs")
    stop.add_argument("target", metavar="RUN_ID|JOB")
    stop.add_argument("--kill", action="store_true", help="SIGKILL at once")
    stop.add_argument("--json", action="store_true", help="print the runs as a JSON list")
    stop.set_defaults(func=_verb(_stop))
    reload = commands.add_parser("reload", parents=[config], help="apply the file on disk")
    reload.add_argument("--json", action="store_true", help="print the report as JSON")
    reload.set_defaults(func=_verb(_reload))
    logs = commands.add_parser("logs", parents=[config], help="a run's output")
    logs.add_argument("job", metavar="JOB")
    logs.add_argument("--run", metavar="RUN_ID", help="this run (default: the newest)")
    logs.add_argument("-f", "--follow", action="store_true", help="follow a live run")
    logs.set_defaults(func=_logs)
    _add_missed(commands, config)
    _add_backfill(commands, config)


Verb = Callable[[SchedulerControl, argparse.Namespace], Awaitable[int]]


def _verb(verb: Verb) -> Callable[[argparse.Namespace], int]:
    """A verb against the running scheduler: exit 69 with one line when there is none."""

    def run(args: argparse.Namespace) -> int:
        try:
            return asyncio.run(_with_remote(args, verb))
        except SchedulerNotRunningError as error:
            print(f"tuisched: {one_line(str(error))}", file=sys.stderr)
            return EX_UNAVAILABLE

    return run


async def _with_remote(args: argparse.Namespace, verb: Verb) -> int:
    control = _remote(args)
    try:
        await control.connect()
        return await verb(control, args)
    finally:
        await control.close()


def _remote(args: argparse.Namespace) -> RemoteControl:
    from tuisched.frontends.cli import config_path  # noqa: PLC0415  (cli imports this module)

    path = control_socket(config_path(args))
    return RemoteControl(path, client=describe_client("command line"))


# --- the verbs ----------------------------------------------------------------------


async def _status(control: SchedulerControl, args: argparse.Namespace) -> int:
    status = await control.status()
    if args.json:
        json.dump(_status_json(status), sys.stdout, indent=2)
        print()
        return 0
    up = ""
    if status.started_at is not None:
        up = f", up {format_elapsed(datetime.now(UTC) - status.started_at)}"
    print(f"scheduler {status.state} on {status.node}, pid {status.pid}{up}")
    print(f"config {status.config_path}")
    print(f"jobs {status.jobs}  groups {status.groups}  running {status.running}  "
          f"queued {status.queued}  waiting {status.waiting}")  # fmt: skip
    print("paused: " + (", ".join(str(p) for p in status.pauses) if status.pauses else "nothing"))
    if status.cluster:
        print(f"cluster: {status.cluster}")
    return 0


def _status_json(status: SchedulerStatus) -> dict[str, object]:
    return {
        "state": status.state.value, "node": status.node, "pid": status.pid,
        "started_at": status.started_at.isoformat() if status.started_at else None,
        "config": str(status.config_path), "jobs": status.jobs, "groups": status.groups,
        "running": status.running, "queued": status.queued, "waiting": status.waiting,
        "paused": [{"kind": p.kind.value, "name": p.name} for p in status.pauses],
        "cluster": status.cluster or None,
    }  # fmt: skip


def _pausing(paused: bool) -> Verb:
    async def verb(control: SchedulerControl, args: argparse.Namespace) -> int:
        if args.all:
            pause = Pause(kind=PauseKind.ALL)
        elif args.group:
            pause = Pause(kind=PauseKind.GROUP, name=args.group)
        else:
            pause = Pause(kind=PauseKind.JOB, name=args.job)
        await control.set_paused(pause, paused=paused)
        print(f"{'paused' if paused else 'resumed'} {pause}")
        return 0

    return verb


async def _trigger(control: SchedulerControl, args: argparse.Namespace) -> int:
    if not args.wait:
        run = await control.run_now(args.job)
        print(json.dumps(encode(run)) if args.json else run.run_id)
        return 0
    events: asyncio.Queue[Event] = asyncio.Queue()
    status = await control.status()
    subscription = control.subscribe(events.put_nowait, after=status.last_seq)
    try:
        run = await control.run_now(args.job)
        print(run.run_id, file=sys.stderr)
        here: set[str] = set()  # runs of ours this node's events spoke of
        following = [_follow(events, run, sys.stdout, here)]
        if status.cluster:  # another node may take it: its end is in the shared history
            following.append(_ended_in_cluster(control, run, here))
        final = await _first(following)
    finally:
        subscription.unsubscribe()
    print(f"{final.job}#{final.run_id}: {final.state} ({final.result}) {final.status}",
          file=sys.stderr)  # fmt: skip
    if args.json:
        print(json.dumps(encode(final)))
    return exit_status(final)


async def _first(waits: list[Coroutine[Any, Any, RunRecord]]) -> RunRecord:
    tasks = [asyncio.ensure_future(wait) for wait in waits]
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        return done.pop().result()
    finally:
        for task in tasks:
            task.cancel()


async def _ended_in_cluster(control: SchedulerControl, run: RunRecord, here: set[str]) -> RunRecord:
    """The end of `run` as the cluster's history has it, when another node took it (its
    output stays on that node; `here` names the runs this node ran), looked for each
    second."""
    told = False
    while True:
        await asyncio.sleep(1)
        if run.run_id in here:
            continue  # it runs here: the events tell its end
        for status in await control.runs():
            if status.run.run_id == run.run_id and status.run.node and not told:
                print(f"{run.run_id} runs on node {status.run.node}: its output is there",
                      file=sys.stderr)  # fmt: skip
                told = True
        for past in await control.history(HistoryQuery(job=run.job, limit=50)):
            ended = past.state not in (RunState.QUEUED, RunState.RUNNING, RunState.WAITING)
            if past.run_id == run.run_id and ended and run.run_id not in here:
                return past


async def _follow(
    events: asyncio.Queue[Event], run: RunRecord, out: TextIO, here: set[str] | None = None
) -> RunRecord:
    """Print the run's output as it comes; its conclusion (its last attempt) once it ends.
    The ids of our runs the events spoke of are added to `here`."""
    ids = {run.run_id}
    while True:
        event = await events.get()
        if not isinstance(event, RunEvent) or event.run.job != run.job:
            continue
        if event.run.run_id not in ids and event.run.attempt > 0 and event.run.slot == run.slot:
            ids.add(event.run.run_id)  # a retry of ours
        if event.run.run_id not in ids:
            continue
        if here is not None:
            here.add(event.run.run_id)
        if isinstance(event, RunOutputWritten):
            out.write("".join(line + "\n" for line in event.lines))
            out.flush()
        elif isinstance(event, RunConcluded):
            return event.run


async def _stop(control: SchedulerControl, args: argparse.Namespace) -> int:
    runs = [status.run for status in await control.runs()]
    chosen = [r for r in runs if r.run_id == args.target] or [
        r for r in runs if r.job == args.target
    ]
    status = await control.status()
    if not chosen and status.cluster:  # another node's run, maybe not seen here yet
        await control.stop_run(args.target, kill=args.kill)
        print(json.dumps([{"run_id": args.target}]) if args.json else f"stopping {args.target}")
        return 0
    if not chosen:
        raise TuischedError(f"no run in progress is '{args.target}' or of a job by that name")
    for run in chosen:
        await control.stop_run(run.run_id, kill=args.kill)
        if not args.json:
            print(f"{'killing' if args.kill else 'stopping'} {run.job}#{run.run_id}")
    if args.json:
        print(json.dumps([{"run_id": run.run_id, "job": run.job} for run in chosen]))
    return 0


async def _reload(control: SchedulerControl, args: argparse.Namespace) -> int:
    pending = await control.pending_edit()
    if not pending.present:
        _report(
            args,
            "unchanged",
            "the file on disk is the configuration in force: nothing to reload",
            (),
        )
        return 0
    if await control.reload():
        _report(args, "reloaded", f"reloaded: {pending.summary}", pending.lines)
        return 0
    lines = (await control.pending_edit()).lines
    _report(args, "refused", "refused: the file on disk is not valid; nothing changed", lines)
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


def _logs(args: argparse.Namespace) -> int:
    return asyncio.run(_logs_async(args))


async def _logs_async(args: argparse.Namespace) -> int:
    return await _through_any_control(args, _print_logs)


async def _through_any_control(
    args: argparse.Namespace,
    verb: Verb,
) -> int:
    """`verb` through the scheduler running here, else through the files it left."""
    remote = _remote(args)
    control: SchedulerControl = remote
    try:
        try:
            await remote.connect()
        except SchedulerNotRunningError:
            control = _offline(args)
        return await verb(control, args)
    finally:
        await remote.close()


def _offline(args: argparse.Namespace) -> OfflineControl:
    from tuisched.frontends.cli import config_path  # noqa: PLC0415

    text, config = read_config(config_path(args))
    return OfflineControl(config, text, clock=lambda: datetime.now(UTC))


async def _print_logs(control: SchedulerControl, args: argparse.Namespace) -> int:
    run_id = args.run or await _newest_run(control, args.job)
    if run_id is None:
        print(f"tuisched: job '{args.job}' has no run yet", file=sys.stderr)
        return 1
    chunk = await control.output(run_id)
    while True:
        for line in chunk.lines:
            print(line)
        sys.stdout.flush()
        if not (args.follow and chunk.running):
            return 0
        await asyncio.sleep(FOLLOW_SECONDS)
        chunk = await control.output(run_id, offset=chunk.next_offset)


async def _newest_run(control: SchedulerControl, job: str) -> str | None:
    live = [s.run for s in await control.runs() if s.run.job == job and s.run.started_at]
    if live:
        return max(live, key=lambda run: run.started_at or datetime.min.replace(tzinfo=UTC)).run_id
    past = await control.history(HistoryQuery(job=job, limit=50))
    launched = [run for run in past if run.started_at is not None]  # skipped runs have none
    return launched[0].run_id if launched else None


# --- the downtime ledger (SPEC R25) ---------------------------------------------------------


def _add_missed(commands: argparse._SubParsersAction[argparse.ArgumentParser],
                config: argparse.ArgumentParser) -> None:  # fmt: skip
    missed = commands.add_parser(
        "missed", parents=[config], help="slots missed while down or paused, per job"
    )
    missed.add_argument("--json", action="store_true", help="print a JSON array")
    missed.set_defaults(func=_verb(_missed))
    verbs = missed.add_subparsers(title="decisions", metavar="decide")
    decide = verbs.add_parser("decide", parents=[config], help="run latest, all, or skip")
    decide.add_argument("job", metavar="JOB", nargs="?", help="the job (or --all)")
    decide.add_argument("--all", action="store_true", help="every job waiting for a decision")
    decide.add_argument("choice", choices=[choice.value for choice in MissedChoice])
    decide.add_argument("--json", action="store_true", help="print what was decided as JSON")
    decide.set_defaults(func=_verb(_decide_missed))


async def _missed(control: SchedulerControl, args: argparse.Namespace) -> int:
    entries = await control.missed()
    if args.json:
        print(json.dumps([_missed_json(entry) for entry in entries], indent=2))
        return 0
    if not entries:
        print("no job missed a slot since the scheduler was last down or paused")
        return 0
    for entry in entries:
        zone = ZoneInfo(entry.timezone)
        first = entry.slots[0].astimezone(zone).isoformat() if entry.slots else "-"
        last = entry.slots[-1].astimezone(zone).isoformat() if entry.slots else "-"
        earlier = f" (first listed; {entry.earlier} earlier)" if entry.earlier else ""
        print(f"{entry.job}: {entry.count} missed, {first}{earlier} .. {last}")
        print(f"  policy: {entry.policy}")
        print(f"  {entry.decided or 'waits for a decision: tuisched missed decide'}")
    return 0


def _missed_json(entry: MissedSlots) -> dict[str, object]:
    zone = ZoneInfo(entry.timezone)
    return {
        "job": entry.job, "count": entry.count, "earlier": entry.earlier,
        "slots": [slot.astimezone(zone).isoformat() for slot in entry.slots],
        "first": entry.slots[0].astimezone(zone).isoformat() if entry.slots else None,
        "last": entry.slots[-1].astimezone(zone).isoformat() if entry.slots else None,
        "misfire": entry.misfire, "policy": entry.policy,
        "pending": entry.pending, "decided": entry.decided or None,
    }  # fmt: skip


async def _decide_missed(control: SchedulerControl, args: argparse.Namespace) -> int:
    if bool(args.job) == bool(args.all):
        print("tuisched: name one JOB or --all", file=sys.stderr)
        return 2
    decided = await control.decide_missed(args.job, MissedChoice(args.choice))
    if args.json:
        print(json.dumps([_missed_json(entry) for entry in decided], indent=2))
        return 0
    for entry in decided:
        print(f"{entry.job}: {entry.decided}")
    return 0


# --- backfill of a window (SPEC R24) ------------------------------------------------------

EX_USAGE = 2


def _add_backfill(commands: argparse._SubParsersAction[argparse.ArgumentParser],
                  config: argparse.ArgumentParser) -> None:  # fmt: skip
    backfill = commands.add_parser(
        "backfill", parents=[config], help="run the slots of a window that have no successful run",
        description="Run, through the running scheduler, the slots of JOB from --from "
        "(included) to --to (excluded) that have no successful run, oldest first, with "
        "trigger `backfill`: `requires`, `overlap` and `max_workers` hold as for any run; "
        "one run at a time, or up to max_workers at a time for an `overlap: allow` job. "
        "At most 10,000 slots. T is ISO 8601 (without an offset: in the job's zone), a "
        "duration before now such as 6h or 7d, or `now`. "
        "--dry-run lists the slots and why others are left out (it needs no running "
        "scheduler). Exit 0; 1 for an unknown job or nothing to run; 2 for a bad time or "
        "window; 69 when no scheduler runs. "
        "Example: tuisched backfill nightly --from 2026-11-01 --to 2026-11-08 --dry-run "
        "(or: --from 7d --to now)",
    )  # fmt: skip
    backfill.add_argument("job", metavar="JOB")
    backfill.add_argument("--from", dest="start", required=True, metavar="T",
                          help="window start (included): ISO 8601, or a duration before "
                          "now like 6h")  # fmt: skip
    backfill.add_argument("--to", dest="end", required=True, metavar="T",
                          help="window end (excluded): ISO 8601, a duration before now, "
                          "or now")  # fmt: skip
    backfill.add_argument("--dry-run", action="store_true", help="list the slots; run nothing")
    backfill.add_argument("--json", action="store_true", help="print a JSON object")
    backfill.set_defaults(func=_backfill)


def _backfill(args: argparse.Namespace) -> int:
    if args.dry_run:  # a listing needs no running scheduler: the files it left do
        return asyncio.run(_backfill_anyhow(args))
    return _verb(_backfill_verb)(args)


async def _backfill_anyhow(args: argparse.Namespace) -> int:
    return await _through_any_control(args, _backfill_verb)


async def _backfill_verb(control: SchedulerControl, args: argparse.Namespace) -> int:
    found = await control.jobs((args.job,))
    if not found:
        raise UnknownJobError(args.job)
    zone = ZoneInfo(found[0].timezone)
    now = datetime.now(UTC).replace(microsecond=0)
    try:
        start, end = _moment(args.start, zone, now, "--from"), _moment(args.end, zone, now, "--to")
        plan = await control.backfill(args.job, start, end, dry_run=args.dry_run)
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
    try:
        return parse_instant(text, now, zone, option)
    except TuischedError as error:
        raise ScheduleError(str(error)) from None


def _print_backfill(plan: BackfillPlan, out: TextIO) -> None:
    zone = ZoneInfo(plan.timezone)
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
    return "1 slot" if count == 1 else f"{count} slots"


def _backfill_json(plan: BackfillPlan) -> dict[str, object]:
    zone = ZoneInfo(plan.timezone)
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
