"""The state directory: private to the user (0700), its files 0600."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from tuisched.domain.errors import HistoryError

# --- the state directory ------------------------------------------------------------


def prepare_state_dir(path: Path) -> None:
    """Create the state directory private to the user (0700), or make an existing one so.

    Missing parents are created 0700 as well. An existing directory owned by
    another user is refused: whoever owns it could read or replace the history.

    Raises:
        HistoryError: `path` is not a directory, or it belongs to another user.
    """
    for folder in reversed([path, *path.parents]):
        if not folder.exists():
            folder.mkdir(mode=0o700)
            folder.chmod(0o700)  # the umask may have taken bits away, never added any
    info = path.stat()
    if not stat.S_ISDIR(info.st_mode):
        raise HistoryError(f"state directory {path} is not a directory")
    if info.st_uid != os.geteuid():
        raise HistoryError(f"state directory {path} belongs to another user (uid {info.st_uid})")
    if stat.S_IMODE(info.st_mode) != 0o700:
        path.chmod(0o700)


def create_private_file(path: Path) -> None:
    """Make sure `path` exists and is readable by its owner only (0600).

    A file created here is 0600 from its first byte; an existing one of ours
    with a wider mode is narrowed.
    """
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        info = os.fstat(fd)
        if info.st_uid == os.geteuid() and stat.S_IMODE(info.st_mode) != 0o600:
            os.fchmod(fd, 0o600)
    finally:
        os.close(fd)
