"""A real runtime on a temporary state directory, for engine and runtime tests."""

from __future__ import annotations

import asyncio
import queue
import socket
import subprocess
import textwrap
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import pytest

from tuisched.runtime.clock import ManualClock
from tuisched.runtime.configfiles import load_config
from tuisched.runtime.runtime import Runtime

from .preloaded import ForkedProcess, spawn
from .recorder import Recorder

REPO = Path(__file__).resolve().parent.parent


def write_config(folder: Path, jobs_yaml: str, *, settings: str = "") -> Path:
    """A configuration in `folder` whose state_dir is `folder/state`."""
    path = folder / "tuisched.yaml"
    lines = {"timezone": "UTC", "state_dir": "state", "shutdown_grace": "2s"}
    for line in textwrap.dedent(settings).strip().splitlines():
        key, _, value = line.partition(":")
        lines[key.strip()] = value.strip()
    text = "settings:\n" + "".join(f"  {key}: {value}\n" for key, value in lines.items())
    text += "jobs:\n" + textwrap.indent(textwrap.dedent(jobs_yaml).strip("\n"), "  ") + "\n"
    path.write_text(text)
    return path


@asynccontextmanager
async def running(path: Path, **kwargs: object) -> AsyncIterator[tuple[Runtime, Recorder]]:
    """Start a runtime on `path`, yield it with a recorder of its events, stop it."""
    runtime = Runtime(load_config(path), kill_grace=0.5, **kwargs)  # type: ignore[arg-type]
    recorder = Recorder(runtime.bus)
    await runtime.start()
    try:
        yield runtime, recorder
    finally:
        await _stop(runtime, kwargs.get("clock"))


async def _stop(runtime: Runtime, clock: object) -> None:
    """Stop `runtime`; on a ManualClock, time passes while it drains (its grace is time)."""
    if not isinstance(clock, ManualClock):
        await runtime.stop()
        return
    stopping = asyncio.get_running_loop().create_task(runtime.stop())
    while not stopping.done():
        await clock.advance(1)
    await stopping


Factory = Callable[[str], Path]


# --- a headless scheduler as a real process -----------------------------------------


class Scheduler:
    """A headless tuisched subprocess whose stderr lines are read by a thread."""

    def __init__(
        self, config: Path, *, argv: list[str] | None = None, env: dict[str, str] | None = None
    ) -> None:
        """`argv` and `env`: another way to start it (default: this Python, this env)."""
        self.config = config
        streams: dict[str, Any] = {
            "stderr": subprocess.PIPE, "stdout": subprocess.DEVNULL, "stdin": subprocess.DEVNULL,
            "text": True, "cwd": REPO,
        }  # fmt: skip
        self.process: subprocess.Popen[str] | ForkedProcess
        if argv:
            self.process = subprocess.Popen(argv, env=env, **streams)
        else:
            self.process = spawn(["--no-ui", "-c", str(config)], env=env, **streams)
        self.lines: list[str] = []
        self._incoming: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self._incoming.put(line)
        self._incoming.put(None)

    def wait_for_line(self, fragment: str, within: float = 15) -> str:
        """The first new stderr line containing `fragment`, waiting up to `within` seconds."""
        deadline = time.monotonic() + within
        while (left := deadline - time.monotonic()) > 0:
            try:
                line = self._incoming.get(timeout=left)
            except queue.Empty:
                break
            if line is None:
                break
            self.lines.append(line)
            if fragment in line:
                return line
        raise AssertionError(f"no line with {fragment!r}; got:\n{''.join(self.lines)}")

    def finish(self, within: float = 20) -> int:
        status = self.process.wait(within)
        while (line := self._incoming.get(timeout=within)) is not None:
            self.lines.append(line)
        assert self.process.stderr is not None
        self.process.stderr.close()
        return status


@pytest.fixture
def schedulers() -> Iterator[list[Scheduler]]:
    started: list[Scheduler] = []
    yield started
    for scheduler in started:
        if scheduler.process.poll() is None:
            scheduler.process.kill()
            scheduler.process.wait(10)
        if scheduler.process.stderr is not None:
            scheduler.process.stderr.close()


def takes_connections(path: Path) -> bool:
    """Whether a socket listens at `path` (a file bound but not yet listening does not)."""
    with socket.socket(socket.AF_UNIX) as probe:
        try:
            probe.connect(str(path))
        except OSError:
            return False
    return True


@contextmanager
def listening(config: Path) -> Iterator[subprocess.Popen[str] | ForkedProcess]:
    """`tuisched --no-ui` on `config`, once its control socket listens; stopped after."""
    process = spawn(["--no-ui", "-c", str(config)], cwd=REPO, stdout=subprocess.DEVNULL,
                    stderr=subprocess.PIPE, text=True)  # fmt: skip
    sock = config.parent / "state" / "control.sock"
    deadline = time.monotonic() + 20
    while not takes_connections(sock):
        assert process.poll() is None, process.communicate()[1]
        assert time.monotonic() < deadline, "the scheduler never listened"
        time.sleep(0.05)  # a process we do not own: nothing to await
    try:
        yield process
    finally:
        process.terminate()
        process.communicate(timeout=20)
