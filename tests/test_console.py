"""The console, driven with Pilot at 80x24 on a real runtime."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot
from textual.widgets import Button, Input

from tuisched.domain.runs import Result
from tuisched.domain.views import SchedulerState
from tuisched.frontends.tui.app import TuischedApp
from tuisched.frontends.tui.screens.detail import JobDetailScreen
from tuisched.frontends.tui.screens.dialogs import ConfirmScreen, LeaveScreen, QuitScreen
from tuisched.frontends.tui.screens.main import REFRESH_SECONDS
from tuisched.frontends.tui.widgets.audit import AuditPane
from tuisched.frontends.tui.widgets.banner import Banner
from tuisched.frontends.tui.widgets.jobs import JobsTable
from tuisched.frontends.tui.widgets.running import RunningTable
from tuisched.runtime.configfiles import load_config
from tuisched.runtime.historian import Historian
from tuisched.runtime.runtime import Runtime
from tuisched.runtime.store.writer import AsyncHistory

from . import engine_jobs
from .console_fixtures import hosted, make_app, on_lane, until
from .runtime_fixtures import write_config

JOBS = """
hello: {command: "echo '[bold]plain[/bold]'", schedule: manual}
blocker: {python: "tests.engine_jobs:Blocker", isolation: thread, schedule: manual}
tick: {python: "tests.engine_jobs:noop", schedule: {every: 1 hour, start: 2026-01-01T00:00}}
"""
SIZE = (80, 24)


@pytest.fixture(autouse=True)
def _reset_gates() -> None:
    engine_jobs.GATES.clear()


def _select(app: object, job: str) -> None:
    table = app.query_one(JobsTable)  # type: ignore[attr-defined]
    table.move_cursor(row=table.get_row_index(job))


async def test_the_panes_show_the_jobs_and_the_status(tmp_path: Path) -> None:
    app, _runtime = make_app(write_config(tmp_path, JOBS))
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.ready and app.query_one(JobsTable).row_count == 3)
        table = app.query_one(JobsTable)
        assert [key.value for key in table.rows] == ["hello", "blocker", "tick"]

        def cell(column: str) -> str:
            return str(table.get_cell("tick", column))

        assert cell("kind") == "python"
        assert cell("state") == "active"
        assert cell("schedule") == "every hour from 2026-01-01 00:00"
        status = str(app.query_one("#status").render())
        assert "running" in status
        assert "09:10:00" in status  # the console's clock


async def test_run_now_asks_then_runs_and_the_result_shows_everywhere(tmp_path: Path) -> None:
    app, _runtime = make_app(write_config(tmp_path, JOBS))
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.ready and app.query_one(JobsTable).row_count == 3)
        _select(app, "hello")
        await pilot.press("r")
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("enter")  # the default button is Cancel
        assert not isinstance(app.screen, ConfirmScreen)
        assert (await on_lane(app, lambda rt: rt.engine.running())) == []
        await pilot.press("r", "y")
        table = app.query_one(JobsTable)
        await until(pilot, lambda: str(table.get_cell("hello", "last")) == "✔ ok")
        audit = app.query_one(AuditPane)
        await until(pilot, lambda: any(line.startswith("hello | ") for line in audit.lines))
        line = next(line for line in audit.lines if line.startswith("hello | "))
        assert line.endswith("| completed | exit 0: [bold]plain[/bold]")  # never markup


async def test_run_now_of_a_running_job_says_why_before_asking_and_offers_to_queue(
    tmp_path: Path,
) -> None:
    """`overlap: skip` and a run in progress: no "Run now?" that ends in a bare
    not_started, but why (the run in the way, since when) and an offer to queue."""
    app, _runtime = make_app(write_config(tmp_path, JOBS))
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.ready and app.query_one(JobsTable).row_count == 3)
        first = await on_lane(app, lambda rt: rt.actions.run_now("blocker"))
        await until(pilot, lambda: app.query_one(RunningTable).row_count == 1)
        started = app.state.run_of(first.run_id)
        assert started is not None
        assert started.run.started_at is not None
        since = started.run.started_at.strftime("%H:%M:%S")  # the job's zone is UTC
        _select(app, "blocker")
        await pilot.press("r")
        assert isinstance(app.screen, ConfirmScreen)
        assert app.screen.question == (
            f"blocker is still running: run {first.run_id} since {since}.\n"
            "Queue a run to start when it ends?"
        )
        assert str(app.screen.query_one("#confirm", Button).label) == "Queue (y)"
        await pilot.press("y")
        await until(pilot, lambda: any("queued" in text for text in _said(app)))
        queued = await on_lane(app, lambda rt: rt.engine.queued())
        assert [run.job for run in queued] == ["blocker"]
        assert _said(app) == [
            f"blocker#{queued[0].run_id} queued: it starts once run {first.run_id} has ended"
        ]
        engine_jobs.GATES["blocker"].set()

        def queued_one_ran() -> bool:
            last = app.state.jobs["blocker"].last
            return last is not None and last.run_id == queued[0].run_id

        await until(pilot, queued_one_ran)
        assert not any("not_started" in text for text in _said(app))


async def test_run_now_the_scheduler_refuses_after_the_question_says_why(
    tmp_path: Path,
) -> None:
    """The console asked "Run now?" before the job started elsewhere: the scheduler's
    refusal is told with its reason, and queueing is offered, never `not_started`."""
    app, _runtime = make_app(write_config(tmp_path, JOBS))
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.ready and app.query_one(JobsTable).row_count == 3)
        _select(app, "blocker")
        await pilot.press("r")
        assert app.screen.question == "Run blocker now?"  # type: ignore[attr-defined]
        first = await on_lane(app, lambda rt: rt.actions.run_now("blocker"))  # behind its back
        await until(pilot, lambda: app.query_one(RunningTable).row_count == 1)
        await pilot.press("y")
        await until(pilot, lambda: "still running" in getattr(app.screen, "question", ""))
        assert app.screen.question.startswith(  # type: ignore[attr-defined]
            f"blocker is still running: run {first.run_id} since "
        )
        await pilot.press("n")
        assert (await on_lane(app, lambda rt: rt.engine.queued())) == []
        assert not any("not_started" in text for text in _said(app))
        engine_jobs.GATES["blocker"].set()


def _said(app: TuischedApp) -> list[str]:
    return [notification.message for notification in app._notifications]


async def test_stop_and_kill_a_running_run(tmp_path: Path) -> None:
    app, _runtime = make_app(write_config(tmp_path, JOBS))
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.ready and app.query_one(JobsTable).row_count == 3)
        run = await on_lane(app, lambda rt: rt.actions.run_now("blocker"))
        running = app.query_one(RunningTable)
        await until(pilot, lambda: running.row_count == 1)
        assert str(running.get_row(run.run_id)[0]) == "blocker"
        await pilot.press("2", "s", "y")
        await until(pilot, lambda: app.state.jobs["blocker"].last is not None)
        assert app.state.jobs["blocker"].last.result is Result.STOPPED
        await until(pilot, lambda: running.row_count == 0)
        second = await on_lane(app, lambda rt: rt.actions.run_now("blocker"))
        await until(pilot, lambda: running.row_count == 1)
        await pilot.press("2", "ctrl+k", "y")
        await until(pilot, lambda: app.state.jobs["blocker"].last.run_id == second.run_id)


async def test_pause_and_pause_everything(tmp_path: Path) -> None:
    app, _runtime = make_app(write_config(tmp_path, JOBS))
    async with app.run_test(size=SIZE) as pilot:
        table = app.query_one(JobsTable)
        await until(pilot, lambda: app.ready and table.row_count == 3)
        _select(app, "tick")
        await pilot.press("p", "y")
        await until(pilot, lambda: str(table.get_cell("tick", "state")) == "paused")
        assert str(table.get_cell("tick", "next_run")) == "-"
        await pilot.press("p", "y")
        await until(pilot, lambda: str(table.get_cell("tick", "state")) == "active")
        await pilot.press("P", "y")
        await until(pilot, lambda: "PAUSED" in str(app.query_one("#status").render()))
        assert all(str(table.get_cell(name, "state")) == "paused" for name in ("hello", "tick"))


async def test_delete_asks_and_removes_the_job_from_the_file(tmp_path: Path) -> None:
    path = write_config(tmp_path, JOBS)
    app, _runtime = make_app(path)
    async with app.run_test(size=SIZE) as pilot:
        table = app.query_one(JobsTable)
        await until(pilot, lambda: app.ready and table.row_count == 3)
        _select(app, "tick")
        await pilot.press("d", "y")
        await until(pilot, lambda: "tick" not in table.rows)
        assert table.row_count == 2
    assert "tick:" not in path.read_text()
    (action,) = (tmp_path / "state" / "actions.log").read_text().splitlines()
    assert action.endswith(" (console) | delete | job tick")  # every change is on record


async def test_the_banner_for_an_offline_edit_and_a_reload(tmp_path: Path) -> None:
    path = write_config(tmp_path, JOBS)
    app, _runtime = make_app(path)
    async with app.run_test(size=SIZE) as pilot:
        table = app.query_one(JobsTable)
        await until(pilot, lambda: app.ready and table.row_count == 3)
        path.write_text(path.read_text() + "  extra: {command: [/bin/true], schedule: manual}\n")
        banner = app.query_one(Banner)
        await until(pilot, lambda: banner.display)
        assert str(banner.render()).startswith("config changed on disk: +1 -0 ~0 jobs - R reload")
        await pilot.press("R", "y")
        await until(pilot, lambda: "extra" in table.rows)
        assert not banner.display


async def test_a_rejected_reload_changes_nothing_and_says_why(tmp_path: Path) -> None:
    path = write_config(tmp_path, JOBS)
    app, _runtime = make_app(path)
    async with app.run_test(size=SIZE) as pilot:
        table = app.query_one(JobsTable)
        await until(pilot, lambda: app.ready and table.row_count == 3)
        path.write_text(path.read_text() + "  broken: {command: [/bin/true]}\n")
        banner = app.query_one(Banner)
        await until(pilot, lambda: banner.display and banner.has_class("-error"))
        await pilot.press("R", "y")
        await until(pilot, lambda: "reload refused" in str(banner.render()))
        assert "job 'broken': a job needs a trigger source" in str(banner.render())
        assert table.row_count == 3
        await pilot.press("escape")
        assert not banner.display


async def test_filter_sort_and_focus_keys(tmp_path: Path) -> None:
    app, _runtime = make_app(write_config(tmp_path, JOBS))
    async with app.run_test(size=SIZE) as pilot:
        table = app.query_one(JobsTable)
        await until(pilot, lambda: app.ready and table.row_count == 3)
        await pilot.press("slash", "t", "i", "c")
        assert app.query_one("#filter", Input).has_focus
        await until(pilot, lambda: app.ready and table.row_count == 1)
        assert [key.value for key in table.rows] == ["tick"]
        await pilot.press("enter", "escape")
        await until(pilot, lambda: app.ready and table.row_count == 3)
        await pilot.press("o")  # by name
        assert [key.value for key in table.rows] == ["blocker", "hello", "tick"]
        await pilot.press("2")
        assert app.query_one(RunningTable).has_focus
        await pilot.press("3")
        assert app.query_one(AuditPane).has_focus
        await pilot.press("1")
        assert table.has_focus


async def test_the_cursor_stays_on_its_job_when_rows_refresh(tmp_path: Path) -> None:
    app, _runtime = make_app(write_config(tmp_path, JOBS))
    async with app.run_test(size=SIZE) as pilot:
        table = app.query_one(JobsTable)
        await until(pilot, lambda: app.ready and table.row_count == 3)
        _select(app, "tick")
        await pilot.press("o")  # sorted by name: tick moves
        assert table.selected_job() == "tick"
        await on_lane(app, lambda rt: rt.actions.run_now("hello"))
        await until(pilot, lambda: str(table.get_cell("hello", "last")) == "✔ ok")
        assert table.selected_job() == "tick"


async def test_read_only_hides_every_mutating_action(tmp_path: Path) -> None:
    app, _runtime = make_app(write_config(tmp_path, JOBS), read_only=True)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.ready and app.query_one(JobsTable).row_count == 3)
        for key in ("r", "p", "P", "d", "u", "R"):
            await pilot.press(key)
            assert not isinstance(app.screen, ConfirmScreen), key
        assert "read-only" in str(app.query_one("#status").render())


async def _blocker_running(pilot: Pilot[int], app: TuischedApp) -> None:
    """The console started, and the `blocker` job's run in its running pane."""
    await until(pilot, lambda: app.ready and app.query_one(JobsTable).row_count == 3)
    await on_lane(app, lambda rt: rt.actions.run_now("blocker"))
    await until(pilot, lambda: app.query_one(RunningTable).row_count == 1)


