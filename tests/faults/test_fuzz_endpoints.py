"""Hostile requests to a running scheduler's control socket and metrics port: each gets
an answer (or, for a request that never ends, a clean close), never a traceback.

One scheduler serves the whole module, on real sockets: its control socket
(a Unix socket, HTTP/1.1) and its metrics port. Hypothesis writes requests
out of what clients and scanners send: any path under /v1, query strings
with huge, negative, non-ASCII, repeated and empty values, odd methods,
JSON bodies nested deep, huge, of the wrong types or not UTF-8 at all, odd
headers, requests cut short, silent clients. Every complete request is
answered with a well-formed HTTP response of status 2xx or 4xx (on the
metrics port also 501 for a method it does not serve, 503 from /healthz and
505 for an HTTP version it does not speak), whose error body is one line;
the scheduler logs no traceback and no error; and it still answers
/v1/status and /metrics afterwards.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import enum
import http.client
import inspect
import json
import logging
import socket
import time
import types
import typing
import urllib.parse
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tuisched.runtime.configfiles import load_config
from tuisched.runtime.control import LocalScheduler, socket_path
from tuisched.runtime.control.seam import SchedulerControl
from tuisched.runtime.control.server import METHODS, QUERIES, ControlServer
from tuisched.runtime.runtime import Runtime

from ..runtime_fixtures import write_config

JOBS = """
hello: {command: "echo hello", schedule: manual}
hourly: {command: [/bin/true], schedule: {every: 1 hour, start: 2026-01-01T00:00}}
after-hello: {command: [/bin/true], after: hello}
output: {command: [/bin/sh, OUTPUT], schedule: manual}
"""
OUTPUT = r"""printf 'one\ntwo\n\033[31mred\033[0m \303\274\n\377\376\n'
head -c 70000 /dev/zero | tr '\0' x
printf '\nlast\n'
"""
"""What job `output` writes: short lines, escapes, bytes that are not UTF-8, a long line."""
ANSWER_SECONDS = 20.0
"""How long one answer may take (2 busy cores): longer is a hang."""
SILENT_CLIENTS = 200
SILENT_SECONDS = 8.0
"""How long SILENT_CLIENTS connections and a scrape may take: a fraction of a second
here, and 30 s or more when each sixth connection waits a second for an accept."""


class _Records(logging.Handler):
    """Every log record of the process at WARNING and above, formatted."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.setFormatter(logging.Formatter("%(name)s %(levelname)s %(message)s"))
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))

    def take(self) -> list[str]:
        """The records since the last call."""
        taken, self.lines = self.lines, []
        return taken


@dataclass
class Served:
    """The scheduler of this module and what it logged."""

    socket: Path
    metrics_port: int
    log: _Records
    run_id: str
    """A finished run of `output`, whose output file the output calls page and search."""


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    folder = tmp_path_factory.mktemp("endpoints")
    (folder / "output.sh").write_text(OUTPUT)
    jobs = JOBS.replace("OUTPUT", str(folder / "output.sh"))
    path = write_config(folder, jobs, settings='metrics: {listen: "127.0.0.1:0"}')
    runtime = Runtime(load_config(path), kill_grace=0.5)
    scheduler = LocalScheduler(runtime)
    records = _Records()
    root = logging.getLogger()
    root.addHandler(records)
    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(scheduler.start())
        assert runtime.metrics is not None
        run = loop.run_until_complete(asyncio.wait_for(scheduler.run_job("output"), 30))
        assert run.result is not None
        port = runtime.metrics.server.port
        yield Served(socket_path(folder / "state"), port, records, run.run_id)
    finally:
        loop.run_until_complete(scheduler.stop(grace=1))
        loop.close()
        root.removeHandler(records)
    assert _bad(records.take()) == []


def _bad(lines: list[str]) -> list[str]:
    """The log lines no request may cause: errors, tracebacks, more than one line."""
    return [line for line in lines if " ERROR " in line or "\n" in line or "Traceback" in line]


