"""The schedule simulator (`S`): every run a window would hold, a day at a time (R25).

The window starts at now and spans a day; `n` and `p` move it a day forward
or back, `t` brings it back to now. The runs are computed by the scheduler off
its loop (the seam's `simulate`), for the jobs the main screen's filter shows.
Runs whose wall-clock time falls in a DST gap or repeats in a fold are marked.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
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
from tuisched.domain.schedule.duration import format_duration
from tuisched.domain.text import counted, plain_text
from tuisched.domain.views import SimulatedRun, Simulation
from tuisched.frontends.tui.view import MINUTES_SHAPE, SECONDS_SHAPE, has_seconds
from tuisched.runtime.control import SchedulerControl

WINDOW = timedelta(days=1)
"""How much one screen shows, and how far `n`/`p` move it."""
LIMIT = 1_000
"""Rows listed at most (the rest are counted): a table this long fills in a blink."""
FETCH = 20_000
"""Runs asked for at most: a day of a job every 5 seconds (17,280), shown as one row."""
COLLAPSE_UNDER = timedelta(hours=1)
"""A job's runs repeating at one interval shorter than this are one row (`360 runs, every
10s to 07:59:50`): the rarer ones keep a row each, where the day's order shows."""
COLLAPSE_FROM = 3
"""Fewer repeats than this keep a row each."""
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
        self.rows: list[SimulatedRow] = []
        """Its rows (a job's frequent repeats on one row), as listed."""

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
            found = await self._control.simulate(start, end, jobs=self._jobs, limit=FETCH)
        except TuischedError as error:
            self.query_one("#sim-note", Static).update(Text(f"cannot simulate: {error}"))
            return
        rows = await asyncio.to_thread(collapsed, found.runs)  # 20,000 runs: off the loop
        if start != self.start:  # moved on meanwhile: the newer window is on its way
            return
        self.simulation = found
        self.rows = rows
        self._show(found, rows)

    def _show_title(self, start: datetime, end: datetime) -> None:
        shown = f"  filter '{self._filter}'" if self._filter else ""
        title = f" Simulation  {_moment(start, self._tz)} to {_moment(end, self._tz)}{shown}"
        self.query_one("#sim-title", Static).update(Text(plain_text(title), no_wrap=True))

    def _show(self, found: Simulation, rows: list[SimulatedRow]) -> None:
        table = self.query_one(DataTable)
        table.clear()
        seconds = has_seconds(run.at for run in found.runs)
        for number, row in enumerate(rows[:LIMIT]):
            table.add_row(*row_cells(row, seconds=seconds), key=str(number))
        dst = sum(1 for run in found.runs if run.dst)
        words = [counted(len(found.runs), "run")]
        if len(rows) < len(found.runs):
            words.append("a job's runs less than an hour apart on one row")
        if dst:
            words.append(f"{dst} touched by DST (marked)")
        unlisted = sum(row.count for row in rows[LIMIT:]) + found.left_out
        if unlisted:
            more = unlisted if found.counted_all else f"at least {unlisted}"
            words.append(f"{more} more left out (filter the jobs with / first)")
        words.append("assuming " + "; ".join(found.assumptions))
        self.query_one("#sim-note", Static).update(Text(". ".join(words)))


@dataclass(frozen=True, slots=True)
class SimulatedRow:
    """A line of the simulator: a run, or a job's runs repeating at one interval."""

    run: SimulatedRun
    """The (first) run."""
    count: int = 1
    every: timedelta = timedelta(0)
    """The interval of the repeats (for `count` above 1)."""
    last: datetime | None = None
    """When the last repeat starts (for `count` above 1)."""


def collapsed(runs: Sequence[SimulatedRun]) -> list[SimulatedRow]:
    """`runs` (in time order) as the simulator's rows, in the same order: a job's runs that
    repeat at one interval shorter than `COLLAPSE_UNDER`, `COLLAPSE_FROM` or more in a
    row, make one row at the first of them; every other run has a row of its own. A run
    touched by DST is never folded in (its warning stands out on a row of its own)."""
    rows: list[tuple[int, SimulatedRow]] = []  # (the first run's place, the row)
    second: dict[int, int] = {}  # row -> the place of its second run, while it has two
    open_rows: dict[tuple[str, ...], int] = {}  # a job's row that its next run may extend
    for place, run in enumerate(runs):
        key = (run.job, run.trigger, run.upstream, run.note, run.timezone)
        if run.dst:
            open_rows.pop(key, None)
            rows.append((place, SimulatedRow(run)))
            continue
        number = open_rows.get(key)
        if number is not None:
            row = rows[number][1]
            step = run.at - (row.last or row.run.at)
            if step == row.every if row.count > 1 else timedelta(0) < step < COLLAPSE_UNDER:
                rows[number] = (rows[number][0], replace(row, count=row.count + 1, every=step,
                                                         last=run.at))  # fmt: skip
                second.setdefault(number, place)
                continue
        open_rows[key] = len(rows)
        rows.append((place, SimulatedRow(run)))
    return _unfolded(rows, second)


def _unfolded(rows: list[tuple[int, SimulatedRow]], second: dict[int, int]) -> list[SimulatedRow]:
    """Rows of fewer than `COLLAPSE_FROM` runs back as a row per run, in time order."""
    placed: list[tuple[int, SimulatedRow]] = []
    for number, (place, row) in enumerate(rows):
        if row.count == 1 or row.count >= COLLAPSE_FROM:
            placed.append((place, row))
            continue
        placed.append((place, SimulatedRow(row.run)))
        if row.last is not None:
            placed.append((second[number], SimulatedRow(replace(row.run, at=row.last))))
    return [row for _, row in sorted(placed, key=lambda item: item[0])]


def row_cells(row: SimulatedRow, *, seconds: bool = False) -> tuple[Text, ...]:
    """A row: plain `Text` cells; a DST warning replaces the note, and stands out; repeats
    say how many, their interval and the last run (`360 runs, every 10s to 07:59:50`)."""
    run, tz = row.run, ZoneInfo(row.run.timezone)
    style = DST_STYLE if run.dst else ""
    note = f"DST: {run.dst}" if run.dst else run.note
    if row.count > 1 and row.last is not None:
        shape = SECONDS_SHAPE if seconds else MINUTES_SHAPE
        first, last = run.at.astimezone(tz), row.last.astimezone(tz)
        until = last.strftime(shape if last.date() == first.date() else f"%m-%d {shape}")
        # The count first: at 80 columns the note's end is cut (→ scrolls to it).
        repeats = f"{counted(row.count, 'run')}, every {format_duration(row.every)} to {until}"
        note = f"{repeats}; {note}" if note else repeats
    cells = (_moment(run.at, tz, seconds=seconds), run.job, run.trigger, note)
    return tuple(Text(plain_text(cell), style=style, no_wrap=True) for cell in cells)


def run_cells(run: SimulatedRun, *, seconds: bool = False) -> tuple[Text, ...]:
    """A run's row: plain `Text` cells; a DST warning replaces the note, and stands out."""
    return row_cells(SimulatedRow(run), seconds=seconds)


def _moment(moment: datetime, tz: ZoneInfo, *, seconds: bool = False) -> str:
    """`2026-03-29 03:00 +02:00` (`03:00:10` with `seconds`)."""
    local = moment.astimezone(tz)
    offset = local.strftime("%z")
    shape = SECONDS_SHAPE if seconds else MINUTES_SHAPE
    return local.strftime(f"%Y-%m-%d {shape} ") + f"{offset[:3]}:{offset[3:]}"
