"""The main screen's keys: top and bottom, sort, marks, copy, zoom, quit, the legend,
refusals before any dialog, failure bursts and the drain screen (Pilot, 80x24)."""

from __future__ import annotations

import random
from dataclasses import replace
from pathlib import Path

import pytest
from textual.app import App

from tuisched.domain.events import RunFinished
from tuisched.domain.runs import Result, RunRecord, RunState, Trigger
from tuisched.domain.views import JobStatus, Pause, PauseKind, RunStatus, SchedulerState
from tuisched.frontends.tui.app import TuischedApp
from tuisched.frontends.tui.failures import Failure, FailureNotices
from tuisched.frontends.tui.jobindex import SORTS, JobIndex, sort_key
from tuisched.frontends.tui.keyrules import Cursor, refusal
from tuisched.frontends.tui.screens.dialogs import ConfirmScreen, LeaveScreen, QuitScreen
from tuisched.frontends.tui.screens.drain import DrainScreen, DrainTable, drain_word
from tuisched.frontends.tui.screens.groups import GroupPickerScreen
from tuisched.frontends.tui.screens.main import FOCUS_MARK, MainScreen, job_target
from tuisched.frontends.tui.state import ConsoleState
from tuisched.frontends.tui.widgets.audit import AuditPane
from tuisched.frontends.tui.widgets.jobcolumns import header_line
from tuisched.frontends.tui.widgets.jobs import JobsTable
from tuisched.frontends.tui.widgets.running import RunningTable
from tuisched.runtime.configfiles import load_config
from tuisched.runtime.control import LocalScheduler
from tuisched.runtime.runtime import Runtime

from . import engine_jobs
from .console_fixtures import FIXED, make_app, on_lane, until
from .recorder import Recorder
from .runtime_fixtures import write_config
from .snapshots import screen_text

SIZE = (80, 24)
JOBS = """
alpha: {command: [/bin/echo, "a b"], schedule: manual}
blocker: {python: "tests.engine_jobs:Blocker", isolation: thread, schedule: manual}
gamma: {command: "echo gamma", schedule: manual}
delta: {python: "tests.engine_jobs:noop", schedule: {every: 1 hour, start: 2026-01-01T00:00}}
slow: {command: "while [ ! -e go ]; do sleep 0.05; done; exit 3", schedule: manual}
"""
NAMES = ["alpha", "blocker", "gamma", "delta", "slow"]


@pytest.fixture(autouse=True)
def _reset_gates() -> None:
    engine_jobs.GATES.clear()


@pytest.fixture
def config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)  # `slow` waits for ./go
    return write_config(tmp_path, JOBS)


async def _started(pilot: object, app: TuischedApp, rows: int = len(NAMES)) -> JobsTable:
    await until(pilot, lambda: app.ready and app.query_one(JobsTable).row_count == rows)  # type: ignore[arg-type]
    return app.query_one(JobsTable)


def _legend(app: App[int]) -> list[str]:
    """The keys the footer offers now, by description."""
    return [
        active.binding.description
        for active in app.screen.active_bindings.values()
        if active.binding.show
    ]


def _notices(app: App[int]) -> list[str]:
    return [notification.message for notification in app._notifications]


def _shown(table: JobsTable) -> list[str]:
    return [key.value or "" for key in table.rows]


# --- 1. top and bottom ----------------------------------------------------------------


async def test_g_and_G_and_home_and_end_go_to_the_first_and_last_row(config: Path) -> None:
    app, _runtime = make_app(config)
    async with app.run_test(size=SIZE) as pilot:
        table = await _started(pilot, app)
        for key, row in (("G", 4), ("g", 0), ("end", 4), ("home", 0)):
            await pilot.press(key)
            assert table.cursor_row == row, key
        await on_lane(app, lambda rt: rt.actions.run_now("blocker"))
        await on_lane(app, lambda rt: rt.actions.run_now("alpha"))
        engine_jobs.GATES["alpha"].set()
        running = app.query_one(RunningTable)
        await until(pilot, lambda: running.row_count >= 1)
        await until(pilot, lambda: running.size.height > 1)  # no longer its header alone
        await pilot.press("2", "G")
        assert running.cursor_row == running.row_count - 1
        await pilot.press("g")
        assert running.cursor_row == 0


