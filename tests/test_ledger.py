"""The downtime ledger (SPEC R25): after an hour down, each job's missed slots are listed
and the operator decides once per job or for all; the history and the actions log keep it."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tuisched.domain.errors import JobActionError, SchedulerNotRunningError
from tuisched.domain.events import RunConcluded, RunStarted, SchedulerStarted, SlotMissed
from tuisched.domain.ledger import earlier_slots
from tuisched.domain.runs import RunRecord, RunState, Trigger
from tuisched.domain.views import HistoryQuery, MissedChoice, MissedSlots, Pause, PauseKind
from tuisched.runtime.clock import ManualClock
from tuisched.runtime.configfiles import load_config
from tuisched.runtime.control import (
    LocalControl,
    LocalScheduler,
    OfflineControl,
    RemoteControl,
    socket_path,
)
from tuisched.runtime.runtime import Runtime
from tuisched.runtime.store import HistoryStore

from . import engine_jobs
from .conftest import REPO
from .recorder import Recorder
from .runtime_fixtures import running, write_config
from .test_cli import run

JOBS = """
ten:
  python: "tests.engine_jobs:noop"
  isolation: thread
  schedule: {every: 10 minutes, start: 2026-01-01T00:00}
other:
  python: "tests.engine_jobs:noop"
  isolation: thread
  schedule: {every: 10 minutes, start: 2026-01-01T00:00}
  overlap: allow
once:
  python: "tests.engine_jobs:noop"
  isolation: thread
  schedule: {every: 10 minutes, start: 2026-01-01T00:00}
  misfire: once
by-hand: {python: "tests.engine_jobs:noop", schedule: manual}
"""
ACTOR = "tester@test (console)"
SLOT_SECONDS = 600
"""The jobs' period: a slot every ten minutes, on the ten minutes."""
SLOT_GUARD = 30
"""How long before a slot a test waits for it to pass (the start of a scheduler beside it)."""


def down_for_an_hour(tmp_path: Path) -> Path:
    """A configuration whose scheduler was last alive an hour ago (as catchup's tests do):
    six slots of each ten-minute job passed meanwhile, and none passes before the
    scheduler starts (a slot due within SLOT_GUARD is let pass first)."""
    into = datetime.now(UTC).timestamp() % SLOT_SECONDS
    if into > SLOT_SECONDS - SLOT_GUARD:
        time.sleep(SLOT_SECONDS - into + 0.1)
    path = write_config(tmp_path, JOBS, settings="max_workers: 1")
    runtime = Runtime(load_config(path))
    state = tmp_path / "state"
    state.mkdir(mode=0o700, exist_ok=True)
    with HistoryStore.open_sqlite(state / "history.db") as store:
        store.mark_alive(runtime.node, datetime.now(UTC) - timedelta(hours=1), 1)
    return path


@asynccontextmanager
async def after_downtime(tmp_path: Path) -> AsyncIterator[tuple[Runtime, Recorder, LocalControl]]:
    """The scheduler back after an hour down, with a console's control."""
    async with running(down_for_an_hour(tmp_path)) as (runtime, events):
        await events.wait_for(SchedulerStarted)
        yield runtime, events, LocalControl(runtime, actor=ACTOR)


async def missed_rows(runtime: Runtime, job: str) -> list[RunRecord]:
    """The job's MISSED rows, oldest slot first."""
    query = HistoryQuery(job=job, states=(RunState.MISSED,), limit=100)
    rows = await runtime.history.call(lambda store: store.page(query))
    return sorted(rows, key=lambda row: row.slot or row.queued_at)


def by_job(entries: tuple[MissedSlots, ...]) -> dict[str, MissedSlots]:
    return {entry.job: entry for entry in entries}


def actions_log(tmp_path: Path) -> str:
    return (tmp_path / "state" / "actions.log").read_text()


