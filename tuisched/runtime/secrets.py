"""The scheduler's secrets, kept where no job can read them (SPEC R20a).

The configuration names environment variables for the SMTP login (and, later,
the cluster's database password). At start (and at each reload that names
new ones) they are moved out of `os.environ` into a `Secrets` mapping that
only the mailer reads: a python job sees no trace of them in `os.environ`,
and command jobs inherit an environment without them. The process's initial
environment block, which `/proc/<pid>/environ` shows, cannot be rewritten, so
the scheduler also makes itself non-dumpable (`hide_process`): the kernel then
lets no process of the same user read its `/proc/<pid>/environ` or memory, or
attach a debugger. A `password_file` keeps the secret out of the environment
altogether and is the better choice.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
import sys
from collections.abc import Iterable, Iterator, Mapping

from tuisched.domain.model import Config

log = logging.getLogger(__name__)

_PR_SET_DUMPABLE = 4


def secret_names(config: Config) -> set[str]:
    """Environment variables holding the scheduler's own secrets (never passed to jobs)."""
    names: set[str] = set()
    if config.email is not None:
        smtp = config.email.smtp
        names.update(filter(None, (smtp.password_env, smtp.username_env)))
    if config.settings.cluster is not None and config.settings.cluster.password_env:
        names.add(config.settings.cluster.password_env)
    if (config.settings.history or "").startswith("postgres"):
        names.add("PGPASSWORD")  # libpq's; the history is opened with it, jobs never see it
    names.update(hook.secret_env for hook in config.webhooks.values() if hook.secret_env)
    return names


class Secrets(Mapping[str, str]):
    """Secrets taken out of the environment, by the name of their variable."""

    def __init__(self) -> None:
        self._values: dict[str, str] = {}

    def take(self, names: Iterable[str]) -> None:
        """Move the variables `names` out of `os.environ` (and so out of every child's)."""
        for name in names:
            value = os.environ.pop(name, None)
            if value is not None:
                self._values[name] = value

    def __getitem__(self, name: str) -> str:
        return self._values[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        return f"Secrets({sorted(self._values)})"  # names only, never values


def hide_process() -> bool:
    """Make this process non-dumpable (Linux): its `/proc/<pid>/environ` and memory are
    then readable by root only. True when done; elsewhere nothing happens."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        done = bool(libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        done = False
    if not done:
        log.warning(
            "could not make the scheduler non-dumpable: jobs of the same user may read its "
            "initial environment in /proc; prefer email.smtp.password_file"
        )
    return done