async def test_the_group_view_moved_to_v(config: Path) -> None:
    config.write_text(config.read_text() + "groups:\n  nightly: {jobs: [alpha, gamma]}\n")
    app, _runtime = make_app(config)
    async with app.run_test(size=SIZE) as pilot:
        table = await _started(pilot, app)
        await pilot.press("G", "g")
        assert not isinstance(app.screen, GroupPickerScreen)
        assert table.cursor_row == 0
        await pilot.press("v")
        await until(pilot, lambda: isinstance(app.screen, GroupPickerScreen))


async def test_the_audit_pane_goes_to_its_first_and_last_line(config: Path) -> None:
    app, _runtime = make_app(config)
    async with app.run_test(size=SIZE) as pilot:
        await _started(pilot, app)
        audit = app.query_one(AuditPane)
        audit.add([f"line {n}" for n in range(50)])
        await pilot.press("3", "g")
        await until(pilot, lambda: audit.scroll_y == 0)
        await pilot.press("G")
        await until(pilot, lambda: audit.scroll_y == audit.max_scroll_y > 0)


# --- 2. sort column and reverse ---------------------------------------------------------


def _status(name: str, position: int) -> JobStatus:
    return JobStatus(name=name, kind="command", trigger=f"every {position} hours")


def test_reverse_reads_the_same_sorted_list_backwards_without_sorting_again() -> None:
    rng = random.Random(7)  # noqa: S311  (names for a test, not secrets)
    names = [f"job{rng.randrange(10**6):06d}" for _ in range(10_000)]
    index = JobIndex()
    index.replace(_status(name, i) for i, name in enumerate(dict.fromkeys(names)))
    index.set_order("name")
    forwards = list(index.shown())
    built = index._sorted["name"]
    index.set_reverse(True)
    assert index.shown() == forwards[::-1]
    assert index._sorted["name"] is built  # the same list: reversed, not sorted again
    index.set_filter("job1")
    assert index.shown() == [name for name in forwards[::-1] if "job1" in name]
    index.set_reverse(False)
    assert index.shown() == [name for name in forwards if "job1" in name]


def test_reverse_agrees_with_a_plain_sort_in_every_order() -> None:
    statuses = [_status(name, i) for i, name in enumerate(["c", "a", "d", "b"])]
    index = JobIndex()
    index.replace(statuses)
    index.set_reverse(True)
    for order in SORTS:
        index.set_order(order)
        plain = sorted(statuses, key=lambda s: sort_key(order, s, statuses.index(s)))
        assert index.shown() == [status.name for status in reversed(plain)], order


def test_the_header_marks_the_sorted_column_and_its_direction() -> None:
    assert "Job ▲" in header_line("name", reverse=False)
    assert "Job ▼" in header_line("name", reverse=True)
    assert "Next run ▲" in header_line("next run", reverse=False)
    assert "▲" not in header_line("file order", reverse=False)  # no column to mark


async def test_o_cycles_the_sort_column_and_O_reverses_it(config: Path) -> None:
    app, _runtime = make_app(config)
    async with app.run_test(size=SIZE) as pilot:
        table = await _started(pilot, app)
        await pilot.press("o")  # by name
        await until(pilot, lambda: "Job ▲" in screen_text(app))
        assert _shown(table) == sorted(NAMES)
        table.move_cursor(row=table.get_row_index("delta"))
        await pilot.press("O")
        await until(pilot, lambda: "Job ▼" in screen_text(app))
        assert _shown(table) == sorted(NAMES, reverse=True)
        assert table.selected_job() == "delta"  # the cursor stays on its job
        assert "sorted by name ▼" in str(table.border_subtitle)


# --- 3. marks -------------------------------------------------------------------------


