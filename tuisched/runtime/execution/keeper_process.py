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
(`processes.json`, pid and start time). A group whose leader is alive but was
started after the `hold` is a stranger's (a recycled pid) and is left alone.
After its scheduler's death the keeper exits; after a fence it keeps serving,
since the scheduler may come back (SIGCONT) and go on.

Run by path with only the standard library (`python -I keeper_process.py
<grace>`): it costs a few megabytes, not the scheduler's imports. What it does
is written to its standard error, a log file in the state directory.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import sys
import time

_READ = 65536


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


def _say(text: str) -> None:
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    with contextlib.suppress(OSError):
        os.write(2, f"{stamp} keeper {os.getpid()}: {text}\n".encode())


class Keeper:
    """The keeper's state: the groups it holds and the limit on its scheduler's claims."""

    def __init__(self, grace: float) -> None:
        self.grace = grace
        self.held: dict[int, int | None] = {}
        """Group leader pid -> its start time when the hold came (None: gone already)."""
        self.fence: float | None = None
        self.fence_grace = grace
        self.ending: dict[int, int | None] = {}
        """Groups sent SIGTERM, to be sent SIGKILL at `kill_at`."""
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
        times = [t for t in (self.kill_at, self.fence if self.held else None) if t is not None]
        return max(0.0, min(times) - now) if times else None

    def act(self, now: float) -> None:
        """Whatever time says: end the held runs past the fence, kill those past grace."""
        if self.fence is not None and now >= self.fence and self.held:
            _say(
                f"no word from the scheduler within its fence: ending {len(self.held)} run(s) "
                f"(pid {', '.join(map(str, sorted(self.held)))})"
            )
            self.terminate(now, self.fence_grace)
        if self.kill_at is not None and now >= self.kill_at:
            self._signal(self.ending, signal.SIGKILL)
            self.ending.clear()
            self.kill_at = None

    def terminate(self, now: float, grace: float) -> None:
        """SIGTERM every held group now; SIGKILL for them after `grace`."""
        self._signal(self.held, signal.SIGTERM)
        self.ending.update(self.held)
        self.held.clear()
        self.kill_at = now + grace if self.kill_at is None else min(self.kill_at, now + grace)

    @staticmethod
    def _signal(groups: dict[int, int | None], signum: int) -> None:
        for pid, start in groups.items():
            now_start = _started(pid)
            if now_start is not None and start is not None and now_start != start:
                continue  # the pid leads a stranger now
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signum)

    def alive(self) -> bool:
        """Whether any group it is ending still has a process."""
        for pid in self.ending:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, 0)
                return True
        return False


def serve(keeper: Keeper, fd: int = 0, record: str | None = None) -> None:
    """Serve the scheduler on `fd` until it closes; then end what is held, and the
    processes that `record` names, and return."""
    pending = b""
    while True:
        now = time.monotonic()
        keeper.act(now)
        ready, _, _ = select.select([fd], [], [], keeper.timeout(time.monotonic()))
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
        keeper.terminate(time.monotonic(), keeper.grace)
    strays = _recorded(record) if record else {}
    if strays:
        _say(f"ending {len(strays)} process(es) that left their runs "
             f"(pid {', '.join(map(str, sorted(strays)))})")  # fmt: skip
        _kill(strays, signal.SIGTERM)
    ends = time.monotonic() + keeper.grace
    while time.monotonic() < ends and (keeper.alive() or _kill(strays, 0)):
        time.sleep(0.05)  # wait out the grace, or until all have ended
        keeper.act(time.monotonic())
    keeper.act(max(ends, keeper.kill_at or 0.0))
    _kill(strays, signal.SIGKILL)


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
    serve(Keeper(grace), record=argv[2] if len(argv) > 2 else None)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
