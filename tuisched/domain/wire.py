"""Events and views turned into JSON values and back, by their type hints.

`encode` turns any of tuisched's frozen dataclasses (events, run records,
views, diffs, problems) into JSON-compatible values: dataclasses become
objects of their fields, datetimes ISO 8601 text (with their offset),
timedeltas seconds, paths and enums their text, tuples and sets arrays.
`decode(type_, data)` builds the value back from the type hints of the
target type, so a round trip gives an equal value. `event_to_json` adds the
event's type name, which `event_from_json` reads to pick the class.

Mappings of arbitrary values (a python job's `message_data`) keep what JSON
can hold (text, numbers, booleans, null, lists, mappings with text keys);
anything else becomes its `str()`. Keys a decoder does not know are ignored,
so a newer peer may add fields; a missing field without a default, or a value
of the wrong type, is a `WireError` that says where.

Only the event functions load `tuisched.domain.events`: a command line verb
that decodes a view never pays for the events (and the configuration diff and
model they carry).
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import types
import typing
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, get_args, get_origin

from tuisched.domain.errors import WireError

if TYPE_CHECKING:  # loaded when an event is read (with the configuration diff it carries)
    from tuisched.domain.events import Event

T = TypeVar("T")
JSON = None | bool | int | float | str | list["JSON"] | dict[str, "JSON"]
"""A value the `json` module can write."""

_SCALARS = (bool, int, float, str)


def encode(value: object) -> JSON:
    """`value` as JSON-compatible values (see the module docstring)."""
    if value is None or isinstance(value, _SCALARS):
        return value
    if isinstance(value, enum.Enum):
        return encode(value.value)
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, Path):
        return str(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {name: encode(getattr(value, name)) for name in _field_names(type(value))}
    if isinstance(value, Mapping):
        return {str(key): encode(item) for key, item in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [encode(item) for item in value]
    return str(value)


def decode(type_: Any, data: object, *, where: str = "") -> Any:
    """The value of `type_` that `data` (from `encode`) stands for.

    Raises:
        WireError: `data` does not fit `type_`; the message names the path to it.
    """
    return _decoder(type_)(data, where or _name(type_))


def event_to_json(event: Event) -> dict[str, JSON]:
    """`event` as a JSON object, with its type's name under `"type"`."""
    encoded = encode(event)
    assert isinstance(encoded, dict)  # noqa: S101  (an event is a dataclass)
    return {"type": type(event).__name__, **encoded}


def event_from_json(data: object) -> Event:
    """The event `event_to_json` made `data` from.

    Raises:
        WireError: not an object, an unknown `"type"`, or fields that do not fit.
    """
    if not isinstance(data, Mapping):
        raise WireError(f"an event must be a JSON object, not {type(data).__name__}")
    name = data.get("type")
    event_type = event_types().get(name) if isinstance(name, str) else None
    if event_type is None:
        raise WireError(f"unknown event type {name!r}")
    fields = {key: value for key, value in data.items() if key != "type"}
    event: Event = decode(event_type, fields)
    return event


def event_types() -> dict[str, type[Event]]:
    """Every concrete event class by name (subclasses of `Event`, recursively)."""
    from tuisched.domain.events import Event  # noqa: PLC0415  (see the import above)

    found: dict[str, type[Event]] = {}
    pending: list[type[Event]] = [Event]
    while pending:
        cls = pending.pop()
        for sub in cls.__subclasses__():
            found[sub.__name__] = sub
            pending.append(sub)
    return found


# --- decoders, one per type, built once ----------------------------------------------

_Decoder = Callable[[object, str], Any]


@functools.cache
def _decoder(type_: Any) -> _Decoder:
    """The function that decodes `type_` (cached: built once per type)."""
    origin = get_origin(type_)
    if type_ is Any or type_ is object:
        return _plain
    if origin in (typing.Union, types.UnionType):
        return _union(get_args(type_))
    if origin is not None:
        return _generic(origin, get_args(type_))
    if isinstance(type_, type):
        return _simple(type_)
    raise WireError(f"cannot decode values of type {type_!r}")


def _simple(cls: type) -> _Decoder:
    if cls is type(None):
        return _none
    if issubclass(cls, enum.Enum):
        return lambda data, where: _enum(cls, data, where)
    if cls is datetime:
        return _datetime
    if cls is timedelta:
        return lambda data, where: timedelta(seconds=_number(data, where))
    if issubclass(cls, Path):
        return lambda data, where: Path(_text(data, where))
    if dataclasses.is_dataclass(cls):
        return lambda data, where: _dataclass(cls, data, where)
    if cls in _SCALARS:
        return lambda data, where: _scalar(cls, data, where)
    raise WireError(f"cannot decode values of type {cls.__name__}")