async def test_quit_with_runs_in_progress_asks_and_stops_them(tmp_path: Path) -> None:
    app, runtime = make_app(write_config(tmp_path, JOBS))
    async with app.run_test(size=SIZE) as pilot:
        await _blocker_running(pilot, app)
        await pilot.press("q")
        assert isinstance(app.screen, LeaveScreen)
        await pilot.press("s")  # stop the scheduler: the runs in progress are asked about
        await until(pilot, lambda: isinstance(app.screen, QuitScreen))
        await pilot.press("escape")  # stay
        assert not isinstance(app.screen, QuitScreen)
        assert app.is_running
        await pilot.press("q", "s")
        await until(pilot, lambda: isinstance(app.screen, QuitScreen))
        await pilot.press("s")  # stop them
        await until(pilot, lambda: not app.is_running)
    history = runtime.config.settings.state_dir / "audit.log"
    assert " | shutdown | " in history.read_text()


async def test_the_quit_question_goes_once_the_runs_it_asks_about_have_ended(
    tmp_path: Path,
) -> None:
    """Asked to stop with a run in progress, then the run ends by itself: nothing is left
    to wait for or stop, and the scheduler stops as the operator asked."""
    app, _runtime = make_app(write_config(tmp_path, JOBS))
    async with app.run_test(size=SIZE) as pilot:
        await _blocker_running(pilot, app)
        await pilot.press("q", "s")
        await until(pilot, lambda: isinstance(app.screen, QuitScreen))
        engine_jobs.GATES["blocker"].set()
        await until(pilot, lambda: not app.is_running)
    audit = (tmp_path / "state" / "audit.log").read_text()
    assert " | completed | " in audit  # it finished by itself, not stopped
    assert " | shutdown | " not in audit


