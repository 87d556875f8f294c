"""Reading a run's output: the parts of the output viewer (`output.OutputScreen`).

`OutputReader` holds the window of lines around what is on screen, fetches pages
at its ends as the view nears them, and says where the view is (the note line and
the status line). `OutputMoves` opens the run and moves the view (rows, pages,
ends, sideways, following a running run, wrapping). `OutputSearch` searches the
file, in the scheduler's bounded steps, or the lines held when there is no file.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text
from textual import on, work
from textual.screen import Screen
from textual.widgets import Input, Static
from textual.worker import Worker

from tuisched.domain.errors import TuischedError
from tuisched.domain.text import counted
from tuisched.domain.views import OutputMatch, OutputPage, OutputSource
from tuisched.frontends.tui.outputwindow import OutputWindow
from tuisched.frontends.tui.widgets.outputview import OutputView
from tuisched.frontends.tui.widgets.status import StatusLine

if TYPE_CHECKING:
    from tuisched.frontends.tui.host import ConsoleHost

PAGE_LINES = 500
"""How many lines one page asks for."""
MARGIN_LINES = 150
"""A page is fetched when the view comes this close to an end of the window."""
FOLLOW_SECONDS = 0.5
"""How often a followed run's file is read for new lines."""
KEPT_FILES = 50
"""How many output files of each job the scheduler keeps (said when one is gone)."""


class OutputReader(Screen[None]):
    """A run's output as a window of lines, paged in as the view moves; the note and
    status lines."""

    def __init__(self, host: ConsoleHost, run_id: str) -> None:
        super().__init__()
        self.host = host
        self.control = host.control
        self.run_id = run_id
        self.window = OutputWindow()
        self.page: OutputPage | None = None
        """The last page read: the run's job, state and file."""
        self.follow = False
        self.search_text = ""
        self.match: OutputMatch | None = None
        self._note = ""
        self._searching = ""
        self._fetching: Worker[None] | None = None
        self._counted = -1
        """The window generation whose line numbers were asked for."""

    @property
    def view(self) -> OutputView:
        return self.query_one(OutputView)

    def _say_source(self, page: OutputPage) -> None:
        if page.source is OutputSource.TAIL:
            self._say(
                f"the output file of run {page.run_id} is gone (only the newest {KEPT_FILES} of"
                f" each job are kept): the last {counted(len(page.lines), 'line')} the history kept"
            )
        elif page.source is OutputSource.NONE:
            self._say("no output yet" if page.running else "this run printed nothing")
        else:
            self._say("")

    def _say(self, text: str) -> None:
        """Show `text` on the note line above the output ("" hides it)."""
        self._note = text
        note = self.query_one("#output-note", Static)
        note.display = bool(text)
        note.update(Text(text))  # Text: a note may quote job output, never read as markup
        self._show_status()

    async def _fetch(self, *, before: bool) -> bool:
        """Grow the window by a page at one end, keeping the view on the same line; False
        when no line came (or the scheduler did not answer, which the note says)."""
        window = self.window
        offset = window.offsets[0] if before and window.offsets else window.end
        generation = window.generation
        try:
            page = await self.control.output_page(
                self.run_id, offset=offset, before=before, lines=PAGE_LINES
            )
        except TuischedError as error:
            self._say(f"cannot read the output: {error}")
            return False
        if window.generation != generation:
            return False  # the view jumped elsewhere meanwhile
        self._heard(page)
        added = window.extend(page)
        self.view.shift(added.before, added.dropped)
        return bool(page.lines)

    async def _grow(self, *, before: bool) -> None:
        if await self._fetch(before=before):
            self._fetching = None
            self._need_pages()  # a short page (long lines) may not reach far enough

    def _heard(self, page: OutputPage) -> None:
        """Keep what a page says of the run (its state, whether it still writes)."""
        ended = self.page is not None and self.page.running and not page.running
        self.page = page
        if ended:
            self.notify(f"run {page.run_id} ended: {page.state.value.lower()}", markup=False)

    def _need_pages(self) -> None:
        """After a move: fetch a page when the view nears an end of the window (unless a
        fetch is under way); the status line says where the view is now either way."""
        view, window = self.view, self.window
        if self._fetching is not None and self._fetching.is_running:
            pass
        elif view.top < MARGIN_LINES and not window.at_start:
            self._fetching = self.run_worker(self._grow(before=True), group="output-page")
        elif view.rows_below() < MARGIN_LINES and not window.at_end and not self.follow:
            self._fetching = self.run_worker(self._grow(before=False), group="output-page")
        self._show_status()

    def _show_status(self) -> None:
        self.query_one("#output-status", StatusLine).text = self.status_text()
        window = self.window
        if window.first_number is None and window.lines and self._counted != window.generation:
            self._counted = window.generation
            self.run_worker(self._count_lines(), group="output-count", exclusive=True)

    async def _count_lines(self) -> None:
        """Learn the first held line's number (the scheduler counts, a bounded step a call,
        and keeps what it counted): the status line then says `line N`."""
        window = self.window
        generation, offset = window.generation, window.offsets[0]
        number = None
        while number is None:
            try:
                number = await self.control.output_line_number(self.run_id, offset)
            except TuischedError:
                return
            if window.generation != generation:
                return  # a jump: the new window is counted anew
        index = window.index_of(offset)
        if number and index is not None:
            window.first_number = number - index
            self._show_status()

    def status_text(self) -> str:
        """` job RUN_ID  state  line N P%  follow on  wrap off  /text` (80 columns)."""
        page = self.page
        if page is None:
            return f" run {self.run_id}  opening..."
        state = "running" if page.running else page.state.value.lower()
        parts = [f" {page.job} {page.run_id}", state, self._position()]
        parts.append("follow on" if self.follow else "follow off")
        parts.append("wrap on" if self.view.wrap else "wrap off")
        if self.search_text:
            parts.append(f"/{self.search_text}")
        return "  ".join(parts)

    def _position(self) -> str:
        window, top = self.window, self.view.top
        if not window.lines:
            return "empty"
        number = window.number(top)
        if window.source is not OutputSource.FILE or window.size == 0:
            return f"line {number or top + 1}/{len(window.lines)}"
        share = 100 * window.offsets[min(top, len(window.offsets) - 1)] // window.size
        return f"line {number:,} {share}%" if number is not None else f"{share}%"


