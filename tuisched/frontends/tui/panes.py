"""The main screen's panes kept in step with the scheduler, through the control seam only.

Events are queued as they come (`on_event` only appends); `refresh` applies
them in one batch a few times a second: the jobs they touched are read again
by name, the running pane and the status line from fresh snapshots, the audit
lines formatted here. A burst of thousands of runs costs a few repaints.
`tick` redoes the relative times once a second.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path

from textual.screen import Screen

from tuisched.domain.config.config import collector_paused
from tuisched.domain.errors import ControlError, SchedulerNotRunningError, TuischedError
from tuisched.domain.events import Event
from tuisched.domain.schedule.duration import format_elapsed
from tuisched.domain.views import JobStatus, SchedulerState
from tuisched.frontends.tui.failures import WINDOW, FailureNotices
from tuisched.frontends.tui.jobindex import SORTS
from tuisched.frontends.tui.notices import NoticeLog, Tell
from tuisched.frontends.tui.state import Changes, ConsoleState
from tuisched.frontends.tui.view import JobRow, job_row, run_row
from tuisched.frontends.tui.widgets.audit import AuditPane
from tuisched.frontends.tui.widgets.banner import Banner
from tuisched.frontends.tui.widgets.jobs import JobsTable
from tuisched.frontends.tui.widgets.running import RunningTable
from tuisched.frontends.tui.widgets.status import StatusLine
from tuisched.runtime.control import SchedulerControl, Subscription


class LivePanes:
    """Reads the scheduler through `control` and shows it on the main screen's panes."""

    def __init__(
        self,
        screen: Screen[None],
        control: SchedulerControl,
        state: ConsoleState,
        *,
        clock: Callable[[], datetime],
        read_only: bool,
        on_lost: Callable[[TuischedError], None],
        notices: NoticeLog,
        tell: Tell,
    ) -> None:
        """`on_lost` is told when the scheduler stopped or stopped answering; `tell` gives
        a notice (a muted job's, in `notices`, is only logged)."""
        self._screen = screen
        self._on_lost = on_lost
        self._control = control
        self._state = state
        self._clock = clock
        self._read_only = read_only
        self._pending: list[Event] = []
        self._subscription: Subscription | None = None
        self._busy = asyncio.Lock()
        self._held = False
        """While the terminal belongs to another program ($EDITOR), nothing is drawn."""
        self.sort = 0
        """Index into SORTS."""
        self._failures = FailureNotices()
        self._notices = notices
        self._tell = tell

    def hold(self, held: bool) -> None:
        """Stop drawing (the terminal is lent to another program), or draw again."""
        self._held = held

    @property
    def _shown(self) -> bool:
        """Whether the panes can be drawn: the console is not closing.

        Textual closes the screens before the app stops the scheduler; a
        refresh that was waiting for an answer then finds no widgets.
        """
        return not self._held and self._screen.is_attached and self._screen.app.is_running

    def on_event(self, event: Event) -> None:
        """The one place events are heard: queue them for `refresh`."""
        self._pending.append(event)

    async def preview(self) -> None:
        """While the scheduler starts: the jobs of its file and their last runs, their next
        runs not known yet. Nothing if it has started meanwhile (`load` follows), or failed
        to (the console says why)."""
        state = self._state
        try:
            state.status = await self._control.status()
            if state.status.state is not SchedulerState.STARTING:
                return
            with collector_paused():
                state.take_jobs(await self._control.jobs(), complete=True)
            state.groups = await self._control.groups()
        except TuischedError:
            return
        if not self._shown:
            return
        self._screen.query_one(JobsTable).set_row_maker(self._make_row)
        with collector_paused():
            self.show_jobs()
        self._show_status()

    async def load(self) -> None:
        """Read everything once (after the scheduler started), then follow its events."""
        self._subscription = self._control.subscribe(self.on_event)
        state, now = self._state, self._clock()
        state.status = await self._control.status()
        # A status per job, and the index's keys: many objects and no cycles, which the
        # collector would rescan as they pile up (0.4 s at a time with 100,000 jobs).
        with collector_paused():
            state.take_jobs(await self._control.jobs(), complete=True)
        state.groups = await self._control.groups()
        state.runs = await self._control.runs()
        state.failures = list(await self._control.failures_since(now - timedelta(hours=24)))
        audit = await self._control.audit()
        if not self._shown:
            return
        self._screen.query_one(JobsTable).set_row_maker(self._make_row)
        with collector_paused():
            self.show_jobs()
        self._show_runs()
        self._screen.query_one(AuditPane).add(audit.lines)
        self._show_status()

    def close(self) -> None:
        """Stop following the scheduler's events."""
        if self._subscription is not None:
            self._subscription.unsubscribe()
            self._subscription = None

    async def refresh(self) -> None:
        """Apply the events heard since the last refresh."""
        if not self._pending or self._busy.locked() or not self._shown:
            return
        async with self._busy:
            events, self._pending = self._pending, []
            changes = self._state.digest(events)
            try:
                await self._reread(changes)
            except (SchedulerNotRunningError, ControlError) as error:
                self._on_lost(error)
                return
            if self._shown:
                self._show_changes(changes)

    async def _reread(self, changes: Changes) -> None:
        state = self._state
        if changes.everything:
            state.take_jobs(await self._control.jobs(), complete=True)
            state.groups = await self._control.groups()
        elif changes.touched:
            state.take_jobs(await self._control.jobs(changes.touched), complete=False)
        state.runs = await self._control.runs()
        state.status = await self._control.status()

    def _show_changes(self, changes: Changes) -> None:
        screen = self._screen
        if changes.everything:
            self.show_jobs()
        else:
            self._update_jobs(changes.touched)
        self._show_runs()
        screen.query_one(AuditPane).add(changes.audit)
        banner = screen.query_one(Banner)
        if changes.hide_banner:
            banner.hide()
        if changes.banner is not None:
            text, error = changes.banner
            banner.show_message(text, error=error)
        for notice in changes.notices:
            self._tell(notice.text, severity=notice.severity, markup=False, job=notice.job)  # type: ignore[arg-type]
        # A muted job's failures are logged one by one, out of the bursts told aloud.
        told = []
        for failure in changes.failed:
            if not self._notices.silenced(failure.job):
                told.append(failure)
                continue
            text = FailureNotices.told(failure)
            self._tell(text, severity="error", markup=False, job=failure.job)
        if self._failures.add(told):
            screen.set_timer(WINDOW, self._tell_failures)
        self._show_status()
        self._changed()

    def _tell_failures(self) -> None:
        """A burst of failures is over: one notice for all of it."""
        told = self._failures.take()
        if told is not None and self._shown:
            text, job = told
            self._tell(text, severity="error", markup=False, job=job)

    def _changed(self) -> None:
        """The screen's keys may apply differently now (a job paused, a run ended)."""
        refresh_legend = getattr(self._screen, "refresh_legend", None)
        if refresh_legend is not None:
            refresh_legend()

    async def tick(self) -> None:
        """Once a second: the clock, elapsed times, and the next-run texts in view."""
        if self._busy.locked() or not self._shown:
            return
        async with self._busy:
            state = self._state
            visible = set(self._screen.query_one(JobsTable).visible_jobs())
            try:
                state.status = await self._control.status()
                state.runs = await self._control.runs()
                if visible:
                    state.take_jobs(await self._control.jobs(visible), complete=False)
            except (SchedulerNotRunningError, ControlError) as error:
                self._on_lost(error)
                return
        if not self._shown:
            return
        if state.status is not None and not state.status.offline_edit:
            self._screen.query_one(Banner).hide()  # the file is back to what runs
        self._show_status()
        self._show_runs()
        self._update_jobs(visible, moved_on=True)
        self._changed()

    # --- the panes -----------------------------------------------------------------

    def show_jobs(self) -> None:
        """Every job again (at start, after a reload or a pause): the index takes them all."""
        table = self._screen.query_one(JobsTable)
        table.index.replace(self._state.jobs.values())
        table.forget_rows()
        self._show_table(table)

    def next_sort(self) -> str:
        """Show the jobs in the next order `o` cycles to; its name."""
        self.sort = (self.sort + 1) % len(SORTS)
        table = self._screen.query_one(JobsTable)
        table.index.set_order(SORTS[self.sort])
        self._show_table(table)
        return SORTS[self.sort]

    def reverse_sort(self) -> str:
        """Show the jobs in the same order backwards (or forwards again); its name."""
        table = self._screen.query_one(JobsTable)
        table.index.set_reverse(not table.index.reverse)
        self._show_table(table)
        return table.index.order + (", reversed" if table.index.reverse else "")

    def _make_row(self, status: JobStatus) -> JobRow:
        """A job's row as of now (the table formats only the rows it draws)."""
        return job_row(status, now=self._clock(), tz=self._state.timezone)

    def _show_table(self, table: JobsTable) -> None:
        table.refresh_rows()
        index = table.index
        backwards = " ▼" if index.reverse else ""
        marked = f"{len(table.marked)} marked - " if table.marked else ""
        table.border_subtitle = (  # a space either side: a rule has no corner to pad it
            f" {marked}{table.row_count} of {index.total} - sorted by {index.order}{backwards} "
        )

    def show_marks(self) -> None:
        """The marks changed: say how many there are under the jobs pane."""
        self._show_table(self._screen.query_one(JobsTable))

    def _update_jobs(self, names: set[str], *, moved_on: bool = False) -> None:
        """Take the jobs' new statuses; `moved_on`: the clock did too (every row's times)."""
        statuses = [self._state.jobs[name] for name in names if name in self._state.jobs]
        table = self._screen.query_one(JobsTable)
        changed = table.index.update(statuses)
        if moved_on:
            table.forget_rows()
        elif changed:
            table.forget_rows(changed)
        if changed or moved_on:
            self._show_table(table)

    def _show_runs(self) -> None:
        now, tz = self._clock(), self._state.timezone
        rows = [run_row(status, now=now, tz=tz) for status in self._state.runs]
        running = self._screen.query_one(RunningTable)
        status = self._state.status
        running.show(rows, nodes=status is not None and bool(status.cluster))
        running.set_class(not rows, "-empty")  # an empty pane gives its rows to the jobs

    def _show_status(self) -> None:
        status, now = self._state.status, self._clock()
        if status is None:
            return
        tz = self._state.timezone
        word = {SchedulerState.RUNNING: "running", SchedulerState.STARTING: "starting"}.get(
            status.state, "stopping"
        )
        if status.all_paused:
            word = "PAUSED"
        clock = now.astimezone(tz).strftime("%H:%M:%S")
        first = ["read-only"] if self._read_only else []  # first, so that it is never cut off
        last = [
            f"LAG {format_elapsed(timedelta(seconds=status.loop_lag))}" if status.loop_lag else "",
            status.cluster,
        ]
        run, jobs = f"run {status.running}", f"jobs {status.jobs}"
        failed = f"failed/24h {self._state.failures_within(now)}"
        width = self._screen.size.width
        for middle in (  # the least needed go first, until the facts fit
            [f"{tz.key} {clock}", jobs, run, failed],
            [clock, jobs, run, failed],
            [clock, run],
            [run],
        ):
            facts = "".join(f"  {text}" for text in (*first, word, *middle, *last) if text)
            if len(facts) + 1 + PATH_ROOM <= width:
                break
        room = width - len(facts) - 1
        path = fit_path(status.config_path, room) if room >= PATH_ROOM else ""
        self._screen.query_one(StatusLine).text = " " + path + facts

    def filter(self, text: str) -> None:
        """Show only the jobs whose name, groups, state or kind contain `text`."""
        table = self._screen.query_one(JobsTable)
        table.filter(text)
        self._show_table(table)


PATH_ROOM = 8
"""The fewest characters of the configuration's path the status line shows (else none)."""


def fit_path(path: Path, room: int) -> str:
    """`path` as short as it reads well: relative to here, `~` for home, cut on the left."""
    try:
        text = str(path.relative_to(Path.cwd()))
    except ValueError:
        home = str(Path.home())
        text = "~" + str(path)[len(home) :] if str(path).startswith(home + "/") else str(path)
    return text if len(text) <= room else "…" + text[len(text) - room + 1 :]
