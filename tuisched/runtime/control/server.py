"""The control seam on a Unix socket: HTTP/1.1 and JSON, for consoles, scripts and curl.

Every scheduler (the console's and `--no-ui`) serves its `SchedulerControl`
on `state_dir/control.sock` (the folder 0700, the socket 0600). Only the user
who runs the scheduler may talk to it: each connection's peer is checked with
`SO_PEERCRED`, and anyone else gets 403 and a line in the actions log.

The protocol, version `PROTOCOL`, lives under `/v1`:

    GET  /v1                       {"protocol": 1, "tuisched": "0.1.0", "pid": ...,
                                    "config": "/path/of/its/tuisched.yaml"}
    GET  /v1/<query>?arg=value     a query of the seam: status, jobs, runs, ...
    POST /v1/<method>  {args}      any method of the seam, arguments as JSON
    GET  /v1/events?after=SEQ      the event stream: one JSON event per line,
                                   every event after SEQ, then each new one

Method and argument names are the seam's (`run_now` or `run-now`; `job`,
`kill`, `pause`...); a query may also be asked with HEAD, any other method
is answered 405. Values are the seam's types as `tuisched.domain.wire`
writes them. A `TuischedError` answers 4xx with `{"error": class name,
"message": text}` (and `problems` for a `ConfigError`): 400 for arguments
that do not fit (`WireError`), 404 for an unknown job, 409 otherwise; the
client raises it again as the same class. A request that is not HTTP, or
not this protocol, gets a 4xx with the same one-line body (`WireError`, or
`ControlError` for a path or method that does not exist) and one line in
the log: nothing a client sends shows a traceback. Every request names its
client in `X-Tuisched-Client` (`console over ssh from 10.0.0.5`, ...); the
actions log records it with the user the kernel vouches for.

    curl --unix-socket state/control.sock http://tuisched/v1/status
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import itertools
import json
import logging
import os
import pwd
import socket
import stat
import struct
import threading
import typing
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError

import tuisched
from tuisched.domain.errors import TuischedError, UnknownJobError, WireError
from tuisched.domain.events import Event
from tuisched.domain.wire import decode, encode, event_to_json
from tuisched.runtime.control.protocol import CLIENT_HEADER, PROTOCOL, error_body, reachable
from tuisched.runtime.control.seam import SchedulerControl

log = logging.getLogger(__name__)

SHUTDOWN_SECONDS = 5.0
"""How long calls in progress may take to finish once the server stops."""
KEEPALIVE_SECONDS = 15.0
"""An empty line on the event stream this often, so a proxy keeps the connection."""
STREAMS_PER_CLIENT = 16
"""Event streams one process may hold open at once (each replays up to the whole kept
journal); more are refused with 429."""
EVENTS_PER_WRITE = 500
"""Events encoded and written in one step of a stream: a replay of the whole journal
goes out in steps, with the loop free between them."""

QUERIES = frozenset({
    "status", "jobs", "groups", "runs", "history", "failures_since", "output", "audit",
    "config_text", "pending_edit", "job_definition", "plan", "preview", "nodes",
    "impact", "simulate", "missed", "output_page", "search_output", "output_line_number",
    "stats", "last_change",
})  # fmt: skip
"""The seam's methods that change nothing: they may be asked with GET."""
METHODS = frozenset({
    *QUERIES, "run_now", "stop_run", "set_paused", "edit", "undo", "reload", "shutdown",
    "hurry", "decide_missed",
    "backfill",
})  # fmt: skip
"""The seam's methods the protocol carries (all but `subscribe`, which is /v1/events)."""

ControlFor = Callable[[str], SchedulerControl]
"""The control a request acts through, for its actor (`user@host (client)`)."""
Refused = Callable[[str], None]
"""Told who was refused (for the actions log)."""