async def test_space_marks_and_p_pauses_every_marked_job_in_one_question(config: Path) -> None:
    app, runtime = make_app(config)
    async with app.run_test(size=SIZE) as pilot:
        table = await _started(pilot, app)
        await pilot.press("space", "space", "down", "space")  # alpha, blocker, delta
        assert table.marked == ["alpha", "blocker", "delta"]
        assert str(table.border_subtitle).strip().startswith("3 marked - 5 of 5")
        lines = screen_text(app).splitlines()
        assert [line[0:8] for line in lines[3:8]] == [
            "*alpha  ", "*blocker", " gamma  ", "*delta  ", " slow   ",
        ]  # fmt: skip
        await pilot.press("p")
        assert isinstance(app.screen, ConfirmScreen)
        assert app.screen.question == "Pause 3 jobs?\nalpha, blocker, delta"
        await pilot.press("y")
        engine = runtime.engine
        await until(
            pilot, lambda: {("job", n) for n in ("alpha", "blocker", "delta")} <= engine.pauses
        )
        assert ("job", "gamma") not in engine.pauses
        assert table.marked == []  # done: the marks are cleared
        await until(pilot, lambda: app.state.jobs["delta"].paused)
        table.move_cursor(row=table.get_row_index("delta"))
        await pilot.press("p")  # the cursor's job is paused: p resumes
        assert app.screen.question == "Resume delta?"
        await pilot.press("y")
        await until(pilot, lambda: ("job", "delta") not in engine.pauses)


async def test_escape_clears_the_marks_and_cancel_keeps_them(config: Path) -> None:
    app, _runtime = make_app(config)
    async with app.run_test(size=SIZE) as pilot:
        table = await _started(pilot, app)
        await pilot.press("space", "space", "r")
        assert app.screen.question == "Run 2 jobs now?\nalpha, blocker"
        await pilot.press("n")
        assert table.marked == ["alpha", "blocker"]
        await pilot.press("escape")
        assert table.marked == []
        assert "*" not in screen_text(app)


async def test_r_on_marked_jobs_names_those_still_running_and_runs_the_others(
    config: Path,
) -> None:
    app, _runtime = make_app(config)
    async with app.run_test(size=SIZE) as pilot:
        table = await _started(pilot, app)
        first = await on_lane(app, lambda rt: rt.actions.run_now("blocker"))
        await until(pilot, lambda: app.query_one(RunningTable).row_count == 1)
        started = app.state.run_of(first.run_id)
        assert started is not None
        assert started.run.started_at is not None
        why = f"still running: run {first.run_id} since {started.run.started_at:%H:%M:%S}"
        await pilot.press("space", "space", "r")  # alpha, blocker
        assert app.screen.question == f"Run 2 jobs now?\nalpha, blocker\nblocker not run: {why}"
        await pilot.press("y")
        await until(pilot, lambda: app.state.jobs["alpha"].last is not None)
        await until(pilot, lambda: any(text.startswith("1 job started") for text in _notices(app)))
        assert f"1 job started: alpha\nblocker not run: {why}" in _notices(app)
        assert table.marked == []
        engine_jobs.GATES["blocker"].set()


async def test_r_runs_and_s_stops_every_marked_job(config: Path) -> None:
    app, _runtime = make_app(config)
    async with app.run_test(size=SIZE) as pilot:
        table = await _started(pilot, app)
        table.move_cursor(row=table.get_row_index("blocker"))
        await pilot.press("space", "space")  # blocker, gamma
        await pilot.press("r", "y")
        await until(pilot, lambda: app.state.jobs["gamma"].last is not None)
        assert table.marked == []
        assert any(text.startswith("2 jobs started: blocker, gamma") for text in _notices(app))
        slow = await on_lane(app, lambda rt: rt.actions.run_now("slow"))
        await until(pilot, lambda: app.query_one(RunningTable).row_count == 2)
        table.move_cursor(row=table.get_row_index("blocker"))
        await pilot.press("space")
        table.move_cursor(row=table.get_row_index("slow"))
        await pilot.press("space", "s")
        question = app.screen.question
        assert question.startswith("Stop 2 runs?\nblocker (")
        assert f"slow ({slow.run_id})" in question
        await pilot.press("y")
        await until(pilot, lambda: app.query_one(RunningTable).row_count == 0)
        assert app.state.jobs["slow"].last.result is Result.STOPPED


# --- 4. copy, 5. zoom, 6. ctrl+c ------------------------------------------------------------


