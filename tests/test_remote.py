"""The control seam over the Unix socket: the same answers as in-process, errors as the
same classes, an event stream that resumes without loss or repeats, and only the
scheduler's own user let in."""

from __future__ import annotations

import asyncio
import inspect
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import aiohttp
import pytest

import tuisched.runtime.control.remote
from tuisched.domain.errors import (
    ControlError,
    JobActionError,
    RunRefusedError,
    SchedulerNotRunningError,
    UnknownJobError,
    UnknownRunError,
)
from tuisched.domain.events import Event, RunFinished, RunStarted
from tuisched.domain.views import ConfigEdit, Pause, PauseKind, SchedulerState
from tuisched.runtime.clock import ManualClock
from tuisched.runtime.configfiles import load_config
from tuisched.runtime.control import (
    LocalScheduler,
    RemoteControl,
    control_socket,
    scheduler_answers,
    socket_path,
)
from tuisched.runtime.control.protocol import raise_error
from tuisched.runtime.control.remote import RECONNECT_SECONDS
from tuisched.runtime.control.seam import SchedulerControl
from tuisched.runtime.runtime import Runtime

from .runtime_fixtures import write_config

JOBS = """
hello: {command: "echo hello; echo world", schedule: manual}
slow: {command: "sleep 30", schedule: manual}
many: {command: "true", schedule: manual, overlap: allow}
"""


@asynccontextmanager
async def serving(path: Path) -> AsyncIterator[tuple[LocalScheduler, RemoteControl]]:
    """A scheduler in this process, serving its socket, and a client of that socket."""
    scheduler = LocalScheduler(Runtime(load_config(path), kill_grace=0.5))
    await scheduler.start()
    remote = RemoteControl(socket_path(path.parent / "state"), client="test")
    try:
        await remote.connect()
        yield scheduler, remote
    finally:
        await remote.close()
        await scheduler.stop(grace=1)


async def _until_event(events: list[Event], kind: type[Event], count: int = 1) -> None:
    async with asyncio.timeout(10):
        while len([e for e in events if isinstance(e, kind)]) < count:  # noqa: ASYNC110
            await asyncio.sleep(0.02)


async def test_the_socket_answers_as_the_scheduler_does(tmp_path: Path) -> None:
    async with serving(write_config(tmp_path, JOBS)) as (scheduler, remote):
        local = scheduler.control("test")
        assert (await remote.jobs()) == (await local.jobs())
        status = await remote.status()
        assert status.state is SchedulerState.RUNNING
        assert status.pid == os.getpid()
        assert remote.server["pid"] == os.getpid()
        events: list[Event] = []
        subscription = remote.subscribe(events.append, after=status.last_seq)
        run = await remote.run_now("hello")
        await _until_event(events, RunFinished)
        subscription.unsubscribe()
        output = await remote.output(run.run_id)
        assert output.lines == ("hello", "world")
        await remote.set_paused(Pause(kind=PauseKind.JOB, name="hello"), paused=True)
        assert (await local.status()).pauses == (Pause(kind=PauseKind.JOB, name="hello"),)
        with pytest.raises(UnknownJobError, match="no job named 'nope'"):
            await remote.run_now("nope")
    actions = (tmp_path / "state" / "actions.log").read_text()
    assert "(test) | pause | job hello" in actions  # the client named in the actions log


