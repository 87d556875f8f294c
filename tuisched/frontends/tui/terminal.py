"""The console's terminal driver: Textual's, made to survive losing the terminal.

When an SSH connection drops or tmux is killed, the terminal goes before
the SIGHUP that says so arrives. Textual's driver then fails in two ways
that would take the scheduler down with the console: its writer thread dies
on the first write error (EIO), after which every write blocks the event
loop on the thread's full queue; and its input thread's read error makes the
app panic, which stops the hosted scheduler. Here a write to a terminal that
has gone is dropped, and a read error tells the app the terminal is lost.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import IO, Any

from textual.drivers.linux_driver import LinuxDriver


class _TerminalFile:
    """The stream Textual writes the screen to; once it fails, writes go nowhere."""

    def __init__(self, file: IO[str]) -> None:
        self._file = file
        self.gone = False

    def write(self, text: str) -> int:
        if not self.gone:
            try:
                self._file.write(text)
            except OSError:
                self.gone = True
        return len(text)

    def flush(self) -> None:
        if not self.gone:
            try:
                self._file.flush()
            except OSError:
                self.gone = True

    def __getattr__(self, name: str) -> Any:
        return getattr(self._file, name)


class TerminalDriver(LinuxDriver):
    """`LinuxDriver`, which tells `app.terminal_lost` instead of failing when the terminal goes."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self._file is not None:
            self._file = _TerminalFile(self._file)  # type: ignore[assignment]

    def _run_input_thread(self) -> None:
        try:
            self.run_input_thread()
        except OSError:  # EIO: the terminal has gone; SIGHUP may not have come yet
            lost: Callable[[], None] | None = getattr(self._app, "terminal_lost", None)
            if lost is not None:
                with contextlib.suppress(RuntimeError):  # the loop has closed: nothing to tell
                    self._loop.call_soon_threadsafe(lost)
        except BaseException:  # anything else: Textual's own panic, with its traceback
            import rich.traceback  # noqa: PLC0415  (as Textual does: only on a crash)

            self._app.call_later(self._app.panic, rich.traceback.Traceback())
