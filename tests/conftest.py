"""Shared fixtures: configuration files written on the fly."""

from __future__ import annotations

import compileall
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from .pg_fixtures import nodes, postgres  # noqa: F401  (one PostgreSQL server for the session)
from .runtime_fixtures import REPO, schedulers  # noqa: F401  (headless processes, stopped at the end)

SAMPLE = REPO / "sample_config" / "tuisched.yaml"


def pytest_configure(config: pytest.Config) -> None:
    """Compile the package and the tests' helpers once, before any worker starts: the tests
    start thousands of interpreters (schedulers, commands, python jobs that import the
    tests' job modules), and without bytecode on disk (a fresh clone, or
    PYTHONDONTWRITEBYTECODE set) each of them would compile what it imports again."""
    if not hasattr(config, "workerinput"):  # the controller, or a run without workers
        for folder in ("tuisched", "tests"):
            compileall.compile_dir(REPO / folder, quiet=1)


SLOW_TESTS = Path(__file__).with_name("slow_tests.txt")


def slow_tests() -> list[str]:
    """The node ids (without parameters) of the longest tests, longest first."""
    lines = SLOW_TESTS.read_text(encoding="utf-8").splitlines()
    return [line for line in lines if line.strip() and not line.startswith("#")]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The longest tests first (`slow_tests.txt`), the rest in their order: the workers
    steal from each other's queues as they free up, so the long ones spread over them
    and no worker is left running one alone at the end."""
    rank = {name: place for place, name in enumerate(slow_tests())}
    items.sort(key=lambda item: rank.get(item.nodeid.split("[", 1)[0], len(rank)))


@pytest.fixture
def write_config(tmp_path: Path) -> Callable[[str], Path]:
    """Write a dedented YAML text to `tmp_path/tuisched.yaml` and return its path."""

    def write(text: str, name: str = "tuisched.yaml") -> Path:
        path = tmp_path / name
        path.write_text(textwrap.dedent(text).lstrip("\n"))
        return path

    return write