async def test_an_hour_down_lists_six_slots_per_ten_minute_job(tmp_path: Path) -> None:
    async with after_downtime(tmp_path) as (_, events, control):
        await events.wait_for(RunConcluded, lambda e: e.run.trigger is Trigger.CATCHUP)
        ledger = by_job(await control.missed())
    assert set(ledger) == {"ten", "other", "once"}  # a manual job has no slots to miss
    ten = ledger["ten"]
    assert ten.count == 6
    assert ten.pending
    assert ten.misfire == "skip"
    assert ten.policy == "recorded only (misfire: skip)"
    assert ten.slots == tuple(sorted(ten.slots))
    assert ten.slots[-1] - ten.slots[0] == timedelta(minutes=50)
    once = ledger["once"]
    assert not once.pending  # misfire: once made it up already
    assert once.decided.startswith("made up by run ")
    assert "(misfire: once)" in once.decided


async def test_skip_is_written_to_the_history_and_the_actions_log_once(tmp_path: Path) -> None:
    async with after_downtime(tmp_path) as (runtime, _, control):
        (decided,) = await control.decide_missed("ten", MissedChoice.SKIP)
        rows = await missed_rows(runtime, "ten")
        with pytest.raises(JobActionError, match="decided already"):
            await control.decide_missed("ten", MissedChoice.ALL)
        ledger = by_job(await control.missed())
        catch_ups = await runtime.history.call(
            lambda store: store.page(HistoryQuery(job="ten", triggers=(Trigger.CATCHUP,)))
        )
    assert decided.decided.startswith(f"skipped by {ACTOR} at ")
    assert len(rows) == 6
    assert all(row.status == decided.decided for row in rows)
    assert not ledger["ten"].pending
    assert ledger["other"].pending  # only the job chosen was decided
    assert not catch_ups
    log = actions_log(tmp_path)
    assert f"| {ACTOR} | missed slots: skip | job ten: skipped by {ACTOR}" in log
    assert "missed slots: all" not in log


async def test_latest_runs_the_newest_slot_once_and_skips_the_others(tmp_path: Path) -> None:
    async with after_downtime(tmp_path) as (runtime, events, control):
        (decided,) = await control.decide_missed("ten", MissedChoice.LATEST)
        (done,) = await events.wait_for(
            RunConcluded, lambda e: e.run.job == "ten" and e.run.trigger is Trigger.CATCHUP
        )
        rows = await missed_rows(runtime, "ten")
    assert done.run.state is RunState.SUCCESS
    assert done.run.slot == rows[-1].slot
    assert rows[-1].status.startswith(f"made up by run {done.run.run_id} ({ACTOR}, ")
    assert all(row.status.startswith(f"skipped by {ACTOR}") for row in rows[:-1])
    assert decided.decided == f"ran the latest of 6 missed slots (run {done.run.run_id}) by {ACTOR}"
    assert "missed slots: latest | job ten: ran the latest" in actions_log(tmp_path)


async def test_all_runs_every_slot_in_order_one_after_another(tmp_path: Path) -> None:
    async with after_downtime(tmp_path) as (runtime, events, control):
        await control.decide_missed("ten", MissedChoice.ALL)
        done = await events.wait_for(
            RunConcluded,
            lambda e: e.run.job == "ten" and e.run.trigger is Trigger.CATCHUP,
            count=6,
        )
        rows = await missed_rows(runtime, "ten")
    slots = [event.run.slot for event in done]
    assert slots == [row.slot for row in rows]  # every slot, in slot order
    assert all(event.run.state is RunState.SUCCESS for event in done)  # none dropped by overlap
    # `overlap: skip`: each started after the one before had concluded.
    started = [e for e in events.of(RunStarted) if e.run.trigger is Trigger.CATCHUP]
    started = [e for e in started if e.run.job == "ten"]
    for before, after in zip(done, started[1:], strict=False):
        assert before.seq < after.seq
    for row, event in zip(rows, done, strict=True):
        assert row.status.startswith(f"made up by run {event.run.run_id} ")


