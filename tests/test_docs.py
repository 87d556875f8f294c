"""docs/architecture.md against the code: the seam's methods, the server's, the error
tree, the runtime's start order and the run's life cycle. A change to one that the
other does not follow fails here."""

from __future__ import annotations

import contextlib
import inspect
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import tuisched.runtime.runtime as runtime_module
from tuisched.domain import errors
from tuisched.domain.errors import TuischedError
from tuisched.domain.runs import RunState
from tuisched.runtime.cluster.link import ClusterLink
from tuisched.runtime.control import server
from tuisched.runtime.control.seam import SchedulerCommands, SchedulerControl, SchedulerQueries

from .conftest import REPO
from .runtime_fixtures import running, write_config
from .test_errors import every_error_class

ARCHITECTURE = REPO / "docs" / "architecture.md"


def _section(title: str) -> str:
    """The text of the `## title` section of docs/architecture.md."""
    text = ARCHITECTURE.read_text()
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def _outside_parentheses(text: str) -> str:
    """`text` without what parentheses outside code spans hold (a method's description
    may name another method: `undo(change=...)` (with the number `last_change()` gave))."""
    kept, depth, in_code = [], 0, False
    for char in text:
        if char == "`":
            in_code = not in_code
        elif not in_code and char == "(":
            depth += 1
        elif not in_code and char == ")":
            depth -= 1
            continue
        if depth == 0:
            kept.append(char)
    return "".join(kept)


def _named(bullet: str) -> set[str]:
    """The methods a bullet of the control seam's section names (`name(...)`)."""
    section = _section("The control seam")
    found = re.search(rf"^- \*\*{re.escape(bullet)}\*\*.*?(?=^- |^\n)", section, re.M | re.S)
    assert found is not None, f"no bullet '{bullet}' in the control seam's section"
    return set(re.findall(r"`(\w+)\(", _outside_parentheses(found.group())))


def _members(protocol: type) -> set[str]:
    return {name for name in vars(protocol) if not name.startswith("_") and callable(
        getattr(protocol, name))}  # fmt: skip


def _coroutines(protocol: type) -> set[str]:
    return {name for name in _members(protocol)
            if inspect.iscoroutinefunction(getattr(protocol, name))}  # fmt: skip


# --- the control seam ----------------------------------------------------------------------


def test_the_doc_names_every_method_of_the_seam_and_no_other() -> None:
    queries = _named("Queries") | _named("The output viewer's reads")
    assert queries == _coroutines(SchedulerQueries)
    assert _named("Commands") == _coroutines(SchedulerCommands)
    assert _named("Events") == _members(SchedulerQueries) - _coroutines(SchedulerQueries)
    every = {name for name in dir(SchedulerControl) if not name.startswith("_")}
    assert queries | _named("Commands") | _named("Events") == every


def test_the_server_carries_what_the_doc_says() -> None:
    queries = _named("Queries") | _named("The output viewer's reads")
    assert queries == server.QUERIES  # a query may be a GET
    assert _named("Commands") == server.METHODS - server.QUERIES  # a command only a POST
    assert "subscribe" not in server.METHODS  # it is /v1/events
    assert "`GET /v1/events`" in _section("The control seam")


# --- the error tree --------------------------------------------------------------------------

_BRANCH = re.compile(r"^(?P<indent>(?:│   |    )*)(?:├── |└── )(?P<name>\w+)")


def _drawn_tree(text: str) -> dict[str, str | None]:
    """Each class a drawing shows, with the class it is drawn under (None: the root)."""
    block = text[text.index("```\nTuischedError") + 4 :]
    block = block[: block.index("```")]
    parents: dict[str, str | None] = {}
    path: list[str] = []
    for line in block.splitlines():
        branch = _BRANCH.match(line)
        if branch is None:  # the root
            path = [line.split()[0]]
            parents[path[0]] = None
            continue
        depth = len(branch["indent"]) // 4 + 1
        path = [*path[:depth], branch["name"]]
        parents[branch["name"]] = path[depth - 1]
    return parents


def _tree_of_classes() -> dict[str, str | None]:
    tree: dict[str, str | None] = {"TuischedError": None}
    for cls in every_error_class():
        (parent,) = (base for base in cls.__bases__ if issubclass(base, TuischedError))
        tree[cls.__name__] = parent.__name__
    return tree


