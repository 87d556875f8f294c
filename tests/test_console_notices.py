"""Notices that inform, not flood: the notice line, repeats counted, the messages view, mutes.

The real console hosting a real runtime, driven with Pilot at 80x24.
"""

from __future__ import annotations

import re
import shutil
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from textual.widgets import DataTable
from textual.widgets._toast import Toast

from tuisched.frontends.tui.app import TuischedApp
from tuisched.frontends.tui.failures import Failure, FailureNotices
from tuisched.frontends.tui.notices import LIMIT, TIMEOUTS, NoticeLog
from tuisched.frontends.tui.screens.detail import JobDetailScreen
from tuisched.frontends.tui.screens.main import MainScreen
from tuisched.frontends.tui.screens.messages import MessagesScreen
from tuisched.frontends.tui.widgets.audit import AuditPane
from tuisched.frontends.tui.widgets.jobs import JobsTable
from tuisched.frontends.tui.widgets.status import StatusLine

from . import test_console_tmux
from .conftest import REPO
from .console_fixtures import make_app, on_lane, until
from .runtime_fixtures import write_config
from .test_console_tmux import Tmux

tmux = test_console_tmux.tmux
"""The tmux server of tests/test_console_tmux.py, one per test."""

JOBS = """
bad: {command: "exit 1", schedule: manual}
fine: {command: "true", schedule: manual}
"""
SIZE = (80, 24)
SAID = "bad failed: exit 1"
AT = datetime(2026, 5, 7, 9, 10, tzinfo=UTC)


def _on_line(app: TuischedApp) -> list[str]:
    """The notices still due on the notice line (the newest is the one shown)."""
    return [notification.message for notification in app._notifications]


def _told(app: TuischedApp, count: int) -> bool:
    """Whether `bad` has failed `count` times in the log."""
    entries = [entry for entry in app.notices.entries() if entry.text == SAID]
    return bool(entries) and entries[0].count == count


async def _fail(pilot: object, app: TuischedApp, count: int) -> None:
    """Run `bad` and wait until its failure is told (a burst's window later)."""
    await on_lane(app, lambda rt: rt.actions.run_now("bad"))
    await until(pilot, lambda: _told(app, count), within=20)  # type: ignore[arg-type]


async def _started(pilot: object, app: TuischedApp) -> None:
    await until(pilot, lambda: app.ready and app.query_one(JobsTable).row_count == 2)  # type: ignore[arg-type]


# --- the log, alone ---------------------------------------------------------------------------


def test_a_repeat_counts_on_its_entry_which_becomes_the_newest() -> None:
    log = NoticeLog()
    log.add(SAID, "error", AT, "bad")
    log.add("sorted by name", "information", AT)
    entry = log.add(SAID, "error", AT + timedelta(seconds=9), "bad")
    assert entry.shown == "bad failed: exit 1 (x2)"
    assert [e.shown for e in log.entries()] == [entry.shown, "sorted by name"]
    assert (entry.first, entry.last) == (AT, AT + timedelta(seconds=9))


def test_the_log_keeps_the_newest_thousand() -> None:
    log = NoticeLog()
    for n in range(LIMIT + 5):
        log.add(f"notice {n}", "information", AT)
    entries = log.entries()
    assert len(entries) == LIMIT
    assert (entries[0].text, entries[-1].text) == (f"notice {LIMIT + 4}", "notice 5")


def test_the_same_jobs_failing_together_again_give_the_same_notice() -> None:
    notices = FailureNotices()
    notices.add([Failure("report", "exit 2"), Failure("backup", "exit 1")])
    first = notices.take()
    notices.add([Failure("backup", "exit 1"), Failure("report", "exit 2")])
    assert notices.take() == first == ("2 runs failed: backup, report - 3: the audit log", None)
    notices.add([Failure("backup", "exit 1"), Failure("backup", "exit 1")])
    assert notices.take() == ("2 runs failed: backup - 3: the audit log", "backup")  # mutable


def test_errors_stay_longer_than_warnings_and_warnings_than_information() -> None:
    assert TIMEOUTS["error"] > TIMEOUTS["warning"] > TIMEOUTS["information"]


# --- the console ------------------------------------------------------------------------------


async def test_a_job_failing_again_and_again_is_one_notice_with_its_count(tmp_path: Path) -> None:
    app, _runtime = make_app(write_config(tmp_path, JOBS))
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await _started(pilot, app)
        for count in (1, 2, 3):
            await _fail(pilot, app, count)
        await until(pilot, lambda: f"{SAID} (x3)" in _on_line(app))
        assert [text for text in _on_line(app) if "failed" in text] == [f"{SAID} (x3)"]
        await until(pilot, lambda: len(app.screen.query(Toast)) == 1)
        assert "(x3)" in str(app.screen.query_one(Toast).render())
        (error,) = [n for n in app._notifications if n.severity == "error"]
        assert error.timeout == TIMEOUTS["error"]


async def test_the_notice_line_covers_no_pane_at_80x24(tmp_path: Path) -> None:
    app, _runtime = make_app(write_config(tmp_path, JOBS))
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await _started(pilot, app)
        await _fail(pilot, app, 1)
        app.notify("a second notice, newer", markup=False)
        screen = app.screen

        def on_top() -> str:
            """What the bottom line shows: the notice drawn over the others there."""
            widget, _ = screen.get_widget_at(2, SIZE[1] - 1)
            return str(widget.render()) if isinstance(widget, Toast) else ""

        await until(pilot, lambda: len(screen.query(Toast)) == 2)
        await until(pilot, lambda: on_top() == "a second notice, newer")
        for toast in screen.query(Toast):  # both on the bottom line, the newest on top
            line = toast.region
            assert (line.y, line.height, line.width) == (SIZE[1] - 1, 1, SIZE[0])
            for pane in ("#jobs", "#why", "#running", "#audit", "#status"):
                assert not line.overlaps(screen.query_one(pane).region), pane
            assert not line.overlaps(screen.query_one(AuditPane).region)
        # The newer goes after its 5 s; the error, still due, shows again in its place.
        await until(pilot, lambda: len(screen.query(Toast)) == 1)
        await until(pilot, lambda: on_top() == SAID)


