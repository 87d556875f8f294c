"""The output viewer: a run's whole output paged from its file, searched in the scheduler
in bounded steps, followed live, wrapped or scrolled sideways, and opened from the main
screen (`l`), the job detail's output tab and its history tab."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot
from textual.widgets import DataTable, Input, Static

from tuisched.domain.events import Event, RunFinished, RunOutputWritten
from tuisched.domain.runs import RunRecord
from tuisched.domain.views import OutputPage, OutputSource
from tuisched.frontends.tui.app import TuischedApp
from tuisched.frontends.tui.outputwindow import WINDOW_LINES, OutputWindow
from tuisched.frontends.tui.screens.detail import JobDetailScreen
from tuisched.frontends.tui.screens.help import HelpScreen
from tuisched.frontends.tui.screens.output import OutputScreen
from tuisched.frontends.tui.screens.outputreading import KEPT_FILES
from tuisched.frontends.tui.widgets.jobs import JobsTable
from tuisched.frontends.tui.widgets.outputview import OutputView
from tuisched.frontends.tui.widgets.running import RunningTable
from tuisched.frontends.tui.widgets.status import StatusLine
from tuisched.runtime.configfiles import load_config
from tuisched.runtime.control import (
    LocalControl,
    LocalScheduler,
    OfflineControl,
    RemoteControl,
    socket_path,
)
from tuisched.runtime.control.paging import (
    LINE_BYTES,
    LINE_INDEX_STEP,
    find_text,
    line_number,
    page_after,
    page_before,
)
from tuisched.runtime.engine.running import OUTPUT_FILES_KEPT
from tuisched.runtime.runtime import Runtime

from .console_fixtures import hosted, make_app, on_lane
from .recorder import Recorder
from .runtime_fixtures import write_config

SIZE = (80, 24)
JOBS = r"""
rows:
  command: "seq 1 3000 | sed 's/^/row /'; echo 'wide '$(seq -s - 1 60); echo 'ERROR [bold]x[/bold]'"
  schedule: manual
quiet: {command: "true", schedule: manual}
drip:
  command: "echo first; sleep 0.3; echo second; sleep 0.3; echo third; sleep 30"
  schedule: manual
