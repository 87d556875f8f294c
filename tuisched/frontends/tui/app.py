"""The console: a Textual app that shows a scheduler and steers it from the keyboard.

It sees the scheduler only through the control seam (`SchedulerControl`).
When it hosts the scheduler (`tuisched` without `--no-ui`), it also starts
and stops it (`LocalScheduler`); the scheduler is the one `tuisched --no-ui`
runs, unchanged.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import ClassVar

from textual.app import App
from textual.binding import Binding, BindingType
from textual.command import Provider

from tuisched.domain.errors import TuischedError
from tuisched.domain.views import ConfigEdit
from tuisched.frontends.tui.commands import JobCommands
from tuisched.frontends.tui.operator import Operator
from tuisched.frontends.tui.screens.detail import JobDetailScreen
from tuisched.frontends.tui.screens.dialogs import QuitScreen
from tuisched.frontends.tui.screens.diff import DiffScreen
from tuisched.frontends.tui.screens.form import JobFormScreen
from tuisched.frontends.tui.screens.groups import GroupPickerScreen
from tuisched.frontends.tui.screens.help import HelpScreen, bindings_of
from tuisched.frontends.tui.screens.main import MainScreen
from tuisched.frontends.tui.state import ConsoleState
from tuisched.frontends.tui.theme import TUISCHED_THEME
from tuisched.frontends.tui.widgets.jobs import JobsTable
from tuisched.frontends.tui.widgets.running import RunningTable
from tuisched.runtime.control import (
    AlreadyRunningError,
    LocalScheduler,
    SchedulerControl,
    who,
)

DRAIN_FOREVER = 24 * 3600.0
"""The grace of "wait for the runs in progress": as long as they take."""


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
        Binding("question_mark", "help", "Help"),
    ]

    def __init__(
        self,
        control: SchedulerControl,
        *,
        scheduler: LocalScheduler | None = None,
        read_only: bool = False,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        """Show the scheduler behind `control`; start and stop `scheduler` when hosting it."""
        super().__init__()
        self.register_theme(TUISCHED_THEME)
        self.theme = TUISCHED_THEME.name
        self.control = control
        self.scheduler = scheduler
        self.read_only = read_only
        self.clock = clock or (lambda: datetime.now(UTC))
        self.state = ConsoleState()
        self.operator = Operator(self, self)
        self.started = False
        """True once the scheduler runs and the panes show it."""
        self._stopping = False

    async def on_mount(self) -> None:
        if self.scheduler is not None:
            try:
                await self.scheduler.start()
            except AlreadyRunningError as error:
                self.exit(75, return_code=75, message=str(error))
                return
            except TuischedError as error:
                self.exit(1, return_code=1, message=str(error))
                return
        self.started = True
        await self.main.start()

    def get_default_screen(self) -> MainScreen:
        """The main screen is the bottom of the screen stack."""
        return MainScreen(self)

    @property
    def main(self) -> MainScreen:
        """The main screen."""
        screen = self.screen_stack[0]
        assert isinstance(screen, MainScreen)  # noqa: S101  (see get_default_screen)
        return screen

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
        """The job form: add a job (`job` None) or edit one, then confirm and save."""
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

        def saved(result: tuple[str, dict[str, object]] | None) -> None:
            if result is None:
                return
            name, new = result
            if job is None:
                question, edit, done = f"Add job {name} to {file}?", ConfigEdit.add_job, "added"
            else:
                question, edit, done = (
                    f"Save the changes to {name} in {file}?", ConfigEdit.replace_job, "saved"
                )  # fmt: skip
            self.operator.edit(question, edit(name, new), done=f"{name} {done}")

        self.push_screen(JobFormScreen(self.control, job, definition), saved)

    def action_help(self) -> None:
        palette = Binding(self.COMMAND_PALETTE_BINDING, "command_palette", "Command palette")
        keys = [*bindings_of(type(self)), *Binding.make_bindings(MainScreen.BINDINGS), palette]
        console = list({binding.key: binding for binding in reversed(keys)}.values())[::-1]
        self.push_screen(
            HelpScreen(
                [
                    ("Console (every pane)", console),
                    ("Jobs pane (1)", bindings_of(JobsTable)),
                    ("Running pane (2)", bindings_of(RunningTable)),
                    ("Job detail (enter on a job)", bindings_of(JobDetailScreen)),
                    ("Group picker (g)", bindings_of(GroupPickerScreen)),
                    ("Offline edit (D)", bindings_of(DiffScreen)),
                ]
            )
        )

    # --- quitting ------------------------------------------------------------------------

    async def action_quit(self) -> None:
        """ctrl+q too asks what to do with runs in progress."""
        await self.action_quit_console()

    async def action_quit_console(self) -> None:
        if not self.started:
            self.exit(0)
            return
        if self._stopping:
            self.notify("stopping every run now", markup=False)
            await self.control.hurry()
            return
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

        self.push_screen(QuitScreen(busy), answered)

    def _shut_down(self, *, grace: float | None) -> None:
        """Drain in the background: the panes keep showing the runs finishing."""
        self._stopping = True
        if grace:
            self.notify("waiting for the runs in progress; q again stops them now", markup=False)
        self.run_worker(self._drain(grace), group="quit", exclusive=True)

    async def _drain(self, grace: float | None) -> None:
        await self.control.shutdown(grace=grace, reason="console quit")
        self.started = False
        self.exit(0)

    async def on_unmount(self) -> None:
        if self.started and self.scheduler is not None:  # ctrl+c or an error: never leave it
            self.started = False
            await self.scheduler.stop(reason="console closed")


def run_console(config_path: Path, *, read_only: bool = False) -> int:
    """Open the console on the configuration at `config_path`; return the exit status."""
    scheduler = LocalScheduler.from_file(config_path)
    app = TuischedApp(scheduler.control(who("console")), scheduler=scheduler, read_only=read_only)
    status = app.run()
    return status if isinstance(status, int) else app.return_code or 0
