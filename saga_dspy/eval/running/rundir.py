"""A run directory's guard: one run at a time holds it (a lock for the whole run). Its files are written through
`eval.files` (private, whole, never through a link).

The lock is `filelock`'s (an OS lock on `<dir>/.lock`, released by the OS when the process dies, so a
killed run never leaves a stale lock behind); a second run on the same directory fails at once, and so does
one on a directory inside or above a directory another run holds (`--out D/full` while a run holds `D`)."""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from pathlib import Path

import filelock

from saga_dspy.eval.errors import EvalError

LOCK_NAME = ".lock"
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
