"""The console of a cluster node, driven with Pilot against a real PostgreSQL: the
database's state in the status line, the nodes pane (`4`) with a node that dies,
and the other nodes' runs in the running pane; plus the pure rules behind them
(drift, the preferred node, the status words)."""

from __future__ import annotations

import signal
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from textual.widgets import DataTable

from tuisched.frontends.tui.screens.nodes import NodesScreen
from tuisched.frontends.tui.widgets.running import RunningTable
from tuisched.frontends.tui.widgets.status import StatusLine
from tuisched.runtime.cluster.rules import (
    ClusterView,
    DatabaseState,
    cluster_text,
    drifted_jobs,
    preferred_node,
)
from tuisched.runtime.cluster.store import NodeRow

from .console_fixtures import make_app, until
from .pg_fixtures import PASSWORD, PostgresServer
from .test_cluster_nodes import Cluster, _manual

pytestmark = pytest.mark.timeout(90)

ROOMY = "poll: 1s, heartbeat: 1s, lease: 10s, dead_after: 5s"
"""Timing with room for a busy machine: the console, its runtime and a node share two
cores with whatever else runs, and a node stalled past a shrunk `dead_after` would be
declared dead and join again under a new id (a third node row) in the middle of the test."""
T0 = datetime(2026, 5, 7, 9, 0, tzinfo=UTC)


def _row(node_id: str, *, started: int, hashes: dict[str, str], state: str = "alive",
         running: int = 0) -> NodeRow:  # fmt: skip
    return NodeRow(
        node_id=node_id, name=node_id, host="h", pid=1, started_at=T0 + timedelta(seconds=started),
        age=timedelta(0), state=state, capacity=4, running=running, config_hash="c",
        job_hashes=hashes,
    )  # fmt: skip


def test_a_job_drifts_on_the_node_that_defines_it_unlike_most_live_nodes() -> None:
    rows = [
        _row("a", started=0, hashes={"x": "1", "y": "1"}),
        _row("b", started=1, hashes={"x": "1", "y": "2"}),
        _row("c", started=2, hashes={"x": "2", "y": "2"}),
        _row("gone", started=3, hashes={"x": "2", "y": "2"}, state="dead"),  # no vote
    ]
    assert drifted_jobs("a", rows) == ("y",)
    assert drifted_jobs("b", rows) == ()
    assert drifted_jobs("c", rows) == ("x",)
    # Two nodes that disagree: the oldest one's definition is the cluster's.
    pair = rows[:2]
    assert (drifted_jobs("a", pair), drifted_jobs("b", pair)) == ((), ("y",))


def test_a_new_run_prefers_a_live_node_chosen_by_its_turn_or_a_stable_hash() -> None:
    busy = _row("busy", started=0, hashes={}, running=4)  # all of its 4 workers
    idle = _row("idle", started=1, hashes={}, running=0)
    dead = _row("dead", started=2, hashes={}, state="dead")
    assert preferred_node("j", T0, [dead]) is None
    assert {preferred_node(f"j{i}", T0, [busy, idle, dead]) for i in range(20)} == {
        "busy",
        "idle",
    }  # a busy node is preferred too: it leaves what it cannot take after steal_after
    even = [_row(f"n{i}", started=i, hashes={}) for i in range(3)]
    picks = {preferred_node(f"j{i}", T0, even) for i in range(30)}
    assert picks == {"n0", "n1", "n2"}  # spread by the hash
    assert preferred_node("j7", T0, even) == preferred_node("j7", T0, list(reversed(even)))
    assert preferred_node("j", T0, [dead]) is None
    # With each job's place among the jobs, one slot's jobs are dealt out evenly.
    dealt = Counter(preferred_node(f"j{i}", T0, even, index=i) for i in range(150))
    assert dealt == {"n0": 50, "n1": 50, "n2": 50}


def test_the_status_words_say_the_database_s_state_and_since_when() -> None:
    view = ClusterView(database="postgresql://db/x", state=DatabaseState.CONNECTED, since=T0,
                       node_id="n", node_state="alive", trouble=None, drifted=())  # fmt: skip
    assert cluster_text(view) == "db connected"
    down = ClusterView(
        database="postgresql://db/x", state=DatabaseState.RECONNECTING, since=T0,
        node_id="n", node_state="fenced", trouble="x", drifted=(),
    )  # fmt: skip
    assert cluster_text(down) == "db reconnecting since 09:00:00 fenced"


@pytest.fixture
def cluster(postgres: PostgresServer, tmp_path: Path) -> Cluster:
    return Cluster(postgres, tmp_path)


async def test_the_console_shows_the_database_the_nodes_and_a_node_that_dies(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    jobs = _manual("long", "sleep 30") + _manual("here", "sleep 30")
    try:
        other = cluster.node(jobs, name="other", timing=ROOMY)
        monkeypatch.setenv("TEST_PG_PASSWORD", PASSWORD)
        folder = cluster.base / "console"
        folder.mkdir()
        path = folder / "tuisched.yaml"
        path.write_text(
            f"settings:\n  timezone: UTC\n  state_dir: {folder / 'state'}\n"
            f"  shutdown_grace: 2s\n  cluster: {{database: '{cluster.url}', "
            f"password_env: TEST_PG_PASSWORD, name: console, {ROOMY}}}\njobs:\n{jobs}",
            encoding="utf-8",
        )
        app, runtime = make_app(path)
        async with app.run_test(size=(120, 30)) as pilot:
            status = app.query_one(StatusLine)
            await until(pilot, lambda: "db connected" in status.text, within=20)
            # Narrow (80x24 with a long path or zone, or narrower) the least needed facts
            # give way, never the database's state.
            for width in (80, 60):
                await pilot.resize_terminal(width, 24)
                await until(pilot, lambda: len(status.text) <= width)  # noqa: B023
                assert status.text.rstrip().endswith("db connected"), status.text
            await pilot.resize_terminal(120, 30)
            await until(pilot, lambda: cluster.alive_count() >= 2, within=20)
            # A run on the other node shows in the running pane, with its node.
            assert other.cli("trigger", "long").returncode == 0
            table = app.query_one(RunningTable)
            await until(pilot, lambda: table.row_count == 1, within=10)
            link = runtime.cluster
            assert link is not None
            # Shown from the moment it is asked for; its node once the other node claims it.
            # By its name, not its node id (host:pid:random).
            await until(pilot, lambda: [r.node for r in link.elsewhere] == ["other"], within=10)
            # This node's own runs by its name too.
            runtime.actions.run_now("here")

            def nodes_shown() -> list[str]:
                return sorted(str(table.get_cell(key, "node")) for key in table.rows)

            await until(pilot, lambda: nodes_shown() == ["console", "other"], within=10)
            await pilot.press("4")
            await until(pilot, lambda: isinstance(app.screen, NodesScreen))
            nodes = app.screen.query_one(DataTable)
            await until(pilot, lambda: nodes.row_count == 2, within=15)
            other.stop(signal.SIGKILL)
            dead_key = next(key for key in nodes.rows if key.value and
                            key.value.split(":")[1] == str(other.pid))  # fmt: skip

            def shown_dead() -> bool:
                row = nodes.get_row(dead_key) if dead_key in nodes.rows else []
                return any(str(cell) == "DEAD" for cell in row)

            await until(pilot, shown_dead, within=30)
            await pilot.press("escape")
            await until(pilot, lambda: not isinstance(app.screen, NodesScreen))
    finally:
        cluster.close()