# --- the control socket ------------------------------------------------------------------

ARGUMENTS = st.sampled_from(
    ["job", "name", "names", "run_id", "offset", "lines", "limit", "count", "after", "before",
     "backward", "text", "query", "since", "start", "end", "jobs", "kill", "key", "pause",
     "paused", "edit", "choice", "grace", "reason", "x", "", "job-", "__class__", "self"]
)  # fmt: skip
VALUE_TEXT = st.sampled_from(
    ["", "0", "1", "-1", "10", "9" * 30, "-" + "9" * 30, "9" * 5000, "1e400", "-1e400", "NaN",
     "Infinity", "-0", "0.5", "true", "null", "[]", "{}", '["hello"]', '{"kind": "all"}',
     '{"kind": "job", "name": "hello"}', "[" * 3000, "hello", "nope", "日本", "\u202e", "%00",
     "%ff%fe", "%0a", "2026-01-01T00:00:00+00:00", "0001-01-01T00:00:00+00:00",
     "9999-12-31T23:59:59+00:00", "2026-13-45", '"hello"', "x" * 3000]
)  # fmt: skip
CALLS = st.sampled_from(sorted(METHODS - {"shutdown"}))
"""Every call but the one that would stop the scheduler under the test."""
PATH = st.one_of(
    CALLS, CALLS, CALLS, CALLS,
    st.sampled_from(
        ["", "events", "status/", "status/x", "..", "../v1/status", "%2e%2e", "run-now",
         "output-page", "STATUS", "status%00", "status;x", "subscribe", "__init__", "_call",
         "shutdown_", "日本", "%ff", "x" * 5000]
    ),
    st.text(st.characters(codec="utf-8", exclude_characters="?#/ \r\n"), max_size=20),
)  # fmt: skip
HTTP_METHOD = st.sampled_from(
    ["GET"] * 4 + ["POST"] * 6
    + ["HEAD", "PUT", "DELETE", "PATCH", "OPTIONS", "TRACE", "CONNECT", "FOO", "get", "M" * 300]
)  # fmt: skip
JSON_VALUE = st.recursive(
    st.one_of(
        st.none(), st.booleans(), st.integers(min_value=-(10**30), max_value=10**30),
        st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=30),
        st.sampled_from(["hello", "nope", "all", "job", "2026-01-01T00:00:00+00:00"]),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(ARGUMENTS | st.text(max_size=8), inner, max_size=4),
    ),
    max_leaves=12,
)  # fmt: skip


RUN = "@run"
"""Stands for `Served.run_id` in a request (replaced as it is sent)."""
NAMES = st.sampled_from(
    ["hello", "hourly", "after-hello", "output", "nope", "", "x" * 3000, "日本", RUN, RUN, RUN]
)
WHEN = st.sampled_from(
    ["2026-01-01T00:00:00+00:00", "2026-06-01T12:00:00+02:00", "0001-01-01T00:00:00+00:00",
     "9999-12-31T23:59:59+00:00", "2026-01-01T00:00:00", "2026-13-45", "", "now"]
)  # fmt: skip
NUMBER = st.one_of(
    st.integers(-3, 20), st.sampled_from([-(2**63), 2**63, 10**30, -(10**30), 10**400]),
    st.floats(), st.integers(),
)  # fmt: skip


