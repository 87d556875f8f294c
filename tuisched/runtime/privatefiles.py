"""Files in the state directory: private to their owner, and never reached through a link.

Whoever can write into the state directory could plant a symbolic link
(`audit.log -> ~/.bashrc`) and have the scheduler append to, truncate or
chmod the file it points to. Every file tuisched opens there is opened with
`O_NOFOLLOW` (a link is refused, with a message that names it), must be a
regular file, and is narrowed to 0600 when it is ours; every folder it makes
there is 0700 and must not be a link either.
"""

from __future__ import annotations

import errno
import logging
import os
import stat
from pathlib import Path

from tuisched.domain.errors import StateError
from tuisched.domain.text import counted

PRIVATE_FILE = 0o600
PRIVATE_FOLDER = 0o700


def open_private(path: Path, flags: int) -> int:
    """Open (or create, 0600) the regular file `path` without following a link; a descriptor.

    `flags` are `os.open` flags (O_NOFOLLOW and O_CLOEXEC are added). An
    existing file of ours with a wider mode is narrowed to 0600.

    Raises:
        StateError: `path` is a symbolic link, not a regular file, or cannot be opened.
    """
    try:
        # O_NONBLOCK: a FIFO planted here is refused at once instead of blocking the open.
        fd = os.open(path, flags | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, PRIVATE_FILE)
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise StateError(
                f"{path} is a symbolic link; tuisched does not follow links in its state "
                "directory: remove it"
            ) from None
        raise StateError(f"cannot open {path}: {error.strerror}") from error
    try:
        _narrow(fd, path)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _narrow(fd: int, path: Path) -> None:
    """Refuse a file that is not regular; make one of ours 0600."""
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        raise StateError(f"{path} is not a regular file: remove it")
    if info.st_uid == os.geteuid() and stat.S_IMODE(info.st_mode) != PRIVATE_FILE:
        os.fchmod(fd, PRIVATE_FILE)


def private_folder(path: Path, *, root: Path | None = None) -> None:
    """Make the folder `path` (and its missing parents) 0700; refuse one that is a link,
    and so a folder from `root` down to it (the state directory's own folders).

    Raises:
        StateError: `path` (or a folder under `root`) is a link, or a folder that had to
            be made cannot be.
    """
    for folder in reversed([path, *path.parents]):
        try:
            info = folder.lstat()
        except FileNotFoundError:
            try:
                folder.mkdir(mode=PRIVATE_FOLDER)
            except FileExistsError:
                pass  # made meanwhile (another run of the same job)
            except OSError as error:
                raise StateError(f"cannot create {folder}: {error.strerror}") from error
            continue
        guarded = folder == path or (root is not None and folder.is_relative_to(root))
        if guarded and stat.S_ISLNK(info.st_mode):
            raise StateError(
                f"{folder} is a symbolic link; tuisched does not follow links in its state "
                "directory: remove it"
            )


class WriteTrouble:
    """One warning per episode of failing writes (a full disk), not one per write.

    `failed` logs the first failure of an episode and counts the rest;
    `succeeded` ends the episode with one line saying how many writes failed.
    """

    def __init__(self, logger: logging.Logger, what: str) -> None:
        self._log = logger
        self._what = what
        self.failures = 0
        """Writes failed in the current episode."""

    def failed(self, error: BaseException) -> None:
        """A write of `what` failed."""
        if not self.failures:
            self._log.warning("cannot write %s: %s (warning once until it works again)",
                              self._what, _reason(error))  # fmt: skip
        self.failures += 1

    def succeeded(self) -> None:
        """A write of `what` worked: an episode of failures, if any, is over."""
        if self.failures:
            self._log.warning(
                "writing %s works again (%s failed)", self._what, counted(self.failures, "write")
            )
            self.failures = 0


def _reason(error: BaseException) -> str:
    return error.strerror if isinstance(error, OSError) and error.strerror else str(error)


def fsync_folder(folder: Path) -> None:
    """Make a rename in `folder` durable (a no-op where the file system cannot fsync
    folders)."""
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    except OSError as error:
        if error.errno != errno.EINVAL:
            raise
    finally:
        os.close(fd)
