"""What a killed scheduler's runs leave behind, found and stopped at the next start."""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Collection
from pathlib import Path

from tuisched.domain.errors import StateError
from tuisched.runtime.execution.descendants import Proc, signal_procs
from tuisched.runtime.privatefiles import open_private

# --- leftovers of a dead scheduler ----------------------------------------------------


def kill_leftovers(run_ids: Collection[str]) -> int:
    """SIGKILL every process still carrying one of `run_ids` in its environment.

    For runs a killed scheduler left behind: their processes, in their own
    session, outlive it. Each command run has `TUISCHED_RUN_ID` in its
    environment, inherited by everything it starts, so this finds them all,
    with no race on when the pid was recorded and no risk from a recycled
    pid. A python run's process (a fork of a fork server) shows it too: it
    writes its run id into the environment block /proc reads. Processes of
    other users are not readable and so never touched. Returns how many
    processes were killed.
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


def kill_forked(journals: Path) -> tuple[int, set[str]]:
    """SIGKILL what the journals of a killed scheduler's fork servers name: the servers
    and the process group of each python run (its process leads it; pid and start time
    both matching), then remove the journals. How many were killed, and the runs named
    (whose other processes `kill_leftovers` finds by their environment)."""
    procs: list[Proc] = []
    run_ids: set[str] = set()
    try:
        journal_files = [path for path in journals.iterdir() if path.suffix in (".runs", ".new")]
    except OSError:
        return 0, run_ids
    for journal in journal_files:
        for line in _read(journal).splitlines():
            name, _, rest = line.partition(" ")
            pid, _, start = rest.partition(" ")
            if not (pid.isascii() and pid.isdigit() and start.isascii() and start.isdigit()):
                continue  # the line a kill cut short
            procs.append(Proc(int(pid), int(start)))
            if name != "server":
                run_ids.add(name)
    killed = signal_procs(procs, signal.SIGKILL, groups=True)
    for journal in journal_files:
        with contextlib.suppress(OSError):
            journal.unlink()
    return killed, run_ids


def _read(journal: Path) -> str:
    """A journal's text ("" if it cannot be read, or is a link or not a file)."""
    try:
        fd = open_private(journal, os.O_RDONLY)
    except StateError:
        return ""
    with os.fdopen(fd, "rb") as file:
        return file.read(1 << 24).decode("ascii", "replace")
