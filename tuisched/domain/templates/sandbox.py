"""The sandbox: Jinja2's immutable sandbox, bounded in what a template may build and
how much work one render may do."""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextvars import ContextVar
from types import BuiltinMethodType, MethodType
from typing import Any

from jinja2 import Environment, StrictUndefined, TemplateSyntaxError, nodes
from jinja2.exceptions import SecurityError
from jinja2.runtime import Context, LoopContext
from jinja2.sandbox import MAX_RANGE, ImmutableSandboxedEnvironment, SandboxedFormatter
from jinja2.utils import Namespace
from jinja2.visitor import NodeTransformer
from markupsafe import EscapeFormatter, Markup

from tuisched.domain.templates.base import (
    MAX_NESTING,
    MAX_POWER_BITS,
    MAX_PRODUCT,
    MAX_RENDERED_BYTES,
    MAX_TEMPLATE_BYTES,
    Interrupt,
)

# --- the sandbox -----------------------------------------------------------------------


class _Fields(dict[str, object]):
    """A plain dict that knows its name in the context, for clear undefined errors."""

    __slots__ = ("label",)

    def __init__(self, label: str, fields: Mapping[str, object]) -> None:
        super().__init__(fields)
        self.label = label


class _AnyKey(dict[str, object]):
    """A plain dict whose missing keys read as "": `message_data` varies from run to run."""

    __slots__ = ()

    def __missing__(self, key: str) -> object:
        return ""


class _Undefined(StrictUndefined):
    """StrictUndefined that names the context variable: "'run' has no attribute 'x'"."""

    __slots__ = ()

    @property
    def _undefined_message(self) -> str:
        owner = self._undefined_obj
        if isinstance(owner, _Fields) and self._undefined_hint is None:
            return f"'{owner.label}' has no attribute {self._undefined_name!r}"
        return str(super()._undefined_message)


MAX_STEPS = 100_000
"""Most loop iterations and calls one render may make ("template does too much work")."""
MAX_BUILT = 16 * MAX_RENDERED_BYTES
"""Most text (characters, estimated) one render may build with operators, filters and methods."""


class Interrupted(Exception):
    """The render was stopped from outside: out of time, or cancelled."""


class _Budget:
    """What one render has spent (loop iterations and calls, text built), and who may stop it."""

    __slots__ = ("built", "interrupt", "steps")

    def __init__(self, interrupt: Interrupt | None = None) -> None:
        self.steps = 0
        self.built = 0
        self.interrupt = interrupt


_BUDGET: ContextVar[_Budget | None] = ContextVar("tuisched_template_budget", default=None)
"""The budget of the render running in this thread (set by `render`)."""


def _current_budget() -> _Budget:
    budget = _BUDGET.get()
    return _Budget() if budget is None else budget  # outside `render`: each check on its own


def _step(count: int = 1) -> None:
    """Spend `count` loop iterations or calls; refuse once the render made `MAX_STEPS`."""
    budget = _current_budget()
    budget.steps += count
    if budget.steps > MAX_STEPS:
        raise SecurityError(
            f"template does too much work (more than {MAX_STEPS} loop iterations and calls)"
        )
    if budget.interrupt is not None and (reason := budget.interrupt()) is not None:
        raise Interrupted(reason)


def _build(size: int, what: str) -> None:
    """Allow building `size` characters (or items) for `what`, within both caps."""
    if size > MAX_PRODUCT:
        raise SecurityError(f"{what} would be longer than {MAX_PRODUCT} characters or items")
    budget = _current_budget()
    budget.built += size
    if budget.built > MAX_BUILT:
        raise SecurityError(
            f"template does too much work (builds more than {MAX_BUILT // 1024} KiB of text)"
        )


def _text_size(value: object, limit: int = MAX_PRODUCT) -> int:
    """About `len(str(value))`, counting no further than just past `limit` (cheap on cycles)."""
    if isinstance(value, str):
        return len(value)
    total = 0
    pending = [value]
    while pending and total <= limit:
        item = pending.pop()
        if isinstance(item, str):
            total += len(item) + 4  # quotes, comma and space in a container's text
        elif isinstance(item, bytes | bytearray):
            total += 4 * len(item) + 5
        elif isinstance(item, int):  # bool too
            total += item.bit_length() // 3 + 6
        elif isinstance(item, float | complex | range | type(None)):
            total += 48
        elif isinstance(item, Mapping):
            total += 2 + 4 * len(item)
            pending.extend(item.keys())
            pending.extend(item.values())
        elif isinstance(item, list | tuple | set | frozenset):
            total += 2 + 2 * len(item)
            pending.extend(item)
        elif isinstance(item, Namespace):
            pending.append(object.__getattribute__(item, "_Namespace__attrs"))
            total += 12
        else:  # macros, loops, cyclers, undefined values...: a short text
            total += 64
    return total