async def test_quit_without_runs_stops_the_scheduler_at_once(tmp_path: Path) -> None:
    app, runtime = make_app(write_config(tmp_path, JOBS))
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.ready and app.query_one(JobsTable).row_count == 3)
        await pilot.press("q")
        assert isinstance(app.screen, LeaveScreen)
        await pilot.press("escape")  # stay
        assert app.is_running
        assert not isinstance(app.screen, LeaveScreen)
        await pilot.press("q", "s")
        await until(pilot, lambda: not app.is_running)
    assert app.return_code == 0
    assert runtime.state is SchedulerState.STOPPED


async def test_detach_leaves_the_scheduler_running(tmp_path: Path) -> None:
    app, runtime = make_app(write_config(tmp_path, JOBS))
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.ready and app.query_one(JobsTable).row_count == 3)
        await on_lane(app, lambda rt: rt.actions.run_now("blocker"))
        await pilot.press("q", "d")
        await until(pilot, lambda: not app.is_running)
    assert (app.return_code, app.detached) == (0, "detached by the operator")
    assert runtime.state is SchedulerState.RUNNING
    assert [run.job for run in (await on_lane(app, lambda rt: rt.engine.running()))] == [
        "blocker"
    ]  # not stopped
    engine_jobs.GATES["blocker"].set()
    assert app.scheduler is not None
    await app.scheduler.stop()


