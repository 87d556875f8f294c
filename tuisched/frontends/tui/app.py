"""The console: a Textual app that shows a scheduler and steers it from the keyboard.

It sees the scheduler only through the control seam (`SchedulerControl`):
the same console hosts the scheduler (`tuisched`: a `LocalScheduler` it
starts, the one `tuisched --no-ui` runs, unchanged) or attaches to one in
another process (`tuisched attach`: a `RemoteControl`). Leaving it (`q`)
offers to detach, to stop the scheduler, or to stay; a hosting console that
detaches, or loses its terminal, leaves its scheduler running headless (see
`hosting`).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
from collections.abc import Callable
from datetime import UTC, datetime
from functools import partial
from typing import ClassVar

from textual import events
from textual.app import App
from textual.binding import Binding, BindingType
from textual.command import Provider
from textual.content import Content
from textual.driver import Driver
from textual.markup import MarkupError
from textual.notifications import Notification, Notify, SeverityLevel

from tuisched.domain.errors import (
    ControlError,
    SchedulerNotRunningError,
    TuischedError,
)
from tuisched.frontends.serving import start_failure_code
from tuisched.frontends.tui.commands import JobCommands
from tuisched.frontends.tui.notices import TIMEOUTS, NoticeLog
from tuisched.frontends.tui.operator import Operator
from tuisched.frontends.tui.screens.detail import JobDetailScreen
from tuisched.frontends.tui.screens.dialogs import LeaveScreen, QuitScreen
from tuisched.frontends.tui.screens.diff import DiffScreen
from tuisched.frontends.tui.screens.drain import DrainScreen
from tuisched.frontends.tui.screens.form import JobFormScreen
from tuisched.frontends.tui.screens.groups import GroupPickerScreen
from tuisched.frontends.tui.screens.help import HelpScreen, bindings_of, own_bindings
from tuisched.frontends.tui.screens.main import MainScreen
from tuisched.frontends.tui.screens.messages import MessagesScreen
from tuisched.frontends.tui.screens.output import OutputScreen
from tuisched.frontends.tui.screens.simulate import SimulateScreen
from tuisched.frontends.tui.state import ConsoleState
from tuisched.frontends.tui.terminal import TerminalDriver
from tuisched.frontends.tui.theme import TUISCHED_16, TUISCHED_THEME, theme_for
from tuisched.frontends.tui.typeahead import KeyQueue
from tuisched.frontends.tui.widgets.audit import AuditPane
from tuisched.frontends.tui.widgets.jobs import JobsTable
from tuisched.frontends.tui.widgets.running import RunningTable
from tuisched.runtime.control import LocalScheduler, SchedulerControl

DRAIN_FOREVER = 24 * 3600.0
"""The grace of "wait for the runs in progress": as long as they take."""
FORGET_LIMIT = 3.0
"""The longest keys typed after a delete wait for its row to leave the panes (seconds)."""
FORGET_POLL = 0.05
"""How often the panes look again for the events of a delete meanwhile (seconds)."""
AGAIN_HOSTING = "stop the scheduler once the runs in progress finish (none is lost)"
AGAIN_ATTACHED = "detach (the scheduler runs on)"
"""What a second `ctrl+c` does, as the leave question says it."""


class TuischedApp(App[int]):
    """The operator console."""

    CSS_PATH = "tuisched.tcss"
    TITLE = "tuisched"
    COMMANDS: ClassVar[set[type[Provider] | Callable[[], type[Provider]]]] = App.COMMANDS | {
        JobCommands
    }
    """Textual's system commands, and run/pause/show for each job and group."""
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit_console", "Quit"),
        Binding(
            "ctrl+c", "interrupt", "Quit; again while it asks: leave, losing no run", show=False
        ),
        Binding("question_mark", "help", "Help"),
    ]
    """`ctrl+c` asks as `q` does (Textual's own only says how to quit); again, while the
    question shows, it leaves without asking (see `action_interrupt`)."""

    def __init__(
        self,
        control: SchedulerControl,
        *,
        scheduler: LocalScheduler | None = None,
        read_only: bool = False,
        clock: Callable[[], datetime] | None = None,
        notice: str | None = None,
    ) -> None:
        """Show the scheduler behind `control`; start and stop `scheduler` when hosting it.

        `notice` is shown once the panes are up (why this console attached)."""
        super().__init__()
        self.register_theme(TUISCHED_THEME)
        self.register_theme(TUISCHED_16)
        self.theme = theme_for(self.console.color_system).name
        self.control = control
        self.scheduler = scheduler
        self.read_only = read_only
        self.clock = clock or (lambda: datetime.now(UTC))
        self.state = ConsoleState()
        self.notices = NoticeLog()
        """Every notice given, for the messages view (`M`); the muted jobs."""
        self._on_line: dict[tuple[str, str], Notification] = {}
        """The notice line's notices, by severity and text (a repeat replaces its own)."""
        self.started = False
        """True once the scheduler runs (the panes may still be reading it)."""
        self.operator = Operator(self, self)
        self.ready = False
        """True once the panes show the running scheduler (not its file's preview)."""
        self.detached: str | None = None
        """Why the console left a scheduler running (a hosting console then goes headless)."""
        self._notice = notice
        self._stopping = False
        self._lost = False
        self.on_terminal_lost: Callable[[], None] | None = None
        """What a hosting console does when its terminal goes (else the console just ends)."""
        self.keys = KeyQueue(self, partial(App.on_event, self))
        """Keys typed ahead, each delivered once the one before it has been handled."""

    async def on_event(self, event: events.Event) -> None:
        """Typed keys and pastes go through the key queue; everything else as Textual does."""
        if self.keys.takes(event):
            await self.keys.receive(event)
        else:
            await super().on_event(event)

    def get_driver_class(self) -> type[Driver]:
        """Textual's terminal driver, made to survive the terminal going away."""
        return TerminalDriver

    def terminal_lost(self) -> None:
        """The terminal has gone (told by the driver, or SIGHUP by the host)."""
        if self.on_terminal_lost is not None:
            self.on_terminal_lost()
        else:
            self.exit(0, return_code=0)

    @property
    def hosting(self) -> bool:
        """Whether this console runs the scheduler it shows (not attached to another's)."""
        return self.scheduler is not None

    def on_mount(self) -> None:
        self.run_worker(self._open(), group="open", exclusive=True)

    async def _open(self) -> None:
        """Start the hosted scheduler (the panes showing its file's jobs meanwhile), then
        show the scheduler and follow it."""
        if self.scheduler is not None and not await self._start_hosted(self.scheduler):
            return
        self.started = True
        try:
            await self.main.start()
        except (SchedulerNotRunningError, ControlError) as error:
            self.scheduler_lost(error)
            return
        self.ready = True
        # What is loaded now (the configuration, the scheduler's jobs, the panes' index)
        # lives as long as the console: kept out of the collector's rounds, a full round
        # no longer rescans it (0.4 s with 100,000 jobs, a stall under a key stroke).
        gc.freeze()
        if self._notice:
            self.notify(self._notice, markup=False, timeout=8)

    async def _start_hosted(self, scheduler: LocalScheduler) -> bool:
        """Start `scheduler` on its lane; meanwhile the panes show the jobs of its file, so
        the first frame does not wait for the engine to load every job. False (and the
        console exits with headless mode's code) when it cannot start.

        The start goes on if the console closes meanwhile: detached, the scheduler runs
        on once started; otherwise closing the console stops it (`on_unmount`)."""
        starting = asyncio.ensure_future(scheduler.start())
        try:
            await self.main.preview()
            await starting
        except TuischedError as error:  # the same exit code as headless
            code = start_failure_code(error)
            self.exit(code, return_code=code, message=str(error))
            return False
        return True

    async def forgotten(self, job: str) -> None:
        """Once the panes no longer list `job` (its delete has been written), or after
        FORGET_LIMIT: the panes take in the scheduler's events now, not at their next
        refresh, so keys typed after a delete act on the row that took its place."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(FORGET_LIMIT):
                while job in self.state.jobs and self.is_running:
                    await self.main.panes.refresh()
                    if job in self.state.jobs:
                        await asyncio.sleep(FORGET_POLL)  # its event is on its way

    def scheduler_lost(self, error: TuischedError) -> None:
        """The scheduler stopped (asked elsewhere) or cannot be reached: leave, saying so."""
        if self._lost:
            return
        self._lost = True
        self.started = False
        stopped = isinstance(error, SchedulerNotRunningError)
        if self.hosting or not stopped:
            message = "the scheduler stopped" if stopped else f"lost the scheduler: {error}"
        else:  # attached: it stopped, or was killed; either way nothing answers now
            message = f"the scheduler stopped: {error}"
        self.exit(0 if stopped else 1, return_code=0 if stopped else 1, message=message)

    def get_default_screen(self) -> MainScreen:
        """The main screen is the bottom of the screen stack."""
        return MainScreen(self)

    @property
    def main(self) -> MainScreen:
        """The main screen."""
        screen = self.screen_stack[0]
        assert isinstance(screen, MainScreen)  # noqa: S101  (see get_default_screen)
        return screen

    # --- notices ------------------------------------------------------------------------

    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: SeverityLevel = "information",
        timeout: float | None = None,
        markup: bool = True,
        job: str | None = None,
    ) -> None:
        """Log the notice (the messages view, `M`) and show it on the notice line, the
        bottom line: over the legend of keys, never over a pane. The newest shows; an
        older one still due shows again when it goes. The same notice again replaces
        its own with a count (`backup failed: exit 1 (x5)`). A notice about a muted
        `job` is only logged. Errors stay longest (`TIMEOUTS`). On the console's loop."""
        text = message
        if markup:
            with contextlib.suppress(MarkupError):  # shown as it came, not read as markup
                text = Content.from_markup(message).plain
        entry = self.notices.add(text, severity, self.clock(), job)
        if self.notices.silenced(job):
            return
        key = (severity, text)
        self._on_line = {k: n for k, n in self._on_line.items() if not n.has_expired}
        previous = self._on_line.pop(key, None)
        if previous is not None and previous in self._notifications:
            self._unnotify(previous, refresh=False)  # its toast goes with the next refresh
        seconds = max(timeout or 0.0, TIMEOUTS[severity])
        notification = Notification(entry.shown, title, severity, seconds, markup=False)
        self._on_line[key] = notification
        self.post_message(Notify(notification))

    def action_messages(self) -> None:
        """`M`: every notice given, newest first; mute or unmute a job's."""
        if not isinstance(self.screen, MessagesScreen):
            self.push_screen(MessagesScreen(self.notices, tz=self.state.timezone))

    # --- screens: detail, form, help -----------------------------------------------------

    def show_job(self, job: str) -> None:
        """Open the detail view of `job` (its row selected on the jobs pane)."""
        if job not in self.state.jobs:
            return
        table = self.main.query_one(JobsTable)
        if job in table.rows:  # the keys of the console then act on this job too
            table.move_cursor(row=table.get_row_index(job))
        self.push_screen(JobDetailScreen(self, job))

    async def open_form(self, job: str | None) -> None:
        """The job form: add a job (`job` None) or edit one; it confirms and saves."""
        status = self.state.status
        if status is None:
            return
        file = status.config_path.name
        definition = None
        if job is not None:
            definition = await self.control.job_definition(job)
            if definition is None:
                self.notify(f"{job} is not in {file}", severity="warning", markup=False)
                return

        def closed(done: str | None) -> None:
            if done is not None:
                self.notify(done, markup=False)

        self.push_screen(JobFormScreen(self.control, job, definition, file=file), closed)

    def action_help(self) -> None:
        palette = Binding(self.COMMAND_PALETTE_BINDING, "command_palette", "Command palette")
        keys = [*bindings_of(type(self)), *own_bindings(MainScreen), palette]
        # A key the app and the main screen both bind (q, ?) is listed once, where the app
        # has it; a key with two actions (p: pause or resume) keeps both.
        console = list({(b.key, b.description): b for b in reversed(keys)}.values())[::-1]
        self.push_screen(
            HelpScreen(
                [
                    ("Console (every pane)", console),
                    ("Jobs pane (1)", bindings_of(JobsTable)),
                    ("Running pane (2)", bindings_of(RunningTable)),
                    ("Job detail (enter on a job)", bindings_of(JobDetailScreen)),
                    ("Audit pane (3)", bindings_of(AuditPane)),
                    ("Group picker (v)", bindings_of(GroupPickerScreen)),
                    ("Offline edit (D)", bindings_of(DiffScreen)),
                    ("Output viewer (l)", bindings_of(OutputScreen)),
                    ("Messages (M)", bindings_of(MessagesScreen)),
                ]
            )
        )

    # --- quitting ------------------------------------------------------------------------

    async def action_quit(self) -> None:
        """ctrl+q too asks what to do with runs in progress."""
        await self.action_quit_console()

    async def action_quit_console(self) -> None:
        if (not self.started and not self.hosting) or (self.read_only and not self.hosting):
            self.exit(0)  # a viewer leaves; the scheduler never notices
            return
        if self._stopping:
            self.notify("stopping every run now", markup=False)
            await self.control.hurry()
            return
        detach = (
            "the scheduler keeps running headless, logging to its state directory's tuisched.log"
            if self.hosting
            else "this console closes and the scheduler runs on"
        )
        again = AGAIN_HOSTING if self.hosting else AGAIN_ATTACHED

        def answered(choice: str | None) -> None:
            if choice == "detach":
                self.detach("detached by the operator")
            elif choice == "stop":
                self.run_worker(self._ask_stop(), group="quit", exclusive=True)

        self.push_screen(LeaveScreen(detach, again), answered)

    async def action_interrupt(self) -> None:
        """`ctrl+c`: asks as `q` does; pressed again while the question shows, it leaves
        without losing a run. Hosting, the scheduler stops once the runs in progress
        finish (no new run starts; the drain screen shows them, and a third ctrl+c stops
        them now); attached, the console detaches and the scheduler runs on."""
        if isinstance(self.screen, LeaveScreen | QuitScreen):
            self.run_worker(self._leave_at_once(), group="quit", exclusive=True)
        else:
            await self.action_quit_console()

    async def _leave_at_once(self) -> None:
        stopping = isinstance(self.screen, QuitScreen)  # the operator chose to stop already
        while isinstance(self.screen, LeaveScreen | QuitScreen):
            await self.pop_screen()
        if not self.hosting and not stopping:
            self.detach("detached by a second ctrl+c")
            return
        status = await self.control.status()
        busy = status.running + status.queued + status.waiting
        self._shut_down(grace=DRAIN_FOREVER if busy else None)

    def stop_scheduler(self) -> None:
        """SIGTERM to a hosting console: drain as `--no-ui` does; again, stop the runs now."""
        if self._stopping:
            self.run_worker(self.control.hurry(), group="hurry")
        else:
            self._shut_down(grace=None, reason="SIGTERM")

    def detach(self, why: str) -> None:
        """Close the console and leave the scheduler running."""
        self.detached = why
        self.exit(0, return_code=0)

    async def _ask_stop(self) -> None:
        """Stop the scheduler: at once when idle; with runs in progress, wait or stop them."""
        status = await self.control.status()
        busy = status.running + status.queued + status.waiting
        if not busy:
            self._shut_down(grace=None)
            return

        def answered(choice: str | None) -> None:
            if choice == "wait":
                self._shut_down(grace=DRAIN_FOREVER)
            elif choice == "stop":
                self._shut_down(grace=0.0)
            elif choice == "idle":  # the runs asked about ended while it asked
                self._shut_down(grace=None)

        self.push_screen(QuitScreen(busy, self._busy_now), answered)

    def _busy_now(self) -> int:
        """The runs in progress, queued or waiting, as the panes last heard."""
        status = self.state.status
        return status.running + status.queued + status.waiting if status is not None else 1

    def _shut_down(self, *, grace: float | None, reason: str = "console quit") -> None:
        """Drain in the background: the panes keep showing the runs finishing."""
        self._stopping = True
        if grace:
            self.notify(
                "waiting for the runs in progress; q or ctrl+c again stops them now", markup=False
            )
        runs = [status.run for status in self.state.runs]
        if self.hosting and runs and isinstance(self.screen, MainScreen):
            # While it stops, no job has a next slot: the jobs pane would call them all
            # "finished". The drain screen shows what becomes of each run instead.
            self.push_screen(DrainScreen(self.control, runs, wait=bool(grace)))
        self.run_worker(self._drain(grace, reason), group="quit", exclusive=True)

    async def _drain(self, grace: float | None, reason: str) -> None:
        await self.control.shutdown(grace=grace, reason=reason)
        self.started = False
        # Attached, the scheduler answered when its drain began; it goes on without us.
        message = None if self.hosting else "the scheduler is stopping"
        self.exit(0, return_code=0, message=message)

    async def on_unmount(self) -> None:
        self.keys.close()
        gc.unfreeze()  # what the console held is the collector's again
        # ctrl+c, an error, or a stop asked elsewhere: a hosting console never leaves its
        # scheduler half-running, unless it detached (the host then keeps it running).
        if self.scheduler is not None and self.detached is None:
            self.started = False
            await self.scheduler.stop(reason="console closed")

    # --- seeing ahead (R25) ----------------------------------------------------------------

    def action_simulate(self) -> None:
        """`S`: every run of the next 24 hours, for the jobs the main screen's filter shows."""
        table = self.main.query_one(JobsTable)
        text = table.filter_text
        jobs = tuple(table.index.shown()) if text else ()
        if text and not jobs:
            self.notify(f"no job matches the filter '{text}'", markup=False)
            return
        screen = SimulateScreen(
            self.control, clock=self.clock, tz=self.state.timezone, jobs=jobs, filter_text=text
        )
        self.push_screen(screen)