def _typed(hint: Any, depth: int = 0) -> st.SearchStrategy[Any]:
    """JSON for a value of type `hint` as the seam takes it: mostly of that type (names
    of real jobs, real enum values, every field of a dataclass), with odd values in it."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return st.one_of(*(_typed(arg, depth) for arg in args))
    if origin in (tuple, list, set, frozenset, Collection, Sequence):
        return st.lists(_typed(args[0], depth + 1) if args else JSON_VALUE, max_size=3)
    if origin in (dict, Mapping):
        return st.dictionaries(st.text(max_size=8), JSON_VALUE, max_size=3)
    return _simple(hint, depth)


def _simple(hint: Any, depth: int) -> st.SearchStrategy[Any]:
    if hint is type(None):
        return st.none()
    if hint is bool:
        return st.booleans()
    if hint is int or hint is float or hint is timedelta:
        return NUMBER
    if hint is str:
        return NAMES | st.text(max_size=20)
    if hint is datetime:
        return WHEN
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return st.sampled_from([member.value for member in hint]) | st.just("bogus")
    if isinstance(hint, type) and dataclasses.is_dataclass(hint) and depth < 4:
        hints = typing.get_type_hints(hint)
        fields = {f.name: _typed(hints[f.name], depth + 1) for f in dataclasses.fields(hint)}
        return st.fixed_dictionaries({}, optional=fields)
    return JSON_VALUE


def _parameters(name: str) -> dict[str, Any]:
    method = getattr(SchedulerControl, name)
    hints = typing.get_type_hints(method)
    return {key: hints[key] for key in inspect.signature(method).parameters if key != "self"}


@st.composite
def arguments(draw: st.DrawFn, name: str) -> dict[str, Any]:
    """Arguments for the seam's method `name`, now and then one odd one more."""
    parameters = _parameters(name) if name in METHODS else {}
    found = {key: draw(_typed(hint)) for key, hint in parameters.items() if draw(st.integers(0, 5))}
    if draw(st.integers(0, 4)) == 0:
        key = draw(st.sampled_from([*parameters, "x"]) if parameters else ARGUMENTS)
        found[key] = draw(JSON_VALUE)
    return found


@st.composite
def body(draw: st.DrawFn, name: str) -> bytes:
    form = draw(st.sampled_from(["args", "args", "args", "json", "deep", "huge", "bytes", ""]))
    if form == "args":
        return json.dumps(draw(arguments(name))).encode()
    if form == "json":
        return json.dumps(draw(JSON_VALUE)).encode()
    if form == "deep":
        depth = draw(st.integers(100, 50_000))
        opening = draw(st.sampled_from(["[", '{"job": ']))
        return (opening * depth).encode() + b"1" + b"]" * depth
    if form == "huge":
        return json.dumps({"job": "x" * draw(st.sampled_from([10_000, 2_000_000]))}).encode()
    if form == "bytes":
        return draw(st.binary(max_size=200))
    return b""


@st.composite
def query(draw: st.DrawFn, name: str) -> str:
    if draw(st.booleans()):  # arguments as the clients write them
        given = draw(arguments(name))
        pairs = [(key, json.dumps(value)) for key, value in given.items()]
    else:
        pairs = draw(st.lists(st.tuples(ARGUMENTS, VALUE_TEXT), max_size=5))
    if not pairs and draw(st.booleans()):
        return draw(st.sampled_from(["", "?", "?&", "?=", "?==", "?a", "?%", "?%zz=1"]))
    if draw(st.integers(0, 4)) == 0:
        return "?" + "&".join(f"{key}={value}" for key, value in pairs)  # as they come
    return "?" + urllib.parse.urlencode(pairs)


@dataclass(frozen=True)
class Request:
    method: str
    target: bytes
    headers: tuple[tuple[str, str], ...]
    body: bytes

    def encode(self, run_id: str = "") -> bytes:
        """The request's bytes, with `run_id` for each RUN in its target and body."""
        target, body = (
            part.replace(RUN.encode(), run_id.encode()) for part in (self.target, self.body)
        )
        head = [f"{self.method} ".encode() + target + b" HTTP/1.1", b"Host: tuisched"]
        head += [f"{name}: {value}".encode() for name, value in self.headers]
        head += [f"Content-Length: {len(body)}".encode(), b"Connection: close"]
        return b"\r\n".join(head) + b"\r\n\r\n" + body