async def test_a_refused_run_comes_back_as_the_scheduler_said_it(tmp_path: Path) -> None:
    """A run the job's overlap refuses is RunRefusedError across the socket, with its
    refusal whole (the run in the way, since when, whether it may queue)."""
    async with serving(write_config(tmp_path, JOBS)) as (scheduler, remote):
        events: list[Event] = []
        subscription = remote.subscribe(events.append, after=(await remote.status()).last_seq)
        first = await remote.run_now("slow")
        await _until_event(events, RunStarted)
        subscription.unsubscribe()
        with pytest.raises(RunRefusedError) as over_the_socket:
            await remote.run_now("slow")
        with pytest.raises(RunRefusedError) as in_process:
            await scheduler.control("test").run_now("slow")
        assert over_the_socket.value.refusal == in_process.value.refusal
        assert str(over_the_socket.value) == str(in_process.value)
        assert over_the_socket.value.refusal.run_id == first.run_id
        assert over_the_socket.value.refusal.queueable
        queued = await remote.run_now("slow", queue=True)
        assert [run.run_id for run in (s.run for s in await remote.runs())] == [
            first.run_id, queued.run_id,
        ]  # fmt: skip


async def test_a_reconnect_from_a_sequence_number_misses_nothing_and_repeats_nothing(
    tmp_path: Path,
) -> None:
    async with serving(write_config(tmp_path, JOBS)) as (_scheduler, remote):
        first: list[Event] = []
        following = remote.subscribe(first.append, after=0)
        for done in range(1, 4):
            await remote.run_now("hello")
            await _until_event(first, RunFinished, count=done)
        following.unsubscribe()
        middle = first[len(first) // 2].seq
        later = len([e for e in first if isinstance(e, RunFinished) and e.seq > middle])
        second: list[Event] = []
        resumed = remote.subscribe(second.append, after=middle)
        await remote.run_now("hello")
        await _until_event(second, RunFinished, count=later + 1)
        resumed.unsubscribe()
    seqs = [e.seq for e in second]
    assert seqs == sorted(set(seqs))  # no repeats, in order
    assert seqs[0] == middle + 1  # nothing missed after `middle`
    assert seqs == list(range(middle + 1, seqs[-1] + 1))


def test_every_query_and_command_of_the_seam_is_made_from_the_seam_s_own_method() -> None:
    members = {name: getattr(SchedulerControl, name) for name in dir(SchedulerControl)}
    seam = {name for name, member in members.items()
            if not name.startswith("_") and inspect.iscoroutinefunction(member)}  # fmt: skip
    assert len(seam) > 30
    for name in seam:
        assert getattr(RemoteControl, name).__wrapped__ is getattr(SchedulerControl, name), name


async def test_a_dropped_event_stream_waits_on_the_clock_then_resumes(tmp_path: Path) -> None:
    """Nobody listens at first: the follower waits RECONNECT_SECONDS on its clock (not
    the wall's), then reads every event from where it was."""
    path = write_config(tmp_path, JOBS)
    clock = ManualClock()
    follower = RemoteControl(socket_path(tmp_path / "state"), client="test", clock=clock)
    waiting = clock.arming(RECONNECT_SECONDS)
    seen: list[Event] = []
    subscription = follower.subscribe(seen.append, after=0)
    try:
        async with asyncio.timeout(10):
            await waiting  # the first read found no scheduler
        async with serving(path) as (_, remote):
            finished: list[Event] = []
            watching = remote.subscribe(finished.append, after=0)
            await remote.run_now("hello")
            await _until_event(finished, RunFinished)
            watching.unsubscribe()
            assert seen == []  # still waiting on the clock
            await clock.advance(RECONNECT_SECONDS)
            await _until_event(seen, RunFinished)
            assert [e.seq for e in seen] == [e.seq for e in finished][: len(seen)]
    finally:
        subscription.unsubscribe()
        await follower.close()


async def test_another_protocol_version_is_refused_naming_both(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write_config(tmp_path, JOBS)
    async with serving(path):
        monkeypatch.setattr(tuisched.runtime.control.remote, "PROTOCOL", 2)
        other = RemoteControl(socket_path(tmp_path / "state"), client="test")
        try:
            with pytest.raises(ControlError, match="speaks protocol version 1; this tuisched "
                               "speaks version 2"):  # fmt: skip
                await other.connect()
        finally:
            await other.close()


async def test_no_scheduler_is_said_plainly(tmp_path: Path) -> None:
    remote = RemoteControl(tmp_path / "state" / "control.sock", client="test")
    try:
        with pytest.raises(SchedulerNotRunningError, match="no scheduler is running on"):
            await remote.connect()
    finally:
        await remote.close()


HELLO = json.dumps({"protocol": 1, "tuisched": "test", "pid": 1}).encode()


async def _dropping(path: Path, *, dies: bool) -> asyncio.Server:
    """A socket whose first call is dropped half-way (read, then its connection closed
    unanswered); `dies`: the listener closes with it, the socket file left behind, as
    a scheduler killed mid-call leaves it. Later calls (hellos) are answered."""
    path.parent.mkdir(parents=True, exist_ok=True)
    calls = 0

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal calls
        calls += 1
        await reader.readuntil(b"\r\n\r\n")
        if calls == 1:
            if dies:
                server.close()
            writer.close()
            return
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                     b"Content-Length: %d\r\n\r\n%s" % (len(HELLO), HELLO))  # fmt: skip
        await writer.drain()
        writer.close()

    server = await asyncio.start_unix_server(answer, path=str(path))
    return server


async def test_a_scheduler_killed_mid_call_is_said_to_be_gone(tmp_path: Path) -> None:
    """Killed with a call in flight, the scheduler resets it and leaves its socket file
    behind, refusing connections: that is a scheduler that stopped, not one that did
    not answer (an attached console leaves saying so, with exit code 0)."""
    path = tmp_path / "state" / "control.sock"
    server = await _dropping(path, dies=True)
    remote = RemoteControl(path, client="test")
    try:
        with pytest.raises(SchedulerNotRunningError, match="no scheduler is running on"):
            await remote.status()
        assert path.exists()  # the file is there; nothing listens on it
    finally:
        server.close()
        await remote.close()


async def test_a_call_dropped_by_a_scheduler_that_still_answers_is_not_said_to_be_gone(
    tmp_path: Path,
) -> None:
    path = tmp_path / "state" / "control.sock"
    server = await _dropping(path, dies=False)
    remote = RemoteControl(path, client="test")
    try:
        with pytest.raises(ControlError, match="did not answer") as raised:
            await remote.status()
        assert not isinstance(raised.value, SchedulerNotRunningError)
    finally:
        server.close()
        await remote.close()


async def test_a_state_directory_too_deep_for_a_socket_path_still_works(tmp_path: Path) -> None:
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    assert len(str(socket_path(deep / "state"))) > 108  # beyond what a Unix socket takes
    async with serving(write_config(deep, JOBS)) as (_scheduler, remote):
        assert (await remote.status()).jobs == 3


def _deep_and_never_used(tmp_path: Path) -> Path:
    """A configuration whose socket path is too long for a Unix socket, in a folder
    where no scheduler ever ran (no state folder yet)."""
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    path = write_config(deep, JOBS)
    assert len(str(control_socket(path))) > 108
    assert not control_socket(path).parent.exists()
    return path


async def test_a_state_directory_too_deep_that_never_held_a_scheduler_has_none(
    tmp_path: Path,
) -> None:
    sock = control_socket(_deep_and_never_used(tmp_path))
    assert not scheduler_answers(sock)
    remote = RemoteControl(sock, client="test")
    try:
        with pytest.raises(SchedulerNotRunningError, match="no scheduler is running on"):
            await remote.connect()
    finally:
        await remote.close()


def test_status_in_a_deep_folder_where_no_scheduler_ran_exits_69(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "tuisched", "status", "-c", str(_deep_and_never_used(tmp_path))],
        capture_output=True, text=True, check=False, timeout=60,
    )  # fmt: skip
    assert done.returncode == 69, done.stderr
    assert done.stderr.startswith("tuisched: no scheduler is running on")


