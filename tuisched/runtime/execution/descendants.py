"""Every process a run started, even one that left its process group or its session.

A command run gets a process group of its own, and stopping it signals that
group; but a child can leave it (`setsid`, a daemonizing double fork) and,
once its parent exits, it would be adopted by init and never found again.
The scheduler makes itself a child subreaper (`become_subreaper`), so such
orphans are adopted by it instead, and `Descendants` keeps, for each run, the
processes found under it by following parent links in `/proc` (scanned off
the loop, once a second while runs are going). A process is known by its pid
and its start time, so a recycled pid is never mistaken for it.

With that, a stopped run's escaped processes are signalled with it, those that
outlive a run are reported, and all of them are stopped at shutdown. The list
is also written to the state directory (`processes.json`), so that after a
`kill -9` of the scheduler (and of its keeper) the next start stops them, even
those that cleared their environment (`env -i`), where `TUISCHED_RUN_ID`
cannot find them. It names each running run's own process, what was found
under it, and what this process adopted: the orphans of runs whose parent
exited before a scan could see them under their run, above all those a run
left behind when it ended (`ADOPTED`). It is rewritten after each scan that
changes it (a new file renamed over the old, so a reader never sees half of
it), and a run that starts or ends asks for a scan at once (`changed`), so
the record is at most a fraction of a second behind.

What the record cannot hold, a process started in the last moments before the
kill, is still found at the next start as long as its parent lives: the
start stops what the record names together with everything under it, and
every process of the sessions and groups those lead (`leftovers.py`).

psutil was weighed for this and not taken. Its `children(recursive=True)`
reads the whole process table on every call, so one scan per run instead of
one for all runs, and it misses what escaped once the escapee's parent exits
and it is adopted here (we follow known processes as well as the root).
Reading the table through `process_iter` costs about three times this scan
(95 ms against 29 ms at 2,100 processes, measured here). And the record must
name a process across a restart and a clock change: psutil's public
`create_time()` is wall-clock seconds (boot time plus ticks), while the ticks
after boot used here do not move with the clock. The subreaper and sessions
are outside psutil anyway.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import json
import logging
import os
import sys
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from tuisched.runtime.clock import SystemClock
from tuisched.runtime.privatefiles import open_private

log = logging.getLogger(__name__)

_PR_SET_CHILD_SUBREAPER = 36

REAP_AFTER = 1.0
"""Seconds a child of ours stays a zombie before a scan reaps it (see `_reap`)."""

ADOPTED = "adopted"
"""The record's entry for processes this one adopted that no run is known to have
started (run ids are never this word)."""

_HELPERS: set[int] = set()
"""Children this process started for itself (the run keeper, fork servers): never
taken for orphans of runs. Changed on the loop, read by scans (under `_HELPERS_LOCK`)."""
_HELPERS_LOCK = threading.Lock()


def helper_started(pid: int) -> None:
    """`pid` is a child of the scheduler's own (not a run's): scans leave it out."""
    with _HELPERS_LOCK:
        _HELPERS.add(pid)


def helper_ended(pid: int) -> None:
    """The helper `pid` has ended (and been reaped): its pid may be anyone's now."""
    with _HELPERS_LOCK:
        _HELPERS.discard(pid)


def _helpers() -> frozenset[int]:
    with _HELPERS_LOCK:
        return frozenset(_HELPERS)


