"""`tuisched trigger JOB --wait`: run a job now and follow it to its end.

The run's output streams to stdout as its events come (`/v1/events`, which
the console's `RemoteControl` follows and resumes without loss); its id and
its end go to stderr; the exit status is `tuisched run`'s (`exits.exit_status`).
In cluster mode another node may take the run: its end is then read from the
shared history. A run the scheduler refuses is told as `trigger` tells it
(exit 1); with `--queue`, the run waits behind the one in progress and is
followed from its start. Loaded only for `--wait`: the other verbs need no event
stream, no event loop and no aiohttp (see `verbs`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Coroutine
from typing import Any
from zoneinfo import ZoneInfo

from tuisched.domain.errors import RunRefusedError, SchedulerNotRunningError
from tuisched.domain.events import Event, RunConcluded, RunEvent, RunFinished, RunOutputWritten
from tuisched.domain.runs import RunRecord, RunState
from tuisched.domain.views import HistoryQuery
from tuisched.frontends.exits import exit_status, unavailable
from tuisched.frontends.history import run_as_json
from tuisched.frontends.lookup import config_path
from tuisched.frontends.outputstream import OutputStream
from tuisched.frontends.refusals import say_refused
from tuisched.runtime.control import (
    RemoteControl,
    SchedulerControl,
    control_socket,
    describe_client,
)


def trigger_and_wait(args: argparse.Namespace) -> int:
    """Run `args.job` now in the running scheduler and follow it (exit 69 when none runs)."""
    try:
        return asyncio.run(_with_remote(args))
    except SchedulerNotRunningError as error:
        return unavailable(error)


async def _with_remote(args: argparse.Namespace) -> int:
    config = config_path(args)
    control = RemoteControl(
        control_socket(config), client=describe_client("command line"), config=config
    )
    try:
        await control.connect()
        return await _trigger_and_wait(control, args)
    finally:
        await control.close()


async def _trigger_and_wait(control: SchedulerControl, args: argparse.Namespace) -> int:
    events: asyncio.Queue[Event] = asyncio.Queue()
    status = await control.status()
    subscription = control.subscribe(events.put_nowait, after=status.last_seq)
    zone = ZoneInfo(status.timezone)
    try:
        final = await _run_and_follow(control, args, events, cluster=bool(status.cluster))
    except RunRefusedError as error:
        return say_refused(error, zone if args.json else None, queued=args.queue)
    finally:
        subscription.unsubscribe()
    print(f"{final.job}#{final.run_id}: {final.state} ({final.result}) {final.status}",
          file=sys.stderr)  # fmt: skip
    if args.json:
        print(json.dumps(run_as_json(final, zone)))
    return exit_status(final)


async def _run_and_follow(
    control: SchedulerControl, args: argparse.Namespace, events: asyncio.Queue[Event],
    *, cluster: bool,
) -> RunRecord:  # fmt: skip
    """Run `args.job` now (RunRefusedError if the scheduler will not) and follow it to its
    end: its id on stderr, its output on stdout."""
    run = await control.run_now(args.job, queue=args.queue)
    print(run.run_id, file=sys.stderr)
    here: set[str] = set()  # runs of ours this node's events spoke of
    following = [
        _follow(events, run, OutputStream(control, sys.stdout, outlive_reader=False), here)
    ]
    if cluster:  # another node may take it: its end is in the shared history
        following.append(_ended_in_cluster(control, run, here))
    return await _first(following)


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
    events: asyncio.Queue[Event], run: RunRecord, stream: OutputStream,
    here: set[str] | None = None,
) -> RunRecord:  # fmt: skip
    """Print the run's output as it comes, every line of it (each attempt's); its
    conclusion (its last attempt) once it ends. The ids of our runs the events spoke of
    are added to `here`."""
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
        if isinstance(event, RunOutputWritten | RunFinished | RunConcluded):
            await stream.catch_up(event.run.run_id)
        if isinstance(event, RunConcluded):
            return event.run