SYSTEM_PYTHON = Path("/usr/bin/python3")
"""An interpreter another user may run (the project's may sit in a private folder)."""


@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("runuser") is None or not SYSTEM_PYTHON.exists(),
    reason="needs root, runuser and /usr/bin/python3",
)
async def test_another_user_is_refused_and_recorded() -> None:
    # A folder the other user can reach (pytest's own are private to root).
    folder = Path(tempfile.mkdtemp(prefix="tuisched-peer-", dir="/tmp"))
    try:
        folder.chmod(0o755)
        async with serving(write_config(folder, JOBS)):
            state = folder / "state"
            state.chmod(0o755)  # let the other user reach the socket: the kernel check must hold
            socket_path(state).chmod(0o666)
            program = (
                "import http.client, socket, sys\n"
                "class Unix(http.client.HTTPConnection):\n"
                "    def connect(self):\n"
                "        self.sock = socket.socket(socket.AF_UNIX)\n"
                "        self.sock.connect(sys.argv[1])\n"
                "c = Unix('tuisched'); c.request('GET', '/v1/status')\n"
                "r = c.getresponse(); print(r.status, r.read().decode())\n"
            )
            done = await asyncio.to_thread(
                subprocess.run,
                ["runuser", "-u", "nobody", "--", str(SYSTEM_PYTHON), "-c", program,
                 str(socket_path(state))],
                capture_output=True, text=True, timeout=30, check=False,
            )  # fmt: skip
        status, _, body = done.stdout.partition(" ")
        assert status == "403", done.stdout + done.stderr
        assert json.loads(body)["message"] == "only the scheduler's own user may"
        actions = (state / "actions.log").read_text()
        assert "nobody (uid" in actions
        assert "refused | the control socket" in actions
    finally:
        shutil.rmtree(folder)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("settings: {state_dir: here}\njobs: {}\n", "here"),
        ("settings:\n  state_dir: 'there'\njobs:\n  a: [broken\n", "there"),  # not YAML
        ("settings: {state_dir: ~/x}\njobs:\n  a: {command: 1}\n", "HOME/x"),  # not valid
    ],
)
def test_the_socket_is_found_from_a_file_that_does_not_validate(
    tmp_path: Path, text: str, expected: str
) -> None:
    path = tmp_path / "tuisched.yaml"
    path.write_text(text)
    folder = Path.home() / "x" if expected == "HOME/x" else tmp_path / expected
    assert control_socket(path) == folder / "control.sock"


