"""Where the console's scheduler lives: hosted, attached to, and left running (SPEC R22).

`tuisched` opens the console on the scheduler of its configuration:

- when one already runs on that state directory, it attaches to it (and says
  so) instead of starting a second one;
- otherwise it hosts one. The scheduler and the console share an event loop
  in a child process, while the process the shell started waits: when the
  operator detaches (`q`, then `d`), the child tells it so and the shell gets
  its prompt back, while the scheduler carries on headless in a session of
  its own, logging to `STATE_DIR/tuisched.log` (rotated). Losing the
  terminal (SIGHUP: an SSH drop, tmux killed, the window closed) does the
  same without asking: the runs in progress go on and are recorded when they
  end, and `tuisched attach` shows them.

`tuisched attach [--read-only]` and `tuisched --read-only` open the same
console as a client of the control socket; a read-only console never starts
a scheduler.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
import threading
import traceback
from pathlib import Path
from typing import TYPE_CHECKING

from tuisched.domain.errors import ControlError, SchedulerNotRunningError, TuischedError
from tuisched.frontends.eventlog import EventLog, log_to_file
from tuisched.frontends.serving import EX_IOERR, Serving, start_failure_code
from tuisched.runtime.control import (
    LocalScheduler,
    RemoteControl,
    control_socket,
    describe_client,
    scheduler_answers,
    who,
)

if TYPE_CHECKING:
    from tuisched.frontends.tui.app import TuischedApp

log = logging.getLogger(__name__)

EX_USAGE = 2
EX_UNAVAILABLE = 69
EX_SOFTWARE = 70
LOG_NAME = "tuisched.log"
HUNG_UP = "the terminal was lost"
DETACHED = b"detached\n"
"""What the hosting child tells the waiting parent when the console has gone."""


def run_console(config_path: Path, *, read_only: bool = False) -> int:
    """`tuisched [--read-only]`: attach to the scheduler running here, or host one."""
    socket = control_socket(config_path)
    if scheduler_answers(socket):
        if not _has_terminal(ATTACHED_HINT):  # before saying it attached
            return EX_USAGE
        notice = f"attached to the scheduler already running on {socket.parent}"
        return run_attach(config_path, read_only=read_only, notice=notice)
    if read_only:
        print(
            f"tuisched: no scheduler is running on {socket.parent}; --read-only only watches "
            "one (start it with `tuisched` or `tuisched --no-ui`)",
            file=sys.stderr,
        )
        return EX_UNAVAILABLE
    # Read once, here: a file that does not validate is reported at once, and the child
    # inherits what was read (100,000 jobs take seconds to read).
    scheduler = LocalScheduler.from_file(config_path)
    if not _has_terminal(HEADLESS_HINT):
        return EX_USAGE
    _console_app()  # loaded before the fork: the child finds it loaded
    return _host_in_child(scheduler)


def _console_app() -> type[TuischedApp]:
    """The console's app, loaded once there is a terminal to show it on: without one
    the console says so at once, without loading Textual and every screen first."""
    from tuisched.frontends.tui.app import TuischedApp  # noqa: PLC0415

    return TuischedApp


def run_attach(config_path: Path, *, read_only: bool, notice: str | None = None) -> int:
    """`tuisched attach [--read-only]`: the console, as a client of the control socket."""
    return asyncio.run(_attach(config_path, read_only=read_only, notice=notice))


async def _attach(config_path: Path, *, read_only: bool, notice: str | None) -> int:
    what = "console (read-only)" if read_only else "console"
    socket = control_socket(config_path)
    control = RemoteControl(socket, client=describe_client(what), config=config_path)
    try:
        try:
            await control.connect()
        except SchedulerNotRunningError as error:  # or it runs another file: both named
            print(f"tuisched: {error}", file=sys.stderr)
            return EX_UNAVAILABLE
        except ControlError as error:  # another protocol version: the line names both
            print(f"tuisched: {error}", file=sys.stderr)
            return 1
        if not _has_terminal(ATTACHED_HINT):
            return EX_USAGE
        if notice is not None:
            print(f"tuisched: {notice}", file=sys.stderr)
        app = _console_app()(control, read_only=read_only, notice=notice)
        await app.run_async()
        return app.return_code or 0
    finally:
        await control.close()


HEADLESS_HINT = ", or `tuisched --no-ui` to run the scheduler headless"
"""What a console without a terminal points to when it would host the scheduler."""
ATTACHED_HINT = " (the scheduler runs on: `tuisched status`, `jobs` and `logs` need none)"
"""What it points to when a scheduler already runs (attaching)."""


def _has_terminal(hint: str) -> bool:
    """Whether the console has a terminal on stdin, stdout and stderr; says why not
    otherwise, with `hint` (what to run instead), in one line.

    Textual reads keys from stdin and draws on stderr: without a terminal there the
    first read finds its end and the console closes as if the terminal had gone, or
    its escape codes go to a file. A stdout that is not a terminal (`> out`, `| less`)
    means a script that wanted lines, not a screen.
    """
    streams = {"stdin": sys.stdin, "stdout": sys.stdout, "stderr": sys.stderr}
    missing = [name for name, stream in streams.items() if stream is None or not stream.isatty()]
    if missing:
        names = ", ".join(missing[:-1]) + " and " + missing[-1] if missing[1:] else missing[0]
        print(
            f"tuisched: the console needs a terminal, and {names} "
            f"{'are' if missing[1:] else 'is'} not one; run it in a terminal{hint}",
            file=sys.stderr,
        )
    return not missing


# --- hosting -------------------------------------------------------------------------


def _host_in_child(scheduler: LocalScheduler) -> int:
    """Host `scheduler` (not started) in a child; wait until it ends or its console goes
    away."""
    for stream in (sys.stdout, sys.stderr):
        stream.flush()  # nothing buffered may be written twice
    read_end, write_end = os.pipe()
    child = os.fork()
    if child == 0:  # the host: no thread or event loop was started before the fork
        os.close(read_end)
        code = EX_SOFTWARE
        try:
            code = asyncio.run(_host(scheduler, write_end))
        except BaseException:
            traceback.print_exc()
        finally:
            for stream in (sys.stdout, sys.stderr):
                with contextlib.suppress(OSError, ValueError):
                    stream.flush()
            os._exit(code)  # the parent's exit handlers are the parent's
    os.close(write_end)
    return _wait_for(child, read_end)


def _wait_for(child: int, pipe: int) -> int:
    """The parent: its status is the child's, or 0 once the child says it detached."""
    # The parent may be its session's leader (`ssh -t host tuisched`, `tmux new "tuisched"`),
    # the only process the kernel tells when the terminal hangs up: tell the child, who decides.
    for sig in (signal.SIGHUP, signal.SIGTERM):
        signal.signal(sig, lambda number, _frame: _tell(child, number))
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    with os.fdopen(pipe, "rb") as said:
        if said.read() == DETACHED:
            return 0
    _, status = os.waitpid(child, 0)
    code = os.waitstatus_to_exitcode(status)
    return code if code >= 0 else 128 - code  # killed by a signal: as a shell says it


