"""Widgets looked up by work that can outlive its screen."""

from __future__ import annotations

from typing import TypeVar

from textual.dom import DOMNode
from textual.widget import Widget

W = TypeVar("W", bound=Widget)


def present(node: DOMNode, selector: str, kind: type[W] = Widget) -> W | None:  # type: ignore[assignment]
    """The widget `selector` finds under `node`; None once it has gone.

    A screen's children go when it closes, or when the app closes: a worker that awaited
    the scheduler's answer meanwhile, or a mount handler that a burst of keys outran
    (the screen closed before it ran), finds nothing and does nothing.
    """
    return next(node.query(selector).results(kind), None)