async def test_a_failure_whose_output_looks_like_markup_is_shown_as_text(tmp_path: Path) -> None:
    jobs = JOBS + "bad: {command: \"echo '[bold]x[/bold] [/oops]'; exit 1\", schedule: manual}\n"
    app, _runtime = make_app(write_config(tmp_path, jobs))
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.ready and app.query_one(JobsTable).row_count == 4)
        await on_lane(app, lambda rt: rt.actions.run_now("bad"))
        table = app.query_one(JobsTable)
        await until(pilot, lambda: str(table.get_cell("bad", "last")) == "✘ failed")
        said = "bad failed: exit 1: [bold]x[/bold] [/oops]"
        # Failures are told once per burst, when the burst's window has passed.
        await until(pilot, lambda: said in [n.message for n in app._notifications])
        assert app.is_running


async def test_stop_acts_on_the_selected_jobs_run_and_names_it(tmp_path: Path) -> None:
    jobs = (
        JOBS + 'other: {python: "tests.engine_jobs:Blocker", isolation: thread, schedule: manual}\n'
    )
    app, _runtime = make_app(write_config(tmp_path, jobs))
    async with app.run_test(size=SIZE) as pilot:
        table = app.query_one(JobsTable)
        await until(pilot, lambda: app.ready and table.row_count == 4)
        blocker = await on_lane(app, lambda rt: rt.actions.run_now("blocker"))
        other = await on_lane(app, lambda rt: rt.actions.run_now("other"))
        await until(pilot, lambda: app.query_one(RunningTable).row_count == 2)
        _select(app, "other")  # the jobs pane has the focus: its job's run is meant
        await pilot.press("s")
        assert isinstance(app.screen, ConfirmScreen)
        assert app.screen.question == f"Stop other (run {other.run_id})?"
        await pilot.press("y")
        await until(pilot, lambda: app.state.jobs["other"].last is not None)
        assert str(table.get_cell("other", "last")) == "■ stopped"  # stopped, not failed
        assert "failed/24h 0" in str(app.query_one("#status").render())
        assert [run.run_id for run in (await on_lane(app, lambda rt: rt.engine.running()))] == [
            blocker.run_id
        ]