def _generic(origin: Any, args: tuple[Any, ...]) -> _Decoder:
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            item = _decoder(args[0])
            return lambda data, where: tuple(_items(item, data, where))
        fixed = [_decoder(arg) for arg in args]
        return lambda data, where: _fixed_tuple(fixed, data, where)
    if origin in (list, set, frozenset):
        item = _decoder(args[0] if args else Any)
        return lambda data, where: origin(_items(item, data, where))
    if origin in (Collection, Sequence, Iterable):  # read-only views: a tuple will do
        item = _decoder(args[0] if args else Any)
        return lambda data, where: tuple(_items(item, data, where))
    if origin in (dict, Mapping) or origin is typing.Mapping:
        value = _decoder(args[1] if len(args) == 2 else Any)
        wrap = dict if origin is dict else types.MappingProxyType
        return lambda data, where: wrap(_mapping(value, data, where))
    raise WireError(f"cannot decode values of type {origin!r}")


def _union(members: tuple[Any, ...]) -> _Decoder:
    optional = type(None) in members
    others = [_decoder(m) for m in members if m is not type(None)]

    def decode_union(data: object, where: str) -> Any:
        if data is None and optional:
            return None
        errors = []
        for member in others:
            try:
                return member(data, where)
            except WireError as error:
                errors.append(str(error))
        raise WireError(errors[0] if len(errors) == 1 else f"{where}: no type fits {data!r}")

    return decode_union


def _dataclass(cls: type, data: object, where: str) -> Any:
    if not isinstance(data, Mapping):
        raise WireError(f"{where}: expected an object, got {_kind(data)}")
    hints = _hints(cls)
    values: dict[str, Any] = {}
    for name in _field_names(cls):
        if name in data:
            values[name] = _decoder(hints[name])(data[name], f"{where}.{name}")
        elif name in _required(cls):
            raise WireError(f"{where}: '{name}' is missing")
    try:
        return cls(**values)
    except (TypeError, ValueError) as error:
        raise WireError(f"{where}: {error}") from None


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


@functools.cache
def _field_names(cls: type) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(cls) if f.init)


@functools.cache
def _required(cls: type) -> frozenset[str]:
    missing = dataclasses.MISSING
    return frozenset(
        f.name
        for f in dataclasses.fields(cls)
        if f.init and f.default is missing and f.default_factory is missing
    )


def _items(item: _Decoder, data: object, where: str) -> list[Any]:
    if not isinstance(data, list):
        raise WireError(f"{where}: expected an array, got {_kind(data)}")
    return [item(value, f"{where}[{index}]") for index, value in enumerate(data)]


def _fixed_tuple(items: list[_Decoder], data: object, where: str) -> tuple[Any, ...]:
    if not isinstance(data, list) or len(data) != len(items):
        raise WireError(f"{where}: expected an array of {len(items)}, got {_kind(data)}")
    pairs = enumerate(zip(items, data, strict=True))
    return tuple(item(value, f"{where}[{i}]") for i, (item, value) in pairs)


def _mapping(value: _Decoder, data: object, where: str) -> dict[str, Any]:
    if not isinstance(data, Mapping):
        raise WireError(f"{where}: expected an object, got {_kind(data)}")
    return {str(key): value(item, f"{where}.{key}") for key, item in data.items()}


def _plain(data: object, where: str) -> object:
    """Any JSON value, kept as it is (lists stay lists, objects dicts)."""
    return data


def _none(data: object, where: str) -> None:
    if data is not None:
        raise WireError(f"{where}: expected null, got {_kind(data)}")


def _enum(cls: type[enum.Enum], data: object, where: str) -> enum.Enum:
    try:
        return cls(data)
    except ValueError:
        raise WireError(f"{where}: {data!r} is not a {cls.__name__}") from None


def _datetime(data: object, where: str) -> datetime:
    """An aware date-time: tuisched keeps no other kind, so one without an offset is
    refused here, where the caller can be told, not deep in the history's store."""
    try:
        found = datetime.fromisoformat(_text(data, where))
    except ValueError:
        raise WireError(f"{where}: {data!r} is not an ISO 8601 date-time") from None
    if found.utcoffset() is None:
        raise WireError(f"{where}: {data!r} has no UTC offset (write +00:00 or Z)")
    return found


def _scalar(cls: type[T], data: object, where: str) -> T:
    if cls is float and isinstance(data, int) and not isinstance(data, bool):
        return float(data)  # type: ignore[return-value]  # cls is float
    if not isinstance(data, cls) or (cls is int and isinstance(data, bool)):
        raise WireError(f"{where}: expected {cls.__name__}, got {_kind(data)}")
    return data


def _text(data: object, where: str) -> str:
    result: str = _scalar(str, data, where)
    return result


def _number(data: object, where: str) -> float:
    result: float = _scalar(float, data, where)
    return result


def _kind(data: object) -> str:
    return "null" if data is None else type(data).__name__


def _name(type_: Any) -> str:
    return getattr(type_, "__name__", str(type_))
