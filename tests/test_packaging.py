"""What a packager checks (issue 16, item 7): the licence, declared dependencies, the Textual
range, the Python versions, and a description and an example in every command's --help."""

from __future__ import annotations

import argparse
import ast
import importlib.metadata
import re
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from tuisched.frontends.cli import _parser

from .conftest import REPO

PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
PROJECT = PYPROJECT["project"]


def _requirements(section: list[str]) -> dict[str, Requirement]:
    return {_normal(Requirement(line).name): Requirement(line) for line in section}


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def test_the_licence_file_is_mit_and_named_in_the_metadata() -> None:
    text = (REPO / "LICENSE").read_text()
    assert text.startswith("MIT License\n")
    assert "Copyright (c) 2026 the tuisched authors" in text
    assert 'THE SOFTWARE IS PROVIDED "AS IS"' in text
    assert PROJECT["license"] == "MIT"
    assert PROJECT["license-files"] == ["LICENSE"]


def _imported_top_level_modules() -> set[str]:
    modules: set[str] = set()
    for path in (REPO / "tuisched").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                modules.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules.add(node.module.split(".")[0])
    return modules - set(sys.stdlib_module_names) - {"tuisched", "__future__"}


def _brought_by_extras(declared: dict[str, Requirement]) -> set[str]:
    """Distributions a declared requirement pulls in through the extras it names
    (`psycopg[pool]` brings psycopg-pool)."""
    brought: set[str] = set()
    for requirement in declared.values():
        for line in importlib.metadata.requires(requirement.name) or []:
            needed = Requirement(line)
            if needed.marker and any(
                needed.marker.evaluate({"extra": extra}) for extra in requirement.extras
            ):
                brought.add(_normal(needed.name))
    return brought


def test_every_imported_package_is_declared() -> None:
    # psycopg is the `postgres` extra (tests/test_postgres_extra.py: only cluster mode loads it).
    extra = PROJECT["optional-dependencies"]["postgres"]
    declared = _requirements(PROJECT["dependencies"] + extra)
    allowed = set(declared) | _brought_by_extras(declared)
    owners = importlib.metadata.packages_distributions()
    imported = _imported_top_level_modules()
    assert {"rich", "markupsafe", "textual", "yaml", "shtab"} <= imported
    undeclared = {
        module: owners.get(module)
        for module in imported
        if not {_normal(d) for d in owners.get(module, [module])} & allowed
    }
    assert undeclared == {}


def test_textual_is_a_compatible_range_for_users_and_exact_for_the_snapshots() -> None:
    textual = _requirements(PROJECT["dependencies"])["textual"]
    assert not any(spec.operator == "==" for spec in textual.specifier)
    pinned = _requirements(PROJECT["optional-dependencies"]["test"])["textual"]
    (exact,) = pinned.specifier
    assert exact.operator == "=="
    assert exact.version in textual.specifier  # the tested version is one users may get
    assert importlib.metadata.version("textual") == exact.version
    assert {spec.operator for spec in textual.specifier} == {">=", "<"}


def test_python_versions_and_classifiers_agree() -> None:
    assert PROJECT["requires-python"] == ">=3.11"
    classifiers = PROJECT["classifiers"]
    assert "Programming Language :: Python :: 3.11" in classifiers
    assert "Programming Language :: Python :: 3 :: Only" in classifiers
    # PEP 639: the licence is the SPDX expression; a licence classifier would be refused.
    assert not [c for c in classifiers if c.startswith("License ::")]
    installed = importlib.metadata.metadata("tuisched")
    assert installed["License-Expression"] == "MIT"
    assert set(installed.get_all("Classifier") or []) == set(classifiers)


# --- --help of every command -----------------------------------------------------------


def _commands(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _commands(sub, (*path, name))


COMMANDS = [path for path, _ in _commands(_parser())]


@pytest.mark.parametrize("path", COMMANDS, ids=lambda path: " ".join(path) or "tuisched")
def test_every_command_help_has_a_description_and_an_example(path: tuple[str, ...]) -> None:
    command = dict(_commands(_parser()))[path]
    assert command.description, "no description"
    example = re.search(r"Example: (tuisched[^\n]*)", command.format_help())
    assert example is not None, command.format_help()
    said = example.group(1).split()
    assert said[1 : 1 + len(path)] == list(path) or not path  # it shows this very command


def test_help_is_printed_by_the_real_command(tmp_path: Path) -> None:
    for path in (("init",), ("service", "install"), ("completion",), ("pause",)):
        done = subprocess.run(
            [sys.executable, "-m", "tuisched", *path, "--help"],
            capture_output=True, text=True, timeout=30, check=False, cwd=tmp_path,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert f"usage: tuisched {' '.join(path)}" in done.stdout
        assert "\nExample: tuisched " in done.stdout