HEADER = st.sampled_from(
    [("Content-Type", "application/json"), ("Content-Type", "text/plain"),
     ("Content-Type", "application/json; charset=latin-1"), ("X-Tuisched-Client", "fuzz"),
     ("X-Tuisched-Client", "x" * 5000), ("X-Tuisched-Client", "日本"), ("Accept", "text/html"),
     ("Transfer-Encoding", "gzip"), ("Content-Encoding", "gzip"), ("Expect", "100-continue")]
)  # fmt: skip


@st.composite
def request(draw: st.DrawFn) -> Request:
    path = draw(PATH)
    name = path.replace("-", "_")
    target = draw(st.sampled_from(["quoted"] * 6 + ["raw", "bytes"]))
    if target == "quoted":
        encoded = f"/v1/{urllib.parse.quote(path)}{draw(query(name))}".encode()
    elif target == "raw":
        encoded = f"/v1/{path}{draw(query(name))}".encode()
    else:
        encoded = b"/v1/" + draw(st.binary(min_size=1, max_size=20))
    encoded = encoded.replace(b"\r", b"%0d").replace(b"\n", b"%0a").replace(b" ", b"%20")
    headers: tuple[tuple[str, str], ...] = ()
    if draw(st.integers(0, 3)) == 0:
        headers = tuple(draw(st.lists(HEADER, max_size=2, unique_by=lambda h: h[0])))
    return Request(draw(HTTP_METHOD), encoded, headers, draw(body(name)))


@st.composite
def call(draw: st.DrawFn) -> Request:
    """A call of the seam as a client writes it, with odd arguments: a query asked with
    GET (its arguments in the query string) or POST (as a JSON body), a command POSTed."""
    name = draw(CALLS)
    shown = name.replace("_", "-") if draw(st.booleans()) else name
    if name in QUERIES and draw(st.booleans()):
        return Request("GET", f"/v1/{shown}{draw(query(name))}".encode(), (), b"")
    given = draw(arguments(name))
    data = json.dumps(given).encode() if draw(st.integers(0, 5)) else draw(body(name))
    return Request("POST", f"/v1/{shown}".encode(), (), data)


OUTPUT_CALLS = ("output", "output_page", "search_output", "output_line_number")


@st.composite
def output_call(draw: st.DrawFn) -> Request:
    """A call that reads the output file of the module's run (paging, searching,
    counting lines) from odd offsets, with odd line counts and needles."""
    name = draw(st.sampled_from(OUTPUT_CALLS))
    given = draw(arguments(name))
    given["run_id"] = RUN
    if draw(st.booleans()):
        given["text"] = draw(
            st.sampled_from(["x", "X", "last", "red", "\x1b", "ü", "\n", "x" * 70_000])
        )
    if draw(st.booleans()):
        key = draw(st.sampled_from(["offset", "lines", "limit"]))
        given[key] = draw(st.sampled_from([0, 1, 3, 69_000, 70_020, -1, -(2**63), 2**63, 10**30]))
    return Request("POST", f"/v1/{name}".encode(), (), json.dumps(given).encode())


@dataclass(frozen=True)
class Answer:
    status: int
    body: bytes


