"""Writing the configuration file atomically: temporary file, fsync, rename, backup."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

from tuisched.runtime.privatefiles import fsync_folder


def atomic_write(path: Path, text: str, *, backup: Path | None = None) -> None:
    """Replace the contents of `path` with `text` so that a crash leaves the old or the new file.

    The new text goes to a temporary file in the same folder, is flushed and
    fsynced, takes the original's mode and owner, and is renamed over `path`;
    then the folder is fsynced so the rename itself survives a power cut. A
    symbolic link is followed: the file it points to is replaced.

    Args:
        path: the file to replace (created, mode 0600, when missing).
        text: the new contents, written as UTF-8.
        backup: where to keep the previous contents first (replaced the same
            atomic way); nothing is backed up when `path` does not exist yet.

    Raises:
        OSError: the write failed; the original file is untouched and no
            temporary file is left behind.
    """
    target = Path(os.path.realpath(path))
    try:
        previous: os.stat_result | None = target.stat()
    except FileNotFoundError:
        previous = None
    if backup is not None and previous is not None:
        backup_target = Path(os.path.realpath(backup))
        _replace_file(backup_target, target.read_bytes(), previous)
        if backup_target.parent != target.parent:
            fsync_folder(backup_target.parent)
    _replace_file(target, text.encode("utf-8"), previous)
    fsync_folder(target.parent)


def _replace_file(target: Path, data: bytes, like: os.stat_result | None) -> None:
    """Write `data` to a temporary file beside `target` and rename it over `target`."""
    fd, temp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(data)
            file.flush()
            if like is not None:
                _copy_owner_and_mode(file.fileno(), like)
            os.fsync(file.fileno())
        Path(temp).replace(target)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise


def _copy_owner_and_mode(fd: int, like: os.stat_result) -> None:
    os.fchmod(fd, like.st_mode & 0o7777)
    # Only root may give a file away; otherwise the file stays the writer's, its mode kept.
    with contextlib.suppress(PermissionError):
        os.fchown(fd, like.st_uid, like.st_gid)
