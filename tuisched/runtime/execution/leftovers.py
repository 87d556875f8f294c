"""What a killed scheduler's runs leave behind, found and stopped at the next start."""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Collection
from pathlib import Path

# --- leftovers of a dead scheduler ----------------------------------------------------


def kill_leftovers(run_ids: Collection[str]) -> int:
    """SIGKILL every process still carrying one of `run_ids` in its environment.

    For runs a killed scheduler left behind: their processes, in their own
    session, outlive it. Each command run has `TUISCHED_RUN_ID` in its
    environment, inherited by everything it starts, so this finds them all,
    with no race on when the pid was recorded and no risk from a recycled
    pid. Processes of other users are not readable and so never touched.
    Returns how many processes were killed.
    """
    wanted = {f"TUISCHED_RUN_ID={run_id}".encode() for run_id in run_ids}
    killed = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environment = set((entry / "environ").read_bytes().split(b"\0"))
        except OSError:
            continue
        if wanted & environment:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(int(entry.name), signal.SIGKILL)
                killed += 1
    return killed