def _peer(request: web.BaseRequest) -> tuple[int, int] | None:
    """The (pid, uid) of the process at the other end of the request's socket."""
    transport = request.transport
    sock = transport.get_extra_info("socket") if transport is not None else None
    if sock is None:
        return None
    data = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    pid, uid, _gid = struct.unpack("3i", data)
    return pid, uid


def _user(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def _arguments(name: str, given: dict[str, Any]) -> dict[str, Any]:
    """`given` (JSON values) as the arguments of the seam's method `name`."""
    method = getattr(SchedulerControl, name)
    hints = typing.get_type_hints(method)
    parameters = inspect.signature(method).parameters
    arguments: dict[str, Any] = {}
    for given_key, value in given.items():
        key = given_key.replace("-", "_")
        if key not in parameters or key == "self":
            raise WireError(f"{name} takes no argument '{given_key}'")
        arguments[key] = decode(hints[key], value, where=f"{name}.{key}")
    for key, parameter in parameters.items():
        needed = parameter.default is inspect.Parameter.empty and parameter.kind in (
            inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY
        )  # fmt: skip
        if needed and key != "self" and key not in arguments:
            raise WireError(f"{name} needs the argument '{key}'")
    return arguments


def _query_arguments(request: web.BaseRequest) -> dict[str, Any]:
    """Query-string arguments: JSON when they parse as JSON, text otherwise; repeated
    names make a list (`?names=a&names=b`)."""
    given: dict[str, Any] = {}
    for key in request.query:
        values = []
        for raw in request.query.getall(key):
            try:
                values.append(json.loads(raw))
            except (ValueError, RecursionError):  # not JSON (or nested too deep for it)
                values.append(raw)
        given[key] = values if len(values) > 1 else values[0]
    return given


async def _given(request: web.BaseRequest) -> dict[str, Any]:
    """The arguments of a call: its query string's, and a POST's JSON object over them.

    Raises:
        WireError: the body cannot be read, is not JSON, or is not an object.
    """
    given = _query_arguments(request)
    if request.method != "POST" or not request.can_read_body:
        return given
    try:
        body = await request.json()
    except web.RequestPayloadError as error:
        raise WireError(f"the body cannot be read: {_client_fault(error)}") from None
    except RecursionError:  # JSON nested deeper than the interpreter goes
        raise WireError("not JSON: nested too deeply") from None
    except ValueError as error:  # not UTF-8, not JSON, a number of over 4,300 digits
        raise WireError(f"not JSON: {_one_line(str(error))}") from None
    if not isinstance(body, dict):
        raise WireError("the body must be a JSON object of arguments")
    given.update(body)
    return given


MOST_DIGITS = 19
"""Digits an event's number may have (one of 5,000 would reach past what int() takes)."""
PREFIX = "/v1/"
READING = frozenset({"GET", "HEAD"})


def _failure(status: int, error: str, message: str) -> web.Response:
    """A failed call's answer: `{"error": ..., "message": ...}` on one line."""
    return web.json_response({"error": error, "message": message}, status=status)


def _one_line(text: str, limit: int = 200) -> str:
    """`text` as one line of at most `limit` characters (a client's bytes quoted in it)."""
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


def _client_fault(exc: object) -> str | None:
    """Why a request could not be read, in one line, when that is the client's fault:
    the parser refused it, or its body (an undecodable Content-Encoding, say)."""
    if isinstance(exc, web.RequestPayloadError):
        exc = exc.__cause__ or exc
    if isinstance(exc, HttpProcessingError) and (exc.code or 400) < 500:
        return _one_line(exc.message or str(exc), limit=300).rstrip(":")
    if isinstance(exc, web.RequestPayloadError):
        return _one_line(str(exc), limit=300)
    return None


class _Connection(web.RequestHandler):
    """One connection: a request aiohttp's parser refuses (not HTTP, a bad header, an
    invalid path...) is answered as this protocol answers, not with the parser's
    multi-line text, and logged in one line, not as a traceback. An event stream hears
    at once when its client goes (`gone`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.gone = asyncio.Event()
        """Set once the connection is lost: a stream on it stops and frees its place
        (it waited for its next write before, up to KEEPALIVE_SECONDS, while a client
        that reconnected was refused 429)."""

    def connection_lost(self, exc: BaseException | None) -> None:
        """The client went away (or the server closed the connection)."""
        super().connection_lost(exc)
        self.gone.set()

    def log_exception(self, *args: Any, **kwargs: Any) -> None:
        """A client's fault (a request, or a body, aiohttp could not read): one line;
        anything else (a fault of ours) with its traceback, as aiohttp logs it."""
        why = _client_fault(kwargs.get("exc_info"))
        if why is None:
            super().log_exception(*args, **kwargs)
        else:
            log.info("control socket: a malformed request: %s", why)

    def handle_error(
        self,
        request: web.BaseRequest,
        status: int = 500,
        exc: BaseException | None = None,
        message: str | None = None,
    ) -> web.StreamResponse:
        """Answer a refused request (4xx) in one line, and a call that failed (a fault of
        ours, with its traceback in the log) in one line too."""
        why = _client_fault(exc) if exc is not None else _one_line(message or "")
        if status < 500 and why is not None:
            log.info("control socket: a malformed request: %s", why)
            error, said = "WireError", f"malformed request: {why or 'unreadable'}"
        else:
            self.log_exception("Error handling request", exc_info=exc)
            error, said = "ControlError", "the scheduler failed to answer: its log says why"
        if request.writer.output_size > 0:
            raise ConnectionError("an answer was under way: the connection is dropped")
        response = _failure(status, error, said)
        response.force_close()
        return response


class _Server(web.Server):
    """The low-level server, with connections that answer refused requests in one line."""

    def __call__(self) -> web.RequestHandler:
        # web.Server.__call__, with our connection class (aiohttp has no option for it)
        return _Connection(self, loop=self._loop, **self._kwargs)


class ControlServer:
    """Serves a scheduler's control seam on its Unix socket (see the module)."""

    def __init__(
        self, path: Path, control_for: ControlFor, *, refused: Refused, config: Path | None = None
    ) -> None:
        """`config`: the configuration file the scheduler runs, named in the hello, so a
        client given another file refuses to speak for it."""
        self.path = path
        self._config = config
        self._control_for = control_for
        self._refused = refused
        self._uid = os.getuid()
        self._runner: web.ServerRunner | None = None
        self._site: web.UnixSite | None = None
        self._streams: set[asyncio.Queue[Event | None]] = set()
        self._streams_of: dict[int, int] = {}
        """Event streams open, by the process at the other end."""
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        """Listen on the socket (a stale one left by a killed scheduler is replaced)."""
        server = _Server(self._handle, access_log=None)
        self._runner = web.ServerRunner(
            server, handle_signals=False, shutdown_timeout=SHUTDOWN_SECONDS
        )
        await self._runner.setup()
        self._remove_stale()
        with reachable(self.path) as name:
            self._site = web.UnixSite(self._runner, name)
            await self._site.start()
        self.path.chmod(0o600)  # the folder is 0700 already: nobody else could race us

    async def stop_listening(self) -> None:
        """Take no new connection and remove the socket; calls in progress may finish
        (one of them may be the `shutdown` that stops the scheduler)."""
        if self._site is not None:
            await self._site.stop()
            self._site = None
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()

    async def stop(self) -> None:
        """Stop listening, end the event streams, close every connection."""
        await self.stop_listening()
        for stream in list(self._streams):
            stream.put_nowait(None)
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    def _remove_stale(self) -> None:
        try:
            info = self.path.lstat()
        except FileNotFoundError:
            return
        if not stat.S_ISSOCK(info.st_mode):
            raise TuischedError(f"{self.path} is in the way of the control socket: remove it")
        self.path.unlink()  # we hold the instance lock: no live scheduler listens on it

    async def _handle(self, request: web.BaseRequest) -> web.StreamResponse:
        """Answer `request`: only our user's, on a path and with a method of the protocol."""
        refused = self._refusal(request)
        if refused is not None:
            return refused
        path = request.path
        if path == "/v1":
            if request.method not in READING:
                return _failure(405, "ControlError", "/v1 is read: GET it")
            return await self._hello(request)
        if path == "/v1/events":
            if request.method != "GET":  # a stream: HEAD would never end either
                return _failure(405, "ControlError", "/v1/events is a stream: GET it")
            return await self._events(request)
        name = path.removeprefix(PREFIX)
        if path == name or not name or "/" in name:
            shown = _one_line(path)
            return _failure(404, "ControlError", f"no such path: {shown} (try /v1/status)")
        return await self._call(request, name)

    def _refusal(self, request: web.BaseRequest) -> web.Response | None:
        """403 for anyone but the scheduler's own user (and a line in the actions log)."""
        peer = _peer(request)
        if peer is not None and peer[1] == self._uid:
            return None
        who = "unknown" if peer is None else f"{_user(peer[1])} (uid {peer[1]}, pid {peer[0]})"
        self._refused(who)
        log.warning("control socket: refused %s, who is not %s", who, _user(self._uid))
        return _failure(403, "ControlError", "only the scheduler's own user may")

    def _later(self, work: Awaitable[None]) -> None:
        """Run `work` after the answer (kept referenced until it ends; failures logged)."""

        async def run() -> None:
            try:
                await work
            except Exception:
                log.exception("a call of the control socket failed after its answer")

        task = asyncio.get_running_loop().create_task(run())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _actor(self, request: web.BaseRequest) -> str:
        client = request.headers.get(CLIENT_HEADER, "") or "a client of the control socket"
        return f"{_user(self._uid)}@{socket.gethostname()} ({client[:200]})"

    async def _hello(self, _request: web.BaseRequest) -> web.Response:
        hello = {"protocol": PROTOCOL, "tuisched": tuisched.__version__, "pid": os.getpid()}
        if self._config is not None:
            hello["config"] = str(self._config)
        return web.json_response(hello)

    async def _call(self, request: web.BaseRequest, given_name: str) -> web.Response:
        name = given_name.replace("-", "_")
        if name not in METHODS:
            return _failure(404, "ControlError", f"no such call: {_one_line(given_name)}")
        if request.method in READING and name not in QUERIES:
            return _failure(405, "ControlError", f"{name} changes things: POST it")
        if request.method not in READING and request.method != "POST":
            return _failure(405, "ControlError", f"{name} is asked with GET or POST")
        try:
            arguments = _arguments(name, await _given(request))
            control = self._control_for(self._actor(request))
            if name == "shutdown":  # answered when the drain starts: it may take hours
                self._later(control.shutdown(**arguments))
                return web.json_response({"result": None})
            result = await getattr(control, name)(**arguments)
        except UnknownJobError as error:
            return web.json_response(error_body(error), status=404)
        except WireError as error:  # the request's fault: its arguments do not fit
            return web.json_response(error_body(error), status=400)
        except TuischedError as error:
            return web.json_response(error_body(error), status=409)
        return web.json_response({"result": encode(result)})

    async def _events(self, request: web.BaseRequest) -> web.StreamResponse:
        after_text = request.query.get("after")
        after = None
        if after_text:
            digits = after_text.removeprefix("-")
            if not (digits.isascii() and digits.isdigit() and len(digits) <= MOST_DIGITS):
                body = {"error": "WireError", "message": "after must be an event's number"}
                return web.json_response(body, status=400)
            after = int(after_text)
        peer = _peer(request)
        client = peer[0] if peer is not None else 0
        if self._streams_of.get(client, 0) >= STREAMS_PER_CLIENT:
            body = {"error": "ControlError",
                    "message": f"at most {STREAMS_PER_CLIENT} event streams a client"}  # fmt: skip
            return web.json_response(body, status=429)
        queue: asyncio.Queue[Event | None] = asyncio.Queue()
        control = self._control_for(self._actor(request))
        try:
            subscription = control.subscribe(queue.put_nowait, after=after)
        except TuischedError as error:
            return web.json_response(error_body(error), status=410)
        self._streams_of[client] = self._streams_of.get(client, 0) + 1
        try:
            response = web.StreamResponse(headers={"Content-Type": "application/x-ndjson"})
            await response.prepare(request)
            self._streams.add(queue)
            connection = request.protocol
            gone = connection.gone if isinstance(connection, _Connection) else asyncio.Event()
            await self._stream(queue, response, gone)
        except ConnectionError:
            pass  # the client went away
        finally:
            subscription.unsubscribe()
            self._streams.discard(queue)
            self._streams_of[client] -= 1
            if not self._streams_of[client]:
                del self._streams_of[client]
        return response

    @staticmethod
    async def _stream(
        queue: asyncio.Queue[Event | None], response: web.StreamResponse, gone: asyncio.Event
    ) -> None:
        """Write the events of `queue` as they come, a burst in steps of EVENTS_PER_WRITE
        with the loop free between them, until the server stops (None) or the client
        goes (`gone`)."""
        while True:
            event = await _next(queue, gone)
            if gone.is_set():
                return
            if event is _IDLE:
                await response.write(b"\n")
                continue
            lines = [event, *_drain(queue, EVENTS_PER_WRITE - 1)]
            events = [e for e in lines if e is not None]
            await response.write(b"".join(_encoded(e) for e in events))
            if len(events) < len(lines):
                return  # the server stops
            if not queue.empty():
                await asyncio.sleep(0)  # the rest of a replay after what else is due


_ENCODED: dict[int, tuple[Event, bytes]] = {}
"""Each event's line, by sequence number, made once for every stream that sends it (the
event is kept beside it: another scheduler in the process numbers its own events)."""
ENCODED_KEPT = 12_000
"""Lines kept (a little more than the bus's journal: a replay finds them made)."""
_ENCODING = threading.Lock()


def _encoded(event: Event) -> bytes:
    """`event` as a line of the stream (JSON, newline), made once."""
    kept = _ENCODED.get(event.seq)
    if kept is not None and kept[0] is event:
        return kept[1]
    line = (json.dumps(event_to_json(event)) + "\n").encode()
    with _ENCODING:  # the servers of several schedulers in one process share it
        _ENCODED[event.seq] = (event, line)
        if len(_ENCODED) > ENCODED_KEPT:
            for seq in list(itertools.islice(_ENCODED, len(_ENCODED) - ENCODED_KEPT)):
                del _ENCODED[seq]
    return line


_IDLE = object()
"""What `_next` gives when KEEPALIVE_SECONDS passed without an event."""


async def _next(queue: asyncio.Queue[Event | None], gone: asyncio.Event) -> Any:
    """The next item of `queue`; `_IDLE` after KEEPALIVE_SECONDS without one, or as soon
    as `gone` is set (a cancelled get leaves its item in the queue)."""
    getter = asyncio.ensure_future(queue.get())
    waiter = asyncio.ensure_future(gone.wait())
    try:
        await asyncio.wait({getter, waiter}, timeout=KEEPALIVE_SECONDS,
                           return_when=asyncio.FIRST_COMPLETED)  # fmt: skip
    finally:
        waiter.cancel()
        if not getter.done():
            getter.cancel()
    return getter.result() if getter.done() and not getter.cancelled() else _IDLE


def _drain(queue: asyncio.Queue[Event | None], limit: int) -> list[Event | None]:
    """Up to `limit` of the events waiting in `queue`."""
    events: list[Event | None] = []
    while not queue.empty() and len(events) < limit:
        events.append(queue.get_nowait())
    return events
