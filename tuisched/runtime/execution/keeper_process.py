"""The run keeper: a small process that outlives its scheduler and ends the runs it held.

A run's processes live in a session of their own, so a scheduler killed with
`kill -9`, stopped by SIGSTOP or cut off from its cluster's database cannot end
them, and in a cluster another node then runs the same work beside them
(`recover: true`). The scheduler starts this keeper once and tells it, over
the keeper's standard input, one line at a time:

    hold <pid>          a run started: <pid> leads the run's process group
    free <pid>          that run ended
    fence <t> <grace>   the scheduler's claims hold until CLOCK_MONOTONIC <t>
    fence none          no such limit (a single node, or a node leaving)

When the scheduler dies (its end of the pipe closes) or <t> passes without a
newer `fence`, the keeper sends SIGTERM to every group it holds, and SIGKILL
to what is left after the grace period. When the scheduler dies it does the
same to the processes that left their runs' groups (`setsid`, a daemon's
double fork), as the scheduler's last record of them names them
(`processes.json`, pid and start time). Either way it first looks in /proc
for everything under those processes and in the sessions they lead, and
ends that too: a process started since the scheduler's last record (in a
session of its own, its environment emptied) is still under its run's
process until that one ends, and would be an orphan nobody knows of after.
A group whose leader is alive but was started after the `hold` is a
stranger's (a recycled pid) and is left alone. The python runs the fork
servers' journals name are ended then too (and at a fence), held or not: the
scheduler holds such a run once it hears of its fork, which a busy or killed
scheduler may not have done.
After its scheduler's death the keeper exits; after a fence it keeps serving,
since the scheduler may come back (SIGCONT) and go on.

Run by path with only the standard library (`python -I keeper_process.py
<grace> [<record> [<journals folder>]]`, an empty argument for none): it costs
a few megabytes, not the scheduler's imports. What it does is written to its
standard error, a log file in the state directory.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import stat
import sys
import time
from collections.abc import Callable

_READ = 65536
_JOURNAL_BYTES = 1 << 24
"""The most of a journal read (the fork server rewrites it every 1,024 forks)."""


def _started(pid: int) -> int | None:
    """When `pid` started (clock ticks after boot), or None if it is gone or a zombie."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:  # noqa: PTH123  (a few per run)
            data = stat.read()
    except OSError:
        return None
    fields = data[data.rfind(b")") + 2 :].split()
    if len(fields) <= 19 or fields[0] == b"Z":
        return None
    return int(fields[19])


def _table() -> dict[int, tuple[int, int, int, int]]:
    """Every live process this user can see: pid -> (parent, group, session, start)."""
    table: dict[int, tuple[int, int, int, int]] = {}
    for name in os.listdir("/proc"):  # noqa: PTH208  (the standard library, by path)
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as stat:  # noqa: PTH123
                data = stat.read()
        except OSError:
            continue
        fields = data[data.rfind(b")") + 2 :].split()
        if len(fields) > 19 and fields[0] != b"Z":
            table[int(name)] = (int(fields[1]), int(fields[2]), int(fields[3]), int(fields[19]))
    return table


def _family(seeds: dict[int, int]) -> dict[int, int]:
    """`seeds` (pid -> start time) still alive, everything under them and every member of
    a session or group one of them leads, over and over; never the keeper's own."""
    table = _table()
    mine = {os.getpid(), 1}
    own_session, own_group = os.getsid(0), os.getpgid(0)
    children: dict[int, list[int]] = {}
    led: dict[int, list[int]] = {}
    for pid, (ppid, group, session, _) in table.items():
        children.setdefault(ppid, []).append(pid)
        if session != own_session:
            led.setdefault(session, []).append(pid)
        if group not in (own_group, session):
            led.setdefault(group, []).append(pid)
    found: dict[int, int] = {}
    todo = [pid for pid, start in seeds.items() if pid in table and table[pid][3] == start]
    while todo:
        pid = todo.pop()
        if pid in found or pid in mine or pid not in table:
            continue
        found[pid] = table[pid][3]
        todo += children.get(pid, ())
        todo += led.get(pid, ())
    return found