async def test_pane_keys_do_nothing_on_the_detail_screen(tmp_path: Path) -> None:
    app, _runtime = make_app(write_config(tmp_path, JOBS))
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.ready and app.query_one(JobsTable).row_count == 3)
        _select(app, "tick")
        await pilot.press("enter")
        await until(pilot, lambda: app.screen is not app.screen_stack[0])
        detail = app.screen
        for key in ("d", "e", "a", "slash", "o"):
            await pilot.press(key)
            assert app.screen is detail, key


async def test_ctrl_q_asks_too_and_waiting_keeps_the_console_alive(tmp_path: Path) -> None:
    app, _runtime = make_app(write_config(tmp_path, JOBS))
    async with app.run_test(size=SIZE) as pilot:
        await _blocker_running(pilot, app)
        await pilot.press("ctrl+q", "s")
        await until(pilot, lambda: isinstance(app.screen, QuitScreen))
        await pilot.press("w")  # wait for the run: the console goes on meanwhile
        await until(pilot, lambda: "stopping" in str(app.query_one("#status").render()))
        assert app.is_running
        engine_jobs.GATES["blocker"].set()
        await until(pilot, lambda: not app.is_running)
    audit = (tmp_path / "state" / "audit.log").read_text()
    assert "blocker | " in audit
    assert " | completed | " in audit  # it finished by itself, not stopped


async def test_a_state_filter_follows_the_states(tmp_path: Path) -> None:
    app, _runtime = make_app(write_config(tmp_path, JOBS))
    async with app.run_test(size=SIZE) as pilot:
        table = app.query_one(JobsTable)
        await until(pilot, lambda: app.ready and table.row_count == 3)
        await pilot.press("slash", *"running", "enter")
        await until(pilot, lambda: app.ready and table.row_count == 0)
        await on_lane(app, lambda rt: rt.actions.run_now("blocker"))
        await until(pilot, lambda: [key.value for key in table.rows] == ["blocker"])
        engine_jobs.GATES["blocker"].set()
        await until(pilot, lambda: app.ready and table.row_count == 0)


async def test_resuming_a_job_under_a_wider_pause_says_why(tmp_path: Path) -> None:
    app, _runtime = make_app(write_config(tmp_path, JOBS))
    async with app.run_test(size=SIZE) as pilot:
        table = app.query_one(JobsTable)
        await until(pilot, lambda: app.ready and table.row_count == 3)
        await pilot.press("P", "y")
        await until(pilot, lambda: str(table.get_cell("tick", "state")) == "paused")
        _select(app, "tick")
        await pilot.press("p")
        assert not isinstance(app.screen, ConfirmScreen)
        messages = [n.message for n in app._notifications]
        assert "tick is paused because everything is paused (P resumes)" in messages


async def test_the_banner_goes_when_the_file_is_put_back(tmp_path: Path) -> None:
    path = write_config(tmp_path, JOBS)
    original = path.read_text()
    app, _runtime = make_app(path)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.ready and app.query_one(JobsTable).row_count == 3)
        path.write_text(original + "  extra: {command: [/bin/true], schedule: manual}\n")
        banner = app.query_one(Banner)
        await until(pilot, lambda: banner.display)
        path.write_text(original)
        await until(pilot, lambda: not banner.display)


