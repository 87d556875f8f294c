"""The state directory: private to the user (0700), its files 0600, one scheduler at a time."""

from __future__ import annotations

import fcntl
import os
import stat
from pathlib import Path

from tuisched.domain.errors import AlreadyRunningError, StateError
from tuisched.runtime.privatefiles import open_private

# --- the state directory ------------------------------------------------------------


def prepare_state_dir(path: Path) -> None:
    """Create the state directory private to the user (0700), or make an existing one so.

    Missing parents are created 0700 as well. An existing directory owned by
    another user is refused: whoever owns it could read or replace the history.

    Raises:
        StateError: `path` cannot be created or made private, is not a
            directory, or belongs to another user.
    """
    try:
        _prepare(path)
    except OSError as error:
        reason = error.strerror or str(error)
        raise StateError(f"cannot use the state directory {path}: {reason}") from error


def earlier_shared_state(path: Path, shared: Path) -> str | None:
    """What to tell the operator when `path`, a configuration's own default state
    directory, is new while `shared` (the folder every configuration without a
    `settings.state_dir` shared before) holds a history: it is not read any more."""
    if path.exists() or not (shared / "history.db").is_file():
        return None
    return (
        f"this configuration's state is now kept in {path}, a folder of its own; the "
        f"history, pauses and missed slots kept before in {shared} are not read: set "
        f"settings.state_dir: {shared} to go on with them"
    )


def _prepare(path: Path) -> None:
    for folder in reversed([path, *path.parents]):
        if not folder.exists():
            folder.mkdir(mode=0o700)
            folder.chmod(0o700)  # the umask may have taken bits away, never added any
    info = path.stat()
    if not stat.S_ISDIR(info.st_mode):
        raise StateError(f"state directory {path} is not a directory")
    if info.st_uid != os.geteuid():
        raise StateError(f"state directory {path} belongs to another user (uid {info.st_uid})")
    if stat.S_IMODE(info.st_mode) != 0o700:
        path.chmod(0o700)


def create_private_file(path: Path) -> None:
    """Make sure `path` exists and is readable by its owner only (0600).

    A file created here is 0600 from its first byte; an existing one of ours
    with a wider mode is narrowed; a link is refused (StateError).
    """
    os.close(open_private(path, os.O_RDWR | os.O_CREAT))


class InstanceLock:
    """An exclusive lock on a file in the state directory, holding the owner's pid and
    the configuration file it runs (a line each)."""

    def __init__(self, path: Path, config: Path) -> None:
        self.path = path
        self.config = str(config)
        self._fd: int | None = None

    def acquire(self) -> None:
        """Take the lock.

        Raises:
            AlreadyRunningError: another process holds it (its pid is named).
            StateError: the lock file cannot be opened or written.
        """
        fd = open_private(self.path, os.O_RDWR | os.O_CREAT)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 8192).decode(errors="replace").split("\n")
            os.close(fd)
            first = holder[0].strip()
            pid = int(first) if first.isascii() and first.isdigit() else None
            theirs = holder[1].strip() if len(holder) > 1 else ""
            raise AlreadyRunningError(
                self.path.parent, pid, theirs=theirs or None, ours=self.config
            ) from None
        try:
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()}\n{self.config}\n".encode())
        except OSError as error:
            os.close(fd)
            raise StateError(f"cannot write the lock {self.path}: {error.strerror}") from error
        self._fd = fd

    def release(self) -> None:
        """Give the lock back (idempotent). The file stays; its content is stale then."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
