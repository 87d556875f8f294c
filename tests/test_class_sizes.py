"""No class in `tuisched` has more than `MOST_METHODS` methods of its own.

A method is a `def` or `async def` written directly in the class body (properties,
actions, handlers and dunders alike; not nested classes' methods, not inherited ones,
not declarations under `if TYPE_CHECKING:`). A class grown past that does several
jobs: split it along them, as Textual's widgets are split into parts with one job
each (see `JobsTable` and its parts in `widgets/jobspane.py`).
"""

from __future__ import annotations

import ast
from pathlib import Path

import tuisched

MOST_METHODS = 30

PACKAGE = Path(tuisched.__file__).parent


def method_counts(source: str) -> dict[str, int]:
    """Each class in `source` (nested ones by their dotted name): its own methods."""
    counts: dict[str, int] = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                name = f"{prefix}{child.name}"
                counts[name] = sum(
                    isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef) for item in child.body
                )
                visit(child, f"{name}.")
            else:
                visit(child, prefix)  # a class defined in a function counts too

    visit(ast.parse(source), "")
    return counts


def oversized() -> dict[str, int]:
    """Every class in the package over the limit, as `path:Class`, with its count."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        where = path.relative_to(PACKAGE.parent).as_posix()
        for name, count in method_counts(path.read_text(encoding="utf-8")).items():
            if count > MOST_METHODS:
                found[f"{where}:{name}"] = count
    return found


def test_no_class_has_more_than_thirty_methods() -> None:
    over = [f"{name}: {count} methods" for name, count in oversized().items()]
    assert not over, f"over {MOST_METHODS} methods, split along its jobs:\n" + "\n".join(over)


def test_the_count_is_of_a_class_own_methods() -> None:
    source = """
class Big:
    x = 1

    def one(self): ...
    async def two(self): ...
    @property
    def three(self): ...

    class Inner:
        def four(self): ...

    if TYPE_CHECKING:
        def declared(self): ...

def outside():
    class Local:
        def five(self): ...
"""

    assert method_counts(source) == {"Big": 3, "Big.Inner": 1, "Local": 1}


def test_a_class_over_the_limit_is_found() -> None:
    body = "".join(f"    def m{n}(self): ...\n" for n in range(MOST_METHODS + 1))

    assert method_counts(f"class Wide:\n{body}") == {"Wide": MOST_METHODS + 1}