def _group(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except OSError:
        return None


def _say(text: str) -> None:
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    with contextlib.suppress(OSError):
        os.write(2, f"{stamp} keeper {os.getpid()}: {text}\n".encode())


class Keeper:
    """The keeper's state: the groups it holds and the limit on its scheduler's claims."""

    def __init__(
        self, grace: float, monotonic: Callable[[], float] = time.monotonic,
        journals: str | None = None,
    ) -> None:  # fmt: skip
        """`monotonic`: CLOCK_MONOTONIC, the clock the scheduler's fence lines speak
        (a test may give another). `journals`: the folder of the scheduler's fork
        servers' journals, whose python runs are ended as held ones are (see
        `journaled`)."""
        self.monotonic = monotonic
        self.grace = grace
        self.journals = journals
        self.held: dict[int, int | None] = {}
        """Group leader pid -> its start time when the hold came (None: gone already)."""
        self.fence: float | None = None
        self.fenced = False
        """The fence has passed and the keeper has acted on it (until a newer one)."""
        self.fence_grace = grace
        self.ending: dict[int, int | None] = {}
        """Groups sent SIGTERM, to be sent SIGKILL at `kill_at`."""
        self.strays: dict[int, int] = {}
        """Processes sent SIGTERM one by one (pid -> start time), SIGKILL at `kill_at`."""
        self.kill_at: float | None = None

    def take(self, line: str) -> None:
        """One line from the scheduler."""
        word, _, rest = line.strip().partition(" ")
        try:
            if word == "hold":
                pid = int(rest)
                self.held[pid] = _started(pid)
            elif word == "free":
                self.held.pop(int(rest), None)
            elif word == "fence":
                self.fenced = False
                if rest.strip() == "none":
                    self.fence = None
                else:
                    limit, _, grace = rest.partition(" ")
                    self.fence = float(limit)
                    self.fence_grace = float(grace) if grace else self.grace
            elif word:
                _say(f"ignored a line it does not know: {line.strip()[:80]!r}")
        except ValueError:
            _say(f"ignored a malformed line: {line.strip()[:80]!r}")

    def timeout(self, now: float) -> float | None:
        """Seconds until the next thing to do, or None (only the pipe can wake it)."""
        fence = self.fence if self._watching_fence() else None
        times = [t for t in (self.kill_at, fence) if t is not None]
        return max(0.0, min(times) - now) if times else None

    def _watching_fence(self) -> bool:
        """Whether the fence, once passed, may have runs to end: held ones (a run held
        after it passed is ended at once), or the journals' (looked at once a fence)."""
        return bool(self.held) or (self.journals is not None and not self.fenced)

    def act(self, now: float) -> None:
        """Whatever time says: end the runs past the fence, kill those past grace."""
        if self.fence is not None and now >= self.fence and self._watching_fence():
            unheld = {} if self.fenced else self.journaled()
            self.fenced = True
            if self.held:
                _say(
                    f"no word from the scheduler within its fence: ending {len(self.held)} "
                    f"run(s) (pid {', '.join(map(str, sorted(self.held)))})"
                )
            if unheld:
                _say(f"no word from the scheduler within its fence: {_unheld_words(unheld)}")
            if self.held or unheld:
                self.terminate(now, self.fence_grace, unheld)
        if self.kill_at is not None and now >= self.kill_at:
            self._signal(self.ending, signal.SIGKILL)
            _kill(self.strays, signal.SIGKILL)
            self.ending.clear()
            self.strays.clear()
            self.kill_at = None

    def terminate(self, now: float, grace: float, strays: dict[int, int] | None = None) -> None:
        """SIGTERM every held group, and `strays`, and the families of both (looked for
        first: a parent that ends leaves its children to init); SIGKILL after `grace`."""
        seeds = {pid: start for pid, start in self.held.items() if start is not None}
        members = _family({**seeds, **(strays or {})})
        self._signal(self.held, signal.SIGTERM)
        loose = {pid: start for pid, start in members.items() if _group(pid) not in self.held}
        _kill(loose, signal.SIGTERM)  # the others had it with their group: once is enough
        self.ending.update(self.held)
        self.strays.update(members)
        self.held.clear()
        # The grace counts from the SIGTERM, after the look in /proc (slow on a busy host).
        now = max(now, self.monotonic())
        self.kill_at = now + grace if self.kill_at is None else min(self.kill_at, now + grace)

    def journaled(self) -> dict[int, int]:
        """The python runs' processes the fork servers' journals (`*.runs`, one line
        `RUN_ID PID START` a run) name, that are still those processes, and that the
        keeper does not hold. A run's process writes its line before it runs anything
        of its job, and the scheduler holds it only once it has heard of the fork: on a
        busy machine a killed or silent scheduler may not have, and its run is here."""
        if self.journals is None:
            return {}
        try:
            names = os.listdir(self.journals)  # noqa: PTH208  (no pathlib: a small program)
        except OSError:
            return {}
        found: dict[int, int] = {}
        for name in [name for name in names if name.endswith((".runs", ".new"))]:
            text = _journal_text(os.path.join(self.journals, name))  # noqa: PTH118
            for line in text.splitlines():
                run, _, rest = line.partition(" ")
                pid, _, start = rest.partition(" ")
                if run == "server" or not (pid.isdigit() and start.isdigit()):
                    continue  # the server dies with its scheduler; a line cut short
                if int(pid) not in self.held and _started(int(pid)) == int(start):
                    found[int(pid)] = int(start)
        return found

    @staticmethod
    def _signal(groups: dict[int, int | None], signum: int) -> None:
        for pid, start in groups.items():
            now_start = _started(pid)
            if now_start is not None and start is not None and now_start != start:
                continue  # the pid leads a stranger now
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signum)

    def alive(self) -> bool:
        """Whether any group or process it is ending is still there."""
        for pid in self.ending:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, 0)
                return True
        return _kill(self.strays, 0)


