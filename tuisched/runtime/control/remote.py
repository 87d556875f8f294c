"""The control seam across the Unix socket: a front end in another process.

`RemoteControl` implements `SchedulerControl` by calling the scheduler's
`ControlServer` (see `server.py` for the protocol). Its queries and commands
are made from the seam's own methods (`status = _remote(SchedulerQueries.status)`,
typed through a `ParamSpec`): each sends its arguments by name, the seam's
defaults filled in, and decodes the answer into the type the seam declares,
so nothing of a method's signature is written here, and mypy checks every
call against the seam. They are split as the seam is, the queries (with the
event stream) and the commands, over one connection (`_Socket`). Each class
names the seam's protocol as its base, so a seam method not made here is
abstract: mypy refuses every `RemoteControl(...)` until it is.

Errors come back as the same `TuischedError` classes; a scheduler that is
not there (no socket, or nobody listening) is `SchedulerNotRunningError`;
one that speaks another protocol version is refused with a line naming both.

Events: `subscribe(callback, after=seq)` follows `/v1/events` in a task of
its own and calls `callback` on the caller's loop; when the connection
drops it waits `RECONNECT_SECONDS` on the injected `Clock` and reconnects
from the last sequence number it delivered, so nothing is missed and
nothing comes twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, Concatenate, ParamSpec, TypeVar, cast

import aiohttp

from tuisched.domain.errors import (
    ControlError,
    EventsLostError,
    SchedulerNotRunningError,
    TuischedError,
)
from tuisched.domain.events import Event
from tuisched.domain.wire import event_from_json
from tuisched.runtime.clock import Clock, SystemClock
from tuisched.runtime.control.protocol import (
    CLIENT_HEADER,
    PROTOCOL,
    call_answer,
    call_body,
    not_running,
    other_configuration,
    protocol_mismatch,
    raise_error,
    reachable,
)
from tuisched.runtime.control.seam import SchedulerCommands, SchedulerControl, SchedulerQueries

P = ParamSpec("P")
R = TypeVar("R")

log = logging.getLogger(__name__)

CALL_TIMEOUT = 30.0
"""Seconds one call may take (a shutdown's drain answers when it starts, not ends)."""
RECONNECT_SECONDS = 0.5
"""How long a dropped event stream waits before it reconnects."""
PROBES = 3
"""How many hellos find out whether a scheduler that dropped a call is still there."""
PROBE_TIMEOUT = 5.0
"""Seconds each such hello may take."""
PROBE_WAIT = 0.2
"""Seconds between two such hellos."""


class _Following:
    """A subscription: a task that reads the event stream and reconnects."""

    def __init__(
        self, control: _Socket, callback: Callable[[Event], object], after: int | None
    ) -> None:
        self._control = control
        self._callback = callback
        self._after = after
        self._task = asyncio.get_running_loop().create_task(self._follow())

    def unsubscribe(self) -> None:
        self._task.cancel()

    async def _follow(self) -> None:
        while True:
            try:
                await self._read()
            except asyncio.CancelledError:
                raise
            except EventsLostError as error:  # the server keeps no events that old
                log.warning("%s", error)
                return
            except (aiohttp.ClientError, OSError, TuischedError) as error:
                log.debug("event stream dropped: %s; reconnecting", error)
            await self._control.clock.sleep(RECONNECT_SECONDS)

    async def _read(self) -> None:
        params = {} if self._after is None else {"after": str(self._after)}
        session = await self._control.session()
        async with session.get(
            "http://tuisched/v1/events", params=params, timeout=aiohttp.ClientTimeout(total=None)
        ) as response:
            if response.status != 200:
                raise_error(await response.json(), response.status)
            async for line in response.content:
                if not line.strip():
                    continue  # keep-alive
                event = event_from_json(json.loads(line))
                if self._after is not None and event.seq <= self._after:
                    continue  # already delivered before a reconnect
                self._after = event.seq
                self._callback(event)


def _remote(
    method: Callable[Concatenate[Any, P], Coroutine[Any, Any, R]],
) -> Callable[Concatenate[_Socket, P], Coroutine[Any, Any, R]]:
    """A method of `RemoteControl` that makes the call of the seam's `method` over the
    socket: its arguments by name, its answer decoded as the seam declares."""

    async def call(self: _Socket, /, *args: P.args, **kwargs: P.kwargs) -> R:
        body = call_body(method, args, kwargs)
        answer = await self._request("POST", f"/v1/{method.__name__}", body)
        return cast("R", call_answer(method, answer))

    functools.update_wrapper(call, method, assigned=("__name__", "__doc__"))  # and __wrapped__
    call.__qualname__ = f"RemoteControl.{method.__name__}"
    return call


class _Socket:
    """The connection to the control socket at `path`: hello, requests, close."""

    def __init__(
        self, path: Path, *, client: str, config: Path | None = None, clock: Clock | None = None
    ) -> None:
        """`client` says what and where this front end is (see `describe_client`);
        `config`, the configuration file the scheduler must run (None: whichever);
        `clock`, what the event stream's reconnections wait on."""
        self.path = path
        self.clock: Clock = clock or SystemClock()
        self._config = config
        self._client = client
        self._session: aiohttp.ClientSession | None = None
        self._reach = contextlib.ExitStack()
        self.server: dict[str, Any] = {}
        """What the server said of itself at `connect`: protocol, tuisched version, pid."""

    async def session(self) -> aiohttp.ClientSession:
        if self._session is None:
            name = self._reach.enter_context(reachable(self.path))
            connector = aiohttp.UnixConnector(path=name)
            headers = {CLIENT_HEADER: self._client}
            self._session = aiohttp.ClientSession(connector=connector, headers=headers)
        return self._session

    async def connect(self) -> None:
        """Say hello: raises SchedulerNotRunningError when nobody listens
        (OtherConfigurationError when the one listening runs another file than the
        one given), and ControlError when the scheduler speaks another protocol version."""
        hello = await self._request("GET", "/v1", None)
        refused = protocol_mismatch(self.path, hello, PROTOCOL) or other_configuration(
            self.path, hello, self._config
        )
        if refused is not None:
            raise refused
        self.server = hello

    async def close(self) -> None:
        """Close the connection (subscriptions end with it)."""
        if self._session is not None:
            await self._session.close()
            self._session = None
        self._reach.close()

    async def _request(
        self,
        method: str,
        path: str,
        body: dict[str, Any] | None,
        *,
        within: float = CALL_TIMEOUT,
        dropped: bool = True,
    ) -> Any:
        """The answer to one call. A call the scheduler dropped half-way (its connection
        reset) is the scheduler gone when nothing listens on the socket since: killed,
        it left its socket file but refuses every connection. (`dropped` False: a dropped
        call is only ControlError.)"""
        session = await self.session()
        try:
            async with session.request(
                method, f"http://tuisched{path}", json=body,
                timeout=aiohttp.ClientTimeout(total=within),
            ) as response:  # fmt: skip
                data = await response.json(content_type=None)
                if response.status >= 400:
                    raise_error(data, response.status)
                return data
        except (aiohttp.ClientConnectorError, FileNotFoundError, ConnectionRefusedError) as error:
            raise SchedulerNotRunningError(not_running(self.path)) from error
        except TimeoutError as error:  # slow, or stopped: it is there but did not answer
            raise ControlError(f"the scheduler at {self.path} did not answer: {error}") from error
        except (OSError, aiohttp.ClientError) as error:
            if dropped and not await self._listening():
                raise SchedulerNotRunningError(not_running(self.path)) from error
            raise ControlError(f"the scheduler at {self.path} did not answer: {error}") from error

    async def _listening(self) -> bool:
        """Whether a scheduler still answers on the socket, after a call it dropped. A
        dying process may drop the call before it closes its socket, so a hello that is
        dropped too is asked again, a few times, a moment apart."""
        for _ in range(PROBES):
            try:
                await self._request("GET", "/v1", None, within=PROBE_TIMEOUT, dropped=False)
            except SchedulerNotRunningError:
                return False
            except ControlError as error:
                if isinstance(error.__cause__, TimeoutError):
                    return True  # there, but slow
                await self.clock.sleep(PROBE_WAIT)
                continue
            return True
        return True  # it accepts connections but drops them: there, but not answering


class _RemoteQueries(_Socket, SchedulerQueries):
    """The seam's queries over the socket, and its event stream."""

    def subscribe(
        self, callback: Callable[[Event], object], *, after: int | None = None
    ) -> _Following:
        return _Following(self, callback, after)

    status = _remote(SchedulerQueries.status)
    jobs = _remote(SchedulerQueries.jobs)
    groups = _remote(SchedulerQueries.groups)
    runs = _remote(SchedulerQueries.runs)
    nodes = _remote(SchedulerQueries.nodes)
    history = _remote(SchedulerQueries.history)
    failures_since = _remote(SchedulerQueries.failures_since)
    output = _remote(SchedulerQueries.output)
    audit = _remote(SchedulerQueries.audit)
    config_text = _remote(SchedulerQueries.config_text)
    pending_edit = _remote(SchedulerQueries.pending_edit)
    job_definition = _remote(SchedulerQueries.job_definition)
    plan = _remote(SchedulerQueries.plan)
    preview = _remote(SchedulerQueries.preview)
    last_change = _remote(SchedulerQueries.last_change)
    output_page = _remote(SchedulerQueries.output_page)
    search_output = _remote(SchedulerQueries.search_output)
    output_line_number = _remote(SchedulerQueries.output_line_number)
    missed = _remote(SchedulerQueries.missed)
    simulate = _remote(SchedulerQueries.simulate)
    impact = _remote(SchedulerQueries.impact)
    stats = _remote(SchedulerQueries.stats)


class _RemoteCommands(_Socket, SchedulerCommands):
    """The seam's commands over the socket."""

    run_now = _remote(SchedulerCommands.run_now)
    stop_run = _remote(SchedulerCommands.stop_run)
    set_paused = _remote(SchedulerCommands.set_paused)
    edit = _remote(SchedulerCommands.edit)
    undo = _remote(SchedulerCommands.undo)
    reload = _remote(SchedulerCommands.reload)
    shutdown = _remote(SchedulerCommands.shutdown)

    hurry = _remote(SchedulerCommands.hurry)
    decide_missed = _remote(SchedulerCommands.decide_missed)
    backfill = _remote(SchedulerCommands.backfill)


class RemoteControl(_RemoteQueries, _RemoteCommands, SchedulerControl):
    """`SchedulerControl` over the control socket at `path` (see the module)."""