async def test_vi_keys_move_the_cursor(tmp_path: Path) -> None:
    app, _runtime = make_app(write_config(tmp_path, JOBS))
    async with app.run_test(size=SIZE) as pilot:
        table = app.query_one(JobsTable)
        await until(pilot, lambda: app.ready and table.row_count == 3)
        await pilot.press("j", "j")
        assert table.selected_job() == "tick"
        await pilot.press("k")
        assert table.selected_job() == "blocker"


async def test_a_python_jobs_status_shows_as_its_last_output(tmp_path: Path) -> None:
    app, _runtime = make_app(write_config(tmp_path, JOBS))
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.ready and app.query_one(JobsTable).row_count == 3)
        run = await on_lane(app, lambda rt: rt.actions.run_now("blocker"))
        running = app.query_one(RunningTable)
        await until(pilot, lambda: running.row_count == 1)
        await until(pilot, lambda: str(running.get_cell(run.run_id, "last_line")) == "blocking")
        engine_jobs.GATES["blocker"].set()


async def test_closing_with_events_still_to_show_does_not_fail(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Textual closes the screens before the app's unmount handler stops the runtime;
    # widen that gap so the refresh timers fire in it, with an event waiting for them.
    close_all = TuischedApp._close_all

    async def slow_close_all(self: TuischedApp) -> None:
        await close_all(self)
        await asyncio.sleep(REFRESH_SECONDS * 3)

    monkeypatch.setattr(TuischedApp, "_close_all", slow_close_all)
    app, _runtime = make_app(write_config(tmp_path, JOBS))
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.ready)
        # its events wait for the next refresh
        await on_lane(app, lambda rt: rt.actions.run_now("hello"))
    assert not app.started  # closed cleanly, and the runtime was stopped


async def test_edit_where_the_terminal_cannot_be_handed_over_says_so(tmp_path: Path) -> None:
    app, _runtime = make_app(write_config(tmp_path, JOBS))
    async with app.run_test(size=SIZE) as pilot:  # a headless driver cannot suspend
        await until(pilot, lambda: app.ready and app.query_one(JobsTable).row_count == 3)
        await pilot.press("E")
        await until(pilot, lambda: app._notifications)
        (message,) = [n.message for n in app._notifications]
        assert message.startswith("this terminal cannot be handed to an editor; edit ")
        assert app.is_running
        await pilot.press("r")  # the console still answers its keys
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))


async def test_s_in_the_detail_view_stops_the_run_it_shows(tmp_path: Path) -> None:
    app, _runtime = make_app(write_config(tmp_path, JOBS))
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.ready and app.query_one(JobsTable).row_count == 3)
        await pilot.press("s")  # nothing runs: nothing to confirm
        assert not isinstance(app.screen, ConfirmScreen)
        run = await on_lane(app, lambda rt: rt.actions.run_now("blocker"))
        await until(pilot, lambda: app.query_one(RunningTable).row_count == 1)
        app.show_job("blocker")
        await until(pilot, lambda: isinstance(app.screen, JobDetailScreen))
        await pilot.press("s")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        assert app.screen.question == f"Stop blocker (run {run.run_id})?"
        await pilot.press("y")
        await until(pilot, lambda: app.query_one(RunningTable).row_count == 0)
        assert await on_lane(app, lambda rt: rt.engine.running()) == []
        assert isinstance(app.screen, JobDetailScreen)  # the view stays, showing the end


async def test_a_state_directory_it_cannot_use_exits_73_as_headless_does(tmp_path: Path) -> None:
    (tmp_path / "taken").write_text("a file where the state folder should be\n")
    app, _ = make_app(write_config(tmp_path, JOBS, settings="state_dir: taken"))
    async with app.run_test() as pilot:
        await pilot.pause()
    assert app.return_code == 73


