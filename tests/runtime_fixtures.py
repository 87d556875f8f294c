"""A real runtime on a temporary state directory, for engine and runtime tests."""

from __future__ import annotations

import asyncio
import textwrap
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

from tuisched.runtime.clock import ManualClock
from tuisched.runtime.configfiles import load_config
from tuisched.runtime.runtime import Runtime

from .recorder import Recorder


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
