"""A run directory's guards: one run at a time holds it (a lock for the whole run), and its files are private (0600)
and written without following a link planted at their place (`write_file`, `open_append`).

The lock is `filelock`'s (an OS lock on `<dir>/.lock`, released by the OS when the process dies, so a
killed run never leaves a stale lock behind); a second run on the same directory fails at once, and so does
one on a directory inside or above a directory another run holds (`--out D/full` while a run holds `D`)."""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import filelock

from saga_dspy.eval.errors import EvalError

LOCK_NAME = ".lock"
PRIVATE_MODE = 0o600  # run files can hold prompts, answers and settings: readable by their owner only


NESTED_DEPTH = 3  # how deep below a run directory other runs' locks are looked for (run/variant/…)
_HELD: set[Path] = set()  # the run directories this process holds (a nested lock of its own run is fine)
_HELD_LOCK = threading.Lock()


@contextlib.contextmanager
def locked_run_dir(path: Path) -> Iterator[Path]:
    """Hold `path`'s lock for the block; an EvalError at once when another run holds it, or holds a
    directory above or below it."""
    path = Path(path)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise EvalError(f"cannot create the run directory {path}: {exc.strerror or exc}") from None
    lock = filelock.FileLock(str(path / LOCK_NAME), timeout=0)
    try:
        lock.acquire()
    except filelock.Timeout:
        raise _in_use(path) from None
    except OSError as exc:
        raise EvalError(f"cannot lock the run directory {path}: {exc.strerror or exc}") from None
    real = path.resolve()
    try:
        other = _held_nearby(real)  # after taking our own: of two runs starting at once, neither misses the other
        if other is not None:
            raise _nearby_in_use(path, real, other)
        with _HELD_LOCK:
            _HELD.add(real)
        yield path
    finally:
        with _HELD_LOCK:
            _HELD.discard(real)
        lock.release()


def check_not_in_use(path: Path) -> None:
    """The EvalError `locked_run_dir` would raise when another run holds `path` (or a directory above or
    below it), said before the run directory is read (a resume reads its config.json first)."""
    path = Path(path)
    if not path.is_dir():
        return
    if _locked(path / LOCK_NAME):
        raise _in_use(path)
    real = path.resolve()
    other = _held_nearby(real)
    if other is not None:
        raise _nearby_in_use(path, real, other)


def _in_use(path: Path) -> EvalError:
    return EvalError(
        f"{path} is in use by another run (it holds {path / LOCK_NAME}); wait for it to finish or pass another --out"
    )


def _nearby_in_use(path: Path, real: Path, other: Path) -> EvalError:
    where = "inside" if other in real.parents else "above"
    return EvalError(
        f"{path} is {where} {other}, a run directory in use by another run; wait for it to finish or pass another --out"
    )


def _held_nearby(path: Path) -> Path | None:
    """A directory above `path`, or up to NESTED_DEPTH below it, whose run lock another run holds."""
    candidates = [parent for parent in path.parents if (parent / LOCK_NAME).is_file()]
    for root, dirs, files in os.walk(path):
        depth = len(Path(root).relative_to(path).parts)
        if depth >= NESTED_DEPTH:
            dirs[:] = []
        if depth and LOCK_NAME in files:
            candidates.append(Path(root))
    with _HELD_LOCK:
        mine = set(_HELD)
    for directory in candidates:
        if directory not in mine and _locked(directory / LOCK_NAME):
            return directory
    return None


def _locked(lock_path: Path) -> bool:
    if not lock_path.is_file():
        return False
    probe = filelock.FileLock(str(lock_path), timeout=0)
    try:
        probe.acquire()
    except filelock.Timeout:
        return True
    except OSError:
        return False
    probe.release()
    return False


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
