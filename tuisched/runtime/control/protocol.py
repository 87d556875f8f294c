"""What the control socket's server and its clients agree on, and nothing heavier.

Where a scheduler listens (`control_socket`: the state directory its
configuration names, read leniently), how a path too long for a Unix socket
is reached, the protocol's version and the header naming the client, and
errors as JSON both ways: `error_body` (the server) and `raise_error` (the
clients, which raise the scheduler's error again as the same class). The
server (`server.py`, aiohttp), the console's client (`remote.py`, aiohttp)
and the command line's blocking client (`blocking.py`, the standard
library) all import it, so a command line verb loads no HTTP library it
does not use.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import os
import socket
import typing
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

from tuisched.domain import errors as error_classes
from tuisched.domain.errors import (
    ConfigError,
    ControlError,
    OtherConfigurationError,
    Problem,
    Refusal,
    RunRefusedError,
    TuischedError,
)
from tuisched.domain.wire import JSON, decode, encode
from tuisched.runtime.configtext import state_dir_of

PROTOCOL = 1
"""The version of the protocol: a client and a server of different versions refuse each other."""
SOCKET_NAME = "control.sock"
CLIENT_HEADER = "X-Tuisched-Client"
MAX_SOCKET_PATH = 100
"""A Unix socket's path may hold 107 bytes; a longer one is reached through its folder."""


def socket_path(state_dir: Path) -> Path:
    """Where the scheduler of `state_dir` listens."""
    return state_dir / SOCKET_NAME


def control_socket(path: Path) -> Path:
    """The control socket of the scheduler of the configuration at `path`, found from a
    file that does not validate too (ConfigError only if it cannot be read at all)."""
    return socket_path(state_dir_of(path))