async def test_a_muted_jobs_failures_are_logged_and_counted_but_not_shown(tmp_path: Path) -> None:
    app, _runtime = make_app(write_config(tmp_path, JOBS))
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await _started(pilot, app)
        await _fail(pilot, app, 1)
        app.show_job("bad")
        await until(pilot, lambda: isinstance(app.screen, JobDetailScreen))
        await pilot.press("m")  # mute, from the job's detail
        assert app.notices.muted == {"bad"}
        await pilot.press("escape")
        await until(pilot, lambda: isinstance(app.screen, MainScreen))
        app.notify("[/oops] not markup")  # logged as it came
        assert app.notices.entries()[0].text == "[/oops] not markup"
        app.clear_notifications()
        await _fail(pilot, app, 2)
        await _fail(pilot, app, 3)
        assert not [text for text in _on_line(app) if "failed" in text]
        status = app.query_one(StatusLine)
        await until(pilot, lambda: "failed/24h 3" in status.text)

        await pilot.press("M")  # unmute, from the messages view
        await until(pilot, lambda: isinstance(app.screen, MessagesScreen))
        table = app.screen.query_one(DataTable)
        await until(pilot, lambda: table.row_count >= 2)
        table.move_cursor(row=[e.text for e in app.notices.entries()].index(SAID))
        await pilot.press("m")
        assert app.notices.muted == set()
        await pilot.press("escape")
        await _fail(pilot, app, 4)
        assert f"{SAID} (x4)" in _on_line(app)


async def test_the_messages_view_lists_every_notice_newest_first(tmp_path: Path) -> None:
    app, _runtime = make_app(write_config(tmp_path, JOBS))
    async with app.run_test(size=SIZE) as pilot:
        await _started(pilot, app)
        await _fail(pilot, app, 1)
        await pilot.press("o")  # an information notice: the order
        await _fail(pilot, app, 2)
        key = app.screen.active_bindings["M"].binding  # in the footer
        assert (key.description, key.show) == ("Messages", True)
        await pilot.press("M")
        await until(pilot, lambda: isinstance(app.screen, MessagesScreen))
        table = app.screen.query_one(DataTable)
        await until(pilot, lambda: table.row_count == 2)
        rows = [[str(cell) for cell in table.get_row_at(n)] for n in range(table.row_count)]
        assert rows[0][1:] == ["error", f"{SAID} (x2)"]
        assert rows[1][1:] == ["info", "sorted by name"]
        assert all(len(row[0]) == len("09:10:00") for row in rows)
        title = str(app.screen.query_one("#messages-title").render())
        assert "muted: none" in title
        await pilot.press("escape")
        await until(pilot, lambda: isinstance(app.screen, MainScreen))
        app.notify("[/oops] not markup")  # logged as it came
        assert app.notices.entries()[0].text == "[/oops] not markup"


# --- the real console in tmux, hosting its scheduler -----------------------------------------


def _bottom_line(tmux: Tmux, shows: str, within: float = 30) -> list[str]:
    """The screen's lines once its bottom line shows `shows` (polled; bounded by `within`)."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        lines = tmux.screen().splitlines()
        if lines and shows in lines[-1]:
            return lines
        time.sleep(0.1)  # polling a screen we do not own; bounded by `within`
    raise AssertionError(f"the bottom line never showed {shows!r}:\n{tmux.screen()}")


def _failed(status: str) -> int:
    """The status line's count of failed runs."""
    found = re.search(r"failed/24h ([0-9]+)", status)
    assert found is not None, status
    return int(found.group(1))


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
def test_in_tmux_a_failing_job_counts_on_the_bottom_line_until_muted(
    tmp_path: Path, tmux: Tmux
) -> None:
    config = write_config(
        tmp_path, "backup: {command: [/bin/false], schedule: {every: 2s, start: 2026-01-01T00:00}}"
    )
    command = f"{sys.executable} -m tuisched -c {config}; echo EXIT=$?; sleep 30"
    tmux("new-session", "-d", "-s", "t", "-x", "80", "-y", "24", "-c", str(REPO), command)
    lines = _bottom_line(tmux, "backup failed: exit 1 (x2)")
    assert len(lines) == SIZE[1]
    top = next(n for n, line in enumerate(lines) if "3 Audit log" in line)
    assert "backup |" in "\n".join(lines[top + 1 : -1])  # the audit pane, above the notices
    tmux.press("M", then="Messages, newest first")
    tmux.press("m", then="muted: backup")
    tmux.press("Escape", then="1 Jobs")
    lines = _bottom_line(tmux, "M Messages")  # the legend of keys again
    failed = _failed(lines[0])
    deadline = time.monotonic() + 30
    while _failed(tmux.screen().splitlines()[0]) <= failed:  # it fails on, counted
        assert time.monotonic() < deadline, tmux.screen()
        time.sleep(0.1)  # polling a screen we do not own; bounded by the deadline
    assert "M Messages" in tmux.screen().splitlines()[-1]  # and stays off the bottom line
    tmux.press("q", then="Leave the console")
    tmux.press("s", then="EXIT=0")
