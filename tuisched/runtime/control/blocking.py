"""The control seam for code without an event loop: the command line's verbs.

`BlockingControl` has every query and command of `SchedulerControl` (all but
`subscribe`) as a plain call that returns the answer. Each of its methods is
made from the seam's own (`status = _blocking(SchedulerControl.status)`), so
its arguments, defaults and result type are the seam's, mypy checks every
call against them, and nothing is written out a second time. A call goes
through one of two ways:

- `BlockingControl.connect(path)`: HTTP/1.1 and JSON over the scheduler's
  control socket (the protocol of `server.py`, answered as `RemoteControl`
  reads it), a connection per call (`exchange.py`). It loads neither aiohttp
  nor asyncio, nor the events: a verb answers in a few tens of milliseconds
  beyond the interpreter's start.
- `BlockingControl.over(control)`: an async `SchedulerControl` (the
  `OfflineControl` over what a stopped scheduler left) driven on an event loop
  of its own, for the verbs that read those files when none runs.

Errors are the seam's: the scheduler's `TuischedError` raised again as the
same class, `SchedulerNotRunningError` when nobody listens on the socket,
`ControlError` when the scheduler does not answer or speaks another version.
"""

from __future__ import annotations

import functools
import json
import socket
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, Protocol, Self, TypeVar, cast

from tuisched.domain.errors import ControlError, SchedulerNotRunningError
from tuisched.runtime.control.exchange import AnswerError, exchange, request
from tuisched.runtime.control.protocol import (
    CLIENT_HEADER,
    PROTOCOL,
    SeamMethod,
    call_answer,
    call_body,
    not_running,
    other_configuration,
    protocol_mismatch,
    raise_error,
    reachable,
)
from tuisched.runtime.control.seam import SchedulerControl

if TYPE_CHECKING:
    import asyncio

P = ParamSpec("P")
R = TypeVar("R")

CALL_TIMEOUT = 30.0
"""Seconds the scheduler may stay silent during one call (as `RemoteControl` allows)."""


