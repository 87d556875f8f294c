"""The output viewer: one run's whole output, paged from its file however large.

Opened with `l` (main screen), `l` or enter on the job detail's output tab,
and enter on a run of its history tab. It holds a window of lines around
what is on screen (`OutputWindow`) and asks the control seam for pages by
byte offset as the view moves, in workers, so a gigabyte opens at once and
nothing is read on the loop. A search (`/`, `n`, `N`) runs in the scheduler
in bounded steps (`search_output`), so it takes the same seconds in an
attached console; the steps are awaited one by one, and `escape` stops them.

A running run opens following its output (`f` toggles); a finished one opens
at its end. When the file was pruned (only the newest files of each job are
kept), the viewer says so and shows the tail the history kept. Every line is
job output made plain by `plain_text` and drawn literally.

`OutputScreen` is the layout, `escape` and the pager; the window of lines, the keys
that move the view and the search are its parts in `outputreading`.
"""

from __future__ import annotations

import asyncio
import os
import shlex
from typing import TYPE_CHECKING, ClassVar

from textual.app import ComposeResult, SuspendNotSupported
from textual.binding import Binding, BindingType
from textual.widgets import Footer, Input, Static

from tuisched.domain.errors import TuischedError
from tuisched.domain.runs import RunState
from tuisched.domain.views import HistoryQuery, OutputSource
from tuisched.frontends.tui.screens.outputreading import FOLLOW_SECONDS, OutputMoves, OutputSearch
from tuisched.frontends.tui.widgets.outputview import OutputView
from tuisched.frontends.tui.widgets.status import StatusLine

if TYPE_CHECKING:
    from tuisched.frontends.tui.host import ConsoleHost


class OutputScreen(OutputMoves, OutputSearch):
    """One run's output; `escape` or `q` goes back."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "back", "Back"),
        Binding("q", "back", "Back", show=False),
        Binding("slash", "search", "Search"),
        Binding("n", "next_match(False)", "Next"),
        Binding("N", "next_match(True)", "Previous", show=False),
        Binding("f", "toggle_follow", "Follow"),
        Binding("w", "toggle_wrap", "Wrap"),
        Binding("o", "pager", "Pager"),
        Binding("g,home", "top", "Top", show=False),
        Binding("G,end", "bottom", "Bottom", show=False),
        Binding("pageup", "page(-1)", "Page up", show=False),
        Binding("pagedown,space", "page(1)", "Page down", show=False),
        Binding("up,k", "rows(-1)", "Up", show=False),
        Binding("down,j", "rows(1)", "Down", show=False),
        Binding("left,h", "sideways(-1)", "Left", show=False),
        Binding("right,l", "sideways(1)", "Right", show=False),
    ]

    def compose(self) -> ComposeResult:
        yield StatusLine(id="output-status")
        yield Static(id="output-note")
        yield OutputView(self.window, id="output-view")
        yield Input(placeholder="search: enter finds, esc cancels", id="output-search")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#output-search").display = False
        self.query_one("#output-note").display = False
        self.view.focus()
        self._open()
        self.set_interval(FOLLOW_SECONDS, self._follow_tick)

    # --- keys ------------------------------------------------------------------------

    def action_back(self) -> None:
        """`escape`: close the search prompt, else stop a search, else go back."""
        prompt = self.query_one("#output-search", Input)
        if prompt.display:
            prompt.display = False
            self.view.focus()
        elif self._searching:
            self.workers.cancel_group(self, "output-search")
            self._searching = ""
            self._say("search stopped")
        else:
            self.dismiss(None)

    # --- the pager -------------------------------------------------------------------

    def action_pager(self) -> None:
        """`o`: the whole file in $PAGER (default less); the scheduler keeps running."""
        page = self.page
        if page is None or page.source is not OutputSource.FILE or not page.path:
            self.notify("there is no output file to open", severity="warning", markup=False)
            return
        self.run_worker(self._page_file(page.path), group="pager", exclusive=True)

    async def _page_file(self, path: str) -> None:
        command = os.environ.get("PAGER") or "less"
        try:
            pager = shlex.split(command)
        except ValueError as error:
            self.notify(f"cannot read $PAGER '{command}': {error}", severity="error", markup=False)
            return
        panes = self.host.main.panes
        panes.hold(True)  # no repaints over the pager's screen
        try:
            with self.app.suspend():
                status = await run_on_terminal([*pager, path])
        except SuspendNotSupported:
            self.notify(
                f"this terminal cannot be handed to a pager; the file is {path}",
                severity="warning", markup=False,
            )  # fmt: skip
            return
        finally:
            panes.hold(False)
        if status is None:
            self.notify(f"cannot start the pager '{pager[0]}'", severity="error", markup=False)


async def open_latest_output(host: ConsoleHost, job: str) -> None:
    """Open the viewer on `job`'s run in progress, else on its newest run in the history."""
    running = [
        status.run
        for status in host.state.runs
        if status.run.job == job and status.run.state is RunState.RUNNING
    ]
    if running:
        host.push_screen(OutputScreen(host, running[-1].run_id))
        return
    try:
        newest = await host.control.history(HistoryQuery(job=job, limit=1))
    except TuischedError as error:
        host.notify(f"cannot read the history of {job}: {error}", severity="error", markup=False)
        return
    if not newest:
        host.notify(f"{job} has not run yet: no output to show", markup=False)
        return
    host.push_screen(OutputScreen(host, newest[0].run_id))


async def run_on_terminal(argv: list[str]) -> int | None:
    """Run `argv` on the terminal and wait for it on the loop; None if it cannot start."""
    try:
        process = await asyncio.create_subprocess_exec(*argv)
    except OSError:
        return None
    return await process.wait()