async def test_all_for_an_overlap_allow_job_queues_them_under_max_workers(
    tmp_path: Path,
) -> None:
    async with after_downtime(tmp_path) as (runtime, events, control):
        await control.decide_missed("other", MissedChoice.ALL)
        queued = [run for run in runtime.engine.queued() if run.job == "other"]
        running_now = [run for run in runtime.engine.running() if run.job == "other"]
        done = await events.wait_for(
            RunConcluded,
            lambda e: e.run.job == "other" and e.run.trigger is Trigger.CATCHUP,
            count=6,
        )
    assert len(running_now) <= 1  # max_workers: 1
    assert len(queued) + len(running_now) == 6  # queued at once, not started at once
    assert [e.run.slot for e in done] == sorted(e.run.slot for e in done)


async def test_a_decision_for_all_jobs_decides_every_pending_one(tmp_path: Path) -> None:
    async with after_downtime(tmp_path) as (_, _, control):
        decided = await control.decide_missed(None, MissedChoice.SKIP)
        with pytest.raises(JobActionError, match="no missed slots wait"):
            await control.decide_missed(None, MissedChoice.SKIP)
        ledger = await control.missed()
    assert {entry.job for entry in decided} == {"ten", "other"}  # `once` was decided by policy
    assert not any(entry.pending for entry in ledger)
    log = actions_log(tmp_path)
    assert "job ten: skipped" in log
    assert "job other: skipped" in log


async def test_a_decision_is_seen_by_a_second_client_through_the_socket(tmp_path: Path) -> None:
    scheduler = LocalScheduler(Runtime(load_config(down_for_an_hour(tmp_path)), kill_grace=0.5))
    await scheduler.start()
    first = RemoteControl(socket_path(tmp_path / "state"), client="console one")
    second = RemoteControl(socket_path(tmp_path / "state"), client="console two")
    try:
        await first.connect()
        await second.connect()
        assert by_job(await second.missed())["ten"].pending
        (decided,) = await first.decide_missed("ten", MissedChoice.SKIP)
        seen = by_job(await second.missed())["ten"]
        with pytest.raises(JobActionError, match="decided already"):
            await second.decide_missed("ten", MissedChoice.LATEST)
    finally:
        await first.close()
        await second.close()
        await scheduler.stop(grace=1)
    assert seen == decided
    assert not seen.pending
    assert "(console one)" in seen.decided
    assert "(console one) | missed slots: skip | job ten" in actions_log(tmp_path)


async def test_slots_passed_while_a_job_was_paused_join_the_ledger(tmp_path: Path) -> None:
    start = datetime(2026, 5, 7, 9, 5, tzinfo=UTC)
    path = write_config(tmp_path, JOBS.split("other:", maxsplit=1)[0])  # `ten` alone
    clock = ManualClock(start)
    async with running(path, clock=clock) as (runtime, events):
        control = LocalControl(runtime, actor=ACTOR)
        assert await control.missed() == ()
        await control.set_paused(Pause(kind=PauseKind.JOB, name="ten"), paused=True)
        clock.jump(3600)  # an hour paused (no slot fires for a paused job)
        await control.set_paused(Pause(kind=PauseKind.JOB, name="ten"), paused=False)
        await events.wait_for(SlotMissed, count=6)
        ledger = by_job(await control.missed())
        rows = await missed_rows(runtime, "ten")
    assert set(ledger) == {"ten"}
    assert ledger["ten"].count == 6
    assert ledger["ten"].slots[0] == datetime(2026, 5, 7, 9, 10, tzinfo=UTC)
    assert all(row.reason == "the job was paused at this slot" for row in rows)


async def test_a_slot_fired_before_a_pause_and_taken_after_it_joins_the_ledger(
    tmp_path: Path,
) -> None:
    # An hourly job: the only slot here is the one the test hands over, as APScheduler's
    # thread hands a due slot to a loop too busy to take it before the pause.
    path = write_config(tmp_path, 'hourly: {command: [true], schedule: {cron: "0 * * * *"}}')
    async with running(path) as (runtime, events):
        control = LocalControl(runtime, actor=ACTOR)
        slot = datetime.now(UTC).replace(microsecond=0) - timedelta(seconds=1)
        await control.set_paused(Pause(kind=PauseKind.JOB, name="hourly"), paused=True)
        firing = runtime.engine._firing
        assert firing._inbox is not None
        firing._inbox.put([("hourly", [(slot, slot)])])  # fired before, taken after
        (missed,) = await events.wait_for(SlotMissed)
        rows = await missed_rows(runtime, "hourly")
    assert missed.run.slot == slot
    assert [(row.slot, row.reason) for row in rows] == [
        (slot, "the job was paused before this slot could start")
    ]


