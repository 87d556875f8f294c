"""The control seam across the Unix socket: a front end in another process.

`RemoteControl` implements `SchedulerControl` by calling the scheduler's
`ControlServer` (see `server.py` for the protocol). Its queries and commands
are made from the seam's own methods (`status = _remote(SchedulerControl.status)`,
typed through a `ParamSpec`): each sends its arguments by name, the seam's
defaults filled in, and decodes the answer into the type the seam declares,
so nothing of a method's signature is written here, and mypy checks every
call against the seam. Errors come back as the same `TuischedError` classes;
a scheduler that is not there (no socket, or nobody listening) is
`SchedulerNotRunningError`; one that speaks another protocol version is
refused with a line naming both.

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
from tuisched.runtime.control.seam import SchedulerControl

P = ParamSpec("P")
R = TypeVar("R")

log = logging.getLogger(__name__)

CALL_TIMEOUT = 30.0
"""Seconds one call may take (a shutdown's drain answers when it starts, not ends)."""
RECONNECT_SECONDS = 0.5
"""How long a dropped event stream waits before it reconnects."""


class _Following:
    """A subscription: a task that reads the event stream and reconnects."""

    def __init__(
        self, control: RemoteControl, callback: Callable[[Event], object], after: int | None
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
) -> Callable[Concatenate[RemoteControl, P], Coroutine[Any, Any, R]]:
    """A method of `RemoteControl` that makes the call of the seam's `method` over the
    socket: its arguments by name, its answer decoded as the seam declares."""

    async def call(self: RemoteControl, /, *args: P.args, **kwargs: P.kwargs) -> R:
        body = call_body(method, args, kwargs)
        answer = await self._request("POST", f"/v1/{method.__name__}", body)
        return cast("R", call_answer(method, answer))

    functools.update_wrapper(call, method, assigned=("__name__", "__doc__"))  # and __wrapped__
    call.__qualname__ = f"RemoteControl.{method.__name__}"
    return call


class RemoteControl(SchedulerControl):
    """`SchedulerControl` over the control socket at `path`."""

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

    async def _request(self, method: str, path: str, body: dict[str, Any] | None) -> Any:
        session = await self.session()
        try:
            async with session.request(
                method, f"http://tuisched{path}", json=body,
                timeout=aiohttp.ClientTimeout(total=CALL_TIMEOUT),
            ) as response:  # fmt: skip
                data = await response.json(content_type=None)
                if response.status >= 400:
                    raise_error(data, response.status)
                return data
        except (aiohttp.ClientConnectorError, FileNotFoundError, ConnectionRefusedError) as error:
            raise SchedulerNotRunningError(not_running(self.path)) from error
        except (OSError, aiohttp.ClientError, TimeoutError) as error:
            raise ControlError(f"the scheduler at {self.path} did not answer: {error}") from error

    def subscribe(
        self, callback: Callable[[Event], object], *, after: int | None = None
    ) -> _Following:
        return _Following(self, callback, after)

    # --- queries --------------------------------------------------------------------
    status = _remote(SchedulerControl.status)
    jobs = _remote(SchedulerControl.jobs)
    groups = _remote(SchedulerControl.groups)
    runs = _remote(SchedulerControl.runs)
    nodes = _remote(SchedulerControl.nodes)
    history = _remote(SchedulerControl.history)
    failures_since = _remote(SchedulerControl.failures_since)
    output = _remote(SchedulerControl.output)
    audit = _remote(SchedulerControl.audit)
    config_text = _remote(SchedulerControl.config_text)
    pending_edit = _remote(SchedulerControl.pending_edit)
    job_definition = _remote(SchedulerControl.job_definition)
    plan = _remote(SchedulerControl.plan)
    preview = _remote(SchedulerControl.preview)
    last_change = _remote(SchedulerControl.last_change)
    output_page = _remote(SchedulerControl.output_page)
    search_output = _remote(SchedulerControl.search_output)
    output_line_number = _remote(SchedulerControl.output_line_number)
    missed = _remote(SchedulerControl.missed)
    simulate = _remote(SchedulerControl.simulate)
    impact = _remote(SchedulerControl.impact)
    stats = _remote(SchedulerControl.stats)
    # --- commands -------------------------------------------------------------------
    run_now = _remote(SchedulerControl.run_now)
    stop_run = _remote(SchedulerControl.stop_run)
    set_paused = _remote(SchedulerControl.set_paused)
    edit = _remote(SchedulerControl.edit)
    undo = _remote(SchedulerControl.undo)
    reload = _remote(SchedulerControl.reload)
    shutdown = _remote(SchedulerControl.shutdown)
    hurry = _remote(SchedulerControl.hurry)
    decide_missed = _remote(SchedulerControl.decide_missed)

    backfill = _remote(SchedulerControl.backfill)
