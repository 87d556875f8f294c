"""`tuisched history`: runs from the history, as a table or JSON."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import TextIO
from zoneinfo import ZoneInfo

from tuisched.domain.runs import RunRecord
from tuisched.domain.schedule.duration import format_elapsed
from tuisched.domain.text import columns, plain_text


def _iso(moment: datetime | None, tz: ZoneInfo) -> str | None:
    return moment.astimezone(tz).isoformat() if moment is not None else None


def run_as_json(run: RunRecord, tz: ZoneInfo) -> dict[str, object]:
    """A run as `tuisched history --json` prints it (SPEC R20)."""
    return {
        "run_id": run.run_id,
        "job": run.job,
        "slot": _iso(run.slot, tz),
        "trigger": run.trigger.value,
        "state": run.state.value,
        "result": run.result.value if run.result else None,
        "status": run.status,
        "exit_code": run.exit_code,
        "queued_at": _iso(run.queued_at, tz),
        "started_at": _iso(run.started_at, tz),
        "ended_at": _iso(run.ended_at, tz),
        "duration": run.duration.total_seconds() if run.duration else None,
        "reason": run.reason,
        "node": run.node,
        "fence": run.fence,
        "attempt": run.attempt,
    }


def print_runs(runs: Sequence[RunRecord], tz: ZoneInfo, *, as_json: bool, out: TextIO) -> None:
    """Print `runs` (newest first) as `tuisched history` does: a table, or JSON."""
    if as_json:
        json.dump([run_as_json(run, tz) for run in runs], out, indent=2)
        out.write("\n")
        return
    rows = [["RUN ID", "JOB", "SLOT", "TRIGGER", "STATE", "RESULT", "TOOK", "STATUS"]]
    rows += [_row(run, tz) for run in runs]
    out.write("".join(line + "\n" for line in columns(rows)))


def _row(run: RunRecord, tz: ZoneInfo) -> list[str]:
    slot = run.slot.astimezone(tz).strftime("%Y-%m-%d %H:%M:%S") if run.slot else "-"
    took = format_elapsed(run.duration) if run.duration is not None else "-"
    status = plain_text(run.status or run.reason).replace("\n", " ")[:80]
    result = run.result.value if run.result else "-"
    return [run.run_id, run.job, slot, run.trigger.value, run.state.value, result, took, status]