class _Gate:
    """Holds whatever waits at it, on its own loop, until `set` (from any thread)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open = False
        self._waiting: list[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = []

    async def wait(self) -> None:
        event = asyncio.Event()
        with self._lock:
            if self._open:
                return
            self._waiting.append((asyncio.get_running_loop(), event))
        await event.wait()

    def set(self) -> None:
        with self._lock:
            self._open, waiting = True, self._waiting
        for loop, event in waiting:
            if not loop.is_closed():  # closed: what waited there was undone with it
                loop.call_soon_threadsafe(event.set)


@pytest.fixture
def held_start(monkeypatch: pytest.MonkeyPatch) -> _Gate:
    """A gate the scheduler's start waits at (when it opens its history) until set."""
    gate = _Gate()
    opening = Historian.open

    async def held(historian: Historian, **how: Any) -> AsyncHistory:
        await gate.wait()
        return await opening(historian, **how)

    monkeypatch.setattr(Historian, "open", held)
    return gate


async def test_the_files_jobs_show_while_the_scheduler_starts(
    tmp_path: Path, held_start: _Gate
) -> None:
    app, _runtime = make_app(write_config(tmp_path, JOBS))
    async with app.run_test(size=SIZE) as pilot:
        table = app.query_one(JobsTable)
        await until(pilot, lambda: table.row_count == 3)  # the first frame, before the start
        assert not app.started
        states = {job: str(table.get_cell(job, "state")) for job in ("hello", "tick")}
        assert states == {"hello": "manual", "tick": "starting"}
        assert str(table.get_cell("tick", "next_run")) == "-"
        assert "  starting  " in str(app.query_one("#status").render())
        held_start.set()
        await until(pilot, lambda: app.ready)
        assert str(table.get_cell("tick", "state")) == "active"  # its slots known now
        assert str(table.get_cell("tick", "next_run")) != "-"
        assert "  running  " in str(app.query_one("#status").render())


async def test_keys_pressed_while_the_scheduler_starts_act_once_it_has_started(
    tmp_path: Path, held_start: _Gate
) -> None:
    app, _runtime = make_app(write_config(tmp_path, JOBS))
    async with app.run_test(size=SIZE) as pilot:
        table = app.query_one(JobsTable)
        await until(pilot, lambda: table.row_count == 3)  # an operator sees the jobs: acts
        _select(app, "hello")
        await pilot.press("r", "y")
        _select(app, "tick")
        await pilot.press("p", "y")
        await pilot.pause()
        assert not app.started  # still held: nothing has run, nothing was refused
        assert not [n.message for n in app._notifications if n.severity == "error"]
        said = [n.message for n in app._notifications]
        assert said == ["the scheduler is starting: done once it has started (x2)"]  # one, counted
        held_start.set()
        await until(pilot, lambda: app.ready and str(table.get_cell("hello", "last")) == "✔ ok")
        await until(pilot, lambda: str(table.get_cell("tick", "state")) == "paused")
        errors = [n.message for n in app._notifications if n.severity == "error"]
        assert errors == []  # not "the scheduler is starting"


async def test_stopping_while_the_scheduler_starts_leaves_nothing_running(
    tmp_path: Path, held_start: _Gate
) -> None:
    path = write_config(tmp_path, JOBS)
    app, runtime = make_app(path)
    async with app.run_test(size=SIZE) as pilot:
        table = app.query_one(JobsTable)
        await until(pilot, lambda: table.row_count == 3)
        await pilot.press("q")  # asks, as once started
        await until(pilot, lambda: isinstance(app.screen, LeaveScreen))
        await pilot.press("s")  # nothing runs yet: stopped at once
        await until(pilot, lambda: not app.is_running)
    held_start.set()  # too late: the start was undone
    assert runtime.state is not SchedulerState.RUNNING
    again = Runtime(load_config(path), kill_grace=0.5)  # the state directory is free
    await again.start()
    await again.stop(grace=1)


async def test_detaching_while_the_scheduler_starts_leaves_it_starting(
    tmp_path: Path, held_start: _Gate
) -> None:
    app, runtime = make_app(write_config(tmp_path, JOBS))
    async with app.run_test(size=SIZE) as pilot:
        table = app.query_one(JobsTable)
        await until(pilot, lambda: table.row_count == 3)
        await pilot.press("q", "d")
        await until(pilot, lambda: not app.is_running)
    assert app.detached == "detached by the operator"
    held_start.set()
    scheduler = hosted(app)
    await scheduler.start()  # the same start, which went on without its console
    assert runtime.state is SchedulerState.RUNNING
    await scheduler.stop(grace=1)
