"""Names of a package imported on first use (PEP 562): a package's `__getattr__` and
`__dir__` for the names whose modules only some commands need."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping


def lazy_names(
    package: str, homes: Mapping[str, str]
) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """The `__getattr__` and `__dir__` of `package`, whose names in `homes` (a name: the
    module that defines it) are imported when first asked for."""
    namespace = vars(sys.modules[package])

    def attribute(name: str) -> object:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(home), name)
        namespace[name] = value  # once found, a plain attribute
        return value

    def names() -> list[str]:
        return sorted([*namespace, *homes])

    return attribute, names
