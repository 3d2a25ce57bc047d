"""A run directory's guards: one run at a time holds it (a lock for the whole run), and its files are private (0600).

The lock is `filelock`'s (an OS lock on `<dir>/.lock`, released by the OS when the process dies, so a
killed run never leaves a stale lock behind); a second run on the same directory fails at once."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import filelock

from saga_dspy.eval.errors import EvalError

LOCK_NAME = ".lock"
PRIVATE_MODE = 0o600  # run files can hold prompts, answers and settings: readable by their owner only


@contextlib.contextmanager
def locked_run_dir(path: Path) -> Iterator[Path]:
    """Hold `path`'s lock for the block; an EvalError at once when another run holds it."""
    path = Path(path)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise EvalError(f"cannot create the run directory {path}: {exc.strerror or exc}") from None
    lock = filelock.FileLock(str(path / LOCK_NAME), timeout=0)
    try:
        lock.acquire()
    except filelock.Timeout:
        raise EvalError(
            f"{path} is in use by another run (it holds {path / LOCK_NAME}); wait for it to finish "
            f"or pass another --out"
        ) from None
    except OSError as exc:
        raise EvalError(f"cannot lock the run directory {path}: {exc.strerror or exc}") from None
    try:
        yield path
    finally:
        lock.release()


def _private_opener(path: str, flags: int) -> int:
    return os.open(path, flags, PRIVATE_MODE)


def open_private(path: Path, mode: str = "w") -> IO:
    """`open(path, mode)` (text, UTF-8) creating the file 0600; an existing file is made 0600 too."""
    fh = open(path, mode, encoding="utf-8", opener=_private_opener)
    os.chmod(path, PRIVATE_MODE)
    return fh


def make_private(path: Path) -> None:
    """Make a file written by someone else (dspy's program.save) 0600."""
    os.chmod(path, PRIVATE_MODE)
