"""The nodes pane (`4`): the cluster's nodes as its database knows them, each second."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import DataTable, Static

from tuisched.domain.errors import TuischedError
from tuisched.domain.schedule.duration import format_elapsed
from tuisched.domain.text import plain_text
from tuisched.domain.views import NodeView
from tuisched.frontends.tui.screens.present import present

REFRESH_SECONDS = 1.0
COLUMNS = ("Node", "Name", "PID", "Heartbeat", "State", "Runs", "Config", "Drifted jobs")


class NodesScreen(ModalScreen[None]):
    """Every node: heartbeat age, state, runs, configuration hash, drifted jobs."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "Close"),
        Binding("4", "close", "Close", show=False),
        Binding("q", "close", "Close", show=False),
    ]

    def __init__(self, nodes: Callable[[], Awaitable[tuple[NodeView, ...]]]) -> None:
        super().__init__()
        self._read_nodes = nodes

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog", id="nodes"):
            yield Static(Text("Nodes of the cluster   esc: close"), classes="question")
            yield DataTable(id="node-table", cursor_type="row", zebra_stripes=True)
            yield Static("", id="node-note")

    def on_mount(self) -> None:
        if (table := present(self, "DataTable", DataTable)) is None:
            return
        table.add_columns(*COLUMNS)
        self.run_worker(self._refresh(), exclusive=True)
        self.set_interval(REFRESH_SECONDS, lambda: self.run_worker(self._refresh(), exclusive=True))

    async def _refresh(self) -> None:
        try:
            nodes = await self._read_nodes()
        except TuischedError as error:
            if (note := present(self, "#node-note", Static)) is not None:
                note.update(Text(f"the cluster's database does not answer: {error}"))
            return
        note = present(self, "#node-note", Static)
        table = present(self, "DataTable", DataTable)
        if note is None or table is None:
            return
        table.clear()
        for node in nodes:
            table.add_row(*_cells(node), key=node.node_id)
        note.update(Text("" if nodes else "one node: settings.cluster is not set"))

    def action_close(self) -> None:
        self.dismiss(None)


def _cells(node: NodeView) -> tuple[Text, ...]:
    state = node.state.upper() if node.state == "dead" else node.state
    style = "bold red" if node.state == "dead" else ""
    heartbeat = f"{format_elapsed(timedelta(seconds=node.heartbeat_age))} ago"
    return (
        Text(plain_text(node.node_id)), Text(plain_text(node.name)), Text(str(node.pid)),
        Text(heartbeat), Text(state, style=style),
        Text(f"{node.running}/{node.capacity}"), Text(node.config_hash[:8]),
        Text(plain_text(", ".join(node.drifted)) or "-"),
    )  # fmt: skip