def _ask_unix(path: Path, data: bytes, method: str = "GET") -> Answer:
    """Send `data` (a whole request) on the Unix socket at `path` and read the answer."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(ANSWER_SECONDS)
        sock.connect(str(path))
        return _answer(sock, data, method)


def _answer(sock: socket.socket, data: bytes, method: str) -> Answer:
    """The answer to `data`: a well-formed response (http.client raises otherwise); the
    body of an event stream is not waited for (it never ends)."""
    # answered and closed before reading all of it (a body too large): read that answer
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        sock.sendall(data)
    response = http.client.HTTPResponse(sock, method=method)  # type: ignore[arg-type]
    response.begin()
    streaming = response.getheader("Content-Type", "").startswith("application/x-ndjson")
    return Answer(response.status, b"" if streaming else response.read())


def _one_line_error(answer: Answer) -> None:
    text = answer.body.decode("utf-8", errors="replace").rstrip("\n")
    assert "\n" not in text, answer
    try:
        found = json.loads(text)
    except ValueError:
        return  # plain text, one line
    if isinstance(found, dict) and "message" in found:
        assert "\n" not in str(found["message"]), answer


def _status(served: Served) -> None:
    answer = _ask_unix(served.socket, b"GET /v1/status HTTP/1.1\r\nHost: t\r\n\r\n")
    assert answer.status == 200, answer
    assert json.loads(answer.body)["result"]["state"] == "running"


def _control_example(served: Served, asked: Request) -> None:
    served.log.take()
    answer = _ask_unix(served.socket, asked.encode(served.run_id), asked.method)
    logged = _bad(served.log.take())  # logged before the answer was written
    assert 200 <= answer.status < 300 or 400 <= answer.status < 500, (answer, logged)
    if answer.status >= 400:
        _one_line_error(answer)
    assert logged == [], asked
    _status(served)


def _post(body: bytes, name: str, target: str = "") -> Request:
    return Request("POST", f"/v1/{name}{target}".encode(), (), body)


def _get(target: str) -> Request:
    return Request("GET", f"/v1/{target}".encode(), (), b"")


SEEN = [
    # the parser's refusals: a traceback in the log and a body of several lines
    Request("GET", b"/v1/\x00", (), b""),
    Request("GET", b"/v1/status?x=\xe2\x80\xae", (), b""),
    Request("GEt", b"/v1/status", (), b""),
    # a body that cannot be decoded: a traceback (unread), a 500 (read)
    Request("GET", b"/v1/audit", (("Content-Encoding", "gzip"),), b"{}"),
    Request("POST", b"/v1/audit", (("Content-Encoding", "gzip"),), b"{}"),
    # a plan past the year 9999: OverflowError, 500
    _post(b'{"name": "hourly", "after": "9999-12-31T23:59:59+00:00"}', "plan"),
    # more slowest runs than SQLite counts: OverflowError, 500
    _get("stats?query=" + urllib.parse.quote('{"slowest": 100000000000000000000000}')),
    _post(b'{"query": {"offset": 100000000000000000000000}}', "history"),
    # a run id with a newline, quoted as it was in the error's message
    _post(b'{"run_id": "\\n"}', "output"),
    _post(b'{"job": "a\\nb"}', "run_now"),
    # query values nested deeper than json.loads goes are text, as other non-JSON values
    _get("jobs?names=" + "[" * 3000),
    # a limit below 0 read the whole file, or past what a seek takes (500)
    _post(b'{"run_id": "@run", "limit": -9223372036854775808}', "output"),
    _post(b'{"run_id": "@run", "limit": -1}', "output"),
    # a backfill window from the first instant of the year 1: OverflowError, 500
    _post(
        b'{"job": "hourly", "start": "0001-01-01T00:00:00+00:00", '
        b'"end": "2026-01-01T00:00:00+00:00"}',
        "backfill",
    ),
    # a ConfigError's message held its problems one a line
    _post(
        b'{"edit": {"action": "add", "name": "nope", "definition": null, "target": "job"}}', "edit"
    ),
    # a newline searched backward: the search never ended (no answer, a thread spinning)
    _post(
        b'{"run_id": "@run", "text": "\\n", "offset": 100000, "backward": true}', "search_output"
    ),
]


FUZZ = settings(
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    derandomize=True,
)  # fmt: skip
"""Examples against the one scheduler of the module (`served`), in a fixed order."""


@settings(FUZZ, max_examples=300)
@given(asked=call())
@example(asked=_get("status"))
def test_a_call_with_odd_arguments_gets_a_clean_answer(served: Served, asked: Request) -> None:
    _control_example(served, asked)


@settings(FUZZ, max_examples=150)
@given(asked=output_call())
def test_reading_a_runs_output_from_odd_places_gets_a_clean_answer(
    served: Served, asked: Request
) -> None:
    _control_example(served, asked)


@settings(FUZZ, max_examples=150)
@given(asked=request())
def test_a_hostile_request_on_the_socket_gets_a_clean_answer(
    served: Served, asked: Request
) -> None:
    _control_example(served, asked)


@pytest.mark.parametrize("asked", SEEN, ids=lambda r: r.target.decode(errors="replace")[:40])
def test_requests_that_failed_once(served: Served, asked: Request) -> None:
    _control_example(served, asked)


@pytest.mark.parametrize(
    ("asked", "status", "error"),
    [
        # HEAD and the other methods ran commands as GET did not: now refused unread
        (Request("HEAD", b"/v1/run_now?job=%22hello%22", (), b""), 405, None),
        (Request("DELETE", b"/v1/run-now?job=%22hello%22", (), b""), 405, "ControlError"),
        (Request("PUT", b"/v1/reload", (), b""), 405, "ControlError"),
        (Request("HEAD", b"/v1/events", (), b""), 405, None),
        # arguments that do not fit are the request's fault: 400, not 409
        (_post(b'{"jobs": 1}', "status"), 400, "WireError"),
        (_post(b'{"name": "hourly", "count": 1000000}', "plan"), 400, "WireError"),
        # a date-time without its offset was refused by the history's store (409, its words)
        (_post(b'{"query": {"since": "2026-01-01T00:00:00"}}', "history"), 400, "WireError"),
        (_post(b"{", "status"), 400, "WireError"),
        (Request("GET", b"/v1/\x00", (), b""), 400, "WireError"),
        (_get("nope"), 404, "ControlError"),
        (_get("status/x"), 404, "ControlError"),
        (_post(b'{"job": "nope"}', "run_now"), 404, "UnknownJobError"),
    ],
)
def test_a_refused_request_says_why_with_its_status(
    served: Served, asked: Request, status: int, error: str | None
) -> None:
    served.log.take()
    answer = _ask_unix(served.socket, asked.encode(), asked.method)
    assert answer.status == status, answer
    if error is not None:
        found = json.loads(answer.body)
        assert found["error"] == error, found
        assert found["message"]
        _one_line_error(answer)
    assert _bad(served.log.take()) == []


def test_a_plan_past_the_year_9999_ends_there(served: Served) -> None:
    answer = _ask_unix(
        served.socket,
        _post(b'{"name": "hourly", "after": "9999-12-31T22:30:00+00:00"}', "plan").encode(),
    )
    assert answer.status == 200, answer
    assert json.loads(answer.body)["result"]["slots"] == ["9999-12-31T23:00:00+00:00"]


# --- the metrics port --------------------------------------------------------------------

ACCEPT = st.sampled_from(
    ["", "*/*", "text/plain", "text/plain; version=0.0.4", "text/plain; version=1.0.0",
     "text/plain; version=abc", "text/plain;version=", "text/plain; version=1.x.0",
     "application/openmetrics-text", "application/openmetrics-text; version=1.0.0",
     "application/openmetrics-text; version=x", "application/openmetrics-text; version=2.0.0",
     "application/openmetrics-text; version=1.0.0; escaping=values",
     "application/openmetrics-text; version=1.0.0; escaping=bogus",
     "application/openmetrics-text; version=99999999999999999999999",
     "application/openmetrics-text;;;version==1", "text/html", "日本", "a" * 5000]
)  # fmt: skip
METRICS_PATH = st.sampled_from(
    ["/metrics", "/metrics", "/healthz", "/healthz", "/", "", "*", "//metrics", "/metrics/",
     "/metrics?x=1", "/metrics?%ff", "/healthz#x", "/METRICS", "/metrics/../healthz",
     "http://tuisched/metrics", "/%00", "/日本", "/" + "x" * 70_000]
)  # fmt: skip
METRICS_METHOD = st.sampled_from(
    ["GET", "GET", "GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "TRACE", "FOO", "get",
     "G ET", ""]
)  # fmt: skip
VERSION = st.sampled_from(
    ["HTTP/1.1", "HTTP/1.1", "HTTP/1.1", "HTTP/1.0", "HTTP/2.0", "HTTP/9.9", "HTTP/1",
     "HTTP/1.1.1", "http/1.1", "HTTP/1.a", "SPDY"]
)  # fmt: skip
RAW_HEADER = st.one_of(
    st.tuples(st.just("Accept"), ACCEPT).map(lambda h: f"{h[0]}: {h[1]}".encode()),
    st.sampled_from(
        [b"Host: x", b"Connection: keep-alive", b"Content-Length: 5", b"Content-Length: -1",
         b"Transfer-Encoding: chunked", b"Expect: 100-continue", b"no colon here",
         b"X-Odd: \xff\xfe", b"X-Long: " + b"y" * 70_000, b" leading: space",
         b"Accept-Encoding: gzip"]
    ),
)  # fmt: skip


@st.composite
def scrape(draw: st.DrawFn) -> tuple[str, bytes]:
    """A request for the metrics port (its method, for reading the answer), whole."""
    method = draw(METRICS_METHOD)
    line = f"{method} {draw(METRICS_PATH)} {draw(VERSION)}".encode()
    headers = draw(st.lists(RAW_HEADER, max_size=4))
    if draw(st.integers(0, 10)) == 0:
        headers += [b"X-N: 1"] * 150  # more headers than http.server reads
    return method, b"\r\n".join([line, *headers]) + b"\r\n\r\n"


def _ask_metrics(port: int, data: bytes, method: str) -> Answer:
    with socket.create_connection(("127.0.0.1", port), timeout=ANSWER_SECONDS) as sock:
        return _answer(sock, data, method)


def _scraped(served: Served) -> None:
    answer = _ask_metrics(served.metrics_port, b"GET /metrics HTTP/1.1\r\nHost: t\r\n\r\n", "GET")
    assert answer.status == 200, answer
    assert b"tuisched_" in answer.body


def _metrics_example(served: Served, method: str, data: bytes) -> None:
    served.log.take()
    answer = _ask_metrics(served.metrics_port, data, method)
    assert answer.status < 500 or answer.status in (501, 503, 505), answer
    if answer.status >= 400:
        assert answer.body.decode("utf-8", errors="replace").count("\n") <= 1, answer
    assert _bad(served.log.take()) == [], data[:200]
    _scraped(served)


@settings(FUZZ, max_examples=200)
@given(asked=scrape())
@example(asked=("GET", b"GET /metrics HTTP/1.1\r\nAccept: text/plain; version=abc\r\n\r\n"))
@example(
    asked=(
        "GET",
        b"GET /metrics HTTP/1.1\r\nAccept: application/openmetrics-text; version=x\r\n\r\n",
    )
)
@example(asked=("POST", b"POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n"))
def test_a_hostile_scrape_gets_an_answer(served: Served, asked: tuple[str, bytes]) -> None:
    method, data = asked
    _metrics_example(served, method, data)


@settings(FUZZ, max_examples=60)
@given(data=st.binary(max_size=300), cut=st.integers(0, 40))
def test_a_request_cut_short_is_closed_cleanly(served: Served, data: bytes, cut: int) -> None:
    """Bytes, or the start of a request, then the client hangs up: the server closes its
    side without a traceback and serves the next scrape."""
    whole = b"GET /metrics HTTP/1.1\r\nAccept: text/plain\r\n\r\n"
    served.log.take()
    with socket.create_connection(("127.0.0.1", served.metrics_port), timeout=5) as sock:
        sock.sendall(data or whole[:cut])
        sock.shutdown(socket.SHUT_WR)
        try:
            while sock.recv(65536):
                pass  # an answer (a 400), then the server's close
        except ConnectionResetError:
            pass  # closed with our bytes unread: clean enough
    assert _bad(served.log.take()) == []
    _scraped(served)


def test_silent_clients_hold_no_scrape_up(served: Served) -> None:
    """Slowloris: a burst of connections that send a request line and then nothing. Each
    holds a thread of its own until it times out; meanwhile every connection is taken
    at once (a full accept queue made each sixth wait a second for its SYN again, and
    scrapes with them), a scrape is answered, and the server closes them as they go."""
    held = []
    began = time.monotonic()
    try:
        for index in range(SILENT_CLIENTS):
            sock = socket.create_connection(("127.0.0.1", served.metrics_port), timeout=5)
            held.append(sock)
            sock.sendall(b"GET /metrics HTTP/1.1\r\nX-Part: " + str(index).encode())
        _scraped(served)
        answer = _ask_metrics(served.metrics_port, b"GET /healthz HTTP/1.0\r\n\r\n", "GET")
        assert answer.status == 200, answer
        took = time.monotonic() - began
    finally:
        for sock in held:
            sock.close()
    assert took < SILENT_SECONDS, took
    _scraped(served)
    assert _bad(served.log.take()) == []


@pytest.mark.parametrize(
    ("accept", "status"),
    [
        ("text/plain; version=abc", 400),  # prometheus_client raised: no answer at all
        ('application/openmetrics-text; version="1.0.0"', 400),
        ("text/plain;version=", 200),  # no version: the library's default
        ("application/openmetrics-text; version=1.0.0", 200),
    ],
)
def test_an_accept_header_with_an_odd_version_is_told_so(
    served: Served, accept: str, status: int
) -> None:
    data = f"GET /metrics HTTP/1.1\r\nAccept: {accept}\r\n\r\n".encode()
    answer = _ask_metrics(served.metrics_port, data, "GET")
    assert answer.status == status, answer
    if status == 400:
        assert answer.body.decode() == f"cannot read the Accept header: {accept}\n"


def test_a_dropped_event_stream_frees_its_place_at_once(served: Served) -> None:
    """A client that opens event streams and drops them (a console reconnecting) was
    refused 429 once it had dropped 16 in 15 s: each stream kept its place until its
    next keep-alive write failed. Now a stream ends as its connection does."""
    ask = b"GET /v1/events HTTP/1.1\r\nHost: t\r\n\r\n"
    statuses = [_ask_unix(served.socket, ask).status for _ in range(40)]
    refused = statuses.count(429)
    deadline = time.monotonic() + 5  # far below the 15 s a place was held
    while _ask_unix(served.socket, ask).status == 429:
        assert time.monotonic() < deadline, statuses
    assert refused <= 4, statuses  # at most the few whose close was not yet seen


class _Broken:
    """A control whose `status` fails as a bug would."""

    async def status(self) -> None:
        raise RuntimeError("a bug")


async def test_a_call_that_fails_is_answered_in_one_line_and_logged_in_full(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, served: Served
) -> None:
    """On a server of its own, beside the module's (whose log must stay clean)."""
    server = ControlServer(
        tmp_path / "control.sock",
        lambda _actor: _Broken(),
        refused=lambda _who: None,
    )
    await server.start()
    try:
        answer = await asyncio.to_thread(
            _ask_unix, server.path, b"GET /v1/status HTTP/1.1\r\nHost: t\r\n\r\n"
        )
    finally:
        await server.stop()
    assert answer.status == 500
    assert json.loads(answer.body) == {
        "error": "ControlError",
        "message": "the scheduler failed to answer: its log says why",
    }
    assert "RuntimeError: a bug" in caplog.text  # the traceback, for whoever fixes it
    assert any("RuntimeError: a bug" in line for line in served.log.take())  # this test's
