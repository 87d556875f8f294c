"""What a killed scheduler's runs leave behind, found and stopped at the next start.

Three sources name them: the record of the runs' processes (`processes.json`,
see `descendants.py`), the journals of the fork servers (a python run's
process, written before the job runs), and the environment of every process
(`TUISCHED_RUN_ID` of a run named by either, or of a run the history says was
left running). None of them sees a process started in the last moments before
the kill that also left its environment, so what they name is only where the
search begins: every process under one of them (parent links in /proc), and
every process of a session or process group one of them leads, belongs to the
same runs (`family`). Each is named by pid and start time, checked again just
before it is signalled, so a recycled pid is never taken for it.

They are stopped in two steps: SIGSTOP to each, again and again until a
look at /proc finds nothing new (a process that forks meanwhile cannot slip
out), then SIGKILL to each. This process and its ancestors are never among
them, and no process is taken only for being in this process's session or
group.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Collection, Iterable
from pathlib import Path

from tuisched.domain.errors import StateError
from tuisched.runtime.execution.descendants import Proc, _process_table, _Row, read_record
from tuisched.runtime.privatefiles import open_private

_RUN_ID = b"TUISCHED_RUN_ID="
_RUN_ID_MAX = 64
"""Longer values are not run ids (ours are 12 hex digits)."""
_ROUNDS = 16
"""Looks at /proc while stopping, at most (each finds what forked since the one before)."""


def kill_left_behind(record: Path | None, journals: Path | None, run_ids: Collection[str]) -> int:
    """Kill every process of a dead scheduler's runs: what `record` and the fork servers'
    `journals` name, what carries the id of one of their runs or of `run_ids`, and their
    families; then remove the record and the journals (not before: a start killed
    meanwhile leaves them to the next). How many were killed (blocking: off the loop)."""
    procs: list[Proc] = []
    wanted = set(run_ids)
    if record is not None:
        recorded, recorded_runs = read_record(record)
        procs += recorded
        wanted |= recorded_runs
    if journals is not None:
        journaled, journaled_runs = read_journals(journals)
        procs += journaled
        wanted |= journaled_runs
    procs += carrying(wanted)
    killed = stop_family(procs)
    if record is not None:
        with contextlib.suppress(OSError):
            record.unlink()
    if journals is not None:
        remove_journals(journals)
    return killed


def kill_forked(journals: Path) -> tuple[int, set[str]]:
    """SIGKILL what the journals of a killed scheduler's fork servers name, and their
    families, then remove the journals. How many were killed, and the runs named."""
    procs, run_ids = read_journals(journals)
    killed = stop_family(procs)
    remove_journals(journals)
    return killed, run_ids


# --- where the search begins ----------------------------------------------------------


def carrying(run_ids: Collection[str]) -> list[Proc]:
    """Every process with one of `run_ids` as `TUISCHED_RUN_ID` in its environment.

    Each command run has it, inherited by everything it starts; a python run's
    process (a fork of a fork server) shows it too: it writes its run id into
    the environment block /proc reads. Processes of other users are not
    readable and so never found.
    """
    if not run_ids:
        return []
    wanted = {f"TUISCHED_RUN_ID={run_id}".encode() for run_id in run_ids}
    found: list[Proc] = []
    table = _process_table()
    for pid, row in table.items():
        if pid == os.getpid() or row.zombie:
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as environ:  # noqa: PTH123  (hot loop)
                environment = set(environ.read().split(b"\0"))
        except OSError:
            continue
        if wanted & environment:
            found.append(Proc(pid, row.start))
    return found


def carried_run_ids() -> set[str]:
    """Every `TUISCHED_RUN_ID` in the environment of a process this user can read (but
    this one's): the history says which are this scheduler's runs, and so which of
    those processes a dead scheduler left, however long ago their runs ended."""
    found: set[str] = set()
    me = os.getpid()
    for pid, row in _process_table().items():
        if pid == me or row.zombie:
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as environ:  # noqa: PTH123  (hot loop)
                block = environ.read()
        except OSError:
            continue
        at = block.find(_RUN_ID)
        while at >= 0:
            if at == 0 or block[at - 1] == 0:
                end = block.find(b"\0", at)
                value = block[at + len(_RUN_ID) : end if end >= 0 else len(block)]
                if 0 < len(value) <= _RUN_ID_MAX and value.isalnum() and value.isascii():
                    found.add(value.decode())
            at = block.find(_RUN_ID, at + 1)
    return found


def read_journals(journals: Path) -> tuple[list[Proc], set[str]]:
    """What the journals of a killed scheduler's fork servers name (the servers and each
    python run's process) and the runs named."""
    procs: list[Proc] = []
    run_ids: set[str] = set()
    for journal in _journal_files(journals):
        for line in _read(journal).splitlines():
            name, _, rest = line.partition(" ")
            pid, _, start = rest.partition(" ")
            if not (pid.isascii() and pid.isdigit() and start.isascii() and start.isdigit()):
                continue  # the line a kill cut short
            procs.append(Proc(int(pid), int(start)))
            if name != "server":
                run_ids.add(name)
    return procs, run_ids


def remove_journals(journals: Path) -> None:
    """Remove the fork servers' journals (once what they name is stopped)."""
    for journal in _journal_files(journals):
        with contextlib.suppress(OSError):
            journal.unlink()


def _journal_files(journals: Path) -> list[Path]:
    try:
        return [path for path in journals.iterdir() if path.suffix in (".runs", ".new")]
    except OSError:
        return []


def _read(journal: Path) -> str:
    """A journal's text ("" if it cannot be read, or is a link or not a file)."""
    try:
        fd = open_private(journal, os.O_RDONLY)
    except StateError:
        return ""
    with os.fdopen(fd, "rb") as file:
        return file.read(1 << 24).decode("ascii", "replace")


# --- the family, stopped then killed ------------------------------------------------------


def family(procs: Iterable[Proc], table: dict[int, _Row]) -> set[Proc]:
    """`procs` still alive, everything under them, and every process of a session or group
    one of them leads, over and over until nothing is added; never this process, its
    ancestors, nor a member of its session or group only for being one."""
    spared = _ancestry(table)
    own_session, own_group = os.getsid(0), os.getpgid(0)
    children: dict[int, list[int]] = {}
    led: dict[int, list[int]] = {}
    for pid, row in table.items():
        children.setdefault(row.ppid, []).append(pid)
        if row.session != own_session:
            led.setdefault(row.session, []).append(pid)
        if row.group not in (own_group, row.session):
            led.setdefault(row.group, []).append(pid)
    found: set[Proc] = set()
    todo = [proc.pid for proc in procs if _same(proc, table)]
    while todo:
        pid = todo.pop()
        member = table.get(pid)
        if member is None or member.zombie or pid in spared or Proc(pid, member.start) in found:
            continue
        found.add(Proc(pid, member.start))
        todo += children.get(pid, ())
        todo += led.get(pid, ())  # it leads a session or a group: all its members
    return found


def stop_family(procs: Iterable[Proc]) -> int:
    """SIGSTOP `procs` and their family until no new member shows, then SIGKILL them all.
    How many were killed."""
    seeds = list(procs)
    if not seeds:
        return 0
    tried: set[Proc] = set()
    stopped: set[Proc] = set()
    for _ in range(_ROUNDS):
        table = _process_table()
        new = family([*seeds, *stopped], table) - tried
        if not new:
            break
        tried |= new
        stopped |= {proc for proc in new if _signal(proc, signal.SIGSTOP)}
    table = _process_table()
    return sum(1 for proc in stopped if _same(proc, table) and _signal(proc, signal.SIGKILL))


def _same(proc: Proc, table: dict[int, _Row]) -> bool:
    row = table.get(proc.pid)
    return row is not None and row.start == proc.start and not row.zombie


def _signal(proc: Proc, signum: int) -> bool:
    try:
        os.kill(proc.pid, signum)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def _ancestry(table: dict[int, _Row]) -> set[int]:
    """This process, its ancestors, and pid 1: never a leftover, whatever a record says."""
    spared = {1, os.getpid()}
    pid = os.getppid()
    while pid > 1 and pid not in spared:
        spared.add(pid)
        row = table.get(pid)
        pid = row.ppid if row is not None else 0
    return spared