def test_what_y_copies_of_a_job() -> None:
    assert job_target({"command": ["/bin/echo", "a b"]}) == ("command", "/bin/echo 'a b'")
    assert job_target({"command": "df -h | tail -1"}) == ("command", "df -h | tail -1")
    assert job_target({"python": "jobs:run"}) == ("python", "jobs:run")
    assert job_target({"wait_for": "/data/*.csv"}) == ("wait_for", "/data/*.csv")
    assert job_target({"schedule": "manual"}) is None


async def test_y_copies_a_jobs_command_or_a_runs_id_and_says_so(config: Path) -> None:
    app, _runtime = make_app(config)
    async with app.run_test(size=SIZE) as pilot:
        await _started(pilot, app)
        await pilot.press("y")
        await until(pilot, lambda: app.clipboard == "/bin/echo 'a b'")
        assert "copied alpha's command: /bin/echo 'a b'" in _notices(app)
        run = await on_lane(app, lambda rt: rt.actions.run_now("blocker"))
        await until(pilot, lambda: app.query_one(RunningTable).row_count == 1)
        await pilot.press("2", "y")
        assert app.clipboard == run.run_id
        assert f"copied run id: {run.run_id}" in _notices(app)


async def test_z_zooms_the_focused_pane_and_back(config: Path) -> None:
    app, _runtime = make_app(config)
    async with app.run_test(size=SIZE) as pilot:
        await _started(pilot, app)
        await pilot.press("3", "z")
        screen = app.screen
        assert screen.maximized is app.query_one(AuditPane)
        await pilot.pause()
        assert app.query_one(AuditPane).size.height >= 18
        assert "1 Jobs" not in screen_text(app)
        await pilot.press("z")
        assert screen.maximized is None
        await pilot.press("1", "z")
        assert screen.maximized is app.query_one(JobsTable)
        await pilot.press("2")  # another pane: every pane again
        assert screen.maximized is None


async def test_ctrl_c_asks_as_q_does(config: Path) -> None:
    app, runtime = make_app(config)
    async with app.run_test(size=SIZE) as pilot:
        await _started(pilot, app)
        await pilot.press("ctrl+c")
        assert isinstance(app.screen, LeaveScreen)
        await pilot.press("escape")
        assert app.is_running
        await pilot.press("ctrl+c", "s")
        await until(pilot, lambda: not app.is_running)
    assert app.return_code == 0
    assert runtime.state is SchedulerState.STOPPED


# --- 7. the legend, 8. refusals ---------------------------------------------------------


async def test_the_legend_shows_the_keys_that_apply_where_the_cursor_is(config: Path) -> None:
    app, _runtime = make_app(config)
    async with app.run_test(size=SIZE) as pilot:
        table = await _started(pilot, app)
        legend = _legend(app)
        assert {"Run", "Pause", "Edit", "Copy", "Messages"} <= set(legend)
        assert "Stop" not in legend
        assert "Resume" not in legend
        await on_lane(app, lambda rt: rt.actions.run_now("blocker"))
        table.move_cursor(row=table.get_row_index("blocker"))
        await until(pilot, lambda: "Stop" in _legend(app))
        await pilot.press("p", "y")
        await until(pilot, lambda: "Resume" in _legend(app))
        assert "Pause" not in _legend(app)
        await pilot.press("2")
        legend = _legend(app)
        assert {"Stop", "Copy"} <= set(legend)
        assert not {"Run", "Pause", "Resume", "Edit"} & set(legend)
        assert str(app.query_one(RunningTable).border_title).strip() == FOCUS_MARK + "2 Running"
        assert str(app.query_one(JobsTable).border_title).strip() == "1 Jobs"


async def test_stop_with_nothing_running_says_why_and_asks_nothing(config: Path) -> None:
    app, _runtime = make_app(config)
    async with app.run_test(size=SIZE) as pilot:
        await _started(pilot, app)
        await pilot.press("s")
        assert isinstance(app.screen, MainScreen)
        assert "nothing to stop: alpha has no run in progress" in _notices(app)
        await pilot.press("space", "space", "s")
        assert isinstance(app.screen, MainScreen)
        assert "nothing to stop: none of the 2 marked jobs has a run in progress" in _notices(app)
        await pilot.press("2", "s")
        assert isinstance(app.screen, MainScreen)
        assert "nothing is running" in _notices(app)
        await pilot.press("r")
        assert isinstance(app.screen, MainScreen)
        assert "that key acts on the jobs pane: 1 goes there" in _notices(app)


