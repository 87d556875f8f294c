"""The one error tree: every error of the package lives in `domain/errors.py`, and the
control socket's clients raise a scheduler's error again as its own class."""

from __future__ import annotations

import importlib
import json
import pkgutil
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

import tuisched
from tuisched.domain import errors
from tuisched.domain.errors import (
    AlreadyRunningError,
    ConfigError,
    DriverMissingError,
    EventsLostError,
    OtherConfigurationError,
    Problem,
    Refusal,
    RunRefusedError,
    TemplateError,
    TuischedError,
    UnknownJobError,
    UnknownRunError,
)
from tuisched.runtime.control.protocol import error_body, raise_error

PROBLEMS = (
    Problem(file=Path("/etc/tuisched.yaml"), line=3, job="nightly", message="bad schedule"),
    Problem(file=Path("/etc/tuisched.yaml"), line=9, message="unknown key 'x'"),
)
REFUSAL = Refusal(
    job="nightly", reason="still running: run 3f2a", run_id="3f2a",
    since=datetime(2026, 5, 7, 9, 10, tzinfo=UTC), queueable=True,
)  # fmt: skip
MADE_WITH_MORE_THAN_A_MESSAGE: dict[type[TuischedError], TuischedError] = {
    ConfigError: ConfigError(PROBLEMS),
    DriverMissingError: DriverMissingError(PROBLEMS[1:]),
    TemplateError: TemplateError("unexpected '}'", line=4),
    UnknownJobError: UnknownJobError("nightly"),
    RunRefusedError: RunRefusedError(REFUSAL),
    AlreadyRunningError: AlreadyRunningError(Path("/var/lib/t"), 42, theirs="/a.yaml", ours="/b"),
    UnknownRunError: UnknownRunError(["0a1b2c3d4e5f"]),
    OtherConfigurationError: OtherConfigurationError(Path("/var/lib/t"), "/a.yaml", "/b.yaml"),
    EventsLostError: EventsLostError(10, 20),
}
"""A sample of each class whose constructor builds its message from more than a string."""


def _subclasses(cls: type[TuischedError]) -> Iterator[type[TuischedError]]:
    for sub in cls.__subclasses__():
        yield sub
        yield from _subclasses(sub)


def every_error_class() -> list[type[TuischedError]]:
    """Every TuischedError subclass the package defines, each of its modules imported."""
    for module in pkgutil.walk_packages(tuisched.__path__, "tuisched."):
        if not module.name.endswith("__main__"):
            importlib.import_module(module.name)
    found = {cls for cls in _subclasses(TuischedError) if cls.__module__.startswith("tuisched.")}
    return sorted(found, key=lambda cls: cls.__name__)


def _sample(cls: type[TuischedError]) -> TuischedError:
    return MADE_WITH_MORE_THAN_A_MESSAGE.get(cls) or cls(f"{cls.__name__}: it went wrong")


def _across_the_socket(error: TuischedError) -> TuischedError:
    """`error` as a client raises it again from the server's answer."""
    body = json.loads(json.dumps(error_body(error)))
    with pytest.raises(TuischedError) as raised:
        raise_error(body, 400)
    return raised.value


def test_every_error_class_of_the_package_lives_in_the_one_tree() -> None:
    elsewhere = [f"{c.__module__}.{c.__name__}" for c in every_error_class()
                 if c.__module__ != errors.__name__]  # fmt: skip
    assert elsewhere == []


@pytest.mark.parametrize("cls", every_error_class(), ids=lambda cls: cls.__name__)
def test_every_error_crosses_the_socket_as_its_own_class_saying_the_same(
    cls: type[TuischedError],
) -> None:
    error = _sample(cls)
    again = _across_the_socket(error)
    assert type(again) is cls
    expected = str(error)
    if isinstance(error, ConfigError):  # one line across the socket, each problem kept
        assert again.problems == error.problems  # type: ignore[attr-defined]
        expected = "\n".join(str(problem) for problem in error.problems)
    assert str(again) == expected


def test_a_refusal_crosses_whole() -> None:
    error = MADE_WITH_MORE_THAN_A_MESSAGE[RunRefusedError]
    again = _across_the_socket(error)
    assert isinstance(again, RunRefusedError)
    assert again.refusal == error.refusal  # type: ignore[attr-defined]


def test_an_error_the_client_does_not_know_is_a_control_error() -> None:
    with pytest.raises(errors.ControlError, match=r"^a new kind of failure$"):
        raise_error({"error": "NewKindOfError", "message": "a new kind of failure"}, 500)


@pytest.mark.parametrize("cls", sorted(MADE_WITH_MORE_THAN_A_MESSAGE, key=lambda c: c.__name__),
                         ids=lambda cls: cls.__name__)  # fmt: skip
def test_what_an_error_carries_crosses_with_it(cls: type[TuischedError]) -> None:
    error = MADE_WITH_MORE_THAN_A_MESSAGE[cls]
    assert vars(_across_the_socket(error)) == vars(error)
