"""No import circles in `tuisched`: every module can be read, typed and tested alone.

A circle is a group of modules each of which reaches every other through imports
(a strongly connected component of grimp's import graph of the package). What counts
as an import, in grimp's words: every `import` and `from ... import` of a `tuisched`
module anywhere in a module, at its top or inside a function (a lazy import still
ties the two files together). Imports under `if TYPE_CHECKING:` are counted apart:

- without them (what Python runs), there is no circle at all, and no exception;
- with them (what a reader and mypy follow), the only circles are those in
  `OPENED_ELSEWHERE`, each being opened on another branch; any other circle
  fails, and so does an entry there that is no longer a circle (take it out).

A module importing its own package (`tuisched.frontends.tui` from one of its
modules) is an edge like any other; a package's `__init__` is its own module.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import grimp
import pytest

PACKAGE = "tuisched"

OPENED_ELSEWHERE: tuple[frozenset[str], ...] = ()
"""Circles through `if TYPE_CHECKING:` imports that another branch opens."""


def circles(graph: grimp.ImportGraph) -> list[frozenset[str]]:
    """Every group of two or more modules that import each other, however far round,
    sorted by their first module (Tarjan's strongly connected components)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []
    for root in sorted(graph.modules):
        if root in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(root, _imported(graph, root))]
        _visit(root, index, low, stack, on_stack)
        while work:
            module, imported = work[-1]
            step = next(imported, None)
            if step is not None:
                if step not in index:
                    _visit(step, index, low, stack, on_stack)
                    work.append((step, _imported(graph, step)))
                elif step in on_stack:
                    low[module] = min(low[module], index[step])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[module])
            if low[module] == index[module]:
                group = _pop_group(module, stack, on_stack)
                if len(group) > 1:
                    found.append(group)
    return sorted(found, key=min)


def _imported(graph: grimp.ImportGraph, module: str) -> Iterator[str]:
    return iter(sorted(graph.find_modules_directly_imported_by(module)))


def _visit(
    module: str, index: dict[str, int], low: dict[str, int], stack: list[str], on: set[str]
) -> None:
    index[module] = low[module] = len(index)
    stack.append(module)
    on.add(module)


def _pop_group(module: str, stack: list[str], on: set[str]) -> frozenset[str]:
    group: set[str] = set()
    while True:
        member = stack.pop()
        on.discard(member)
        group.add(member)
        if member == module:
            return frozenset(group)


def unexpected(found: Iterable[frozenset[str]], allowed: Iterable[frozenset[str]]) -> list[str]:
    """What is wrong, one line each: a circle no allowed group holds, and an allowed
    group that holds no circle any more."""
    found, allowed = list(found), list(allowed)
    problems = [
        f"import circle: {' <-> '.join(sorted(group))}"
        for group in found
        if not any(group <= entry for entry in allowed)
    ]
    problems += [
        f"no longer a circle, take it out of OPENED_ELSEWHERE: {', '.join(sorted(entry))}"
        for entry in allowed
        if not any(group <= entry for group in found)
    ]
    return problems


@pytest.fixture(scope="module")
def graphs() -> dict[bool, grimp.ImportGraph]:
    """The package's import graph without (True) and with (False) type-only imports."""
    return {
        skip: grimp.build_graph(PACKAGE, exclude_type_checking_imports=skip, cache_dir=None)
        for skip in (True, False)
    }


def test_no_circle_among_the_imports_python_runs(graphs: dict[bool, grimp.ImportGraph]) -> None:
    problems = unexpected(circles(graphs[True]), ())
    assert not problems, "\n".join(problems)


def test_no_circle_through_type_only_imports_but_those_opened_elsewhere(
    graphs: dict[bool, grimp.ImportGraph],
) -> None:
    problems = unexpected(circles(graphs[False]), OPENED_ELSEWHERE)
    assert not problems, "\n".join(problems)


def _graph(*imports: tuple[str, str]) -> grimp.ImportGraph:
    graph = grimp.ImportGraph()
    for importer, imported in imports:
        graph.add_import(importer=importer, imported=imported)
    return graph


def test_a_circle_is_found_and_named_however_far_round() -> None:
    graph = _graph(("p.a", "p.b"), ("p.b", "p.c"), ("p.c", "p.a"), ("p.d", "p.a"), ("p.e", "p.e"))
    graph.add_module("p.f")

    assert circles(graph) == [frozenset({"p.a", "p.b", "p.c"})]
    assert unexpected(circles(graph), ()) == ["import circle: p.a <-> p.b <-> p.c"]


def test_an_allowed_circle_passes_and_one_gone_is_told() -> None:
    graph = _graph(("p.a", "p.b"), ("p.b", "p.a"))
    gone = frozenset({"p.x", "p.y"})

    assert unexpected(circles(graph), [frozenset({"p.a", "p.b", "p.c"})]) == []
    assert unexpected(circles(graph), [gone]) == [
        "import circle: p.a <-> p.b",
        "no longer a circle, take it out of OPENED_ELSEWHERE: p.x, p.y",
    ]


def test_two_circles_joined_by_one_import_are_two() -> None:
    graph = _graph(("p.a", "p.b"), ("p.b", "p.a"), ("p.b", "p.c"), ("p.c", "p.d"), ("p.d", "p.c"))

    assert circles(graph) == [frozenset({"p.a", "p.b"}), frozenset({"p.c", "p.d"})]