def _check_text(value: object, what: str) -> None:
    """Refuse to turn `value` into text when that text would pass `MAX_PRODUCT`."""
    if not isinstance(value, str) and _text_size(value) > MAX_PRODUCT:
        raise SecurityError(f"{what} would be longer than {MAX_PRODUCT} characters")


def _finalize(value: object) -> object:
    """Applied to each `{{ ... }}` before it becomes text: no huge container texts."""
    _check_text(value, "the printed value")
    return value


def _product(left: Any, right: Any) -> Any:
    """`left * right`, refusing huge strings, sequences and integers."""
    if isinstance(left, int) and not isinstance(right, int):
        left, right = right, left
    if isinstance(left, int) and isinstance(right, int):
        if left.bit_length() + right.bit_length() > MAX_POWER_BITS:
            raise SecurityError(f"the product would be larger than {MAX_POWER_BITS} bits")
    elif isinstance(right, int) and isinstance(left, str | list | tuple):
        times = max(right, 0)
        _build(_text_size(left, MAX_PRODUCT // max(times, 1) + 1) * times, "the product")
    return left * right


def _sum(left: Any, right: Any) -> Any:
    """`left + right`, refusing huge strings and sequences."""
    both_text = isinstance(left, str) and isinstance(right, str)
    both_sequences = isinstance(left, list | tuple) and isinstance(right, list | tuple)
    if both_text or both_sequences:
        _build(_text_size(left) + _text_size(right), "the sum")
    return left + right


def _power(base: Any, exponent: Any) -> Any:
    """`base ** exponent`, refusing integers larger than `MAX_POWER_BITS` bits."""
    huge = (
        isinstance(base, int)
        and isinstance(exponent, int)
        and abs(base).bit_length() * max(exponent, 0) > MAX_POWER_BITS
    )
    if huge and abs(base) > 1:
        raise SecurityError(f"the power would be larger than {MAX_POWER_BITS} bits")
    return base**exponent


def _printf_size(template: str, values: Any) -> int:
    """About `len(template % values)`, from the fields of `template` (as Python reads them).

    Refuses a width or precision over `MAX_PRODUCT`, and `*` widths taken from
    numbers over it.
    """
    args = values if isinstance(values, tuple) else (values,)
    size = len(template) + sum(_text_size(arg) for arg in args if not isinstance(values, Mapping))
    if "*" in template and any(isinstance(arg, int) and abs(arg) > MAX_PRODUCT for arg in args):
        raise SecurityError(f"a '*' width over {MAX_PRODUCT} is not allowed")
    position, end = 0, len(template)
    while (position := template.find("%", position) + 1) > 0:
        if position < end and template[position] == "(":  # %(key)s, parentheses may nest
            depth, start = 1, position + 1
            while depth and (position := position + 1) < end:
                depth += {"(": 1, ")": -1}.get(template[position], 0)
            if isinstance(values, Mapping):
                size += _text_size(values.get(template[start:position]))
            position += 1
        while position < end and template[position] in "-+ #0":
            position += 1
        for _number in ("width", "precision"):
            digits = position
            while position < end and template[position].isdigit():
                position += 1
            if position - digits > 7 or int(template[digits:position] or 0) > MAX_PRODUCT:
                raise SecurityError(f"a format width over {MAX_PRODUCT} is not allowed")
            size += int(template[digits:position] or 0)
            if position < end and template[position] == ".":
                position += 1
        position += 1
    return size


def _modulo(left: Any, right: Any) -> Any:
    """`left % right`, refusing string formatting that would build a huge string."""
    if isinstance(left, str):
        _build(_printf_size(left, right), "the formatted string")
    return left % right


class _BoundedFormatter(SandboxedFormatter):
    """`str.format` in the sandbox, refusing huge widths and huge results."""

    def __init__(self, env: Environment, **kwargs: Any) -> None:
        super().__init__(env, **kwargs)
        self.produced = 0

    def format_field(self, value: Any, format_spec: str) -> Any:
        """Format one field after checking its spec's numbers and the text so far."""
        for digits in re.findall(r"\d+", format_spec):
            if len(digits) > 7 or int(digits) > MAX_PRODUCT:
                raise SecurityError(f"a format width over {MAX_PRODUCT} is not allowed")
        _check_text(value, "the formatted field")
        text = super().format_field(value, format_spec)
        self.produced += len(text)
        _build(len(text), "the formatted string")
        if self.produced > MAX_PRODUCT:
            raise SecurityError(f"the formatted string would be longer than {MAX_PRODUCT}")
        return text


class _BoundedEscapeFormatter(_BoundedFormatter, EscapeFormatter):
    """`Markup.format` in the sandbox, bounded the same way."""


def _str_method_size(text: str, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> int:
    """About the length of `text.<name>(*args, **kwargs)` for methods that can grow text."""
    arguments = [*args, *kwargs.values()]
    first = arguments[0] if arguments else None
    size = len(text)
    if name in {"center", "ljust", "rjust", "zfill"} and isinstance(first, int):
        size = max(size, first)
    elif name == "expandtabs":
        size += text.count("\t") * (first if isinstance(first, int) else 8)
    elif name == "replace" and len(arguments) >= 2:
        old, new = (_text_size(item) for item in arguments[:2])
        size += (len(text) + 1) * max(new - old, 0)
    elif name == "join" and isinstance(first, list | tuple):
        size = _text_size(first) + len(first) * len(text)
    elif name == "translate":
        table = first if isinstance(first, Mapping) else {}
        size *= max([1, *(_text_size(item) for item in table.values())])
    return size


def _counted(iterable: Iterable[Any]) -> Iterator[Any]:
    """`iterable`, spending one step of the render's budget per item."""
    for item in iterable:
        _step()
        yield item


def _helper_call(name: str, argument: nodes.Node, lineno: int) -> nodes.Call:
    """The node of `environment.<name>(argument)`, a call the template cannot write."""
    call = nodes.Call(nodes.EnvironmentAttribute(name), [argument], [], None, None)
    call.set_lineno(lineno)
    return call


def _is_helper_call(node: nodes.Node, name: str) -> bool:
    callee = getattr(node, "node", None) if isinstance(node, nodes.Call) else None
    return isinstance(callee, nodes.EnvironmentAttribute) and callee.name == name


class _Bounding(NodeTransformer):
    """Rewrites a parsed template so that its loops and `~` spend the render's budget.

    A loop's iterable becomes `environment.counted(<iterable>)` (recursive loops:
    see `call`), and `a ~ b ~ ...` becomes `environment.joined((a, b, ...))`. Done
    on the tree with Jinja's public node types and `Environment.compile`, which
    takes a tree: its code generator (private) is left as it is.
    """

    def visit_For(self, node: nodes.For) -> nodes.Node:
        """A loop whose iterable spends the budget per item (once: a tree compiled twice
        is not counted twice)."""
        self.generic_visit(node)
        if not _is_helper_call(node.iter, "counted"):
            node.iter = _helper_call("counted", node.iter, node.iter.lineno)
        return node

    def visit_Concat(self, node: nodes.Concat) -> nodes.Node:
        """`a ~ b ~ ...`, refusing a huge result."""
        self.generic_visit(node)
        parts = nodes.Tuple(node.nodes, "load").set_lineno(node.lineno)
        return _helper_call("joined", parts, node.lineno)


# Filters that turn their first argument into text, and checks of their other arguments.
_TEXT_FILTERS = frozenset(
    {"capitalize", "e", "escape", "forceescape", "lower", "pprint", "safe", "string"}
    | {"striptags", "title", "tojson", "trim", "truncate", "upper", "urlencode", "urlize"}
    | {"wordcount", "xmlattr"}
)


def _filter_size(name: str, arguments: dict[str, Any]) -> int:
    """About the length of a filter's result, from its bound `arguments` (0: small)."""
    value = next(iter(arguments.values()), None)
    text = value if isinstance(value, str) else ""
    if name == "center":
        width = arguments.get("width", 0)
        return max(_text_size(value), width if isinstance(width, int) else 0)
    if name == "indent":
        width = arguments.get("width", 0)
        prefix = width if isinstance(width, int) else _text_size(width)
        return len(text) + (text.count("\n") + 1) * prefix
    if name == "wordwrap":
        wrap = arguments.get("wrapstring") or "\n"
        return len(text) + (len(text) + 1) * (len(wrap) - 1)
    if name == "replace":
        old, new = _text_size(arguments.get("old", "")), _text_size(arguments.get("new", ""))
        return len(text) + (len(text) + 1) * max(new - old, 0)
    if name == "join":
        items = arguments.get("value", ())
        separator = arguments.get("d", "")
        return _text_size(items) + len(items) * _text_size(separator)
    if name == "format":
        values = arguments.get("kwargs") or arguments.get("args", ())
        return _printf_size(str(value), values)
    return 0


def _bounded_filter(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
    """`original` (the filter `name`), refusing to build huge text or loop for long."""
    inner = inspect.unwrap(original)
    signature = inspect.signature(inner)
    jinjas = 1 if hasattr(original, "jinja_pass_arg") else 0  # leading arguments from Jinja
    unsigned = 0 if hasattr(inner, "jinja_pass_arg") else jinjas  # ...not in `signature`

    @functools.wraps(original)
    def bounded(*args: Any, **kwargs: Any) -> Any:
        bound = signature.bind(*args[unsigned:], **kwargs)
        arguments = dict(list(bound.arguments.items())[jinjas - unsigned :])
        value_name = next(iter(arguments), "")
        if name == "join" and value_name:
            bound.arguments[value_name] = arguments[value_name] = list(arguments[value_name])
        _check_text(arguments.get(value_name), f"the input of |{name}")
        _build(_filter_size(name, arguments), f"the result of |{name}")
        count = arguments.get("slices", arguments.get("linecount", 0))
        if name in {"slice", "batch"} and isinstance(count, int) and count > MAX_RANGE:
            raise SecurityError(f"|{name} takes at most {MAX_RANGE}")
        start = arguments.get("start", 0)
        if name == "sum" and not isinstance(start, int | float):
            raise SecurityError("|sum starts from a number only")
        return original(*args[:unsigned], *bound.args, **bound.kwargs)

    return bounded


def _stepping(original: Callable[..., Any]) -> Callable[..., Any]:
    """`original` (a filter or test), spending one step of the render's budget per call."""

    @functools.wraps(original)  # keeps Jinja's pass_context and friends
    def stepping(*args: Any, **kwargs: Any) -> Any:
        _step()
        return original(*args, **kwargs)

    return stepping


_CHECKED_FILTERS = _TEXT_FILTERS | {"center", "indent", "wordwrap", "replace", "join", "format"}
_CHECKED_FILTERS |= {"slice", "batch", "sum"}


class _AlertSandbox(ImmutableSandboxedEnvironment):
    """The immutable sandbox, bounded: `*`, `+`, `%`, `**` and `~`, text-building filters
    and methods, and loops and calls (a budget per render); no `lipsum`."""

    intercepted_binops = frozenset({"*", "**", "%", "+"})
    _BINOPS: Mapping[str, Callable[[Any, Any], Any]] = {
        "*": _product,
        "**": _power,
        "%": _modulo,
        "+": _sum,
    }

    def __init__(self, **options: Any) -> None:
        super().__init__(finalize=_finalize, **options)
        self.globals.pop("lipsum", None)
        for name in _CHECKED_FILTERS:
            self.filters[name] = _bounded_filter(name, self.filters[name])
        # Every filter and test spends a step: `|sort|sort|...` or `|map(...)` cost time too.
        for name, original in list(self.filters.items()):
            self.filters[name] = _stepping(original)
        tests: dict[str, Any] = self.tests  # typed `function` by Jinja
        for name, test in list(tests.items()):
            tests[name] = _stepping(test)

    def compile(
        self,
        source: str | nodes.Template,
        name: str | None = None,
        filename: str | None = None,
        raw: bool = False,
        defer_init: bool = False,
    ) -> Any:
        """Compile `source` (text or a parsed tree) with its loops and `~` bounded."""
        tree = self.parse(source, name, filename) if isinstance(source, str) else source
        tree = _Bounding().visit(tree)
        if raw:
            return super().compile(tree, name, filename, raw=True, defer_init=defer_init)
        return super().compile(tree, name, filename, defer_init=defer_init)

    def call_binop(self, context: Any, operator_: str, left: Any, right: Any) -> Any:
        """Apply an intercepted operator with its size bound."""
        handler = self._BINOPS.get(operator_)
        if handler is None:
            return super().call_binop(context, operator_, left, right)
        return handler(left, right)

    def call(__self, __context: Context, __obj: Any, *args: Any, **kwargs: Any) -> Any:
        """A call from the template: counted, and bounded for text-growing str methods.

        The sandbox's own helpers (`counted`, `joined`, written in by `_Bounding`)
        are not the template's calls and spend nothing here.
        """
        if __obj is _AlertSandbox.counted or __obj is _AlertSandbox.joined:
            return __context.call(__obj, *args, **kwargs)  # drops Jinja's `_loop_vars`
        _step()
        if isinstance(__obj, LoopContext) and args:  # loop(children) in a recursive loop
            args = (_counted(args[0]), *args[1:])
        owner = getattr(__obj, "__self__", None)
        if isinstance(owner, str) and isinstance(__obj, BuiltinMethodType):
            if __obj.__name__ == "join" and args:
                args = (list(args[0]), *args[1:])
            _build(_str_method_size(owner, __obj.__name__, args, kwargs), f".{__obj.__name__}()")
        return super().call(__context, __obj, *args, **kwargs)

    def wrap_str_format(self, value: Any) -> Callable[..., str] | None:
        """`str.format` / `format_map` with bounded widths and result (see `_BoundedFormatter`)."""
        if not isinstance(value, MethodType | BuiltinMethodType) or value.__name__ not in (
            "format",
            "format_map",
        ):
            return None
        owner: Any = value.__self__
        if not isinstance(owner, str):
            return None
        is_format_map = value.__name__ == "format_map"

        def wrapper(*args: Any, **kwargs: Any) -> str:
            formatter: _BoundedFormatter
            if isinstance(owner, Markup):
                formatter = _BoundedEscapeFormatter(self, escape=owner.escape)
            else:
                formatter = _BoundedFormatter(self)
            if is_format_map:
                if kwargs or len(args) != 1:
                    raise TypeError("format_map() takes exactly one argument")
                kwargs, args = args[0], ()
            return type(owner)(formatter.vformat(owner, args, kwargs))

        return functools.update_wrapper(wrapper, value)

    @staticmethod
    def counted(iterable: Iterable[Any]) -> Iterator[Any]:
        """The iterable of a `{% for %}`, spending the render's budget per item."""
        return _counted(iterable)

    @staticmethod
    def joined(parts: tuple[Any, ...]) -> str:
        """`a ~ b ~ ...`, refusing a huge result."""
        _build(sum(_text_size(part) for part in parts), "the joined text")
        return "".join(str(part) for part in parts)

    @staticmethod
    def concat(parts: Iterable[str]) -> str:
        """The text of a block, macro or filter section: bounded like `~`."""
        parts = list(parts)
        _build(sum(len(part) for part in parts), "the block's text")
        return "".join(parts)


def sandbox() -> ImmutableSandboxedEnvironment:
    """A fresh alert sandbox: immutable, strict about undefined names, autoescape off."""
    return _AlertSandbox(autoescape=False, keep_trailing_newline=True, undefined=_Undefined)


_ENVIRONMENT = sandbox()
"""Shared by every render: a Jinja environment is safe to use from many threads."""


_OPENING_BLOCKS = frozenset(
    {"if", "for", "macro", "call", "filter", "with", "block", "autoescape", "raw"}
)


def nesting_problem(source: str) -> tuple[int, str] | None:
    """(line, message) where `source` nests deeper than `MAX_NESTING`, or None.

    Counted from Jinja's tokens, before anything is parsed or compiled, so the
    line is known: operators, filters and brackets within one tag, and blocks
    inside each other.
    """
    blocks = 0
    parts = 0
    tag_opening = False
    try:
        for line, kind, value in _ENVIRONMENT.lex(source):
            if kind in ("block_begin", "variable_begin"):
                parts, tag_opening = 0, kind == "block_begin"
            elif kind == "name" and tag_opening:
                tag_opening = False
                if value in _OPENING_BLOCKS:
                    blocks += 1
                elif value.startswith("end"):
                    blocks -= 1
            elif kind == "operator" and value not in ",:=)]}":
                parts += 1
            if blocks > MAX_NESTING:
                return line, f"blocks are nested more than {MAX_NESTING} deep"
            if parts > MAX_NESTING:
                return line, f"more than {MAX_NESTING} operators, filters and brackets in one tag"
            if kind not in ("whitespace", "block_begin", "name"):
                tag_opening = False
    except TemplateSyntaxError:
        return None  # the parser says it better
    return None


def syntax_problem(source: str) -> tuple[int, str] | None:
    """Check `source` parses; return (line within the template, message) if not."""
    if len(source.encode()) > MAX_TEMPLATE_BYTES:
        return 1, f"template is larger than {MAX_TEMPLATE_BYTES // 1024} KiB"
    nested = nesting_problem(source)
    if nested is not None:
        return nested[0], f"template {nested[1]}"
    try:
        _ENVIRONMENT.parse(source)  # parsing leaves it as it was: no fresh one (10 parses long)
    except TemplateSyntaxError as error:
        return error.lineno, f"template syntax error: {error.message}"
    except RecursionError:
        return 1, "template is nested too deeply"
    return None