class OutputMoves(OutputReader):
    """Opening the run, the keys that move the view, and following a running run."""

    @work(exclusive=True, group="output-open")
    async def _open(self) -> None:
        """Read the last page: a running run is then followed, a finished one shown at its end."""
        try:
            page = await self.control.output_page(self.run_id, lines=PAGE_LINES)
        except TuischedError as error:
            self._say(f"cannot read the output of run {self.run_id}: {error}")
            return
        self.page = page
        self.follow = page.running
        self.window.replace(page)
        self.view.changed()
        self.view.to_bottom()
        self._say_source(page)
        self._show_status()

    async def _jump(self, *, offset: int | None, then_bottom: bool) -> None:
        """Replace the window by the page at `offset` (None: the last page)."""
        try:
            page = await self.control.output_page(self.run_id, offset=offset, lines=PAGE_LINES)
        except TuischedError as error:
            self._say(f"cannot read the output: {error}")
            return
        self._heard(page)
        self.window.replace(page)
        self.view.changed()
        if then_bottom:
            self.view.to_bottom()
        else:
            self.view.to_top()
        self._need_pages()

    def _follow_tick(self) -> None:
        """Following: read what the run wrote since, and keep its last line in view."""
        page = self.page
        if not self.follow or page is None or self.app.screen is not self:
            return
        if self._fetching is not None and self._fetching.is_running:
            return
        self._fetching = self.run_worker(self._follow_once(), group="output-page")

    async def _follow_once(self) -> None:
        """Read the last page: it joins the window, or replaces it when the run wrote more
        than a page since (a flood is shown at its end, as it comes)."""
        generation = self.window.generation
        try:
            page = await self.control.output_page(self.run_id, lines=PAGE_LINES)
        except TuischedError as error:
            self._say(f"cannot read the output: {error}")
            return
        if self.window.generation != generation or not self.follow:
            return  # a jump, a search or `f` came meanwhile
        first = not self.window.lines
        self._heard(page)
        added = self.window.extend(page)
        self.view.shift(added.before, added.dropped)
        if first and page.lines:
            self._say_source(page)  # "no output yet" no more
        if self.follow:
            self.view.to_bottom()
        if self.page is not None and not self.page.running and self.window.at_end:
            self.follow = False  # nothing more will come
        self._show_status()

    def action_rows(self, delta: int) -> None:
        self._moved(delta)

    def action_page(self, direction: int) -> None:
        self._moved(direction * max(1, self.view.size.height - 1))

    def _moved(self, delta: int) -> None:
        if delta < 0:
            self.follow = False  # reading back: new lines must not pull the view away
        self.view.scroll_rows(delta)
        self._need_pages()

    def action_sideways(self, direction: int) -> None:
        self.view.scroll_sideways(direction * max(1, self.view.size.width // 2))

    def action_top(self) -> None:
        self.follow = False
        if self.window.at_start:
            self.view.to_top()
            self._need_pages()
        else:
            self.run_worker(self._jump(offset=0, then_bottom=False), group="output-page")

    def action_bottom(self) -> None:
        self.run_worker(self._jump(offset=None, then_bottom=True), group="output-page")

    def action_toggle_follow(self) -> None:
        """`f`: follow a running run's new lines (at the bottom), or stop following."""
        page = self.page
        if not self.follow and (page is None or not page.running):
            self.notify("this run has ended: there is nothing to follow", markup=False)
            return
        self.follow = not self.follow
        if self.follow:
            self.action_bottom()
        self._show_status()

    def action_toggle_wrap(self) -> None:
        """`w`: wrap long lines onto the next rows, or scroll sideways (never cut)."""
        view = self.view
        at_bottom = view.rows_below() == 0 and self.window.at_end
        view.wrap = not view.wrap
        view.x = view.top_row = 0
        view.changed()
        if self.follow or at_bottom:  # the last line stays in view
            view.to_bottom()
        self._show_status()


class OutputSearch(OutputReader):
    """`/`, `n` and `N`: a search of the whole file, in bounded steps (`escape` stops it)."""

    def action_search(self) -> None:
        prompt = self.query_one("#output-search", Input)
        prompt.display = True
        prompt.value = ""
        prompt.focus()

    @on(Input.Submitted, "#output-search")
    def _search_asked(self, event: Input.Submitted) -> None:
        event.stop()
        prompt = self.query_one("#output-search", Input)
        prompt.display = False
        self.view.focus()
        if event.value:
            self.search_text = event.value
            self.match = None
            self._start_search(backward=False)

    def action_next_match(self, backward: bool) -> None:
        """`n` the next match, `N` the previous one."""
        if not self.search_text:
            self.notify("nothing to search for: / asks", markup=False)
            return
        self._start_search(backward=backward)

    def _start_search(self, *, backward: bool) -> None:
        self.follow = False
        origin = self._search_origin(backward=backward)
        self._searching = self.search_text
        self.run_worker(
            self._search(self.search_text, origin, backward=backward),
            group="output-search", exclusive=True,
        )  # fmt: skip

    def _search_origin(self, *, backward: bool) -> int:
        """Where a search begins: after (before) the current match, else the top line."""
        if self.match is not None:
            return self.match.offset if backward else self.match.end
        window, top = self.window, self.view.top
        return window.offsets[top] if top < len(window.offsets) else window.end

    async def _search(self, text: str, origin: int, *, backward: bool) -> None:
        """Ask for search steps until a match, or a whole turn of the file found none."""
        if self.window.source is not OutputSource.FILE:
            self._search_window(text, origin, backward=backward)
            return
        offset, wrapped = origin, False
        while True:
            try:
                step = await self.control.search_output(
                    self.run_id, text, offset=offset, backward=backward
                )
            except TuischedError as error:
                self._search_ended(f"the search stopped: {error}")
                return
            if step.found:
                await self._show_match(step, wrapped=wrapped)
                return
            passed = step.scanned_to >= origin if not backward else step.scanned_to <= origin
            if wrapped and (step.done or passed):
                self._search_ended(f"'{text}' is not in the output")
                return
            if step.done:
                wrapped, offset = True, step.size if backward else 0
            else:
                offset = step.scanned_to
            self._searching_at(text, step, wrapped=wrapped)

    def _searching_at(self, text: str, step: OutputMatch, *, wrapped: bool) -> None:
        share = 100 * step.scanned_to // max(1, step.size)
        turn = ", from the other end" if wrapped else ""
        self._say(f"searching for '{text}'... {share}% of the file{turn} (esc stops)")

    def _search_ended(self, text: str) -> None:
        self._searching = ""
        self._say(text)

    def _search_window(self, text: str, origin: int, *, backward: bool) -> None:
        """Search the lines held (the tail a history row kept): nothing else exists."""
        lines, fold = self.window.lines, text == text.lower()
        order = range(origin - 1, -1, -1) if backward else range(origin, len(lines))
        for index in order:
            line = lines[index].lower() if fold else lines[index]
            column = line.find(text.lower() if fold else text)
            if column >= 0:
                found = OutputMatch(
                    found=True, offset=index, end=index + 1, column=column, length=len(text)
                )
                self._mark(found, index, wrapped=False)
                return
        self._search_ended(f"'{text}' is not in the lines kept")

    async def _show_match(self, match: OutputMatch, *, wrapped: bool) -> None:
        """Bring the matching line into view, fetching the pages around it when not held."""
        index = self.window.index_of(match.offset)
        if index is None:
            try:
                before = await self.control.output_page(
                    self.run_id, offset=match.offset, before=True, lines=PAGE_LINES // 2
                )
                after = await self.control.output_page(
                    self.run_id, offset=match.offset, lines=PAGE_LINES
                )
            except TuischedError as error:
                self._search_ended(f"cannot read the output: {error}")
                return
            self._heard(after)
            self.window.replace(before if before.lines else after)
            if before.lines:
                self.window.extend(after)
            self.view.changed()
            index = self.window.index_of(match.offset)
        if index is not None:
            self._mark(match, index, wrapped=wrapped)
        self._need_pages()

    def _mark(self, match: OutputMatch, index: int, *, wrapped: bool) -> None:
        self.match = match
        self.view.mark = (match.offset, match.column, match.length)
        self.view.show_line(index, match.column)
        self._searching = ""
        self._say("search wrapped around the end of the file" if wrapped else "")