async def test_resume_of_a_job_paused_by_its_group_says_why(config: Path) -> None:
    config.write_text(config.read_text() + "groups:\n  nightly: {jobs: [alpha, gamma]}\n")
    app, _runtime = make_app(config)
    async with app.run_test(size=SIZE) as pilot:
        await _started(pilot, app)
        await on_lane(app, lambda rt: rt.actions.pause_group("nightly", actor="tester"))
        await until(pilot, lambda: app.state.jobs["alpha"].paused)
        resume = app.screen.active_bindings["p"]
        assert (resume.binding.description, resume.enabled) == ("Resume", False)  # dimmed
        await pilot.press("p")
        assert isinstance(app.screen, MainScreen)
        assert any("its group nightly is paused" in text for text in _notices(app))


async def test_read_only_refuses_with_a_notice_and_no_dialog(config: Path) -> None:
    app, _runtime = make_app(config, read_only=True)
    async with app.run_test(size=SIZE) as pilot:
        await _started(pilot, app)
        assert not {"Run", "Pause", "Edit", "Stop"} & set(_legend(app))
        for key, words in (
            ("e", "edit jobs"), ("a", "add jobs"), ("d", "delete jobs"), ("r", "run jobs"),
            ("p", "pause jobs"), ("u", "undo changes"), ("R", "reload the configuration"),
        ):  # fmt: skip
            await pilot.press(key)
            await app.workers.wait_for_complete()
            assert isinstance(app.screen, MainScreen), key
            assert f"read-only console: it cannot {words}" in _notices(app), key
        assert "read-only" in screen_text(app).splitlines()[0]  # at 80 columns, not cut off


def test_the_rules_of_the_keys_without_a_screen() -> None:
    group = Pause(kind=PauseKind.GROUP, name="nightly")
    own = Pause(kind=PauseKind.JOB, name="b")
    state = ConsoleState(
        jobs={
            "a": _status("a", 0),
            "b": replace(_status("b", 1), paused_by=(own,)),
            "c": replace(_status("c", 2), paused_by=(group,)),
        },
        runs=(RunStatus(run=replace(_run(RunState.RUNNING), job="a")),),
    )
    on_a = Cursor(pane="jobs", job="a")
    assert refusal("pause_jobs", on_a, state) is None
    assert refusal("resume_jobs", on_a, state) == "a is not paused"
    assert refusal("stop_run", on_a, state) is None
    on_b = replace(on_a, job="b")
    assert refusal("pause_jobs", on_b, state) == "b is paused"
    assert refusal("resume_jobs", on_b, state) is None
    assert refusal("stop_run", on_b, state) == "nothing to stop: b has no run in progress"
    on_c = replace(on_a, job="c")
    why = "c is paused because its group nightly is paused (v, the group view, resumes it)"
    assert refusal("resume_jobs", on_c, state) == why
    marked = replace(on_a, marked=("b", "c"))
    assert refusal("pause_jobs", marked, state) == "every one of the 2 marked jobs is paused"
    assert refusal("resume_jobs", marked, state) is None  # b is its own: resumed
    assert refusal("run_jobs", replace(on_a, pane="audit"), state) == (
        "that key acts on the jobs pane: 1 goes there"
    )
    read_only = replace(on_a, read_only=True)
    assert refusal("edit_job", read_only, state) == "read-only console: it cannot edit jobs"
    assert refusal("copy", read_only, state) is None  # reading is never refused


def test_a_job_deleted_under_the_cursor_is_no_target_for_any_key() -> None:
    """The footer asks the rules for every key while a delete lands: the cursor still
    names the job the state no longer has (a KeyError once took the console down)."""
    state = ConsoleState(jobs={"a": _status("a", 0)})
    on_gone = Cursor(pane="jobs", job="tick")
    for action in ("run_jobs", "pause_jobs", "resume_jobs"):
        assert refusal(action, on_gone, state) == "no job selected"
    marked = Cursor(pane="jobs", job="a", marked=("tick", "a"))
    assert refusal("resume_jobs", marked, state) == "a is not paused"
    assert refusal("pause_jobs", marked, state) is None


