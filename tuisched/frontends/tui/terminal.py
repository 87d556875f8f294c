"""The console's terminal driver: Textual's, made to survive losing the terminal.

When an SSH connection drops or tmux is killed, the terminal goes before the
SIGHUP that says so arrives, or with none at all: the kernel tells only the
session's leader, and a console exec'd as its session (`ssh -t host
tuisched`, `tmux new "tuisched"`) has its waiting parent as that leader.
Textual's driver then fails in three ways. Its input thread reads
end-of-file from the hung-up terminal, takes it for a pipe, and polls the
dead descriptor for ever (a whole core). Its writer thread dies on the first
write error (EIO), after which every write blocks the event loop on the
thread's full queue. A read error makes the app panic, which stops the
hosted scheduler.

Here the first sign of the end (end-of-file or an error on a read, an error
on a write) tells the app once that the terminal is lost. The input thread
then ends, and writes go nowhere until the app has closed (its writer
thread ends with it).
"""

from __future__ import annotations

import contextlib
import os
import selectors
import threading
from codecs import getincrementaldecoder
from collections.abc import Callable
from typing import IO, Any

from textual.drivers.linux_driver import LinuxDriver

from tuisched.frontends.tui.typeahead import KeyParser

_READ_SIZE = 4096
_POLL_SECONDS = 0.1
"""How often the input thread looks at its stop flag while no key comes (as Textual's)."""


class _TerminalFile:
    """The stream Textual writes the screen to; once it fails, writes go nowhere."""

    def __init__(self, file: IO[str], failed: Callable[[], None]) -> None:
        self._file = file
        self._failed = failed
        self.gone = False

    def write(self, text: str) -> int:
        if not self.gone:
            try:
                self._file.write(text)
            except OSError:
                self._fail()
        return len(text)

    def flush(self) -> None:
        if not self.gone:
            try:
                self._file.flush()
            except OSError:
                self._fail()

    def _fail(self) -> None:
        self.gone = True
        self._failed()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._file, name)


class TerminalDriver(LinuxDriver):
    """`LinuxDriver`, which tells `app.terminal_lost` instead of failing when the terminal goes."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._told = threading.Lock()
        self._lost = False
        self._stopped = False
        """Whether a SIGTSTP suspended the console (and SIGCONT may resume it)."""
        super().__init__(*args, **kwargs)  # installs the SIGTSTP and SIGCONT handlers below
        if self._file is not None:
            self._file = _TerminalFile(self._file, self._terminal_lost)  # type: ignore[assignment]

    def _sigtstp_application(self, *args: Any) -> None:
        self._stopped = True
        super()._sigtstp_application(*args)

    def _sigcont_application(self, *args: Any) -> None:
        """Resume only what SIGTSTP suspended. The kernel sends SIGCONT with the SIGHUP of
        a hang-up, and Textual's handler would start the terminal's threads a second
        time, on a dead terminal, even after the console has closed."""
        if self._stopped and not self._lost:
            self._stopped = False
            super()._sigcont_application(*args)

    def _run_input_thread(self) -> None:
        try:
            self.run_input_thread()
        except BaseException:  # a bug of ours or Textual's: its panic, with the traceback
            import rich.traceback  # noqa: PLC0415  (as Textual does: only on a crash)

            self._app.call_later(self._app.panic, rich.traceback.Traceback())

    def run_input_thread(self) -> None:
        """Textual's input loop, ended by the terminal's end instead of spinning on it.

        Textual's own loop takes end-of-file for piped input and selects
        again; a hung-up terminal is always readable and always at its end,
        so that loop never sleeps again.
        """
        parser = KeyParser(self._debug)  # an Esc typed ahead of a key stays an Esc
        decode = getincrementaldecoder("utf-8")().decode
        with selectors.SelectSelector() as selector:
            selector.register(self.fileno, selectors.EVENT_READ)
            while not self.exit_event.is_set():
                data = self._read_ready(selector)
                if data == b"":
                    self._terminal_lost()
                    return
                text = decode(data) if data else ""  # "" also for half a character
                if text:  # (feeding "" would tell the parser the input has ended)
                    for event in parser.feed(text):
                        self.process_message(event)
                for event in parser.tick():  # a lone Esc becomes a key once it waited
                    self.process_message(event)

    def _read_ready(self, selector: selectors.BaseSelector) -> bytes | None:
        """What the terminal sent within a poll (None: nothing yet; b"": it has gone)."""
        try:
            if not selector.select(_POLL_SECONDS):
                return None
            return os.read(self.fileno, _READ_SIZE)
        except OSError:  # EIO, EBADF: the terminal has gone, and SIGHUP may never come
            return b""

    def _terminal_lost(self) -> None:
        """Tell the app, once, from whichever thread saw the terminal go."""
        with self._told:
            if self._lost:
                return
            self._lost = True
        lost: Callable[[], None] | None = getattr(self._app, "terminal_lost", None)
        if lost is not None:
            with contextlib.suppress(RuntimeError):  # the loop has closed: nothing to tell
                self._loop.call_soon_threadsafe(lost)
