"""The control seam across the Unix socket: a front end in another process.

`RemoteControl` implements `SchedulerControl` by calling the scheduler's
`ControlServer` (see `server.py` for the protocol). Errors come back as the
same `TuischedError` classes; a scheduler that is not there (no socket, or
nobody listening) is `SchedulerNotRunningError`; one that speaks another
protocol version is refused with a line naming both.

Events: `subscribe(callback, after=seq)` follows `/v1/events` in a task of
its own and calls `callback` on the caller's loop; when the connection
drops it reconnects from the last sequence number it delivered, so nothing
is missed and nothing comes twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Callable, Collection, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

import aiohttp

from tuisched.domain.errors import (
    ControlError,
    EventsLostError,
    SchedulerNotRunningError,
    TuischedError,
)
from tuisched.domain.events import Event
from tuisched.domain.runs import RunRecord
from tuisched.domain.views import (
    AuditChunk,
    BackfillPlan,
    ConfigChange,
    ConfigEdit,
    EditImpact,
    GroupStatus,
    HistoryQuery,
    HistoryStats,
    JobPlan,
    JobStatus,
    MissedChoice,
    MissedSlots,
    NodeView,
    OutputChunk,
    OutputMatch,
    OutputPage,
    Pause,
    PendingEdit,
    RunStatus,
    SchedulerStatus,
    Simulation,
    StatsQuery,
)
from tuisched.domain.wire import decode, encode, event_from_json
from tuisched.runtime.control.protocol import (
    CLIENT_HEADER,
    PROTOCOL,
    not_running,
    other_configuration,
    protocol_mismatch,
    raise_error,
    reachable,
)
from tuisched.runtime.control.seam import AUDIT_LINES, OUTPUT_CHUNK_BYTES, PAGE_LINES

log = logging.getLogger(__name__)

CALL_TIMEOUT = 30.0
"""Seconds one call may take (a shutdown's drain answers when it starts, not ends)."""
RECONNECT_SECONDS = 0.5


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
            await asyncio.sleep(RECONNECT_SECONDS)

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


class RemoteControl:
    """`SchedulerControl` over the control socket at `path`."""

    def __init__(self, path: Path, *, client: str, config: Path | None = None) -> None:
        """`client` says what and where this front end is (see `describe_client`);
        `config`, the configuration file the scheduler must run (None: whichever)."""
        self.path = path
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

    async def _call(self, method: str, result: Any, /, **arguments: object) -> Any:
        body = {key: encode(value) for key, value in arguments.items()}
        data = await self._request("POST", f"/v1/{method}", body)
        return decode(result, data["result"], where=method)

    # --- queries --------------------------------------------------------------------

    async def status(self) -> SchedulerStatus:
        return await self._call("status", SchedulerStatus)  # type: ignore[no-any-return]

    async def jobs(self, names: Collection[str] | None = None) -> tuple[JobStatus, ...]:
        listed = None if names is None else list(names)
        return await self._call("jobs", tuple[JobStatus, ...], names=listed)  # type: ignore[no-any-return]

    async def groups(self) -> tuple[GroupStatus, ...]:
        return await self._call("groups", tuple[GroupStatus, ...])  # type: ignore[no-any-return]

    async def nodes(self) -> tuple[NodeView, ...]:
        return await self._call("nodes", tuple[NodeView, ...])  # type: ignore[no-any-return]

    async def runs(self) -> tuple[RunStatus, ...]:
        return await self._call("runs", tuple[RunStatus, ...])  # type: ignore[no-any-return]

    async def history(self, query: HistoryQuery) -> tuple[RunRecord, ...]:
        return await self._call("history", tuple[RunRecord, ...], query=query)  # type: ignore[no-any-return]

    async def failures_since(self, since: datetime) -> tuple[datetime, ...]:
        return await self._call("failures_since", tuple[datetime, ...], since=since)  # type: ignore[no-any-return]

    async def output(
        self, run_id: str, *, offset: int | None = None, limit: int = OUTPUT_CHUNK_BYTES
    ) -> OutputChunk:
        return await self._call(  # type: ignore[no-any-return]
            "output", OutputChunk, run_id=run_id, offset=offset, limit=limit
        )

    async def audit(self, *, offset: int | None = None, lines: int = AUDIT_LINES) -> AuditChunk:
        return await self._call("audit", AuditChunk, offset=offset, lines=lines)  # type: ignore[no-any-return]

    async def config_text(self) -> str:
        return await self._call("config_text", str)  # type: ignore[no-any-return]

    async def pending_edit(self) -> PendingEdit:
        return await self._call("pending_edit", PendingEdit)  # type: ignore[no-any-return]

    async def job_definition(self, name: str) -> Mapping[str, object] | None:
        return await self._call(  # type: ignore[no-any-return]
            "job_definition", Mapping[str, object] | None, name=name
        )

    async def plan(self, name: str, *, count: int = 10, after: datetime | None = None) -> JobPlan:
        return await self._call("plan", JobPlan, name=name, count=count, after=after)  # type: ignore[no-any-return]

    async def preview(self, edit: ConfigEdit) -> tuple[str, ...]:
        return await self._call("preview", tuple[str, ...], edit=edit)  # type: ignore[no-any-return]

    async def last_change(self) -> ConfigChange | None:
        return await self._call("last_change", ConfigChange | None)  # type: ignore[no-any-return]

    def subscribe(
        self, callback: Callable[[Event], object], *, after: int | None = None
    ) -> _Following:
        return _Following(self, callback, after)

    # --- the downtime ledger (SPEC R25) ---

    async def missed(self) -> tuple[MissedSlots, ...]:
        return await self._call("missed", tuple[MissedSlots, ...])  # type: ignore[no-any-return]

    # --- commands -------------------------------------------------------------------

    async def run_now(self, job: str, *, key: str | None = None, queue: bool = False) -> RunRecord:
        return await self._call("run_now", RunRecord, job=job, key=key, queue=queue)  # type: ignore[no-any-return]

    async def stop_run(self, run_id: str, *, kill: bool = False) -> None:
        await self._call("stop_run", type(None), run_id=run_id, kill=kill)

    async def set_paused(self, pause: Pause, *, paused: bool) -> None:
        await self._call("set_paused", type(None), pause=pause, paused=paused)

    async def edit(self, edit: ConfigEdit) -> None:
        await self._call("edit", type(None), edit=edit)

    async def undo(self, *, change: int | None = None) -> None:
        await self._call("undo", type(None), change=change)

    async def reload(self) -> bool:
        return await self._call("reload", bool)  # type: ignore[no-any-return]

    async def shutdown(self, *, grace: float | None = None, reason: str = "shutdown") -> None:
        await self._call("shutdown", type(None), grace=grace, reason=reason)

    async def hurry(self) -> None:
        await self._call("hurry", type(None))

    # --- the output viewer ----------------------------------------------------------

    async def output_page(
        self, run_id: str, *, offset: int | None = None, before: bool = False,
        lines: int = PAGE_LINES,
    ) -> OutputPage:  # fmt: skip
        return await self._call(  # type: ignore[no-any-return]
            "output_page", OutputPage, run_id=run_id, offset=offset, before=before, lines=lines
        )

    async def search_output(
        self, run_id: str, text: str, *, offset: int = 0, backward: bool = False
    ) -> OutputMatch:
        return await self._call(  # type: ignore[no-any-return]
            "search_output", OutputMatch, run_id=run_id, text=text, offset=offset,
            backward=backward,
        )  # fmt: skip

    async def output_line_number(self, run_id: str, offset: int) -> int | None:
        return await self._call(  # type: ignore[no-any-return]
            "output_line_number", int | None, run_id=run_id, offset=offset
        )

    # --- the downtime ledger (SPEC R25) ---

    async def decide_missed(self, job: str | None, choice: MissedChoice) -> tuple[MissedSlots, ...]:
        return await self._call(  # type: ignore[no-any-return]
            "decide_missed", tuple[MissedSlots, ...], job=job, choice=choice
        )

    # --- seeing ahead (R25) ---------------------------------------------------------------

    async def simulate(
        self, start: datetime, end: datetime, *, jobs: tuple[str, ...] = (), limit: int = 10_000
    ) -> Simulation:
        return await self._call(  # type: ignore[no-any-return]
            "simulate", Simulation, start=start, end=end, jobs=jobs, limit=limit
        )

    # --- the edit form's impact preview (SPEC R25) ---

    async def impact(self, edit: ConfigEdit) -> EditImpact:
        return await self._call("impact", EditImpact, edit=edit)  # type: ignore[no-any-return]

    # --- backfill of a window (SPEC R24) ---

    async def backfill(
        self, job: str, start: datetime, end: datetime, *, dry_run: bool = False
    ) -> BackfillPlan:
        return await self._call(  # type: ignore[no-any-return]
            "backfill", BackfillPlan, job=job, start=start, end=end, dry_run=dry_run
        )

    # --- history stats (issue 16) ---

    async def stats(self, query: StatsQuery) -> HistoryStats:
        return await self._call("stats", HistoryStats, query=query)  # type: ignore[no-any-return]