# --- 9. failure bursts ----------------------------------------------------------------


def test_a_burst_of_failures_is_one_notice() -> None:
    notices = FailureNotices()
    assert notices.add([Failure("backup", "exit 1")])
    assert not notices.add([Failure(f"job{n}", "exit 2") for n in range(11)])
    text = notices.due()
    assert text == "12 runs failed: backup, job0, job1, job2, job3, ... - 3: the audit log"
    assert notices.due() is None
    assert notices.add([Failure("report", "exit 3")])  # a new burst
    assert notices.due() == "report failed: exit 3"


async def test_many_failures_at_once_give_one_notice(tmp_path: Path) -> None:
    jobs = "".join(f'fail{n}: {{command: "exit {n + 1}", schedule: manual}}\n' for n in range(6))
    app, _runtime = make_app(write_config(tmp_path, jobs))
    async with app.run_test(size=SIZE) as pilot:
        await _started(pilot, app, rows=6)
        for n in range(6):
            await on_lane(app, lambda rt, n=n: rt.actions.run_now(f"fail{n}"))
        await until(pilot, lambda: any("runs failed" in text for text in _notices(app)))
        failed = [text for text in _notices(app) if "failed" in text]
        assert len(failed) == 1
        assert failed[0].startswith("6 runs failed: ")
        assert failed[0].endswith(" - 3: the audit log")


# --- 10. the drain screen -------------------------------------------------------------------


def _run(state: RunState, result: Result | None = None, exit_code: int | None = None) -> RunRecord:
    return RunRecord(
        run_id="r1", job="j", slot=None, trigger=Trigger.MANUAL, state=state, queued_at=FIXED,
        result=result, exit_code=exit_code,
    )  # fmt: skip


def test_the_drain_screen_words_each_end() -> None:
    assert drain_word(_run(RunState.RUNNING)) == "▶ running"
    assert drain_word(_run(RunState.SUCCESS, Result.COMPLETED, 0)) == "✔ succeeded"
    assert drain_word(_run(RunState.FAILED, Result.COMPLETED, 3)) == "✘ failed"
    assert drain_word(_run(RunState.FAILED, Result.STOPPED, -15)) == "■ stopped"
    assert drain_word(_run(RunState.FAILED, Result.SHUTDOWN, -9)) == "■ killed"
    assert drain_word(_run(RunState.FAILED, Result.TIMED_OUT, -15)) == "✘ timed out"


async def test_waiting_on_quit_shows_each_runs_real_state(config: Path) -> None:
    app, _runtime = make_app(config)
    async with app.run_test(size=SIZE) as pilot:
        await _started(pilot, app)
        blocker = await on_lane(app, lambda rt: rt.actions.run_now("blocker"))
        slow = await on_lane(app, lambda rt: rt.actions.run_now("slow"))
        await until(pilot, lambda: app.query_one(RunningTable).row_count == 2)
        await pilot.press("q", "s")
        await until(pilot, lambda: isinstance(app.screen, QuitScreen))
        await pilot.press("w")
        await until(pilot, lambda: isinstance(app.screen, DrainScreen))
        drain = app.screen
        assert isinstance(drain, DrainScreen)
        table = drain.query_one(DrainTable)

        def state(run_id: str) -> str:
            return str(table.get_cell(run_id, "state"))

        assert (state(blocker.run_id), state(slow.run_id)) == ("▶ running", "▶ running")
        (config.parent / "go").touch()
        await until(pilot, lambda: state(slow.run_id) == "✘ failed")
        assert state(blocker.run_id) == "▶ running"  # not "finished": still running
        assert "waiting for 1 run in progress" in str(drain.query_one("#status").render())
        engine_jobs.GATES["blocker"].set()
        await until(pilot, lambda: not app.is_running)


# --- issue 28: smaller habits -----------------------------------------------------------