def become_subreaper() -> bool:
    """Make orphaned descendants of this process its children (Linux). True when done."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        return bool(libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


@dataclass(frozen=True, slots=True)
class Proc:
    """One process: its pid and its start time (clock ticks after boot), which together
    name it for good (a pid alone may be reused)."""

    pid: int
    start: int


@dataclass(frozen=True, slots=True)
class _Row:
    ppid: int
    start: int
    zombie: bool
    group: int = 0
    session: int = 0


def _process_table() -> dict[int, _Row]:
    """Every process this user can see: pid -> parent, start time, zombie or not, process
    group and session."""
    table: dict[int, _Row] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as stat:  # noqa: PTH123  (hot loop)
                data = stat.read()
        except OSError:
            continue  # gone meanwhile
        # The command name is in parentheses and may hold anything: split after the last ')'.
        fields = data[data.rfind(b")") + 2 :].split()
        if len(fields) > 19:
            table[int(entry.name)] = _Row(
                int(fields[1]), int(fields[19]), fields[0] == b"Z", int(fields[2]), int(fields[3])
            )
    return table


def _alive(proc: Proc, table: dict[int, _Row]) -> bool:
    row = table.get(proc.pid)
    return row is not None and row.start == proc.start and not row.zombie


@dataclass(slots=True)
class _Run:
    root: int
    known: set[Proc] = field(default_factory=set)
    ended: bool = False
    root_proc: Proc | None = None
    """The root as a scan saw it (its start time), while the run goes on."""


class Descendants:
    """The processes of each run, found in `/proc`; safe from any thread.

    `scan()` is blocking (it reads `/proc`): call it off the loop.
    """

    def __init__(
        self, record: Path | None = None, *, changed: Callable[[], None] | None = None,
        monotonic: Callable[[], float] | None = None,
    ) -> None:  # fmt: skip
        """`record`: where the known processes are written after each scan that changes
        them. `changed`: called (on the caller's thread) when a run starts or ends, so
        that a scan comes soon. `monotonic`: the clock that ages adopted zombies (the
        system's by default: they age in real time)."""
        self._monotonic = monotonic or SystemClock().monotonic
        self._record = record
        self._changed = changed
        self._lock = threading.Lock()
        self._runs: dict[str, _Run] = {}
        self._adopted: set[Proc] = set()
        """Orphans this process adopted that no run's scan had found, and what is under them."""
        self._zombies: dict[int, float] = {}
        """Children seen as zombies at the last scan, and since when (monotonic)."""
        self._written: dict[str, list[tuple[int, int]]] = {}

    @property
    def watching(self) -> bool:
        """Whether any run or adopted orphan has processes to follow."""
        return bool(self._runs or self._adopted)

    def watch(self, run_id: str, pid: int) -> None:
        """Follow the processes under `pid`, the process `run_id` started."""
        with self._lock:
            self._runs[run_id] = _Run(root=pid)
        if self._changed is not None:
            self._changed()

    def signal(self, run_id: str, signum: int) -> int:
        """Send `signum` to every known process of `run_id`; how many got it."""
        with self._lock:
            run = self._runs.get(run_id)
            procs = list(run.known) if run is not None else []
        return signal_procs(procs, signum)

    def run_ended(self, run_id: str) -> list[Proc]:
        """`run_id`'s main process ended: the processes it left running (at last scan).

        They stay followed (and are stopped at shutdown) until they end.
        """
        with self._lock:
            run = self._runs.get(run_id)
            if run is None:
                return []
            run.ended = True
            # Those in the run's own group are killed with it by its runner.
            run.known = {proc for proc in run.known if _group_of(proc.pid) not in (run.root, None)}
            if not run.known:
                del self._runs[run_id]
            left = sorted(run.known, key=lambda proc: proc.pid)
        if self._changed is not None:  # its orphans are ours now: a scan records them
            self._changed()
        return left

    def stop_all(self, signum: int) -> int:
        """Send `signum` to every process left by an ended run, and to every process this
        one adopted and what they started (at shutdown, once no run is left: an adopted
        child is then the leftover of a run that ended before a scan could see what it
        left; this process's own helpers, the keeper among them, are not)."""
        table = _process_table()
        children: dict[int, list[int]] = {}
        for pid, row in table.items():
            children.setdefault(row.ppid, []).append(pid)
        with self._lock:
            roots = {run.root for run in self._runs.values() if not run.ended}
            procs = {proc for run in self._runs.values() if run.ended for proc in run.known}
            procs |= self._orphans(table, children, roots)
        return signal_procs(procs, signum)

    def scan(self) -> None:
        """Look in `/proc`: add what each run started since, drop what ended, reap adopted
        zombies, and write the record if it changed (blocking)."""
        table = _process_table()
        children: dict[int, list[int]] = {}
        for pid, row in table.items():
            children.setdefault(row.ppid, []).append(pid)
        with self._lock:
            roots = {run.root for run in self._runs.values()}
            for run_id, run in list(self._runs.items()):
                run.known = _found(run, table, children)
                root = table.get(run.root)
                alive = root is not None and not root.zombie and not run.ended
                run.root_proc = Proc(run.root, root.start) if alive and root else None
                if run.ended and not run.known:
                    del self._runs[run_id]
            self._adopted = self._orphans(table, children, roots)
            snapshot = {
                run_id: sorted(
                    (proc.pid, proc.start)
                    for proc in (run.known | ({run.root_proc} if run.root_proc else set()))
                )
                for run_id, run in self._runs.items()
                if run.known or run.root_proc
            }
            if self._adopted:
                snapshot[ADOPTED] = sorted((proc.pid, proc.start) for proc in self._adopted)
        self._reap(table, roots)
        if snapshot != self._written:
            self._write(snapshot)

    def _orphans(
        self, table: dict[int, _Row], children: dict[int, list[int]], roots: set[int]
    ) -> set[Proc]:
        """What this process adopted (children in a session other than ours that it did not
        start: not a run's root, not a helper), with what is under them, and what was found
        so before and is still alive, minus what a run's scan knows (call under the lock)."""
        me, ours, helpers = os.getpid(), os.getsid(0), _helpers()
        known = {proc for run in self._runs.values() for proc in run.known}
        found: set[Proc] = set()
        for proc in self._adopted:
            # A run's root or a helper seen in the moment between its start and its being said.
            if proc.pid not in roots and proc.pid not in helpers and _alive(proc, table):
                found |= {proc} | _found(_Run(root=proc.pid), table, children)
        for pid in children.get(me, ()):
            row = table[pid]
            if pid in roots or pid in helpers or row.zombie or row.session == ours:
                continue
            found |= {Proc(pid, row.start)} | _found(_Run(root=pid), table, children)
        return found - known

    def _reap(self, table: dict[int, _Row], roots: set[int]) -> None:
        """Reap adopted children that died (asyncio reaps only what it started).

        A zombie child is reaped once it has been one for REAP_AFTER seconds: the
        loop reaps the processes it started within milliseconds, so such a zombie
        is an orphan we adopted, never one asyncio waits for (scans come more
        often than that after runs start or end: time, not their count, decides).
        """
        me, now = os.getpid(), self._monotonic()
        zombies = {pid for pid, row in table.items() if row.ppid == me and row.zombie}
        zombies -= roots | _helpers()
        self._zombies = {pid: self._zombies.get(pid, now) for pid in zombies}
        for pid, since in self._zombies.items():
            if now - since >= REAP_AFTER:
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(pid, os.WNOHANG)

    def _write(self, snapshot: dict[str, list[tuple[int, int]]]) -> None:
        self._written = snapshot
        if self._record is None:
            return
        try:
            temporary = self._record.with_name(self._record.name + ".new")
            fd = open_private(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            with os.fdopen(fd, "w", encoding="utf-8") as file:
                json.dump(snapshot, file)
            temporary.replace(self._record)
        except (OSError, ValueError) as error:
            log.debug("could not record the runs' processes: %s", error)

    def forget_record(self) -> None:
        """Remove the record (a clean stop leaves nothing to clean up)."""
        if self._record is not None:
            with contextlib.suppress(OSError):
                self._record.unlink()


def _found(run: _Run, table: dict[int, _Row], children: dict[int, list[int]]) -> set[Proc]:
    """The live processes under `run`'s root and under each process already known."""
    starts = [run.root] if run.root in table and not run.ended else []
    starts += [proc.pid for proc in run.known if _alive(proc, table)]
    found: set[Proc] = set()
    seen: set[int] = set()
    while starts:
        pid = starts.pop()
        if pid in seen:
            continue
        seen.add(pid)
        starts.extend(children.get(pid, ()))
        row = table.get(pid)
        if pid != run.root and row is not None and not row.zombie:
            found.add(Proc(pid, row.start))
    return found


def _group_of(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except OSError:
        return None


def signal_procs(procs: Iterable[Proc], signum: int, *, groups: bool = False) -> int:
    """Send `signum` to each of `procs` still alive (pid and start time matching); with
    `groups`, to the whole group of each that leads one. How many got it."""
    table = _process_table()
    sent = 0
    for proc in procs:
        if _alive(proc, table):
            leads = groups and _group_of(proc.pid) == proc.pid
            with contextlib.suppress(ProcessLookupError, PermissionError):
                if leads:
                    os.killpg(proc.pid, signum)
                else:
                    os.kill(proc.pid, signum)
                sent += 1
    return sent


def read_record(record: Path) -> tuple[list[Proc], set[str]]:
    """What a killed scheduler's record names: its processes, and the runs they are of
    (nothing, if it cannot be read). The caller removes it once they are stopped."""
    try:
        recorded = json.loads(record.read_text(encoding="utf-8"))
        procs = [Proc(int(pid), int(start)) for pairs in recorded.values() for pid, start in pairs]
        run_ids = {str(run_id) for run_id in recorded if run_id != ADOPTED}
    except (OSError, ValueError, TypeError, AttributeError):
        return [], set()
    return procs, run_ids
