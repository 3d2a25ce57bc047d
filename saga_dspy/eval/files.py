"""Run files written private (0600) and without following a link planted at their place: `write_file` writes a
file whole (a new temporary file synced, then renamed), `open_append` opens one to append. Every file a run, a gold
freeze or an export writes goes through here."""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from pathlib import Path
from typing import IO

from saga_dspy.eval.errors import EvalError

PRIVATE_MODE = 0o600  # run files can hold prompts, answers and settings: readable by their owner only
TMP_SUFFIX = ".tmp"  # `<name>.tmp`: the file being written; a killed writer's leftover is removed by the next


def write_file(path: str | Path, data: str | bytes) -> Path:
    """Write `path` whole and private (0600), never through a link: the data goes to a new `<name>.tmp` (created
    O_EXCL|O_NOFOLLOW after a stale one is unlinked), is synced to disk, then renamed to `path`. Every run-folder
    file is written here; an EvalError names the file when it cannot be, or when `path` is there as anything but a
    regular file (a link, a device: neither written through nor replaced)."""
    path = Path(path)
    tmp = path.with_name(path.name + TMP_SUFFIX)
    raw = data.encode("utf-8") if isinstance(data, str) else data
    try:
        if (kind := _not_a_file(path)) is not None:
            raise EvalError(f"cannot write {path}: it is a {kind}, not a regular file; name another file")
        path.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)  # a link is removed, not followed
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, PRIVATE_MODE)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(raw)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
    except OSError as exc:
        where = f" ({exc.filename})" if exc.filename and str(exc.filename) != str(path) else ""
        raise EvalError(f"cannot write {path}: {exc.strerror or exc}{where}") from None
    _sync_directory(path.parent)
    return path


def _not_a_file(path: Path) -> str | None:
    """What stands at `path` when it is there and no regular file (a symbolic link is not followed); else None."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return None
    if stat.S_ISREG(mode):
        return None
    return "symbolic link" if stat.S_ISLNK(mode) else "directory" if stat.S_ISDIR(mode) else "special file"


def _sync_directory(path: Path) -> None:
    """The rename itself on disk (best effort: some file systems cannot sync a directory)."""
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def open_append(path: str | Path) -> IO[str]:
    """`path` opened to append text (UTF-8), created 0600 and never through a link (O_NOFOLLOW); an existing
    file is made 0600 too."""
    path = Path(path)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, PRIVATE_MODE)
    except OSError as exc:
        why = "it is a symbolic link, not a regular file; name another file" if exc.errno == errno.ELOOP else None
        raise EvalError(f"cannot write {path}: {why or exc.strerror or exc}") from None
    os.fchmod(fd, PRIVATE_MODE)
    return os.fdopen(fd, "a", encoding="utf-8")