async def test_keys_of_other_habits_say_what_to_press_instead(config: Path) -> None:
    app, _runtime = make_app(config)
    async with app.run_test(size=SIZE) as pilot:
        await _started(pilot, app)
        for key, words in (
            ("colon", "commands: ctrl+p (the palette)"),
            ("N", "nodes: this scheduler is not in a cluster"),
            ("4", "nodes: this scheduler is not in a cluster"),
            ("A", "missed-slots ledger (m)"),
        ):
            given = sum(entry.count for entry in app.notices.entries())
            await pilot.press(key)
            assert isinstance(app.screen, MainScreen), key  # no empty nodes pane
            assert sum(entry.count for entry in app.notices.entries()) == given + 1, key
            assert words in app.notices.entries()[0].text, key  # one short notice, newest


async def test_space_marks_and_goes_down_and_the_footer_says_so(config: Path) -> None:
    app, _runtime = make_app(config)
    async with app.run_test(size=SIZE) as pilot:
        table = await _started(pilot, app)
        assert "Mark↓" in _legend(app)
        await pilot.press("space")
        assert table.marked == ["alpha"]
        assert table.selected_job() == "blocker"
        assert screen_text(app).splitlines()[-1].endswith("M Messages ␣ Mark↓")  # within 80


async def test_a_second_ctrl_c_stops_an_idle_hosted_scheduler(config: Path) -> None:
    app, runtime = make_app(config)
    async with app.run_test(size=SIZE) as pilot:
        await _started(pilot, app)
        await pilot.press("ctrl+c")
        assert isinstance(app.screen, LeaveScreen)
        assert "ctrl+c again: stop the scheduler once the runs in progress finish" in (
            app.screen.question
        )
        await pilot.press("ctrl+c")
        await until(pilot, lambda: not app.is_running)
    assert app.return_code == 0
    assert app.detached is None
    assert runtime.state is SchedulerState.STOPPED


async def test_a_second_ctrl_c_waits_for_the_runs_in_progress(config: Path) -> None:
    app, runtime = make_app(config)
    async with app.run_test(size=SIZE) as pilot:
        await _started(pilot, app)
        events = Recorder(runtime.bus)
        run = await on_lane(app, lambda rt: rt.actions.run_now("blocker"))
        await until(pilot, lambda: app.query_one(RunningTable).row_count == 1)
        await pilot.press("ctrl+c", "ctrl+c")
        await until(pilot, lambda: isinstance(app.screen, DrainScreen))
        assert "q or ctrl+c stops them now" in screen_text(app)
        assert runtime.state is not SchedulerState.STOPPED  # the run is not cut short
        engine_jobs.GATES["blocker"].set()
        await until(pilot, lambda: not app.is_running)
    finished = [e.run for e in events.events if isinstance(e, RunFinished)]
    assert [(done.run_id, done.state) for done in finished] == [(run.run_id, RunState.SUCCESS)]


async def test_ctrl_c_on_the_question_about_runs_in_progress_waits_for_them(
    config: Path,
) -> None:
    app, _runtime = make_app(config)
    async with app.run_test(size=SIZE) as pilot:
        await _started(pilot, app)
        await on_lane(app, lambda rt: rt.actions.run_now("blocker"))
        await until(pilot, lambda: app.query_one(RunningTable).row_count == 1)
        await pilot.press("ctrl+c", "s")
        await until(pilot, lambda: isinstance(app.screen, QuitScreen))
        assert "ctrl+c again: wait for them" in app.screen.question
        await pilot.press("ctrl+c")
        await until(pilot, lambda: isinstance(app.screen, DrainScreen))
        engine_jobs.GATES["blocker"].set()
        await until(pilot, lambda: not app.is_running)


async def test_a_second_ctrl_c_detaches_an_attached_console(config: Path) -> None:
    runtime = Runtime(load_config(config), kill_grace=0.5)
    scheduler = LocalScheduler(runtime)
    await scheduler.start()
    try:
        app = TuischedApp(scheduler.control("tester (console)"), clock=lambda: FIXED)
        async with app.run_test(size=SIZE) as pilot:
            await _started(pilot, app)
            await pilot.press("ctrl+c")
            assert isinstance(app.screen, LeaveScreen)
            assert "ctrl+c again: detach (the scheduler runs on)" in app.screen.question
            await pilot.press("ctrl+c")
            await until(pilot, lambda: not app.is_running)
        assert app.detached == "detached by a second ctrl+c"
        assert runtime.state is SchedulerState.RUNNING
    finally:
        await scheduler.stop(grace=1)