@pytest.mark.parametrize(
    "where", ["docs/architecture.md", "tuisched/domain/errors.py"], ids=["doc", "docstring"]
)
def test_the_error_drawing_shows_every_class_under_its_parent(where: str) -> None:
    text = (REPO / where).read_text() if where.endswith(".md") else str(errors.__doc__)
    assert _drawn_tree(text) == _tree_of_classes()


# --- the runtime's start order --------------------------------------------------------------

STOPS = {
    "InstanceLock.release": "instance lock",
    "LoopWatchdog.stop": "watchdog",
    "Runtime._stop_metrics": "metrics",
    "Runtime._close_at_stop": "closers",
    "ActionLog.close": "actions log",
    "AuditLog.close": "audit log",
    "Runtime._told_stopped": "stopped said",
    "Historian.close": "history",
    "Historian.stop_checks": "history checks",
    "Alerting.close_outbox": "kept alerts",
    "Runtime._drain_alerts_left": "alerts",
    "RunProcesses.stop_keeper": "keeper",
    "RunProcesses.stop_leftovers": "processes of runs",
    "close_fork_servers": "fork servers",
    "ClusterLink.stop": "cluster",
    "Engine.drain": "engine",
    "DependencyTrigger.stop": "dependency triggers",
    "ConfigWatcher.stop": "config watcher",
    "Historian.stop_heartbeat": "heartbeat",
    "Historian.stop_retention": "retention",
}
"""How each part's stop, as the start pushes it, is named in the doc's start order."""
ONLY_IN_CLUSTER_MODE = {"cluster"}


def _documented_start_order() -> list[str]:
    text = _section("The layers")
    listed = text[text.index("**The start order.**") :]
    return re.findall(r"^\d+\. \*\*([^*]+)\*\*", listed[: listed.index("\n\n**")], re.M)


class _Recording(contextlib.AsyncExitStack):
    """An exit stack that notes the name of each stop pushed on it, in order."""

    pushed: list[str]

    def _note(self, stop: Callable[..., Any], args: tuple[Any, ...]) -> None:
        # `push_async_callback(in_thread, Lane.AUDIT, log.close)`: the stop is `log.close`
        called = [item for item in (stop, *args) if callable(item)]
        _Recording.pushed.append(called[-1].__qualname__)

    def callback(self, stop: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        self._note(stop, args)
        return super().callback(stop, *args, **kwargs)

    def push_async_callback(self, stop: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        self._note(stop, args)
        return super().push_async_callback(stop, *args, **kwargs)


async def test_the_doc_gives_the_order_in_which_the_runtime_starts_its_parts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _Recording.pushed = []
    monkeypatch.setattr(runtime_module.contextlib, "AsyncExitStack", _Recording)
    path = write_config(tmp_path, 'a: {command: "true", schedule: manual}')
    async with running(path):
        pass
    unnamed = [stop for stop in _Recording.pushed if stop not in STOPS]
    assert unnamed == [], "a new part: name it in the doc's start order and in STOPS"
    started = [STOPS[stop] for stop in _Recording.pushed]
    documented = _documented_start_order()
    assert started == [part for part in documented if part not in ONLY_IN_CLUSTER_MODE]
    assert set(documented) == set(STOPS.values())
    assert ClusterLink.stop.__qualname__ in STOPS  # what cluster mode pushes, where the doc says


# --- a run's life ------------------------------------------------------------------------------


def test_the_run_s_life_is_one_diagram_that_names_every_state() -> None:
    text = ARCHITECTURE.read_text()
    assert text.count("stateDiagram") == 1
    diagram = _section("A run's life")
    diagram = diagram[
        diagram.index("```mermaid") : diagram.index("```\n", diagram.index("stateDiagram"))
    ]
    drawn = set(re.findall(r"\b([A-Z][A-Z_]+)\b", diagram))
    assert drawn == {state.value for state in RunState}
    docs = [path for path in (REPO / "docs").rglob("*.md") if "stateDiagram" in path.read_text()]
    assert docs == [ARCHITECTURE]  # in one place
