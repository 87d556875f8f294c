"""The check installs the dev tools at the versions pinned in constraints/dev.txt, and those
pins agree with the test extra's ranges (issue 29): a tool's new release turns no check red
until someone moves its pin."""

from __future__ import annotations

import ast
import re
import tomllib

from packaging.requirements import Requirement

from .conftest import REPO, slow_tests

CONSTRAINTS = REPO / "constraints" / "dev.txt"
TOOLS = {"ruff", "mypy", "types-pyyaml", "import-linter", "hypothesis", "pytest"}
"""Tools of the test extra whose own release can turn the check red (and pytest's plugins)."""


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _pins() -> dict[str, Requirement]:
    lines = CONSTRAINTS.read_text().splitlines()
    found = [Requirement(line) for line in lines if line.strip() and not line.startswith("#")]
    return {_normal(pin.name): pin for pin in found}


def _test_extra() -> dict[str, Requirement]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    found = [Requirement(line) for line in project["optional-dependencies"]["test"]]
    return {_normal(requirement.name): requirement for requirement in found}


def test_the_readme_s_check_command_installs_with_the_constraints() -> None:
    text = (REPO / "README.md").read_text()
    command = text.split("<!-- check-command -->", 1)[1].split("```sh\n", 1)[1].split("\n")[0]
    installer, extra = command.split(" && ")[1:3]
    assert installer == ".venv/bin/pip install -q -c constraints/dev.txt uv"  # uv pinned too
    assert extra.startswith(".venv/bin/uv pip install -q --python .venv/bin/python ")
    assert " -c constraints/dev.txt -e '.[test]'" in extra
    # Bytecode written at install: with PYTHONDONTWRITEBYTECODE set, as here, every
    # interpreter the tests start would compile its imports again without it.
    assert "--compile-bytecode" in extra
    # A plain path entry: setuptools' editable import hook costs every interpreter the
    # tests start (about 2,700) some 10 ms.
    assert "--config-settings editable_mode=compat" in extra


def test_every_pin_is_exact_and_every_tool_is_pinned() -> None:
    pins = _pins()
    assert all(re.fullmatch(r"==[^,*]+", str(pin.specifier)) for pin in pins.values()), pins
    tools = {name for name in _test_extra() if name in TOOLS or name.startswith("pytest-")}
    assert tools <= set(pins), tools - set(pins)


def test_every_pin_is_within_the_test_extra_s_range() -> None:
    extra = _test_extra()
    for name, pin in _pins().items():
        if name in extra:
            (version,) = (spec.version for spec in pin.specifier)
            assert extra[name].specifier.contains(version), (name, version, extra[name])


def test_every_test_named_slow_is_still_a_test() -> None:
    """tests/slow_tests.txt orders the run; a renamed or deleted test must leave it."""
    gone = []
    for name in slow_tests():
        path, function = name.split("::")
        source = REPO / path
        defined = source.exists() and any(
            isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == function
            for node in ast.walk(ast.parse(source.read_text(encoding="utf-8")))
        )
        if not defined:
            gone.append(name)
    assert not gone, f"no longer tests, take them out of tests/slow_tests.txt: {gone}"
