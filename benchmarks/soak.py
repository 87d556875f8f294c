"""Soak (issue 26): 10 jobs every 1-2 s through kill -9s, a full disk, a lock, 200 readers.

Each job's own log of executions is then held against the history.

    .venv/bin/python benchmarks/soak.py [--minutes 10] [--out DIR] [--seed N]

A headless scheduler (`python -m tuisched --no-ui`) runs 10 command jobs (every 1 s
or 2 s; `every` and 6-field `cron`; `misfire: once` on some). Each run appends one line
to its job's own file, `slot pid start run_id`, so the jobs' logs are the witness, not
the history. One job's runs last 1 s (a kill finds some in progress: ABANDONED at the
next start). Three jobs leave a process behind them: one in the run's group for 0.3 s,
one in a session of its own for 3 s, one in a session of its own until something ends it.

The scheduler's state directory is a small file system of its own (tmpfs), so that the
soak can fill it up: a holder process (`unshare -rm`: a user and mount namespace, no
root needed) mounts it on OUT/state and sleeps; each scheduler starts inside that
namespace (`nsenter`), and the soak reaches the files from outside through
/proc/HOLDER/root. The jobs' logs stay outside it, on the usual disk. Without user
namespaces the soak says so and exits 2.

Faults, each at a time this script chooses and records (scaled by --minutes / 10):

- kill -9 of the scheduler, 20 times spread over the run (one in the second half of
  the full disk, one in that of the lock), each restarted after a random pause of
  0.2-3 s (and 1 s after a start that fails by itself, as a service manager would);
  the run keeper and the next start must end what the runs left and close the
  abandoned runs;
- a full disk for 30 s: a filler file takes the state's file system until the write
  fails with ENOSPC, then is deleted. Only writes that need new blocks fail, as on
  any full disk (the history's pre-allocated journal does not);
- an exclusive lock on the history for 30 s: another process, inside the namespace,
  holds `BEGIN EXCLUSIVE` on `history.db`;
- 200 readers of the control socket's `/v1/events?after=0` (20 processes of 10
  streams: the server allows 16 a client), reconnecting whenever a stream ends.

Then the ledger is asked for (`tuisched missed --json`, inside the namespace), the
scheduler is stopped with SIGTERM, and the history is read from a copy of its files.
Each slot from the first start to the stop is, in this order:

- ran: its job's log has a line for it;
- abandoned, recorded: no line, and an ABANDONED row (a scheduler died while the run
  was RUNNING; its process may or may not have started);
- missed, in the ledger: no line, and a MISSED row (or counted by the oldest MISSED
  row of a long downtime, "and about N earlier slots"), which the ledger lists for a
  decision;
- lost: no line, and no row at all, or only rows in other states (NOT_STARTED, ...).

The report says, per criterion:

- twice: slots that appear more than once in their job's log (must be 0);
- lost: as above (must be 0);
- left behind: processes of the soak's jobs (a token in their command line or
  environment) still alive after the clean stop, and the run keepers (must be 0);
- late: start (the job's own clock reading) minus slot, p50/p95/max, for slots outside
  the outages, and how many are over 1 s (must be 0). An outage is a kill (1 s before
  it, to 3 s after the restart answers on the control socket), the full disk and the
  lock (each to 3 s after its end), and the first start (to 3 s after it answers).

Also reported, without a verdict: the abandoned and missed slots, executions with no
history row, slots that ran (not as a catch-up) yet are recorded MISSED, the history's
states, lateness inside the outages, what the readers got, the ledger at the end, and
each start of the scheduler (how long it took to answer, how it ended). The JSON report goes to
`OUT/report.json`, the scheduler's log of each start to `OUT/scheduler-NN.log`, a copy
of the state's files (sockets and the filler aside) to `OUT/state-copy`; the exit
status is 0 only when every criterion passes, 2 when user namespaces are refused.
Every process the script starts is ended on the way out, Ctrl-C too.
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import contextlib
import errno
import json
import math
import os
import platform
import random
import secrets
import shlex
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tuisched.domain.ledger import earlier_slots

REPO = Path(__file__).resolve().parent.parent
SETTLE = 3.0
"""Seconds after an outage ends (or a restart answers) still counted as the outage."""
BEFORE_KILL = 1.0
"""Seconds before a kill counted as its outage: a slot due then may not have started."""
LATE = 1.0
"""A slot started later than this after its slot, outside the outages, fails the soak."""
READY_WITHIN = 60.0
"""Seconds a started scheduler has to answer on its control socket before it is killed."""
STOP_WITHIN = 60.0
"""Seconds the final SIGTERM has to end the scheduler."""
READER_PROCESSES = 20
MAX_SOCKET = 107
"""The longest path a Unix socket can be reached by (bytes)."""
EXAMPLES = 6
"""Failures printed per criterion (the report has them all)."""


# --- the configuration ----------------------------------------------------------------


@dataclass(frozen=True)
class JobPlan:
    """One job of the soak: its schedule, period and what it leaves behind."""

    name: str
    schedule: dict[str, str]
    period: int
    misfire_once: bool = False
    lasts: float = 0.0
    """Seconds the run goes on after its line (so that some kills find runs in progress)."""
    leaves: str = ""
    """Shell run in the background after the line is written ("" for nothing)."""


def _jobs(token: str) -> list[JobPlan]:
    every1 = {"every": "1 second", "start": "2026-01-01T00:00:00Z"}
    every2 = {"every": "2 seconds", "start": "2026-01-01T00:00:00Z"}
    cron1, cron2 = {"cron": "* * * * * *"}, {"cron": "*/2 * * * * *"}
    quiet = "</dev/null >/dev/null 2>&1 &"
    return [
        JobPlan("j00", every1, 1),
        JobPlan("j01", every1, 1, misfire_once=True),
        JobPlan("j02", cron1, 1),
        JobPlan("j03", cron1, 1, misfire_once=True,
                leaves=f"sh -c 'sleep 0.3; : {token} group' {quiet}"),
        JobPlan("j04", every1, 1),
        JobPlan("j05", every2, 2, lasts=1.0),
        JobPlan("j06", every2, 2, misfire_once=True,
                leaves=f"setsid sh -c 'sleep 3; : {token} session' {quiet}"),
        JobPlan("j07", cron2, 2),
        JobPlan("j08", cron2, 2, misfire_once=True),
        JobPlan("j09", every2, 2, leaves=f"setsid sh -c 'sleep 3600; : {token} forever' {quiet}"),
    ]  # fmt: skip


def _command(job: JobPlan, log: Path, token: str) -> str:
    """The job's shell line: the start time first, then one line in its own log (on the
    usual disk: a full state disk does not touch it)."""
    parts = [
        "t=$(date +%s.%N)",
        f'echo "$TUISCHED_SLOT $$ $t $TUISCHED_RUN_ID" >> {log}',
    ]
    if job.lasts:
        parts.append(f"sleep {job.lasts:g}")
    command = "; ".join(parts)
    if job.leaves:  # it ends with "&", which takes no ";" after it
        command += f"; {job.leaves}"
    return command + f" : {token}" if job.leaves else command + f"; : {token}"


def write_config(out: Path, jobs: list[JobPlan], token: str) -> Path:
    """OUT/tuisched.yaml (JSON is YAML's flow style) with the state in OUT/state."""
    lines = [
        "settings:",
        "  timezone: UTC",
        f"  state_dir: {json.dumps(str(out / 'state'))}",
        "  shutdown_grace: 5s",
        "  max_workers: 16",
        "jobs:",
    ]
    for job in jobs:
        spec: dict[str, object] = {
            "command": _command(job, out / "jobs" / f"{job.name}.log", token),
            "schedule": job.schedule,
        }
        if job.misfire_once:
            spec["misfire"] = "once"
        lines.append(f"  {job.name}: {json.dumps(spec)}")
    path = out / "tuisched.yaml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


# --- the plan of faults ---------------------------------------------------------------


@dataclass
class Plan:
    """When each fault happens, in seconds from the start of the soak."""

    duration: float
    kills: list[float]
    disk: tuple[float, float]
    lock: tuple[float, float]
    readers: tuple[float, float]
    reader_count: int


def make_plan(minutes: float, rng: random.Random, readers: int) -> Plan:
    """Faults scaled by minutes / 10: 20 kills, 30 s windows, 3 minutes of readers at 10.

    One kill falls in the second half of the full disk and one in the second half of the
    lock (the runs started in the window have no row yet, and the restart comes soon
    after it); the others are spread, one in each equal part of the run after a quiet start.
    """
    duration = minutes * 60
    scale = minutes / 10
    window = max(10.0, 30 * scale)
    disk = (0.25 * duration, 0.25 * duration + window)
    lock = (0.5 * duration, 0.5 * duration + window)
    readers_window = (0.6 * duration, 0.6 * duration + max(20.0, 180 * scale))
    count = max(2, round(20 * scale))
    kills = [disk[0] + rng.uniform(0.5, 0.95) * window, lock[0] + rng.uniform(0.5, 0.95) * window]
    begin, end = 0.08 * duration, 0.95 * duration
    part = (end - begin) / max(1, count - 2)
    kills += [begin + (i + rng.uniform(0.1, 0.9)) * part for i in range(count - 2)]
    return Plan(duration, sorted(kills), disk, lock, readers_window, readers)


# --- talking to the scheduler and reading /proc ---------------------------------------


def answers(sock: Path, timeout: float = 0.5) -> bool:
    """Whether a scheduler answers `GET /v1` on its control socket."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
            client.settimeout(timeout)
            client.connect(str(sock))
            client.sendall(b"GET /v1 HTTP/1.1\r\nHost: tuisched\r\nConnection: close\r\n\r\n")
            return client.recv(64).startswith(b"HTTP/1.1 200")
    except OSError:
        return False


def _proc_read(pid: int, name: str) -> bytes:
    try:
        return (Path("/proc") / str(pid) / name).read_bytes()
    except OSError:
        return b""


def _stat(pid: int) -> tuple[str, int] | None:
    """(state, parent pid) of `pid`, or None when it is gone."""
    data = _proc_read(pid, "stat")
    if not data:
        return None
    fields = data[data.rfind(b")") + 2 :].split()
    return fields[0].decode(), int(fields[1])


def _pids() -> list[int]:
    return [int(entry.name) for entry in Path("/proc").iterdir() if entry.name.isdigit()]


def marked_processes(token: str) -> list[dict[str, Any]]:
    """Live processes (zombies aside) whose command line or environment holds `token`."""
    mark, env_mark = token.encode(), f"SOAK_TOKEN={token}".encode()
    found = []
    for pid in _pids():
        if pid == os.getpid():
            continue
        cmdline = _proc_read(pid, "cmdline")
        if mark not in cmdline and env_mark not in _proc_read(pid, "environ"):
            continue
        stat = _stat(pid)
        if stat is None or stat[0] == "Z":
            continue
        command = cmdline.replace(b"\0", b" ").decode(errors="replace").strip()
        found.append({"pid": pid, "ppid": stat[1], "command": command[:200], **_origin(pid)})
    return found


def _origin(pid: int) -> dict[str, str]:
    """When `pid` started and the run it came from (its TUISCHED_ variables), if readable."""
    origin = {}
    data = _proc_read(pid, "stat")
    boot = next(
        (line.split()[1] for line in Path("/proc/stat").read_text().splitlines()
         if line.startswith("btime ")),
        "0",
    )  # fmt: skip
    if data:
        ticks = int(data[data.rfind(b")") + 2 :].split()[19])
        origin["started"] = _iso(int(boot) + ticks / os.sysconf("SC_CLK_TCK"))
    for item in _proc_read(pid, "environ").split(b"\0"):
        name, _, value = item.decode(errors="replace").partition("=")
        if name in {"TUISCHED_JOB", "TUISCHED_RUN_ID", "TUISCHED_SLOT"}:
            origin[name.removeprefix("TUISCHED_").lower()] = value
    return origin


def _kill_quietly(pid: int, sig: int = signal.SIGKILL) -> None:
    with contextlib.suppress(OSError):
        os.kill(pid, sig)


# --- the state's own small disk ----------------------------------------------------------

DISK_SIZE = "64m"
"""The state's file system: the history, its journal and the runs' output files fit."""
FILL_BLOCK = 1 << 20


class NoNamespaces(Exception):
    """User namespaces are refused here (`unshare -rm` failed): no disk of the soak's own."""


class StateDisk:
    """A tmpfs mounted on `inside` in a user and mount namespace of its own (no root),
    held by a sleeping process, which the soak fills up and empties again.

    Processes started behind `enter()` see it at `inside`; the soak reaches its files at
    `outside`, through the holder's root in /proc (SQLite resolves that link, so the
    history is read from a copy).
    """

    def __init__(self, inside: Path, lifetime: float) -> None:
        self.inside = inside
        inside.mkdir(parents=True, exist_ok=True)
        mount = f"mount -t tmpfs -o size={DISK_SIZE} none {shlex.quote(str(inside))}"
        try:
            self.holder = subprocess.Popen(
                ["unshare", "-rm", "sh", "-c",
                 f"{mount} && echo ready && exec sleep {lifetime:.0f}"],
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                text=True, start_new_session=True,
            )  # fmt: skip
        except OSError as error:  # no unshare(1)
            raise NoNamespaces(str(error)) from error
        assert self.holder.stdout is not None
        assert self.holder.stderr is not None
        if self.holder.stdout.readline() != "ready\n":
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.holder.wait(10)
            said = " ".join(self.holder.stderr.read().split())
            self.close()
            raise NoNamespaces(said or f"unshare -rm: exit {self.holder.returncode}")
        self.outside = Path(f"/proc/{self.holder.pid}/root") / str(inside).lstrip("/")
        self._filler: int | None = None
        self.filled = 0
        """Bytes the filler took, in all (it is topped up while the disk is full)."""

    def enter(self) -> list[str]:
        """The command line prefix that starts a process inside the namespace."""
        return ["nsenter", "-U", "-m", "--preserve-credentials", "-t", str(self.holder.pid)]

    @property
    def full(self) -> bool:
        return self._filler is not None

    def fill(self) -> None:
        """Write a filler file until the file system refuses it (ENOSPC)."""
        flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC
        self._filler = os.open(self.outside / "filler", flags, 0o600)
        self.top_up()

    def top_up(self) -> None:
        """Take again whatever space was given back meanwhile (a file deleted, truncated)."""
        if self._filler is None:
            return
        block = bytes(FILL_BLOCK)
        while True:
            try:
                written = os.write(self._filler, block)
            except OSError as error:
                if error.errno != errno.ENOSPC:
                    raise
                return
            self.filled += written

    def free(self) -> None:
        """Space returns: the filler is deleted."""
        if self._filler is not None:
            os.close(self._filler)
            self._filler = None
        with contextlib.suppress(OSError):
            (self.outside / "filler").unlink()

    def copy_state(self, to: Path) -> list[str]:
        """Copy the state's regular files (the filler aside) to `to`; the names not copied."""
        failed = []
        for path in sorted(self.outside.rglob("*")):
            target = to / path.relative_to(self.outside)
            try:
                if path.is_dir():
                    target.mkdir(parents=True, exist_ok=True)
                elif path.is_file() and path.name != "filler":
                    target.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copyfile(path, target)
            except OSError as error:
                failed.append(f"{path.relative_to(self.outside)}: {error}")
        return failed

    def close(self) -> None:
        """End the holder (the file system goes with the last process inside)."""
        if self._filler is not None:
            os.close(self._filler)
            self._filler = None
        _end_group(self.holder)
        for pipe in (self.holder.stdout, self.holder.stderr):
            if pipe is not None:
                pipe.close()


# --- the scheduler under supervision ---------------------------------------------------


@dataclass
class Incarnation:
    """One start of the scheduler: its process, when it answered and how it ended."""

    number: int
    process: subprocess.Popen[bytes]
    started: float
    ready: float | None = None
    ended: float | None = None
    how: str = ""
    """How it ended: "killed" (by the soak), "stopped, exit N" (SIGTERM) or "exit N"."""


@dataclass
class Supervisor:
    """Starts, kills and restarts the scheduler, inside the namespace of the state's disk."""

    config: Path
    out: Path
    token: str
    disk: StateDisk
    incarnations: list[Incarnation] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def current(self) -> Incarnation | None:
        last = self.incarnations[-1] if self.incarnations else None
        return last if last is not None and last.ended is None else None

    @property
    def sock(self) -> Path:
        return self.disk.outside / "control.sock"

    def start(self) -> Incarnation:
        """Start a scheduler; its stderr goes through a pipe (a full disk spares pipes)."""
        number = len(self.incarnations)
        process = subprocess.Popen(
            [*self.disk.enter(), sys.executable, "-m", "tuisched", "--no-ui", "-c",
             str(self.config)],
            cwd=REPO, env={**os.environ, "SOAK_TOKEN": self.token},
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            start_new_session=True,  # Ctrl-C reaches the soak alone, which ends it
        )  # fmt: skip
        log = self.out / f"scheduler-{number:02d}.log"
        threading.Thread(target=_copy, args=(process, log), daemon=True).start()
        incarnation = Incarnation(number, process, time.time())
        self.incarnations.append(incarnation)
        return incarnation

    def poll(self) -> str:
        """The current scheduler's state: "ready" (it answers), "starting" or "down"."""
        now = self.current
        if now is None:
            return "down"
        code = now.process.poll()
        if code is not None:
            now.ended, now.how = time.time(), f"exit {code}"
            self.problems.append(f"scheduler {now.number} ended by itself: exit {code}")
            return "down"
        if now.ready is None:
            if answers(self.sock):
                now.ready = time.time()
            elif time.time() - now.started > READY_WITHIN:
                self.problems.append(f"scheduler {now.number} did not answer in {READY_WITHIN} s")
                self.kill()
                return "down"
            else:
                return "starting"
        return "ready"

    def kill(self) -> None:
        """kill -9 the current scheduler (its keeper lives on, as after a real crash)."""
        now = self.current
        if now is None:
            return
        now.process.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            now.process.wait(10)
        now.ended, now.how = time.time(), "killed"

    def stop(self) -> bool:
        """SIGTERM and wait: whether the scheduler ended by itself in time."""
        now = self.current
        if now is None:
            self.problems.append("no scheduler was running at the end")
            return False
        now.process.terminate()
        try:
            code = now.process.wait(STOP_WITHIN)
        except subprocess.TimeoutExpired:
            self.problems.append(f"the final SIGTERM did not end the scheduler in {STOP_WITHIN} s")
            self.kill()
            return False
        now.ended, now.how = time.time(), f"stopped, exit {code}"
        return code == 0

    def ledger(self) -> dict[str, Any]:
        """`tuisched missed --json` of the running scheduler (asked inside the namespace)."""
        argv = [*self.disk.enter(), sys.executable, "-m", "tuisched", "missed", "--json",
                "-c", str(self.config)]  # fmt: skip
        try:
            done = subprocess.run(
                argv, cwd=REPO, capture_output=True, text=True, timeout=60, check=False
            )
        except subprocess.TimeoutExpired:
            return {"error": "tuisched missed --json did not answer in 60 s"}
        if done.returncode != 0:
            return {"error": f"exit {done.returncode}: {done.stderr.strip()[-500:]}"}
        try:
            return {"entries": json.loads(done.stdout)}
        except ValueError:
            return {"error": f"not JSON: {done.stdout[:500]}"}

    def end_all(self) -> None:
        """Kill every scheduler still running (the way out)."""
        for incarnation in self.incarnations:
            if incarnation.process.poll() is None:
                incarnation.process.kill()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    incarnation.process.wait(10)


def _copy(process: subprocess.Popen[bytes], log: Path) -> None:
    assert process.stderr is not None
    with log.open("wb") as out:
        for line in process.stderr:
            out.write(line)
            out.flush()


# --- helpers in processes of their own: the lock holder and the readers ---------------

LOCK_HOLDER = """
import json, sqlite3, sys, time
db = sqlite3.connect(sys.argv[1], timeout=float(sys.argv[3]), isolation_level=None)
asked = time.time()
db.execute("BEGIN EXCLUSIVE")
held = time.time()
time.sleep(float(sys.argv[2]))
db.execute("ROLLBACK")
print(json.dumps({"asked": asked, "held": held, "released": time.time()}), flush=True)
"""


class Helpers:
    """The lock holder and the reader processes: started, awaited, always ended."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self.lock: subprocess.Popen[str] | None = None
        self.readers: list[subprocess.Popen[bytes]] = []

    def hold_lock(self, enter: list[str], db: Path, seconds: float) -> None:
        """Lock `db` for `seconds` from a process started behind `enter` (inside the
        namespace of the state's disk: the same file the scheduler has)."""
        self.lock = subprocess.Popen(
            [*enter, sys.executable, "-c", LOCK_HOLDER, str(db), str(seconds), "30"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            start_new_session=True,
        )  # fmt: skip

    def lock_result(self, within: float) -> dict[str, object]:
        """When the lock was asked for, held and released (or what went wrong)."""
        if self.lock is None:
            return {"error": "never started"}
        try:
            text, _ = self.lock.communicate(timeout=within)
        except subprocess.TimeoutExpired:
            self.lock.kill()
            text, _ = self.lock.communicate(timeout=10)
            return {"error": f"did not finish in {within} s", "output": text[-2000:]}
        try:
            return dict(json.loads(text.strip().splitlines()[-1]))
        except (ValueError, IndexError):
            return {"error": f"exit {self.lock.returncode}", "output": text[-2000:]}

    def start_readers(self, sock: Path, count: int, until: float) -> None:
        per = -(-count // READER_PROCESSES)
        left = count
        for index in range(READER_PROCESSES):
            streams = min(per, left)
            left -= streams
            if streams <= 0:
                break
            report = self.out / f"readers-{index:02d}.json"
            self.readers.append(subprocess.Popen(
                [sys.executable, "-I", __file__, "--reader", str(sock), str(streams),
                 str(until), str(report)],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                stderr=(self.out / f"readers-{index:02d}.err").open("wb"),
                start_new_session=True,
            ))  # fmt: skip

    def reader_results(self, within: float) -> dict[str, object]:
        """The readers' counts added up (each writes its own file as it ends)."""
        deadline = time.monotonic() + within
        totals: dict[str, int] = {}
        unfinished = 0
        for process in self.readers:
            try:
                process.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                unfinished += 1
                _end_group(process)
        for report in sorted(self.out.glob("readers-*.json")):
            for key, value in json.loads(report.read_text()).items():
                totals[key] = totals.get(key, 0) + value
        return {"processes": len(self.readers), "unfinished": unfinished, **totals}

    def end_all(self) -> None:
        for process in self.readers:
            _end_group(process)
        if self.lock is not None:
            _end_group(self.lock)


def _end_group(process: subprocess.Popen[bytes] | subprocess.Popen[str]) -> None:
    if process.poll() is None:
        with contextlib.suppress(OSError):
            os.killpg(process.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(10)


async def _read_stream(sock: str, until: float, counts: dict[str, int]) -> None:
    """One reader: `/v1/events?after=0`, read to its end, again, until `until`."""
    request = (
        b"GET /v1/events?after=0 HTTP/1.1\r\nHost: tuisched\r\n"
        b"X-Tuisched-Client: soak reader\r\n\r\n"
    )
    while time.time() < until:
        try:
            async with asyncio.timeout(max(0.1, until - time.time())):
                reader, writer = await asyncio.open_unix_connection(sock)
                counts["connections"] += 1
                try:
                    writer.write(request)
                    await _read_answer(reader, counts)
                except OSError:
                    counts["broken"] += 1  # the scheduler went away mid-stream
                finally:
                    writer.close()
        except TimeoutError:
            return
        except OSError:
            counts["refused"] += 1  # down: nothing listens on the socket
        await asyncio.sleep(0.2)


async def _read_answer(reader: asyncio.StreamReader, counts: dict[str, int]) -> None:
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 20)
    status = head.split(b" ", 2)[1].decode()
    counts[f"status_{status}"] = counts.get(f"status_{status}", 0) + 1
    if status != "200":
        return
    while True:  # the server sends a bare line every 15 s while nothing happens
        data = await asyncio.wait_for(reader.read(65536), 40)
        if not data:
            counts["ended_by_server"] += 1
            return
        counts["bytes"] += len(data)
        counts["events"] += data.count(b"}\n")


def reader_main(sock: str, streams: int, until: float, report: str) -> None:
    """`--reader`: `streams` readers of the event stream in this process, then a report."""
    counts = {"streams": streams, "connections": 0, "refused": 0, "bytes": 0, "events": 0}
    counts.update(broken=0, ended_by_server=0)

    async def run() -> None:
        await asyncio.gather(*(_read_stream(sock, until, counts) for _ in range(streams)))

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(run())
    Path(report).write_text(json.dumps(counts))


# --- the soak itself --------------------------------------------------------------------


@dataclass
class Record:
    """What the soak did, with wall-clock times."""

    began: float = 0.0
    first_ready: float | None = None
    stop_sent: float | None = None
    kills: list[dict[str, float | None]] = field(default_factory=list)
    disk: list[float] = field(default_factory=list)
    lock: dict[str, Any] = field(default_factory=dict)
    readers: list[float] = field(default_factory=list)
    ledger: dict[str, Any] = field(default_factory=dict)
    """`tuisched missed --json` just before the stop."""
    stopped_cleanly: bool = False


class Soak:
    """Runs the plan against a supervised scheduler and records when each fault happened."""

    def __init__(self, plan: Plan, supervisor: Supervisor, helpers: Helpers, seed: int) -> None:
        self.plan, self.sup, self.helpers = plan, supervisor, helpers
        self.rng = random.Random(seed + 1)  # noqa: S311  (fault times, not secrets)
        self.record = Record()
        self.t0 = time.monotonic()
        self._restart_at: float | None = None
        self._pending_kill: dict[str, float | None] | None = None

    def run(self) -> None:
        self.t0 = time.monotonic()
        self.record.began = time.time()
        self.sup.start()
        actions = self._actions()
        while True:
            now = time.monotonic() - self.t0
            state = self._tend(now)
            if actions[0][0] > now:
                time.sleep(0.05)
                continue
            _, name = actions.pop(0)
            if name == "end":
                break
            if name == "kill" and state != "ready":  # once the restart answers; the
                bisect.insort(actions, (now + 1.0, name))  # rest that is due goes first
            else:
                getattr(self, f"_do_{name}")()
        self.record.ledger = self.sup.ledger()
        self.record.stop_sent = time.time()
        self.record.stopped_cleanly = self.sup.stop()

    def _actions(self) -> list[tuple[float, str]]:
        plan = self.plan
        actions = [(t, "kill") for t in plan.kills]
        actions += [(plan.disk[0], "fill_disk"), (plan.disk[1], "free_disk")]
        actions += [(plan.lock[0], "lock"), (plan.readers[0], "readers")]
        actions.append((plan.duration, "end"))
        return sorted(actions)

    def _tend(self, now: float) -> str:
        """Notice a ready or dead scheduler; restart a killed one when its pause is over."""
        self.sup.disk.top_up()  # while it is full
        state = self.sup.poll()
        if state == "ready" and self.record.first_ready is None:
            self.record.first_ready = self.sup.current.ready if self.sup.current else None
        if state == "ready" and self._pending_kill is not None:
            self._pending_kill["ready"] = self.sup.current.ready if self.sup.current else None
            self._pending_kill = None
        if state == "down":
            if self._restart_at is None:
                self._restart_at = now + 1.0  # ended by itself: back after a second
            if now >= self._restart_at:
                self._restart_at = None
                self.sup.start()
                state = "starting"
        return state

    def _do_kill(self) -> None:
        killed = time.time()
        self.sup.kill()
        pause = self.rng.uniform(0.2, 3.0)
        self._restart_at = time.monotonic() - self.t0 + pause
        self._pending_kill = {"killed": killed, "pause": pause, "ready": None}
        self.record.kills.append(self._pending_kill)

    def _do_fill_disk(self) -> None:
        self.record.disk.append(time.time())
        self.sup.disk.fill()

    def _do_free_disk(self) -> None:
        self.sup.disk.free()
        self.record.disk.append(time.time())

    def _do_lock(self) -> None:
        seconds = self.plan.lock[1] - self.plan.lock[0]
        disk = self.sup.disk
        self.helpers.hold_lock(disk.enter(), disk.inside / "history.db", seconds)
        self.record.lock["asked"] = time.time()

    def _do_readers(self) -> None:
        start, end = self.plan.readers
        until = time.time() + (end - start)
        self.helpers.start_readers(self.sup.sock, self.plan.reader_count, until)
        self.record.readers = [time.time(), until]


# --- the analysis -----------------------------------------------------------------------


def _epoch(text: str) -> float:
    return datetime.fromisoformat(text).timestamp()


def read_executions(path: Path) -> list[dict[str, object]]:
    """The job's own lines: slot (epoch seconds, None for a run by hand), pid, start, run."""
    found: list[dict[str, object]] = []
    if not path.exists():
        return found
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        parts = line.split()
        if len(parts) == 4:
            slot, pid, start, run = parts
            found.append({"slot": _epoch(slot), "pid": int(pid), "start": float(start), "run": run})
        elif len(parts) == 3:  # no slot: a run started by hand
            pid, start, run = parts
            found.append({"slot": None, "pid": int(pid), "start": float(start), "run": run})
    return found


def read_history(db: Path) -> list[dict[str, object]]:
    """Every row of the history (a copy of it: SQLite does not follow /proc/PID/root)."""
    if not db.exists():
        raise sqlite3.OperationalError(f"no {db} (the state was not copied)")
    with contextlib.closing(sqlite3.connect(db, timeout=30)) as con:
        con.row_factory = sqlite3.Row
        rows = con.execute(
            'SELECT run_id, job, slot, "trigger", state, result, reason, started_at FROM runs'
        ).fetchall()
    history = []
    for row in rows:
        item = dict(row)
        slot = item["slot"]
        item["slot"] = _epoch(slot if "+" in slot else slot + "+00:00") if slot else None
        history.append(item)
    return history


def percentile(values: list[float], q: float) -> float | None:
    """The q-th percentile (0-100), nearest-rank."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, round(q / 100 * len(ordered) + 0.5) - 1))]


def outages(record: Record) -> list[tuple[float, float, str]]:
    """The windows (wall clock) whose slots do not count for lateness."""
    windows: list[tuple[float, float, str]] = []
    end = record.stop_sent or time.time()
    if record.first_ready is not None:
        windows.append((record.began, record.first_ready + SETTLE, "first start"))
    for kill in record.kills:
        ready = kill["ready"]
        assert kill["killed"] is not None
        windows.append(
            (kill["killed"] - BEFORE_KILL, (ready if ready else end) + SETTLE, "kill -9")
        )
    if len(record.disk) == 2:
        windows.append((record.disk[0], record.disk[1] + SETTLE, "full disk"))
    lock = record.lock
    if isinstance(lock.get("held"), float) and isinstance(lock.get("released"), float):
        windows.append((lock["held"], lock["released"] + SETTLE, "lock"))
    return windows


def _in(windows: list[tuple[float, float, str]], moment: float) -> str:
    return next((name for start, end, name in windows if start <= moment <= end), "")


def analyse_job(
    job: JobPlan,
    executions: list[dict[str, Any]],
    rows: list[dict[str, Any]],
    span: tuple[float, float],
    windows: list[tuple[float, float, str]],
) -> dict[str, Any]:
    """Twice, lost and late for one job, from its own log against its history rows.

    Each expected slot is ran (a line in the job's log), else abandoned and recorded (an
    ABANDONED row), else missed in the ledger (a MISSED row, or counted by one), else
    lost (no row, or rows in other states only)."""
    by_slot: dict[float, list[dict[str, Any]]] = {}
    for ex in executions:
        if ex["slot"] is not None:
            by_slot.setdefault(float(ex["slot"]), []).append(ex)
    rows_of: dict[float | None, list[dict[str, Any]]] = {}
    for row in rows:
        rows_of.setdefault(row["slot"], []).append(row)
    twice = {s: [str(e["run"]) for e in found] for s, found in by_slot.items() if len(found) > 1}
    missed = _ledger_slots(rows, job.period)
    first = math.ceil(span[0] / job.period) * job.period
    expected = range(first, int(span[1]), job.period)
    abandoned, in_ledger, lost = [], [], []
    for second in expected:
        if second in by_slot:
            continue
        found = rows_of.get(second, [])
        states = [f"{r['state']}/{r['trigger']}" for r in found]
        item = {"slot": _iso(second), "history": states, "outage": _in(windows, second)}
        if any(r["state"] == "ABANDONED" for r in found):
            abandoned.append(item)
        elif second in missed:
            in_ledger.append(item)
        else:
            lost.append(item)
    late_out: list[float] = []
    late_in: list[float] = []
    over = []
    for slot, found in by_slot.items():
        lateness = min(float(e["start"]) for e in found) - slot
        if _in(windows, slot):
            late_in.append(lateness)
        else:
            late_out.append(lateness)
            if lateness > LATE:
                over.append({"slot": _iso(slot), "late": round(lateness, 3)})
    missed_rows = {r["slot"] for r in rows if r["state"] == "MISSED"}
    catchups = {r["run_id"] for r in rows if r["trigger"] == "catchup"}
    ran_but_missed = [  # a catch-up run made up the slot: that one is in the ledger rightly
        _iso(s) for s in sorted(by_slot)
        if s in missed_rows and any(e["run"] not in catchups for e in by_slot[s])
    ]  # fmt: skip
    known = {r["run_id"] for r in rows}
    unrecorded = [str(e["run"]) for e in executions if e["run"] not in known]
    return {
        "period": job.period,
        "misfire_once": job.misfire_once,
        "expected": len(expected),
        "executions": len(executions),
        "slots_ran": sum(1 for second in expected if second in by_slot),
        "twice": {_iso(s): runs for s, runs in sorted(twice.items())},
        "abandoned_recorded": abandoned,
        "missed_in_ledger": in_ledger,
        "lost": lost,
        "missed_rows": sum(1 for r in rows if r["state"] == "MISSED"),
        "late_outside": _spread(late_out),
        "late_inside": _spread(late_in),
        "over_1s_outside": over,
        "executions_not_in_history": unrecorded,
        "ran_but_recorded_missed": ran_but_missed,
        "_late_outside": late_out,
    }


def _ledger_slots(rows: list[dict[str, Any]], period: int) -> set[float]:
    """Slots the downtime ledger accounts for: MISSED rows, and the earlier slots that the
    oldest row of a long downtime counts ("(and about N earlier slots)")."""
    slots: set[float] = set()
    for row in rows:
        if row["state"] != "MISSED" or row["slot"] is None:
            continue
        slot = float(row["slot"])
        slots.add(slot)
        count = earlier_slots(str(row["reason"] or ""))
        slots.update(slot - period * i for i in range(1, count + 1))
    return slots


def _spread(values: list[float]) -> dict[str, float | int | None]:
    def r(value: float | None) -> float | None:
        return None if value is None else round(value, 3)

    return {
        "n": len(values),
        "p50": r(percentile(values, 50)),
        "p95": r(percentile(values, 95)),
        "max": r(max(values) if values else None),
    }


def _iso(moment: float) -> str:
    return datetime.fromtimestamp(moment, UTC).isoformat(timespec="seconds")


def analyse(
    jobs: list[JobPlan], out: Path, record: Record, leftovers: list[dict[str, Any]]
) -> dict[str, Any]:
    """The report: per job, then the criteria."""
    try:
        history = read_history(out / "state-copy" / "history.db")
        history_error = ""
    except sqlite3.Error as error:
        history, history_error = [], str(error)
    windows = outages(record)
    begin = record.first_ready or record.began
    span = (begin, (record.stop_sent or time.time()) - 1.0)
    per_job: dict[str, dict[str, Any]] = {}
    late_out: list[float] = []
    for job in jobs:
        executions = read_executions(out / "jobs" / f"{job.name}.log")
        rows = [row for row in history if row["job"] == job.name]
        per_job[job.name] = analyse_job(job, executions, rows, span, windows)
        late_out += per_job[job.name].pop("_late_outside")

    def total(key: str) -> int:
        return sum(len(result[key]) for result in per_job.values())

    def examples(key: str) -> list[str]:
        return [
            f"{name} {json.dumps(item)}"
            for name, result in per_job.items()
            for item in (result[key].items() if key == "twice" else result[key])
        ]

    criteria = {
        "no slot ran twice": examples("twice"),
        "no slot lost (no execution, no ABANDONED row, not in the ledger)": examples("lost"),
        "no process left behind": _grouped(leftovers),
        f"no slot over {LATE:g} s late outside the outages": examples("over_1s_outside"),
        "the scheduler stopped cleanly at the end": [] if record.stopped_cleanly else ["no"],
        "the history can be read": [history_error] if history_error else [],
    }
    counts = {name: len(found) for name, found in criteria.items()}
    counts["no process left behind"] = len(leftovers)
    return {
        "pass": not any(counts.values()),
        "criteria": {
            name: {"count": counts[name], "pass": not counts[name], "examples": found}
            for name, found in criteria.items()
        },
        "late_outside_all_jobs": _spread(late_out),
        "slots": {
            "expected": sum(result["expected"] for result in per_job.values()),
            "ran": sum(result["slots_ran"] for result in per_job.values()),
            "abandoned, recorded": total("abandoned_recorded"),
            "missed, in the ledger": total("missed_in_ledger"),
            "lost": total("lost"),
        },
        "abandoned_recorded": examples("abandoned_recorded"),
        "ledger_at_end": _ledger_summary(record.ledger),
        "executions_not_in_history": total("executions_not_in_history"),
        "ran_but_recorded_missed": total("ran_but_recorded_missed"),
        "history_error": history_error,
        "history_states": _count(f"{r['state']}/{r['trigger']}" for r in history),
        "jobs": per_job,
        "leftovers": leftovers,
        "outages": [
            {"from": _iso(a), "to": _iso(b), "what": name, "seconds": round(b - a, 1)}
            for a, b, name in windows
        ],
    }


def _ledger_summary(ledger: dict[str, Any]) -> dict[str, Any]:
    """Per job, what `tuisched missed --json` listed at the end: slots, how many wait."""
    if "entries" not in ledger:
        return {"error": ledger.get("error", "not asked")}
    return {
        str(entry["job"]): {"count": entry["count"], "pending": entry["pending"],
                            "decided": entry["decided"] or entry["policy"]}
        for entry in ledger["entries"]
    }  # fmt: skip


def _grouped(processes: list[dict[str, Any]]) -> list[str]:
    """Processes left behind, one line per job and command: how many, started when."""
    groups: dict[tuple[str, str], list[str]] = {}
    for process in processes:
        key = (str(process.get("job", "?")), str(process["command"]))
        groups.setdefault(key, []).append(str(process.get("started", "?")))
    return [
        f"{job}: {len(starts)} x `{command}`, started {min(starts)} to {max(starts)}"
        for (job, command), starts in sorted(groups.items())
    ]


def _count(items: Iterable[str]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for item in items:
        counts[item] = counts.get(item, 0) + 1
    return dict(sorted(counts.items()))


def left_behind(token: str, schedulers: list[int], within: float = 10.0) -> list[dict[str, Any]]:
    """What of the soak's jobs, keepers and schedulers is still alive `within` s after
    the stop (the stop ends escaped processes; give the kernel a moment to reap)."""
    deadline = time.monotonic() + within
    while True:
        found = marked_processes(token)
        found += [
            {"pid": pid, "ppid": stat[1], "command": "a scheduler of this soak"}
            for pid in schedulers
            if (stat := _stat(pid)) is not None and stat[0] != "Z"
        ]
        if not found or time.monotonic() > deadline:
            return found
        time.sleep(0.2)


def end_marked(token: str) -> None:
    """The way out: kill whatever of the soak's jobs and keepers still runs."""
    for process in marked_processes(token):
        _kill_quietly(process["pid"])


# --- the command line -------------------------------------------------------------------


def print_summary(report: dict[str, Any], out: Path) -> None:
    jobs: dict[str, dict[str, Any]] = report["jobs"]
    print("slots: ran = a line in the job's log; aband. = no line, an ABANDONED row; "
          "ledger = no line, a MISSED row; lost = none of these")  # fmt: skip
    print(f"{'job':4} {'every':>5} {'exp':>5} {'ran':>5} {'twice':>5} {'aband.':>6} "
          f"{'ledger':>6} {'lost':>4} {'p50 ms':>7} {'p95 ms':>7} {'max ms':>7} {'>1s':>4} "
          f"{'no row':>6}")  # fmt: skip
    for name, job in jobs.items():
        late: dict[str, float] = job["late_outside"]
        print(
            f"{name:4} {job['period']:>4}s {job['expected']:>5} {job['slots_ran']:>5} "
            f"{len(job['twice']):>5} {len(job['abandoned_recorded']):>6} "
            f"{len(job['missed_in_ledger']):>6} {len(job['lost']):>4} "
            f"{_ms(late['p50']):>7} {_ms(late['p95']):>7} {_ms(late['max']):>7} "
            f"{len(job['over_1s_outside']):>4} {len(job['executions_not_in_history']):>6}"
        )
    slots = report["slots"]
    print("slots: " + "; ".join(f"{what} {count}" for what, count in slots.items()))
    for example in report["abandoned_recorded"][:EXAMPLES]:
        print(f"      abandoned, recorded: {example}")
    print(f"ledger at the end (tuisched missed --json): {report['ledger_at_end']}")
    late_all: dict[str, float] = report["late_outside_all_jobs"]
    print(f"lateness outside the outages, all jobs: p50 {_ms(late_all['p50'])} ms, "
          f"p95 {_ms(late_all['p95'])} ms, max {_ms(late_all['max'])} ms (n={late_all['n']})")  # fmt: skip
    print(f"history: {report['history_states']}")
    print(f"executions with no history row: {report['executions_not_in_history']}; "
          f"slots that ran (not as a catch-up) yet are recorded MISSED: "
          f"{report['ran_but_recorded_missed']}")  # fmt: skip
    readers = report["readers"]
    statuses = {k: v for k, v in readers.items() if k.startswith("status_")}
    print(f"readers: {readers.get('streams', 0)} streams, {readers.get('connections', 0)} "
          f"connections {statuses}, {readers.get('events', 0)} events, "
          f"{readers.get('refused', 0)} refused, {readers.get('broken', 0)} broken")  # fmt: skip
    starts = report["scheduler_starts"]
    answered = [s["ready_after"] for s in starts if s["ready_after"] is not None]
    print(f"scheduler starts: {len(starts)}, answering after {min(answered, default=0):.1f}-"
          f"{max(answered, default=0):.1f} s")  # fmt: skip
    for problem in report["problems"]:
        print(f"note: {problem}")
    for name, verdict in report["criteria"].items():
        print(f"{'PASS' if verdict['pass'] else 'FAIL'}  {name} ({verdict['count']})")
        for example in verdict["examples"][:EXAMPLES]:
            print(f"      {example}")
        if len(verdict["examples"]) > EXAMPLES:
            print(f"      ... {len(verdict['examples']) - EXAMPLES} more in the report")
    print(f"{'PASS' if report['pass'] else 'FAIL'}: report in {out / 'report.json'}")


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1000:.0f}"


def _interrupt(signum: int, _frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10.0, help="length of the soak")
    parser.add_argument("--out", type=Path, help="folder for everything (default: a new one)")
    parser.add_argument("--seed", type=int, help="for the times of the faults")
    parser.add_argument("--readers", type=int, default=200, help="event stream readers")
    args = parser.parse_args()
    if args.minutes < 1:
        parser.error("--minutes: at least 1 (the faults need room: windows of 10 s at least)")
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)  # noqa: S311  (a seed)
    out = args.out or Path(tempfile.mkdtemp(prefix="tuisched-soak-"))
    out.mkdir(parents=True, exist_ok=True)
    (out / "jobs").mkdir(exist_ok=True)
    token = "soak-" + secrets.token_hex(6)
    jobs = _jobs(token)
    plan = make_plan(args.minutes, random.Random(seed), args.readers)  # noqa: S311
    try:
        disk = StateDisk(out / "state", lifetime=plan.duration + 3600)
    except NoNamespaces as refused:
        print(f"soak: no user namespaces here, so no disk to fill ({refused})", file=sys.stderr)
        return 2
    if len(os.fsencode(disk.outside / "control.sock")) > MAX_SOCKET:
        disk.close()
        parser.error(f"--out: {disk.outside / 'control.sock'} is too long for a Unix socket")
    supervisor = Supervisor(write_config(out, jobs, token), out, token, disk)
    helpers = Helpers(out)
    soak = Soak(plan, supervisor, helpers, seed)
    print(f"soak of {args.minutes:g} min, seed {seed}, in {out}; "
          f"{len(plan.kills)} kills, full disk {plan.disk[1] - plan.disk[0]:.0f} s, "
          f"lock {plan.lock[1] - plan.lock[0]:.0f} s, {plan.reader_count} readers for "
          f"{plan.readers[1] - plan.readers[0]:.0f} s", flush=True)  # fmt: skip
    signal.signal(signal.SIGTERM, _interrupt)
    load_before = os.getloadavg()
    try:
        readers, leftovers = _soak(soak, helpers, supervisor, token, out)
    except KeyboardInterrupt:
        print("interrupted: every process of the soak was ended; no report", file=sys.stderr)
        return 130
    report = analyse(jobs, out, soak.record, leftovers)
    report.update({
        "machine": f"{platform.node()} | {os.cpu_count()} CPUs ({_cpu_model()}) | Python "
                   f"{platform.python_version()} | kernel {platform.release()}",
        "load_average_before": load_before, "load_average_after": os.getloadavg(),
        "date": _iso(soak.record.began), "minutes": args.minutes, "seed": seed,
        "plan": plan.__dict__, "record": soak.record.__dict__, "readers": readers,
        "scheduler_starts": [
            {"started": _iso(i.started), "ready_after": None if i.ready is None
             else round(i.ready - i.started, 2), "how": i.how} for i in supervisor.incarnations
        ],
        "problems": supervisor.problems,
    })  # fmt: skip
    (out / "report.json").write_text(json.dumps(report, indent=2, default=str))
    print_summary(report, out)
    return 0 if report["pass"] else 1


def _cpu_model() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.partition(":")[2].strip()
    return "model unknown"


def _soak(
    soak: Soak, helpers: Helpers, supervisor: Supervisor, token: str, out: Path
) -> tuple[dict[str, object], list[dict[str, object]]]:
    """Run the soak, copy the state's files out of its disk, and collect what the helpers
    saw and what was left behind; whatever happens (Ctrl-C, SIGTERM, an error), end
    every process it started on the way out, the holder of the disk last."""
    disk = supervisor.disk
    try:
        soak.run()
        lock = helpers.lock_result(within=60) if helpers.lock else {"error": "never asked"}
        soak.record.lock.update(lock)
        readers = helpers.reader_results(within=60)
        disk.free()
        for failed in disk.copy_state(out / "state-copy"):
            supervisor.problems.append(f"not copied from the state: {failed}")
        pids = [i.process.pid for i in supervisor.incarnations]
        return readers, left_behind(token, pids)
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):  # a second Ctrl-C must not stop this
            signal.signal(sig, signal.SIG_IGN)
        helpers.end_all()
        disk.free()
        supervisor.end_all()
        end_marked(token)
        disk.close()


if __name__ == "__main__":
    if len(sys.argv) == 6 and sys.argv[1] == "--reader":
        reader_main(sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), sys.argv[5])
    else:
        sys.exit(main())
