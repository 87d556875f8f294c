"""`tuisched nodes`: the cluster's nodes, as a table or JSON."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import timedelta
from typing import TextIO

from tuisched.domain.schedule.duration import format_elapsed
from tuisched.domain.text import columns
from tuisched.domain.views import NodeView


def node_as_json(node: NodeView) -> dict[str, object]:
    """A node as `tuisched nodes --json` prints it."""
    return {
        "node_id": node.node_id,
        "name": node.name,
        "host": node.host,
        "pid": node.pid,
        "started": node.started_at.isoformat(),
        "heartbeat_age": round(node.heartbeat_age, 3),
        "state": node.state,
        "running": node.running,
        "capacity": node.capacity,
        "config_hash": node.config_hash,
        "drifted_jobs": list(node.drifted),
    }


def print_nodes(nodes: Sequence[NodeView], *, as_json: bool, out: TextIO) -> None:
    """Print `nodes` (newest first) as a table, or JSON."""
    if as_json:
        json.dump([node_as_json(node) for node in nodes], out, indent=2)
        out.write("\n")
        return
    rows = [["NODE", "NAME", "PID", "STARTED", "HEARTBEAT", "STATE", "RUNS", "CONFIG", "DRIFT"]]
    rows += [_row(node) for node in nodes]
    out.write("".join(line + "\n" for line in columns(rows)))


def _row(node: NodeView) -> list[str]:
    heartbeat = f"{format_elapsed(timedelta(seconds=node.heartbeat_age))} ago"
    return [
        node.node_id, node.name, str(node.pid), node.started_at.strftime("%Y-%m-%d %H:%M:%S"),
        heartbeat, node.state, f"{node.running}/{node.capacity}",
        node.config_hash[:8], ", ".join(node.drifted) or "-",
    ]  # fmt: skip
