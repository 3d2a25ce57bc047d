"""Files a user names (a compiled program, a schema index, a data file, gold): checked for type and size before
they are read, so a FIFO, a device or a huge file is one clear line, not a hang or a MemoryError."""

from __future__ import annotations

import contextlib
import gzip
import io
import os
import stat
import zlib
from collections.abc import Iterator
from pathlib import Path

MAX_INPUT_BYTES = 512 * 2**20  # on disk; what a gzip file may inflate to is bounded by the same figure
MAX_PROGRAM_BYTES = 64 * 2**20  # a compiled program.json: instructions and demos, a few MB at most
MAX_IDS_BYTES = 16 * 2**20
READING = "reading "  # the start of the note `reading` adds to an error


class InputFileError(ValueError):
    """A named input that is no regular file, or too large to read."""


def check_input_file(path: str | Path, what: str, max_bytes: int = MAX_INPUT_BYTES) -> Path:
    """`path` when it is a regular file of at most `max_bytes` (a link is judged by what it points to);
    FileNotFoundError when it is missing, InputFileError otherwise."""
    path = Path(path)
    try:
        info = path.stat()
    except FileNotFoundError:
        raise FileNotFoundError(f"{what} {path}: no such file") from None
    except OSError as exc:
        raise InputFileError(f"{what} {path}: {exc.strerror or exc}") from None
    if not stat.S_ISREG(info.st_mode):
        raise InputFileError(f"{what} {path}: not a regular file (a {file_kind(info.st_mode)}); name a file")
    if info.st_size > max_bytes:
        raise InputFileError(
            f"{what} {path}: {info.st_size / 2**20:,.0f} MB, more than the {max_bytes / 2**20:,.0f} MB accepted"
        )
    return path


def read_input_bytes(path: str | Path, what: str, max_bytes: int = MAX_INPUT_BYTES) -> bytes:
    """The bytes of a checked file, gunzipped when gzip-compressed (bounded by `max_bytes` as well). Opened once,
    without blocking (a FIFO put in its place after the check is refused, not waited on); a truncated or corrupt
    gzip stream is an InputFileError naming the file."""
    path = check_input_file(path, what, max_bytes)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        raise FileNotFoundError(f"{what} {path}: no such file") from None
    except OSError as exc:
        raise InputFileError(f"{what} {path}: {exc.strerror or exc}") from None
    with os.fdopen(fd, "rb") as fh:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise InputFileError(f"{what} {path}: not a regular file (a {file_kind(mode)}); name a file")
        raw = fh.read(max_bytes + 1)
    if len(raw) > max_bytes:
        raise InputFileError(f"{what} {path}: more than the {max_bytes / 2**20:,.0f} MB accepted")
    if raw[:2] != b"\x1f\x8b":
        return raw
    try:
        with gzip.GzipFile(fileobj=io.BytesIO(raw)) as gz:
            data = gz.read(max_bytes + 1)
    except (OSError, EOFError, zlib.error) as exc:  # cut off, or not gzip after its first two bytes
        raise InputFileError(f"{what} {path}: not a readable gzip file ({exc})") from None
    if len(data) > max_bytes:
        raise InputFileError(f"{what} {path}: inflates to more than the {max_bytes / 2**20:,.0f} MB accepted")
    return data


@contextlib.contextmanager
def reading(path: str | Path, what: str = "") -> Iterator[None]:
    """Any error raised while the input at `path` (`what`: "--data-file", "program") is read or taken apart carries
    a note naming it, so the one line a command prints (`cli.run_main`) says which file or record it was."""
    try:
        yield
    except Exception as exc:
        exc.add_note(f"{READING}{what} {path}".replace("  ", " ").rstrip())
        raise


def reading_context(exc: BaseException, message: str) -> str:
    """ " (reading …)" for the inputs `reading` noted on `exc`, innermost first, those `message` names left out."""
    notes = [n for n in getattr(exc, "__notes__", ()) if isinstance(n, str) and n.startswith(READING)]
    said = [n for n in dict.fromkeys(notes) if n.rsplit(" ", 1)[-1] not in message]
    return f" ({'; '.join(said)})" if said else ""


def file_kind(mode: int) -> str:
    """What a file that is no regular file is ("FIFO", "directory"), for a message."""
    for test, name in (
        (stat.S_ISFIFO, "FIFO"),
        (stat.S_ISCHR, "character device"),
        (stat.S_ISBLK, "block device"),
        (stat.S_ISSOCK, "socket"),
        (stat.S_ISDIR, "directory"),
    ):
        if test(mode):
            return name
    return "special file"