class Calls(Protocol):
    """The way a `BlockingControl` makes its calls."""

    def call(self, method: SeamMethod, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """`method` of the seam called with `args` and `kwargs`, and its answer."""
        ...

    def close(self) -> None:
        """Let go of what the calls hold. Idempotent."""
        ...


def _blocking(
    method: Callable[Concatenate[Any, P], Awaitable[R]],
) -> Callable[Concatenate[BlockingControl, P], R]:
    """A method of `BlockingControl` that makes the call of the seam's `method`."""

    def call(self: BlockingControl, /, *args: P.args, **kwargs: P.kwargs) -> R:
        return cast("R", self.calls.call(method, args, kwargs))

    functools.update_wrapper(call, method, assigned=("__name__", "__doc__"))  # and __wrapped__
    call.__qualname__ = f"BlockingControl.{method.__name__}"
    return call


class BlockingControl:
    """`SchedulerControl` without `subscribe`, each method a plain call (see the module)."""

    def __init__(self, calls: Calls) -> None:
        self.calls = calls

    @classmethod
    def connect(cls, path: Path, *, client: str, config: Path | None = None) -> BlockingControl:
        """The scheduler listening on the control socket at `path`, once it said hello;
        `client` says what and where this front end is (see `describe_client`); `config`,
        the configuration file it must run (None: whichever it runs).

        Raises:
            SchedulerNotRunningError: nobody listens on `path`
                (OtherConfigurationError: the one that does runs another file).
            ControlError: the scheduler speaks another protocol version, or does not answer.
        """
        calls = SocketCalls(path, client=client)
        calls.hello(config)
        return cls(calls)

    @classmethod
    def over(cls, control: SchedulerControl) -> BlockingControl:
        """`control`'s calls, each run to its end on an event loop kept for them."""
        return cls(AwaitedCalls(control))

    def close(self) -> None:
        """End the calls (an `over` control's loop closes)."""
        self.calls.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:  # fmt: skip
        self.close()

    # --- queries -------------------------------------------------------------------
    status = _blocking(SchedulerControl.status)
    jobs = _blocking(SchedulerControl.jobs)
    groups = _blocking(SchedulerControl.groups)
    runs = _blocking(SchedulerControl.runs)
    nodes = _blocking(SchedulerControl.nodes)
    history = _blocking(SchedulerControl.history)
    failures_since = _blocking(SchedulerControl.failures_since)
    output = _blocking(SchedulerControl.output)
    audit = _blocking(SchedulerControl.audit)
    config_text = _blocking(SchedulerControl.config_text)
    pending_edit = _blocking(SchedulerControl.pending_edit)
    job_definition = _blocking(SchedulerControl.job_definition)
    plan = _blocking(SchedulerControl.plan)
    preview = _blocking(SchedulerControl.preview)
    last_change = _blocking(SchedulerControl.last_change)
    output_page = _blocking(SchedulerControl.output_page)
    search_output = _blocking(SchedulerControl.search_output)
    output_line_number = _blocking(SchedulerControl.output_line_number)
    missed = _blocking(SchedulerControl.missed)
    simulate = _blocking(SchedulerControl.simulate)
    impact = _blocking(SchedulerControl.impact)
    stats = _blocking(SchedulerControl.stats)
    # --- commands ------------------------------------------------------------------
    run_now = _blocking(SchedulerControl.run_now)
    stop_run = _blocking(SchedulerControl.stop_run)
    set_paused = _blocking(SchedulerControl.set_paused)
    edit = _blocking(SchedulerControl.edit)
    undo = _blocking(SchedulerControl.undo)
    reload = _blocking(SchedulerControl.reload)
    shutdown = _blocking(SchedulerControl.shutdown)
    hurry = _blocking(SchedulerControl.hurry)
    decide_missed = _blocking(SchedulerControl.decide_missed)
    backfill = _blocking(SchedulerControl.backfill)


# --- over the control socket ------------------------------------------------------------


class SocketCalls:
    """Calls over the control socket at `path`, one connection each (a connection costs
    tens of microseconds here, and none is ever found closed by the server's idle timeout)."""

    def __init__(self, path: Path, *, client: str) -> None:
        """`client` names this front end in the actions log (see `describe_client`)."""
        self.path = path
        self._headers = {CLIENT_HEADER: client, "Content-Type": "application/json"}
        self.server: Mapping[str, Any] = {}
        """What the server said of itself in `hello`: protocol, tuisched version, pid."""

    def hello(self, config: Path | None = None) -> None:
        """Ask the server who it is; refuse one of another protocol version (ControlError),
        or running another file than `config` (OtherConfigurationError)."""
        hello = self._request("GET", "/v1", None)
        refused = protocol_mismatch(self.path, hello, PROTOCOL) or other_configuration(
            self.path, hello, config
        )
        if refused is not None:
            raise refused
        self.server = hello

    def call(self, method: SeamMethod, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        body = call_body(method, args, kwargs)
        return call_answer(method, self._request("POST", f"/v1/{method.__name__}", body))

    def close(self) -> None:
        """Nothing to let go of: every call closes its connection."""

    def _request(self, method: str, target: str, body: dict[str, Any] | None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        sent = request(method, target, self._headers, data)
        with self._connect() as sock:
            try:
                status, raw = exchange(sock, sent)
            except (OSError, AnswerError) as error:  # TimeoutError is an OSError
                message = f"the scheduler at {self.path} did not answer: {error}"
                raise ControlError(message) from error
        return _answer(raw, status)

    def _connect(self) -> socket.socket:
        """A connection to the socket, or SchedulerNotRunningError: no socket, nobody
        listening on it, or (as `RemoteControl` says) one that cannot be reached."""
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.settimeout(CALL_TIMEOUT)
            with reachable(self.path) as name:
                sock.connect(name)
        except OSError as error:
            sock.close()
            raise SchedulerNotRunningError(not_running(self.path)) from error
        return sock


def _answer(raw: bytes, status: int) -> Any:
    """The JSON an answer holds; a failed call's error raised again as the scheduler's."""
    try:
        data = json.loads(raw)
    except ValueError:
        raise ControlError(f"the scheduler answered {status} with something not JSON") from None
    if status >= 400:
        raise_error(data, status)
    return data


# --- over an async control ---------------------------------------------------------------


class AwaitedCalls:
    """Calls of an async `SchedulerControl`, each awaited on an event loop of their own,
    kept from the first call to `close` (what the control opened stays with that loop)."""

    def __init__(self, control: SchedulerControl) -> None:
        self._control = control
        self._runner: asyncio.Runner | None = None

    def call(self, method: SeamMethod, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if self._runner is None:
            import asyncio  # noqa: PLC0415  (only a control over files needs a loop)

            self._runner = asyncio.Runner()
        return self._runner.run(getattr(self._control, method.__name__)(*args, **kwargs))

    def close(self) -> None:
        if self._runner is not None:
            self._runner.close()
            self._runner = None