def serve(
    keeper: Keeper, fd: int = 0, record: str | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> None:  # fmt: skip
    """Serve the scheduler on `fd` until it closes; then end what is held, and the
    processes that `record` names, and return. Time is `keeper.monotonic`; the waits
    on the pipe are `select`'s, and those after the scheduler's death `sleep`."""
    pending = b""
    monotonic = keeper.monotonic
    while True:
        keeper.act(monotonic())
        ready, _, _ = select.select([fd], [], [], keeper.timeout(monotonic()))
        if not ready:
            continue
        try:
            data = os.read(fd, _READ)
        except InterruptedError:
            continue
        except OSError:
            data = b""
        if not data:
            break
        *lines, pending = (pending + data).split(b"\n")
        for line in lines:
            keeper.take(line.decode("ascii", "replace"))
    if keeper.held:
        _say(f"the scheduler is gone: ending {len(keeper.held)} run(s) "
             f"(pid {', '.join(map(str, sorted(keeper.held)))})")  # fmt: skip
    recorded = _recorded(record) if record else {}
    strays = {pid: start for pid, start in recorded.items() if pid not in keeper.held}
    if strays:  # (the record names the runs' own processes too: those are held)
        _say(f"ending {len(strays)} process(es) that left their runs "
             f"(pid {', '.join(map(str, sorted(strays)))})")  # fmt: skip
    unheld = {pid: start for pid, start in keeper.journaled().items() if pid not in strays}
    if unheld:
        _say(f"the scheduler is gone: {_unheld_words(unheld)}")
        strays.update(unheld)
    if keeper.held or strays:
        keeper.terminate(monotonic(), keeper.grace, strays)
    ends = monotonic() + keeper.grace
    while monotonic() < ends and keeper.alive():
        sleep(0.05)  # wait out the grace, or until all have ended
        keeper.act(monotonic())
    keeper.act(max(ends, keeper.kill_at or 0.0))


def _recorded(record: str) -> dict[int, int]:
    """The processes the scheduler's record (`processes.json`: run id -> [[pid, start
    time], ...]) names that are still those processes: what left the runs' groups."""
    try:
        with open(record, encoding="utf-8") as file:  # noqa: PTH123  (the standard library)
            data = json.load(file)
        pairs = [(int(pid), int(start)) for procs in data.values() for pid, start in procs]
    except (OSError, ValueError, TypeError, AttributeError):
        return {}
    return {pid: start for pid, start in pairs if _started(pid) == start}


def _journal_text(path: str) -> str:
    """A journal's text, as the next start reads it: "" for a link, or anything but a
    file (a FIFO would block the open), and no more than _JOURNAL_BYTES of it."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return ""
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return ""
        return os.read(fd, _JOURNAL_BYTES).decode("ascii", "replace")
    except OSError:
        return ""
    finally:
        os.close(fd)


def _unheld_words(unheld: dict[int, int]) -> str:
    return (f"ending {len(unheld)} python run(s) it had not been told of yet "
            f"(pid {', '.join(map(str, sorted(unheld)))})")  # fmt: skip


def _kill(procs: dict[int, int], signum: int) -> bool:
    """Send `signum` to each of `procs` still the same process; whether any was."""
    sent = False
    for pid, start in procs.items():
        if _started(pid) == start:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signum)
                sent = True
    return sent


def main(argv: list[str]) -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a terminal's ^C is for the scheduler
    grace = float(argv[1]) if len(argv) > 1 else 5.0
    record = argv[2] if len(argv) > 2 and argv[2] else None
    journals = argv[3] if len(argv) > 3 and argv[3] else None
    serve(Keeper(grace, journals=journals), record=record)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