"""


# --- the file, a page at a time ----------------------------------------------------------


def test_pages_after_and_before_an_offset_join_without_a_gap(tmp_path: Path) -> None:
    path = tmp_path / "out.log"
    path.write_bytes(b"".join(b"line %d\n" % i for i in range(1000)))
    first = page_after(path, 0, 10, growing=False)
    assert first.lines[:2] == ["line 0", "line 1"]
    second = page_after(path, first.end, 10, growing=False)
    assert second.lines[0] == "line 10"
    assert second.offsets[0] == first.end
    back = page_before(path, second.offsets[0], 3)
    assert back.lines == ["line 7", "line 8", "line 9"]
    assert back.end == second.offsets[0]
    tail = page_before(path, None, 2)
    assert tail.lines == ["line 998", "line 999"]
    assert tail.end == tail.size == path.stat().st_size


def test_a_page_is_plain_text_with_crlf_endings_and_redraws_shown_as_less_does(
    tmp_path: Path,
) -> None:
    path = tmp_path / "out.log"
    path.write_bytes(b"\x1b[31mred\x1b[0m [b]x[/b]\r\n10%\r50%\r100%\n\xe2\x80\xaeevil\n")
    page = page_after(path, 0, 10, growing=False)
    assert page.lines == ["red [b]x[/b]", "10%^M50%^M100%", "\ufffdevil"]


def test_a_growing_file_keeps_its_unfinished_last_line_for_later(tmp_path: Path) -> None:
    path = tmp_path / "out.log"
    path.write_bytes(b"done\nhalf a li")
    assert page_after(path, 0, 10, growing=True).lines == ["done"]
    assert page_before(path, None, 10, growing=True).lines == ["done"]
    assert page_after(path, 0, 10, growing=False).lines == ["done", "half a li"]


def test_a_line_longer_than_a_page_is_one_line_with_a_note(tmp_path: Path) -> None:
    path = tmp_path / "out.log"
    path.write_bytes(b"a\n" + b"x" * 3_000_000 + b"\nb\n")
    long = page_after(path, 2, 5, growing=False)
    assert len(long.lines) == 1
    assert long.lines[0].startswith("x" * LINE_BYTES)
    assert f"{3_000_000 - LINE_BYTES:,} more bytes" in long.lines[0]
    assert page_after(path, long.end, 5, growing=False).lines == ["b"]
    before = page_before(path, long.end, 5)
    assert before.offsets == [2]  # found where it begins, far behind the page
    assert page_before(path, 2, 5).lines == ["a"]


def test_a_search_step_finds_a_line_forward_and_backward_as_shown(tmp_path: Path) -> None:
    path = tmp_path / "out.log"
    path.write_bytes(b"one\nEr\x1b[0mror hidden\nan Error here\nerror again\nlast\n")
    forward = find_text(path, "error", 0)  # no capital: any case
    assert forward.found
    assert page_after(path, forward.offset, 1, growing=False).lines == ["an Error here"]
    assert (forward.column, forward.length) == (3, 5)
    strict = find_text(path, "Error", forward.end)  # a capital: this case only
    assert not strict.found
    assert strict.done
    back = find_text(path, "error", path.stat().st_size, backward=True)
    assert page_after(path, back.offset, 1, growing=False).lines == ["error again"]
    before = find_text(path, "error", back.offset, backward=True)
    assert before.offset == forward.offset
    hidden = find_text(path, "error", 0, budget=1)  # ErESC[0mror: not "error" as shown
    assert hidden.offset == forward.offset


def test_a_search_goes_in_bounded_steps_that_resume_where_they_stopped(tmp_path: Path) -> None:
    path = tmp_path / "out.log"
    filler = b"x" * 1023 + b"\n"
    path.write_bytes(filler * 12 * 1024 + b"needle\n" + filler)  # 12 MiB, then the match
    step = find_text(path, "needle", 0, budget=1)  # one chunk a step
    steps = 1
    while not step.found:
        assert not step.done
        assert step.scanned_to > 0
        step = find_text(path, "needle", step.scanned_to, budget=1)
        steps += 1
    assert steps >= 3
    assert step.offset == len(filler) * 12 * 1024
    back = find_text(path, "needle", path.stat().st_size, backward=True, budget=1024)
    assert back.found


@pytest.mark.timeout(10)
@pytest.mark.parametrize("needle", ["\n", "\ntwo", "\x1b", "o\n"])
@pytest.mark.parametrize("backward", [False, True])
def test_a_needle_no_shown_line_holds_ends_the_search(
    tmp_path: Path, needle: str, backward: bool
) -> None:
    """A newline found in the bytes is never in a line as shown; backward, the search
    stepped back to the start of the line after it, and found it again for ever."""
    path = tmp_path / "out.log"
    path.write_bytes(b"one\ntwo\n\x1b[31mthree\n")
    found = find_text(path, needle, path.stat().st_size if backward else 0, backward=backward)
    assert (found.found, found.done) == (False, True)


def test_line_numbers_are_counted_in_bounded_steps_and_kept(tmp_path: Path) -> None:
    path = tmp_path / "out.log"
    line = b"y" * 99 + b"\n"
    path.write_bytes(line * (3 * LINE_INDEX_STEP // 100))
    end = path.stat().st_size - 100
    assert line_number(path, end, budget=1) is None  # one step of the index a call
    assert line_number(path, end, budget=1) == end // 100 + 1
    assert line_number(path, 0) == 1
    with path.open("ab") as grown:  # a growing file keeps what was counted
        grown.write(line * 10)
    assert line_number(path, end + 1000, budget=1) == end // 100 + 11
    replaced = tmp_path / "new.log"  # another file in its place: counted anew
    replaced.write_bytes(b"a\nb\n")
    replaced.replace(path)
    assert line_number(path, 2) == 2


# --- the window ----------------------------------------------------------------------------


def _page(start: int, count: int, *, size: int = 10**9) -> OutputPage:
    return OutputPage(
        run_id="r", job="j", state="SUCCESS",  # type: ignore[arg-type]
        lines=tuple(f"line {i}" for i in range(start, start + count)),
        offsets=tuple(i * 10 for i in range(start, start + count)),
        end=(start + count) * 10, size=size,
    )  # fmt: skip


def test_the_window_grows_at_both_ends_and_lets_go_of_the_far_one() -> None:
    window = OutputWindow()
    window.replace(_page(0, 100))
    assert window.number(0) == 1
    assert window.at_start
    added = window.extend(_page(100, WINDOW_LINES))
    assert added.dropped == 100
    assert window.lines[0] == "line 100"
    assert window.number(0) == 101  # the numbers stay known from the start
    added = window.extend(_page(50, 50))
    assert added.before == 50
    assert len(window.lines) == WINDOW_LINES
    assert window.end == window.offsets[-1] + 10
    generation = window.generation
    window.extend(_page(10_000, 5))  # does not join: a jump
    assert window.generation == generation + 1  # pages asked before it are dropped
    assert window.lines == [f"line {i}" for i in range(10_000, 10_005)]
    assert window.first_number is None
    overlap = _page(10_003, 10)  # a tail read while following overlaps what is held
    window.extend(overlap)
    assert window.lines[-1] == "line 10012"
    assert len(window.lines) == 13


# --- the seam: in this process, offline, and through the control socket -----------------


@asynccontextmanager
async def serving(path: Path) -> AsyncIterator[tuple[LocalScheduler, LocalControl, RemoteControl]]:
    """A scheduler in this process serving its socket; the scheduler, its seam, a client."""
    scheduler = LocalScheduler(Runtime(load_config(path), kill_grace=0.5))
    await scheduler.start()
    remote = RemoteControl(socket_path(path.parent / "state"), client="test")
    try:
        await remote.connect()
        yield scheduler, scheduler.control("test"), remote
    finally:
        await remote.close()
        await scheduler.stop(grace=1)


async def _finished(scheduler: LocalScheduler, job: str) -> RunRecord:
    """A run of `job` started through the seam (on the scheduler's lane), once finished."""
    control = scheduler.control("test")
    ended: set[str] = set()
    heard = asyncio.Event()

    def hear(event: Event) -> None:
        if isinstance(event, RunFinished):
            ended.add(event.run.run_id)
            heard.set()

    subscription = control.subscribe(hear)  # heard on this loop
    try:
        run = await control.run_now(job)
        async with asyncio.timeout(10):
            while run.run_id not in ended:
                heard.clear()
                await heard.wait()
    finally:
        subscription.unsubscribe()
    return run


async def test_the_seam_pages_and_searches_alike_here_and_through_the_socket(
    tmp_path: Path,
) -> None:
    path = write_config(tmp_path, JOBS)
    async with serving(path) as (scheduler, local, remote):
        run = await _finished(scheduler, "rows")
        tail = await remote.output_page(run.run_id, lines=2)
        assert tail == await local.output_page(run.run_id, lines=2)
        assert tail.lines == ("wide " + "-".join(map(str, range(1, 61))), "ERROR [bold]x[/bold]")
        assert tail.source is OutputSource.FILE
        assert tail.path.endswith(f"output/rows/{run.run_id}.log")
        head = await remote.output_page(run.run_id, offset=0, lines=3)
        assert head.lines == ("row 1", "row 2", "row 3")
        before = await remote.output_page(run.run_id, offset=head.offsets[2], before=True)
        assert before.lines == ("row 1", "row 2")
        assert await remote.output_line_number(run.run_id, tail.offsets[1]) == 3002
        assert await local.output_line_number(run.run_id, head.offsets[2]) == 3
        match = await remote.search_output(run.run_id, "ERROR")
        assert match == await local.search_output(run.run_id, "ERROR")
        assert (match.found, match.offset) == (True, tail.offsets[1])
        again = await remote.search_output(run.run_id, "row 2999", offset=match.offset,
                                           backward=True)  # fmt: skip
        assert again.found
        assert (await remote.output_page(run.run_id, offset=again.offset, lines=1)).lines == (
            "row 2999",
        )
    offline = OfflineControl(load_config(path), path.read_text(), clock=lambda: datetime.now(UTC))
    assert (await offline.output_page(run.run_id, lines=2)).lines == tail.lines
    assert (await offline.search_output(run.run_id, "ERROR")).offset == match.offset


async def test_a_pruned_file_gives_the_tail_the_history_kept(tmp_path: Path) -> None:
    assert KEPT_FILES == OUTPUT_FILES_KEPT  # the viewer says the scheduler's number
    path = write_config(tmp_path, JOBS)
    async with serving(path) as (scheduler, _local, remote):
        run = await _finished(scheduler, "rows")
        (tmp_path / "state" / "output" / "rows" / f"{run.run_id}.log").unlink()
        page = await remote.output_page(run.run_id, offset=0)
        assert page.source is OutputSource.TAIL
        assert page.lines[-1] == "ERROR [bold]x[/bold]"
        assert not (await remote.search_output(run.run_id, "ERROR")).found
        quiet = await _finished(scheduler, "quiet")
        assert (await remote.output_page(quiet.run_id)).source is OutputSource.NONE


# --- the viewer in the console ---------------------------------------------------------------


def _app(tmp_path: Path) -> tuple[TuischedApp, Runtime]:
    return make_app(write_config(tmp_path, JOBS))


async def _until(pilot: Pilot[int], condition: Callable[[], object], what: str) -> None:
    try:
        async with asyncio.timeout(10):
            while not condition():
                await pilot.pause(0.05)
    except TimeoutError:
        raise AssertionError(f"never: {what}") from None


async def _ready(pilot: Pilot[int], app: TuischedApp) -> None:
    await _until(pilot, lambda: app.ready and app.query_one(JobsTable).row_count == 3, "the jobs")


def _viewer(app: TuischedApp) -> OutputScreen:
    screen = app.screen
    assert isinstance(screen, OutputScreen)
    return screen


async def _open(pilot: Pilot[int], app: TuischedApp, job: str) -> OutputScreen:
    """Select `job` on the main screen, press `l`, wait for its output."""
    table = app.query_one(JobsTable)
    table.focus()
    table.move_cursor(row=table.get_row_index(job))
    await pilot.press("l")
    await _until(pilot, lambda: isinstance(app.screen, OutputScreen), "the viewer")
    viewer = _viewer(app)
    await _until(pilot, lambda: viewer.page is not None, "the first page")
    return viewer


def _rows(viewer: OutputScreen) -> list[str]:
    view = viewer.query_one(OutputView)
    return [
        "".join(seg.text for seg in view.render_line(y)).rstrip() for y in range(view.size.height)
    ]


def _status(viewer: OutputScreen) -> str:
    return viewer.query_one("#output-status", StatusLine).text


def _note(viewer: OutputScreen) -> str:
    return str(viewer.query_one("#output-note", Static).content)


async def test_l_opens_the_selected_jobs_newest_run_at_its_end_as_plain_text(
    tmp_path: Path,
) -> None:
    app, _ = _app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await _ready(pilot, app)
        run = await _finished(hosted(app), "rows")
        viewer = await _open(pilot, app, "rows")
        assert viewer.run_id == run.run_id
        assert _rows(viewer)[-1] == "ERROR [bold]x[/bold]"  # literally, never markup
        await _until(pilot, lambda: "line 2,9" in _status(viewer), "the top row's number")
        status = _status(viewer)
        for part in (f"rows {run.run_id}", "success", "follow off", "wrap off"):
            assert part in status
        await pilot.press("q")
        await _until(pilot, lambda: not isinstance(app.screen, OutputScreen), "back")


async def test_l_on_a_job_that_never_ran_says_so(tmp_path: Path) -> None:
    app, _runtime = _app(tmp_path)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await _ready(pilot, app)
        await pilot.press("l")
        await _until(pilot, lambda: app._notifications, "a notice")
        assert "has not run yet" in next(iter(app._notifications)).message
        assert not isinstance(app.screen, OutputScreen)


async def test_top_bottom_and_pages_move_through_the_whole_file(tmp_path: Path) -> None:
    app, _ = _app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await _ready(pilot, app)
        await _finished(hosted(app), "rows")
        viewer = await _open(pilot, app, "rows")
        await pilot.press("g")
        await _until(pilot, lambda: _rows(viewer)[0] == "row 1", "the top")
        assert "line 1 0%" in _status(viewer)
        await pilot.press("pagedown")
        height = viewer.query_one(OutputView).size.height
        assert _rows(viewer)[0] == f"row {height}"
        await pilot.press("pageup")
        assert _rows(viewer)[0] == "row 1"
        await pilot.press("end")
        await _until(pilot, lambda: _rows(viewer)[-1].startswith("ERROR"), "the bottom")
        await pilot.press("home")
        await _until(pilot, lambda: _rows(viewer)[0] == "row 1", "the top again")
        await pilot.press("G")
        await _until(pilot, lambda: _rows(viewer)[-1].startswith("ERROR"), "the bottom again")
        for _ in range(3):  # back up through the whole file: pages come as the view nears them
            await pilot.press("pageup")
        view = viewer.query_one(OutputView)
        assert view.top < len(viewer.window.lines)


async def test_a_jump_while_a_page_is_on_its_way_says_where_the_view_is_now(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    app, _ = _app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await _ready(pilot, app)
        await _finished(hosted(app), "rows")
        viewer = await _open(pilot, app, "rows")  # its last page: the top is not held
        gate = asyncio.Event()
        reading = viewer.control.output_page

        async def held(run_id: str, **kwargs: Any) -> OutputPage:
            if kwargs.get("before"):
                await gate.wait()  # a page before the window, on a slow link
            return await reading(run_id, **kwargs)

        monkeypatch.setattr(viewer.control, "output_page", held)
        for _ in range(40):  # up until the viewer asks for the page before its window
            fetching = viewer._fetching
            if fetching is not None and fetching.is_running:
                break
            await pilot.press("pageup")
        await pilot.press("g")  # the top of the file, while that page is on its way
        await _until(pilot, lambda: _rows(viewer)[0] == "row 1", "the top")
        await _until(pilot, lambda: "line 1 0%" in _status(viewer), "the status of the top")
        gate.set()  # the late page is for a window the view has left: dropped
        await pilot.press("pagedown")
        assert _rows(viewer)[0].startswith("row ")


async def test_wrap_shows_a_long_line_on_the_next_rows_and_off_it_scrolls_sideways(
    tmp_path: Path,
) -> None:
    app, _ = _app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await _ready(pilot, app)
        await _finished(hosted(app), "rows")
        viewer = await _open(pilot, app, "rows")
        wide = "wide " + "-".join(map(str, range(1, 61)))
        assert _rows(viewer)[-2] == wide[:80]  # cut by the screen's edge only
        await pilot.press("right")
        assert _rows(viewer)[-2] == wide[40:120]
        await pilot.press("left")
        await pilot.press("w")
        assert "wrap on" in _status(viewer)
        rows = _rows(viewer)
        first = next(i for i, row in enumerate(rows) if row.startswith("wide"))
        assert "".join(rows[first : first + 3]) == wide  # the whole line, on three rows
        assert rows[first + 3] == "ERROR [bold]x[/bold]"
        await pilot.press("w")
        assert "wrap off" in _status(viewer)


async def test_search_n_and_shift_n_highlight_matches_and_wrap_around(tmp_path: Path) -> None:
    app, _ = _app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await _ready(pilot, app)
        await _finished(hosted(app), "rows")
        viewer = await _open(pilot, app, "rows")
        await pilot.press("g")
        await _until(pilot, lambda: _rows(viewer)[0] == "row 1", "the top")
        await pilot.press("slash")
        assert viewer.query_one("#output-search", Input).has_focus
        await pilot.press(*"row 1500", "enter")
        await _until(pilot, lambda: viewer.match is not None, "a match")
        assert "row 1500" in _rows(viewer)
        view = viewer.query_one(OutputView)
        assert view.mark == (viewer.match.offset, 0, 8)  # type: ignore[union-attr]
        assert "/row 1500" in _status(viewer)
        first = viewer.match
        await pilot.press("n")  # the next: "row 15000" does not exist; wraps to row 1500
        await _until(pilot, lambda: viewer.match is not first, "the next match")
        assert "wrapped" in _note(viewer)
        await pilot.press("slash", *"ERROR", "enter")
        await _until(pilot, lambda: "ERROR [bold]x[/bold]" in _rows(viewer), "ERROR")
        await pilot.press("slash", *"row 1", "enter")  # from the top line: wraps to row 1
        await _until(pilot, lambda: _rows(viewer)[0] == "row 1", "row 1 (wrapped)")
        assert "wrapped" in _note(viewer)
        await pilot.press("N")  # before row 1: nothing; wraps to the last "row 1..." line
        await _until(pilot, lambda: "row 1999" in _rows(viewer), "the previous match")
        assert "row 2000" not in _rows(viewer)[: _rows(viewer).index("row 1999")]
        await pilot.press("slash", *"nowhere", "enter")
        await _until(pilot, lambda: "is not in the output" in _note(viewer), "not found")


async def test_escape_closes_the_prompt_first_then_the_viewer(tmp_path: Path) -> None:
    app, _ = _app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await _ready(pilot, app)
        await _finished(hosted(app), "rows")
        viewer = await _open(pilot, app, "rows")
        await pilot.press("slash", "q")  # q typed into the prompt, not leaving
        prompt = viewer.query_one("#output-search", Input)
        assert prompt.value == "q"
        await pilot.press("escape")
        assert not prompt.display
        assert app.screen is viewer
        await pilot.press("escape")
        await _until(pilot, lambda: app.screen is not viewer, "back")


async def test_a_running_run_is_followed_and_f_stops_and_resumes(tmp_path: Path) -> None:
    app, hosted_runtime = _app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await _ready(pilot, app)
        events = Recorder(hosted_runtime.bus)
        run = await on_lane(app, lambda rt: rt.actions.run_now("drip"))
        await events.wait_for(RunOutputWritten, lambda e: e.run.run_id == run.run_id)
        running = app.query_one(RunningTable)
        await _until(pilot, lambda: running.selected_run() == run.run_id, "the running row")
        running.focus()
        await pilot.press("l")  # the run under the running pane's cursor
        await _until(pilot, lambda: isinstance(app.screen, OutputScreen), "the viewer")
        viewer = _viewer(app)
        assert viewer.run_id == run.run_id
        await _until(pilot, lambda: "third" in _rows(viewer), "new lines while following")
        assert "follow on" in _status(viewer)
        assert "running" in _status(viewer)
        await pilot.press("f")
        assert "follow off" in _status(viewer)
        await pilot.press("f")
        assert "follow on" in _status(viewer)
        await on_lane(app, lambda rt: rt.actions.stop_run(run.run_id, actor="test"))
        await _until(pilot, lambda: "follow off" in _status(viewer), "the end of the run")
        assert "running" not in _status(viewer)


async def test_enter_on_a_past_run_in_the_history_opens_its_output(tmp_path: Path) -> None:
    app, _ = _app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await _ready(pilot, app)
        older = await _finished(hosted(app), "rows")
        await _finished(hosted(app), "rows")
        table = app.query_one(JobsTable)
        table.focus()
        table.move_cursor(row=table.get_row_index("rows"))
        await pilot.press("enter")
        await _until(pilot, lambda: isinstance(app.screen, JobDetailScreen), "the detail")
        detail = app.screen
        history = detail.query_one("#detail-history", DataTable)
        await _until(pilot, lambda: history.row_count == 2, "both runs")
        await pilot.press("h")
        history.move_cursor(row=history.get_row_index(older.run_id))
        await pilot.press("enter")  # the history tab's enter, whatever has the focus
        await _until(pilot, lambda: isinstance(app.screen, OutputScreen), "the viewer")
        assert _viewer(app).run_id == older.run_id
        await pilot.press("escape")
        await _until(pilot, lambda: app.screen is detail, "back to the detail")
        history.focus()
        history.move_cursor(row=history.get_row_index(older.run_id))
        await pilot.press("enter")  # the table's own enter
        await _until(pilot, lambda: isinstance(app.screen, OutputScreen), "the viewer again")
        assert _viewer(app).run_id == older.run_id


async def test_the_output_tab_opens_the_viewer_on_the_jobs_newest_run(tmp_path: Path) -> None:
    app, _ = _app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await _ready(pilot, app)
        await _finished(hosted(app), "rows")
        newest = await _finished(hosted(app), "rows")
        app.show_job("rows")
        await _until(pilot, lambda: isinstance(app.screen, JobDetailScreen), "the detail")
        detail = app.screen
        await pilot.press("o", "enter")
        await _until(pilot, lambda: isinstance(app.screen, OutputScreen), "the viewer")
        assert _viewer(app).run_id == newest.run_id
        await pilot.press("escape")
        await _until(pilot, lambda: app.screen is detail, "back to the detail")
        await pilot.press("l")
        await _until(pilot, lambda: isinstance(app.screen, OutputScreen), "the viewer by l")


async def test_a_pruned_file_is_said_and_its_kept_tail_shown_and_searched(
    tmp_path: Path,
) -> None:
    app, _ = _app(tmp_path)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await _ready(pilot, app)
        run = await _finished(hosted(app), "rows")
        (tmp_path / "state" / "output" / "rows" / f"{run.run_id}.log").unlink()
        viewer = await _open(pilot, app, "rows")
        assert "is gone (only the newest 50 of each job are kept)" in _note(viewer)
        assert "ERROR [bold]x[/bold]" in _rows(viewer)
        await pilot.press("g", "slash", *"ERROR", "enter")
        await _until(pilot, lambda: viewer.match is not None, "a match in the tail")
        await pilot.press("o")
        await _until(pilot, lambda: app._notifications, "a notice")
        assert "no output file" in next(iter(app._notifications)).message


async def test_o_where_the_terminal_cannot_be_handed_over_says_so(tmp_path: Path) -> None:
    app, _ = _app(tmp_path)
    async with app.run_test(size=SIZE, notifications=True) as pilot:  # headless: no suspend
        await _ready(pilot, app)
        await _finished(hosted(app), "rows")
        viewer = await _open(pilot, app, "rows")
        await pilot.press("o")
        await _until(pilot, lambda: app._notifications, "a notice")
        message = next(iter(app._notifications)).message
        assert message.startswith("this terminal cannot be handed to a pager; the file is ")
        assert app.screen is viewer


async def test_help_lists_the_viewers_keys(tmp_path: Path) -> None:
    app, _runtime = _app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await _ready(pilot, app)
        await pilot.press("question_mark")
        await _until(pilot, lambda: isinstance(app.screen, HelpScreen), "the help")
        text = str(app.screen.query_one("#help-text", Static).content)
        assert "Output viewer (l)" in text
        assert "Search" in text