def _tell(child: int, signal_number: int) -> None:
    with contextlib.suppress(ProcessLookupError):  # it has ended meanwhile
        os.kill(child, signal_number)


async def _host(scheduler: LocalScheduler, detached_to: int) -> int:
    """The child: the console on this loop, its scheduler on its lane; headless once the
    console detaches."""
    loop = asyncio.get_running_loop()
    notify: int | None = detached_to
    stop_logging = log_to_file(scheduler.state_dir / LOG_NAME, scheduler.timezone)
    control = scheduler.control(who("console"))
    control.subscribe(EventLog(scheduler.timezone).write)
    app = _console_app()(control, scheduler=scheduler)
    app.on_terminal_lost = lambda: _hung_up(app)
    loop.add_signal_handler(signal.SIGHUP, _hung_up, app)
    # Into the app's own queue: a signal handler runs outside the app's context, where a
    # screen pushed (the drain's) cannot render (Textual's `active_app` is unset there).
    loop.add_signal_handler(signal.SIGTERM, app.call_later, app.stop_scheduler)
    try:
        await app.run_async()
        if app.detached is None:  # a stop that left history writes unwritten is a failure
            return app.return_code or (EX_IOERR if scheduler.left_unwritten else 0)
        serving = Serving(scheduler, log_events=False)  # its signal handlers replace ours
        if app.detached != HUNG_UP:
            print(
                f"tuisched: detached; the scheduler runs on headless as pid {os.getpid()}, "
                f"logging to {scheduler.state_dir / LOG_NAME}; `tuisched attach "
                f"-c {scheduler.config_path}` comes back to it",
                file=sys.stderr,
            )
            _leave_terminal()
        log.info("console closed (%s): the scheduler runs on headless", app.detached)
        if left := _terminal_threads():  # they poll a terminal that may be gone: a bug
            log.warning("the console's terminal threads still run after it closed: %s", left)
        os.write(detached_to, DETACHED)
        os.close(detached_to)
        notify = None  # closed: its number may be another file's from now on
        try:
            await scheduler.start()  # it may still be starting: the same start, awaited
        except TuischedError as error:
            log.error("not started: %s", error)  # noqa: TRY400  (a report: no traceback)
            return start_failure_code(error)
        return await serving.until_stopped()
    finally:
        if notify is not None:
            os.close(notify)
        stop_logging()


def _terminal_threads() -> str:
    """The console driver's threads still alive (Textual names them), comma-separated."""
    names = (thread.name for thread in threading.enumerate())
    return ", ".join(name for name in names if name in ("textual-input", "textual-output"))


def _hung_up(app: TuischedApp) -> None:
    """The terminal is gone (SIGHUP, or the driver saw it end first): stop using it at
    once, and keep the scheduler."""
    if app.detached is None:
        _leave_terminal()
        app.detach(HUNG_UP)


def _leave_terminal() -> None:
    """Point stdin, stdout and stderr at /dev/null and leave the terminal's session."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.close(null)
    with contextlib.suppress(OSError):  # already a session leader (tests): nothing to leave
        os.setsid()
