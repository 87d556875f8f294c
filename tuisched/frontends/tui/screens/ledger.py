"""The downtime ledger (`m`, SPEC R25): the slots each job missed, and the operator's choice.

After the scheduler was down (or a job paused), each job that missed slots
is listed with how many, the first and the last, and what its `misfire`
policy did. On the selected job, `l` runs the latest missed slot once, `a`
runs them all in slot order, `s` skips them; `L`, `A` and `S` do the same
for every job still waiting, after one confirmation. A choice is made once:
a job decided here or in another console shows its decision.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, ClassVar
from zoneinfo import ZoneInfo

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import DataTable, Static

from tuisched.domain.errors import TuischedError
from tuisched.domain.text import counted, plain_text
from tuisched.domain.views import MissedChoice, MissedSlots
from tuisched.frontends.tui.screens.present import present
from tuisched.runtime.control import SchedulerControl

if TYPE_CHECKING:
    from tuisched.frontends.tui.host import ConsoleHost

REFRESH_SECONDS = 2.0
"""How often the ledger is read again (another console may decide meanwhile)."""
COLUMNS = ("Job", "Missed", "First", "Last", "Decision")
CHOICES = ("choose_job", "choose_all")
"""Actions hidden by `--read-only`."""
_WORDS = {
    MissedChoice.LATEST: "run the latest missed slot once",
    MissedChoice.ALL: "run every missed slot in slot order",
    MissedChoice.SKIP: "skip the missed slots",
}


async def missed_banner(control: SchedulerControl) -> str | None:
    """The banner's words when jobs have missed slots waiting for a decision, else None."""
    try:
        entries = await control.missed()
    except TuischedError:
        return None  # not served here (cluster mode, an older scheduler): no banner
    pending = [entry for entry in entries if entry.pending]
    if not pending:
        return None
    slots = sum(entry.count for entry in pending)
    jobs, missed = counted(len(pending), "job"), counted(slots, "slot")
    return f"{jobs} missed {missed} while the scheduler was down or paused: m to decide"


class LedgerScreen(ModalScreen[None]):
    """Each job's missed slots; `l`/`a`/`s` decide the selected job, `L`/`A`/`S` all."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "Close"),
        Binding("m,q", "close", "Close", show=False),
        Binding("j", "down", "Down", show=False),
        Binding("k", "up", "Up", show=False),
        Binding("l", "choose_job('latest')", "Latest"),
        Binding("a", "choose_job('all')", "All"),
        Binding("s", "choose_job('skip')", "Skip"),
        Binding("L", "choose_all('latest')", "Latest, every job", show=False),
        Binding("A", "choose_all('all')", "All, every job", show=False),
        Binding("S", "choose_all('skip')", "Skip, every job", show=False),
    ]

    def __init__(self, host: ConsoleHost) -> None:
        super().__init__()
        self.host = host
        self.entries: tuple[MissedSlots, ...] = ()
        """What the ledger said when last read."""

    def compose(self) -> ComposeResult:
        keys = "" if self.host.read_only else "l latest  a all  s skip (L A S: every job)  "
        with Vertical(classes="dialog", id="ledger"):
            yield Static(Text(f"Missed slots   {keys}esc: close"), classes="question")
            yield DataTable(id="ledger-table", cursor_type="row", zebra_stripes=True)
            yield Static("", id="ledger-note")

    def on_mount(self) -> None:
        if (table := present(self, "DataTable", DataTable)) is None:
            return
        table.add_columns(*COLUMNS)
        self.reread()
        self.set_interval(REFRESH_SECONDS, self.reread)
        table.focus()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """`--read-only` shows the ledger without its choices."""
        return not (self.host.read_only and action in CHOICES)

    def reread(self) -> None:
        """Read the ledger again (in the background) and show it."""
        self.run_worker(self._refresh(), group="ledger", exclusive=True)

    async def _refresh(self) -> None:
        try:
            entries = await self.host.control.missed()
        except TuischedError as error:
            self._note(str(error))
            return
        if (table := present(self, "DataTable", DataTable)) is None:
            return
        selected = self.selected()
        self.entries = entries
        table.clear()
        for entry in entries:
            table.add_row(*_cells(entry), key=entry.job)
        if selected is not None and selected.job in table.rows:
            table.move_cursor(row=table.get_row_index(selected.job))
        self._describe()

    def selected(self) -> MissedSlots | None:
        """The entry under the cursor."""
        table = self.query_one(DataTable)
        if not table.row_count or not table.is_valid_coordinate(table.cursor_coordinate):
            return None
        key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
        return next((entry for entry in self.entries if entry.job == key), None)

    @on(DataTable.RowHighlighted, "#ledger-table")
    def _describe(self) -> None:
        entry = self.selected()
        if not self.entries:
            self._note("no job missed a slot since the scheduler was last down or paused")
        elif entry is not None:
            decision = entry.decided or "waits for your choice"
            self._note(f"{entry.job}: {entry.policy}\n{decision}")

    def _note(self, text: str) -> None:
        if (note := present(self, "#ledger-note", Static)) is not None:
            note.update(Text(plain_text(text)))

    # --- the choices -----------------------------------------------------------------

    def action_choose_job(self, choice: str) -> None:
        """Decide the selected job's missed slots (asked first)."""
        entry = self.selected()
        if entry is None:
            return
        if not entry.pending:
            self.notify(f"{entry.job}: decided already ({entry.decided})", markup=False)
            return
        what = MissedChoice(choice)
        question = f"{entry.job}: {_WORDS[what]} ({entry.count} missed)?"
        self._decide(question, entry.job, what)

    def action_choose_all(self, choice: str) -> None:
        """Decide every waiting job's missed slots at once (one confirmation)."""
        pending = [entry for entry in self.entries if entry.pending]
        if not pending:
            self.notify("no missed slots wait for a decision", markup=False)
            return
        what = MissedChoice(choice)
        self._decide(f"Every job ({len(pending)}): {_WORDS[what]}?", None, what)

    def _decide(self, question: str, job: str | None, choice: MissedChoice) -> None:
        async def decide() -> None:
            try:
                decided = await self.host.control.decide_missed(job, choice)
                self.notify(_summary(decided), markup=False)
            finally:
                self.reread()

        self.host.operator.confirm(question, decide)

    def action_down(self) -> None:
        """`j`: the cursor a row down, as on the jobs pane (vi keys, besides the arrows)."""
        self.query_one(DataTable).action_cursor_down()

    def action_up(self) -> None:
        """`k`: the cursor a row up."""
        self.query_one(DataTable).action_cursor_up()

    def action_close(self) -> None:
        self.dismiss(None)


def _summary(decided: Sequence[MissedSlots]) -> str:
    if len(decided) == 1:
        return f"{decided[0].job}: {decided[0].decided}"
    return f"{counted(len(decided), 'job')} decided"


def _cells(entry: MissedSlots) -> tuple[Text, ...]:
    zone = ZoneInfo(entry.timezone)
    seconds = any(slot.second for slot in entry.slots)  # a job every few seconds
    shown = [_short(slot.astimezone(zone), seconds=seconds) for slot in entry.slots]
    first, last = (shown[0], shown[-1]) if shown else ("-", "-")
    if entry.earlier:
        first = f"<{first}"
    state = Text("pending", style="bold") if entry.pending else Text(plain_text(entry.decided))
    return (Text(plain_text(entry.job)), Text(str(entry.count)), Text(first), Text(last), state)


def _short(slot: datetime, *, seconds: bool) -> str:
    return f"{slot:%m-%d %H:%M:%S}" if seconds else f"{slot:%m-%d %H:%M}"