def test_an_error_whose_class_builds_its_message_reaches_the_client_as_the_scheduler_said() -> None:
    for cls, message in ((UnknownRunError, "no run with id 0a1b2c3d4e5f in the history"),
                         (UnknownJobError, "no job named 'nightly'")):  # fmt: skip
        with pytest.raises(cls) as raised:
            raise_error({"error": cls.__name__, "message": message}, 404)
        assert str(raised.value) == message


async def test_hostile_requests_are_answered_in_one_line_and_the_scheduler_goes_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = write_config(tmp_path, JOBS)
    nested = "[" * 100_000 + "]" * 100_000
    cases = [
        ("GET", "/v1/simulate", None, "simulate needs the argument"),
        ("GET", f"/v1/events?after={'9' * 5_000}", None, "after must be an event's number"),
        ("POST", "/v1/run_now", nested, "nested too deeply"),
    ]
    async with serving(path) as (_, remote):
        connector = aiohttp.UnixConnector(path=str(socket_path(tmp_path / "state")))
        async with aiohttp.ClientSession(connector=connector) as session:
            for method, url, body, said in cases:
                async with session.request(
                    method, f"http://tuisched{url}", data=body,
                    headers={"Content-Type": "application/json"},
                ) as response:  # fmt: skip
                    assert response.status in (400, 409), (url, response.status)
                    answer = await response.json()
                assert answer["error"] == "WireError", answer
                assert said in answer["message"], answer
        assert (await remote.status()).state is SchedulerState.RUNNING
    assert "Traceback" not in caplog.text