@contextlib.contextmanager
def reachable(path: Path) -> Iterator[str]:
    """A name by which `path` can be bound or connected to, whatever its length.

    A path too long for a Unix socket is reached as `/proc/self/fd/N/NAME`
    through a descriptor of its folder, open while the block runs (Linux). A
    folder that does not exist (no scheduler ever ran there) holds no socket:
    its path is given back as it is, and connecting fails as for any missing
    socket.
    """
    if len(os.fsencode(path)) <= MAX_SOCKET_PATH:
        yield str(path)
        return
    try:
        folder = os.open(path.parent, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    except (FileNotFoundError, NotADirectoryError):
        yield str(path)
        return
    try:
        yield f"/proc/self/fd/{folder}/{path.name}"
    finally:
        os.close(folder)


def scheduler_answers(path: Path, *, timeout: float = 2.0) -> bool:
    """Whether a scheduler listens on the control socket at `path` (a blocking check,
    for a command line before it starts an event loop)."""
    with reachable(path) as name, socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.settimeout(timeout)
        try:
            probe.connect(name)
        except OSError:
            return False
        return True


def describe_client(what: str) -> str:
    """Where this client is, for the actions log: `console on /dev/pts/3 over ssh from ...`."""
    where = what
    with contextlib.suppress(OSError):
        where += f" on {os.ttyname(0)}"
    ssh = os.environ.get("SSH_CLIENT", "").split()
    if ssh:
        where += f" over ssh from {ssh[0]}"
    return where


def not_running(path: Path) -> str:
    """What a client says when nobody listens on the socket at `path`."""
    return f"no scheduler is running on {path.parent} (nothing answers on {path})"


def protocol_mismatch(path: Path, hello: object, ours: int) -> ControlError | None:
    """The error for a server at `path` whose hello (`GET /v1`) is not of protocol
    version `ours` (a client's PROTOCOL), or None when it is."""
    if isinstance(hello, dict) and hello.get("protocol") == ours:
        return None
    theirs = hello.get("protocol") if isinstance(hello, dict) else "unknown"
    return ControlError(
        f"the scheduler at {path} speaks protocol version {theirs}; this "
        f"tuisched speaks version {ours}: use the same version of tuisched"
    )


def other_configuration(
    path: Path, hello: object, config: Path | None
) -> OtherConfigurationError | None:
    """The error for a scheduler at `path` whose hello names another configuration file
    than `config` (the one the client was given), or None when it runs that one (or a
    client asks for any: `config` None)."""
    if config is None or not isinstance(hello, dict):
        return None
    theirs = hello.get("config")
    if not isinstance(theirs, str) or not theirs or same_file(Path(theirs), config):
        return None
    return OtherConfigurationError(path.parent, theirs, str(config.absolute()))


def same_file(one: Path, other: Path) -> bool:
    """Whether two paths name one configuration file (through links too)."""
    try:
        return one.samefile(other)
    except OSError:  # one of them is gone: compare what they name
        return one.absolute().resolve() == other.absolute().resolve()


# --- calls as JSON -------------------------------------------------------------------

SeamMethod = Callable[..., Awaitable[Any]]
"""A method of `SchedulerControl`, taken from the class (its first argument is `self`)."""


@functools.cache
def _shape(method: SeamMethod) -> tuple[inspect.Signature, Any]:
    """What a call of the seam's `method` takes, and the type its answer decodes into."""
    return inspect.signature(method), typing.get_type_hints(method)["return"]


def call_body(method: SeamMethod, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, JSON]:
    """The JSON a call of the seam's `method` with `args` and `kwargs` sends: every
    argument by its name, the seam's defaults filled in."""
    bound = _shape(method)[0].bind(None, *args, **kwargs)  # None: the seam's `self`
    bound.apply_defaults()
    given = list(bound.arguments.items())[1:]
    return {name: encode(value) for name, value in given}


def call_answer(method: SeamMethod, answer: object) -> Any:
    """The value a call of the seam's `method` answered with (`answer`: the JSON body),
    decoded into the type the seam declares."""
    result = answer.get("result") if isinstance(answer, dict) else None
    return decode(_shape(method)[1], result, where=method.__name__)


# --- errors as JSON ------------------------------------------------------------------


def error_body(error: TuischedError) -> dict[str, object]:
    """The JSON a failed call answers with: its message on one line (a ConfigError's
    problems, one a line in its text, joined by `; `; each is in `problems` too; a
    RunRefusedError's refusal is in `refusal`), and the attributes its constructor set
    that are plain values (`fields`: a pid, an event's number, run ids)."""
    body: dict[str, object] = {"error": type(error).__name__, "message": str(error)}
    if isinstance(error, ConfigError):
        body["message"] = "; ".join(str(problem) for problem in error.problems)
        body["problems"] = encode(error.problems)
    elif isinstance(error, RunRefusedError):
        body["refusal"] = encode(error.refusal)
    else:
        body["fields"] = {key: value for key, value in vars(error).items() if _plain(value)}
    return body


def _plain(value: object) -> bool:
    if isinstance(value, tuple):
        return all(isinstance(item, str) for item in value)
    return value is None or isinstance(value, str | int | float)


def raise_error(body: object, status: int) -> None:
    """Raise the error a failed call answered with (`body`, HTTP `status`) as the scheduler
    raised it: the same `TuischedError` class saying the same (every class of the tree
    lives in `domain/errors.py`), else a ControlError."""
    if not isinstance(body, dict):
        raise ControlError(f"the scheduler answered {status} without a reason")
    name, message = str(body.get("error", "")), str(body.get("message", ""))
    cls = getattr(error_classes, name, None)
    if not (isinstance(cls, type) and issubclass(cls, TuischedError)):
        raise ControlError(message or f"the scheduler answered {status}")
    if issubclass(cls, ConfigError):
        raise cls(decode(tuple[Problem, ...], body.get("problems", [])))
    if issubclass(cls, RunRefusedError) and "refusal" in body:
        raise cls(decode(Refusal, body["refusal"]))
    fields = body.get("fields")
    raise _same_error(cls, message, fields if isinstance(fields, dict) else {})


def _same_error(cls: type[TuischedError], message: str, fields: dict[str, object]) -> TuischedError:
    """The scheduler's error as its own class, saying exactly what the scheduler said.

    A class whose constructor builds its message (UnknownRunError from run ids, say)
    would say it twice over, or garbled, and one whose constructor wants more than a
    message cannot be made from it: either is made around the message instead, with
    the attributes the scheduler's error had (`fields`)."""
    try:
        error: TuischedError | None = cls(message)
    except TypeError:  # a constructor that wants more than a message
        error = None
    said = error if error is not None and str(error) == message else cls.__new__(cls)
    if said is not error:
        Exception.__init__(said, message)
        said.__dict__.update(error.__dict__ if error is not None else {})
    said.__dict__.update(
        {key: tuple(value) if isinstance(value, list) else value for key, value in fields.items()}
    )
    return said