async def test_slots_while_a_resume_waits_for_the_history_are_the_pause_s_not_lost(
    tmp_path: Path,
) -> None:
    path = write_config(
        tmp_path, 'tick: {command: [true], schedule: {every: 1s, start: "2026-01-01T00:00:00Z"}}'
    )
    async with running(path) as (runtime, events):
        control = LocalControl(runtime, actor=ACTOR)
        pause = Pause(kind=PauseKind.JOB, name="tick")
        await control.set_paused(pause, paused=True)
        # The history's writer is busy (a slow disk, a burst) across the next slots: the
        # resume waits for it while those slots pass.
        gate = threading.Event()
        busy = asyncio.ensure_future(runtime.history.call(lambda store: gate.wait(20)))
        resuming = asyncio.ensure_future(control.set_paused(pause, paused=False))
        asked = datetime.now(UTC)
        await asyncio.sleep(2.2)  # the fault itself: two slots go by while it waits
        gate.set()
        await busy
        await resuming
        resumed = datetime.now(UTC)
        await events.wait_for(RunStarted)  # firing again
        rows = await missed_rows(runtime, "tick")
        ran = await runtime.history.call(
            lambda store: store.page(HistoryQuery(job="tick", limit=100))
        )
    between = {row.slot for row in ran if row.slot is not None and asked < row.slot <= resumed}
    # The two whole seconds after `asked` passed while the gate held the resume (2.2 s):
    # they are the pause's, MISSED. Later ones may have run: on a busy machine the test
    # hears of the resume a while after it took effect.
    first = asked.replace(microsecond=0) + timedelta(seconds=1)
    held = {first, first + timedelta(seconds=1)}
    assert held <= between, sorted(between)
    assert held <= {row.slot for row in rows}, "a slot passed during the resume was lost"


def test_the_oldest_row_counts_the_earlier_slots_of_a_long_downtime() -> None:
    down = "the scheduler was not running at this slot (and about 140 earlier slots)"
    assert earlier_slots(down) == 140
    assert earlier_slots("too late to run (90s late) (and 3 earlier slots)") == 3
    assert earlier_slots("the job was paused at this slot (and about 1 earlier slot)") == 1
    assert earlier_slots("the scheduler was not running at this slot") == 0


async def test_without_a_scheduler_the_ledger_says_one_is_needed(tmp_path: Path) -> None:
    path = write_config(tmp_path, JOBS)
    offline = OfflineControl(load_config(path), path.read_text(), clock=lambda: datetime.now(UTC))
    with pytest.raises(SchedulerNotRunningError):
        await offline.missed()
    with pytest.raises(SchedulerNotRunningError):
        await offline.decide_missed(None, MissedChoice.SKIP)


# --- the command line: `tuisched missed` -------------------------------------------------


