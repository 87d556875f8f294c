"""Trivial job targets the benchmarks run (`python: "benchmarks.jobs:noop"`)."""

from __future__ import annotations


def noop() -> None:
    """Does nothing and succeeds."""
