"""The schedule simulator (`S`): every run a window would hold, a day at a time (R25).

The window starts at now and spans a day; `n` and `p` move it a day forward
or back, `t` brings it back to now. The runs are computed by the scheduler off
its loop (the seam's `simulate`), for the jobs the main screen's filter shows.
Runs whose wall-clock time falls in a DST gap or repeats in a fold are marked.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import ClassVar
from zoneinfo import ZoneInfo

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Static

from tuisched.domain.errors import TuischedError
from tuisched.domain.text import counted, plain_text
from tuisched.domain.views import SimulatedRun, Simulation
from tuisched.runtime.control import SchedulerControl

WINDOW = timedelta(days=1)
"""How much one screen shows, and how far `n`/`p` move it."""
LIMIT = 1_000
"""Runs listed at most (the rest are counted): a table this long fills in a blink."""
COLUMNS = ("Time", "Job", "Trigger", "Note")
DST_STYLE = "bold reverse"
"""DST rows stand out without colour too (NO_COLOR, 16 colours)."""


class SimulateScreen(Screen[None]):
    """Every run of a day-long window, in time order; `escape` goes back."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "Back"),
        Binding("q", "close", "Back", show=False),
        Binding("n", "move(1)", "Next day"),
        Binding("p", "move(-1)", "Previous day"),
        Binding("t", "move(0)", "Now"),
    ]

    def __init__(
        self,
        control: SchedulerControl,
        *,
        clock: Callable[[], datetime],
        tz: ZoneInfo,
        jobs: tuple[str, ...] = (),
        filter_text: str = "",
    ) -> None:
        """`jobs`: only these jobs' runs (the main screen's filter); every job when empty."""
        super().__init__()
        self._control = control
        self._clock = clock
        self._tz = tz
        self._jobs = jobs
        self._filter = filter_text
        self.start = clock().astimezone(UTC)
        """The window's first instant (it spans `WINDOW`)."""
        self.simulation: Simulation | None = None
        """The last answer shown."""

    def compose(self) -> ComposeResult:
        yield Static(id="sim-title")
        yield DataTable[Text](id="sim-runs", cursor_type="row", zebra_stripes=True)
        yield Static(id="sim-note")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one(DataTable).add_columns(*COLUMNS)
        self._load()

    def action_close(self) -> None:
        self.dismiss(None)

    def action_move(self, days: int) -> None:
        """`n` a day forward, `p` a day back, `t` back to now."""
        self.start = self.start + days * WINDOW if days else self._clock().astimezone(UTC)
        self._load()

    @work(exclusive=True, group="simulate")
    async def _load(self) -> None:
        """Ask the scheduler for the window's runs (computed off its loop) and show them."""
        start, end = self.start, self.start + WINDOW
        self._show_title(start, end)
        self.query_one("#sim-note", Static).update(Text("computing..."))
        try:
            found = await self._control.simulate(start, end, jobs=self._jobs, limit=LIMIT)
        except TuischedError as error:
            self.query_one("#sim-note", Static).update(Text(f"cannot simulate: {error}"))
            return
        if start != self.start:  # moved on meanwhile: the newer window is on its way
            return
        self.simulation = found
        self._show(found)

    def _show_title(self, start: datetime, end: datetime) -> None:
        shown = f"  filter '{self._filter}'" if self._filter else ""
        title = f" Simulation  {_moment(start, self._tz)} to {_moment(end, self._tz)}{shown}"
        self.query_one("#sim-title", Static).update(Text(plain_text(title), no_wrap=True))

    def _show(self, found: Simulation) -> None:
        table = self.query_one(DataTable)
        table.clear()
        for number, run in enumerate(found.runs):
            table.add_row(*run_cells(run), key=str(number))
        dst = sum(1 for run in found.runs if run.dst)
        words = [counted(len(found.runs), "run")]
        if dst:
            words.append(f"{dst} touched by DST (marked)")
        if found.left_out:
            more = found.left_out if found.counted_all else f"at least {found.left_out}"
            words.append(f"{more} more left out (filter the jobs with / first)")
        words.append("assuming " + "; ".join(found.assumptions))
        self.query_one("#sim-note", Static).update(Text(". ".join(words)))


def run_cells(run: SimulatedRun) -> tuple[Text, ...]:
    """A run's row: plain `Text` cells; a DST warning replaces the note, and stands out."""
    style = DST_STYLE if run.dst else ""
    note = f"DST: {run.dst}" if run.dst else run.note
    cells = (_moment(run.at, ZoneInfo(run.timezone)), run.job, run.trigger, note)
    return tuple(Text(plain_text(cell), style=style, no_wrap=True) for cell in cells)


def _moment(moment: datetime, tz: ZoneInfo) -> str:
    """`2026-03-29 03:00 +02:00`."""
    local = moment.astimezone(tz)
    offset = local.strftime("%z")
    return local.strftime("%Y-%m-%d %H:%M ") + f"{offset[:3]}:{offset[3:]}"
