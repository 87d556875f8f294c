"""The messages view (`M`): every notice the console gave, newest first.

A notice shows for a few seconds on the notice line; here it stays (the
newest `notices.LIMIT` of them), with the time it was last given, its
severity in words, and how many times (`(x5)`). `m` mutes the selected
notice's job (its notices are logged here but stay off the notice line) or
unmutes it; `u` unmutes every job. The muted jobs are listed on the title.
"""

from __future__ import annotations

from typing import ClassVar
from zoneinfo import ZoneInfo

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Static

from tuisched.domain.text import plain_text
from tuisched.frontends.tui.notices import LIMIT, SEVERITY_WORDS, Entry, NoticeLog
from tuisched.frontends.tui.screens.present import present

REFRESH_SECONDS = 1.0
"""How often the view looks for new notices."""
COLUMNS = ("Time", "Severity", "Message")
_STYLES = {"error": "bold red", "warning": "yellow", "information": ""}


class MessagesScreen(Screen[None]):
    """The notice log; `m` mutes or unmutes the selected notice's job."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "Back"),
        Binding("q,M", "close", "Back", show=False),
        Binding("m", "mute", "Mute/unmute its job"),
        Binding("u", "unmute_all", "Unmute every job"),
    ]

    def __init__(self, notices: NoticeLog, *, tz: ZoneInfo) -> None:
        super().__init__()
        self.notices = notices
        self._tz = tz
        self._shown = -1
        """The log's version last shown."""
        self._entries: list[Entry] = []

    def compose(self) -> ComposeResult:
        yield Static(id="messages-title")
        yield DataTable[Text](id="messages-table", cursor_type="row", zebra_stripes=True)
        yield Static(id="messages-full")
        yield Footer()

    def on_mount(self) -> None:
        if (table := present(self, "DataTable", DataTable)) is None:
            return
        table.add_columns(*COLUMNS)
        self._show()
        self.set_interval(REFRESH_SECONDS, self._show)
        table.focus()

    def _show(self) -> None:
        """Show the log again if it changed since (a repeat counts on its own row)."""
        if self.notices.version == self._shown:
            return
        self._shown = self.notices.version
        table = self.query_one(DataTable)
        selected = self.selected()
        self._entries = self.notices.entries()
        table.clear()
        for entry in self._entries:
            table.add_row(*self._cells(entry), key=_key(entry))
        if selected is not None and _key(selected) in table.rows:
            table.move_cursor(row=table.get_row_index(_key(selected)))
        self._title()
        self._describe()

    def _cells(self, entry: Entry) -> tuple[Text, ...]:
        when = entry.last.astimezone(self._tz).strftime("%H:%M:%S")
        severity = Text(SEVERITY_WORDS.get(entry.severity, entry.severity))
        severity.stylize(_STYLES.get(entry.severity, ""))
        return Text(when), severity, Text(plain_text(entry.shown).replace("\n", " "))

    def _title(self) -> None:
        count = len(self._entries)
        kept = f"{count} of the last {LIMIT:,}" if count >= LIMIT else str(count)
        muted = ", ".join(sorted(self.notices.muted)) or "none"
        text = f" Messages, newest first ({kept})   muted: {muted}"
        self.query_one("#messages-title", Static).update(Text(text, no_wrap=True))

    def selected(self) -> Entry | None:
        """The notice under the cursor."""
        table = self.query_one(DataTable)
        row = table.cursor_row
        if not table.row_count or not 0 <= row < len(self._entries):
            return None
        return self._entries[row]

    @on(DataTable.RowHighlighted)
    def _describe(self) -> None:
        """The selected notice in full below the table (a long one is cut in its row)."""
        entry = self.selected()
        full = self.query_one("#messages-full", Static)
        if entry is None:
            full.update(Text("no notice yet"))
            return
        zone = self._tz
        since = entry.first.astimezone(zone).strftime("%H:%M:%S")
        times = f" (x{entry.count} since {since})" if entry.count > 1 else ""
        muted = "  [muted]" if self.notices.silenced(entry.job) else ""
        full.update(Text(plain_text(entry.text) + times + muted))

    def action_mute(self) -> None:
        """`m`: the selected notice's job: its notices stay off the notice line, or back."""
        entry = self.selected()
        if entry is None or entry.job is None:
            said = "this notice is about no one job: m in a job's detail mutes that job"
            self.notify(said, markup=False)
            return
        muted = self.notices.toggle_mute(entry.job)
        said = "muted: logged here only" if muted else "shown again"
        self.notify(f"{entry.job}'s notices {said}", markup=False)
        self._show()

    def action_unmute_all(self) -> None:
        """`u`: every job's notices are shown again."""
        for job in sorted(self.notices.muted):
            self.notices.toggle_mute(job)
        self.notify("no job muted", markup=False)
        self._show()

    def action_close(self) -> None:
        self.dismiss()


def _key(entry: Entry) -> str:
    return f"{entry.severity}\0{entry.text}"
