"""wait_for sensors: a file matching a path or glob, watched without polling."""

from __future__ import annotations

import asyncio
import glob
import re
from collections.abc import Mapping
from pathlib import Path

from watchfiles import awatch

from tuisched.domain.model import WaitForSpec
from tuisched.domain.runs import Outcome, Result, RunState
from tuisched.runtime.execution.base import (
    _NO_PROPS,
    _RECHECK_MS,
    _WATCH_STEP_MS,
    _cut,
    _not_started,
)
from tuisched.runtime.execution.output import OutputCapture
from tuisched.runtime.threads import Lane, in_thread

# --- wait_for sensors ----------------------------------------------------------


_MAGIC = re.compile(r"[*?[]")


def _first_match(pattern: str) -> str | None:
    """The first existing path matching `pattern` (sorted), or None."""
    # Path.glob cannot take an absolute pattern; glob.glob can.
    matches = sorted(glob.glob(pattern, recursive="**" in pattern))  # noqa: PTH207
    return matches[0] if matches else None


def watch_root(pattern: str) -> tuple[Path, bool]:
    """The folder to watch for `pattern`, and whether to watch it recursively.

    That is the deepest existing folder above the pattern's first wildcard
    (or above its file name, for a plain path). The watch is recursive only
    when a match may appear deeper than that folder's direct children: a
    wildcard in a folder name, or folders on the way that do not exist yet.
    """
    parts = Path(pattern).absolute().parts
    wild = next((i for i, part in enumerate(parts) if _MAGIC.search(part)), len(parts) - 1)
    root = Path(*parts[:wild])
    recursive = wild < len(parts) - 1
    while not root.is_dir() and root != root.parent:
        root, recursive = root.parent, True
    return root, recursive


class WaitForRunner:
    """Succeeds when a file matching a path or glob exists or appears (SPEC R1).

    It checks the glob once, then watches the folder the match would appear
    in (`watch_root`) and re-checks on each batch of changes: no busy polling.
    Atomic saves (write a temporary file, rename it) count. The engine ends a
    fruitless wait with `stop(Result.TIMED_OUT)`.
    """

    def __init__(self, spec: WaitForSpec, *, output: OutputCapture) -> None:
        """Prepare a sensor for `spec.path` (`~` is expanded)."""
        self._pattern = str(Path(spec.path).expanduser())
        self._output = output
        self._stop_event: asyncio.Event | None = None
        self._stop: Result | None = None
        self._status = f"waiting for {spec.path}"
        self._ended = False

    @property
    def status(self) -> str:
        """What it waits for, then what it found."""
        return _cut(self._status)

    @property
    def message_data(self) -> Mapping[str, object]:
        """Always empty."""
        return _NO_PROPS

    async def start(self) -> int | None:
        """Get ready to watch; nothing can fail to launch."""
        if self._stop is None:
            self._stop_event = asyncio.Event()
        return None

    async def wait(self) -> Outcome:
        """Until a match exists, or `stop()` was called."""
        if self._stop_event is None:
            self._output.close()
            return _not_started(self._stop or Result.ERROR)
        try:
            found = await self._watch(self._stop_event)
        except OSError as exc:
            return self._ended_with(RunState.FAILED, f"cannot watch {self._pattern}: {exc}")
        finally:
            self._ended = True
            self._output.close()
        if found is not None:
            return self._ended_with(RunState.SUCCESS, f"found {found}")
        return self._ended_with(RunState.FAILED, f"no file matched {self._pattern}")

    def stop(self, result: Result, *, kill: bool = False) -> None:
        """End the watch promptly (within one watch step); `kill` changes nothing."""
        if self._ended:
            return
        if self._stop is None:
            self._stop = result
        if self._stop_event is not None:
            self._stop_event.set()

    async def _watch(self, stop_event: asyncio.Event) -> str | None:
        found = await in_thread(Lane.SENSORS, _first_match, self._pattern)
        if found is not None or stop_event.is_set():
            return found
        root, recursive = watch_root(self._pattern)
        async for _changes in awatch(
            root,
            stop_event=stop_event,
            watch_filter=None,  # the default filter drops names like *.swp or *~
            debounce=_WATCH_STEP_MS,
            step=_WATCH_STEP_MS,
            recursive=recursive,
            rust_timeout=_RECHECK_MS,
            yield_on_timeout=True,
        ):
            found = await in_thread(Lane.SENSORS, _first_match, self._pattern)
            if found is not None:
                return found
        return None

    def _ended_with(self, state: RunState, status: str) -> Outcome:
        self._status = status
        result = self._stop if self._stop is not None and state is not RunState.SUCCESS else None
        return Outcome(state=state, result=result or Result.COMPLETED, status=_cut(status))