async def test_a_client_holds_at_most_so_many_event_streams_each_replayed_from_the_start(
    tmp_path: Path,
) -> None:
    from tuisched.runtime.control.server import STREAMS_PER_CLIENT

    path = write_config(tmp_path, JOBS)
    async with serving(path) as (_, remote):
        for _ in range(3):  # some events in the journal to replay
            await remote.run_now("many")
        async with _replays(tmp_path, STREAMS_PER_CLIENT) as (session, streams):
            assert [s.status for s in streams] == [200] * STREAMS_PER_CLIENT
            async with session.get("http://tuisched/v1/events?after=0") as refused:
                assert refused.status == 429
                assert "event streams a client" in (await refused.json())["message"]
            first = await asyncio.wait_for(streams[-1].content.readline(), 10)
            assert json.loads(first)["seq"] == 1  # the replay starts at the beginning


async def test_streams_replay_the_kept_events_whole_and_go_on_without_a_gap(
    tmp_path: Path,
) -> None:
    """Each stream's replay is handed over in one step on the scheduler's lane, and what
    comes next follows it: every stream reads the same lines, numbered without a gap."""
    from tuisched.runtime.control.server import STREAMS_PER_CLIENT

    path = write_config(tmp_path, JOBS)
    async with serving(path) as (_, remote):
        for _ in range(40):  # a journal to replay
            await remote.run_now("many")
        async with _replays(tmp_path, STREAMS_PER_CLIENT) as (_, streams):
            last = await remote.run_now("many")  # heard live, after the replays
            heard = [await _lines_until_the_end_of(stream, last.run_id) for stream in streams]
    seqs = [json.loads(line)["seq"] for line in heard[0]]
    assert seqs == list(range(1, seqs[-1] + 1))
    assert seqs[-1] > 40  # the replay (an event or more per run), and the live ones after it
    assert all(lines == heard[0] for lines in heard)  # the same bytes on every stream


@asynccontextmanager
async def _replays(
    tmp_path: Path, count: int
) -> AsyncIterator[tuple[aiohttp.ClientSession, list[aiohttp.ClientResponse]]]:
    """`count` event streams from the start of the scheduler's socket under `tmp_path`."""
    connector = aiohttp.UnixConnector(path=str(socket_path(tmp_path / "state")))
    async with aiohttp.ClientSession(connector=connector) as session:
        streams = [await session.get("http://tuisched/v1/events?after=0") for _ in range(count)]
        try:
            yield session, streams
        finally:
            for stream in streams:
                stream.close()


async def _lines_until_the_end_of(stream: aiohttp.ClientResponse, run_id: str) -> list[bytes]:
    """The event lines of `stream` up to the end of run `run_id` (keep-alives left out)."""
    lines: list[bytes] = []
    async with asyncio.timeout(20):
        while True:
            line = await stream.content.readline()
            if not line.strip():
                continue
            lines.append(line)
            event = json.loads(line)
            ended = event["type"] in ("RunFinished", "RunNotStarted")
            if ended and event["run"]["run_id"] == run_id:
                return lines


async def test_the_last_change_crosses_the_socket_and_is_undone_only_while_it_is_last(
    tmp_path: Path,
) -> None:
    async with serving(write_config(tmp_path, JOBS)) as (_scheduler, remote):
        assert await remote.last_change() is None
        await remote.edit(ConfigEdit.add_job("tidy", {"command": "true", "schedule": "manual"}))
        added = await remote.last_change()
        assert added is not None
        assert (added.action, added.subject, added.lines) == ("add", "job tidy", ("+ tidy",))
        await remote.edit(ConfigEdit.delete_job("many"))
        with pytest.raises(JobActionError, match="another change was made since"):
            await remote.undo(change=added.number)
        deleted = await remote.last_change()
        assert deleted is not None
        await remote.undo(change=deleted.number)
        assert await remote.last_change() == added