@pytest.fixture
def headless(tmp_path: Path) -> Iterator[Path]:
    """A headless scheduler back after an hour down; its configuration's path."""
    path = down_for_an_hour(tmp_path)
    process = subprocess.Popen(
        [sys.executable, "-m", "tuisched", "--no-ui", "-c", str(path)],
        cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    sock = tmp_path / "state" / "control.sock"
    deadline = time.monotonic() + 20
    while not sock.exists():
        assert process.poll() is None, process.communicate()[1]
        assert time.monotonic() < deadline, "the scheduler never listened"
        time.sleep(0.05)  # a process we do not own: nothing to await
    yield path
    process.terminate()
    process.communicate(timeout=20)


def test_the_cli_lists_and_decides_through_the_socket(headless: Path) -> None:
    status, out, _ = run("missed", "--json", "-c", str(headless))
    assert status == 0
    listed = {entry["job"]: entry for entry in json.loads(out)}
    assert listed["ten"]["count"] == 6
    assert listed["ten"]["pending"] is True
    assert listed["once"]["pending"] is False
    status, out, _ = run("missed", "decide", "ten", "skip", "-c", str(headless))
    assert status == 0
    assert out.startswith("ten: skipped by ")
    status, _, err = run("missed", "decide", "ten", "latest", "-c", str(headless))
    assert status == 1
    assert "decided already" in err
    status, out, _ = run("missed", "decide", "--all", "skip", "-c", str(headless))
    assert (status, out.splitlines()[0].split(":")[0]) == (0, "other")
    status, out, _ = run("missed", "-c", str(headless))
    assert "ten: 6 missed, " in out
    assert "waits for a decision" not in out
    status, history, _ = run("history", "ten", "-c", str(headless))
    assert history.count("skipped by ") == 6  # `tuisched history` shows the decision


def test_the_cli_exits_69_when_no_scheduler_runs(tmp_path: Path) -> None:
    path = write_config(tmp_path, JOBS)
    for argv in (["missed"], ["missed", "decide", "--all", "skip"]):
        status, _, err = run(*argv, "-c", str(path))
        assert status == 69
        assert "no scheduler is running" in err


async def test_slots_decided_while_others_are_made_up_join_the_line(tmp_path: Path) -> None:
    engine_jobs.GATES.clear()
    path = down_for_an_hour(tmp_path)
    path.write_text(
        path.read_text().replace('"tests.engine_jobs:noop"', '"tests.engine_jobs:Blocker"', 1)
    )
    async with running(path) as (runtime, events):
        await events.wait_for(SchedulerStarted)
        control = LocalControl(runtime, actor=ACTOR)
        await control.decide_missed("ten", MissedChoice.ALL)
        await events.wait_for(RunStarted, lambda e: e.run.trigger is Trigger.CATCHUP)
        first = (await missed_rows(runtime, "ten"))[0]
        assert first.slot is not None
        earlier = replace(first, run_id="earlier00001", slot=first.slot - timedelta(hours=1),
                          queued_at=first.slot - timedelta(hours=1), status="")  # fmt: skip
        await runtime.history.insert(earlier)
        await LocalControl(runtime, actor="second@test (console)").decide_missed(
            "ten", MissedChoice.ALL
        )
        engine_jobs.GATES["blocker"].set()
        done = await events.wait_for(
            RunConcluded,
            lambda e: e.run.job == "ten" and e.run.trigger is Trigger.CATCHUP,
            count=7,
        )
        rows = {row.run_id: row for row in await missed_rows(runtime, "ten")}
    slots = [event.run.slot for event in done]
    assert slots[1:] == sorted(slots[1:])  # the line kept slot order after the first
    assert earlier.slot in slots
    assert "(second@test (console), " in rows["earlier00001"].status


async def test_a_backfill_of_missed_slots_decides_them_and_leaves_the_others(
    tmp_path: Path,
) -> None:
    async with after_downtime(tmp_path) as (runtime, events, control):
        before = await missed_rows(runtime, "ten")
        middle = before[len(before) // 2].slot
        assert middle is not None
        plan = await control.backfill("ten", before[0].slot or middle, middle)
        for _ in plan.slots:
            await events.wait_for(
                RunConcluded, lambda e: e.run.job == "ten" and e.run.trigger is Trigger.BACKFILL
            )
        rows = await missed_rows(runtime, "ten")
        ledger = by_job(await control.missed())
    made_up = [row for row in rows if row.slot in plan.slots]
    assert len(made_up) == len(plan.slots) == len(before) // 2
    assert all(row.status.startswith(f"made up by backfill ({ACTOR}, ") for row in made_up)
    assert all(not row.status for row in rows if row.slot not in plan.slots)
    assert ledger["ten"].pending  # the slots after the window still wait
    assert ledger["ten"].count == len(before) - len(plan.slots)
