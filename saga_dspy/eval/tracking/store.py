"""The MLflow tracking URI is a usable store, asked when the tracker opens (before the first question): an
http(s) server answers at all, a sqlite database or file store can be opened there. MLflow itself retries a store it
cannot open for minutes; here a bad one stops the run with one line (an `EvalError`: exit 2)."""

from __future__ import annotations

import os
import re
import sqlite3
import stat
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

from saga_dspy.eval.errors import EvalError
from saga_dspy.input_files import file_kind

TRACKING_PROBE_SECONDS = 3.0


def check_tracking_server(uri: str, timeout: float = TRACKING_PROBE_SECONDS) -> None:
    """An EvalError at once when an http(s) tracking URI does not answer (any HTTP status is an answer)."""
    if not uri.startswith(("http://", "https://")):
        return
    try:
        urllib.request.urlopen(uri.rstrip("/") + "/health", timeout=timeout).close()
    except urllib.error.HTTPError:
        return
    except (OSError, ValueError) as exc:
        reason = getattr(exc, "reason", None) or exc
        raise EvalError(
            f"--mlflow-uri {uri}: the tracking server does not answer ({reason}); start it, or pass --no-mlflow"
        ) from None


def sqlite_path(uri: str) -> Path | None:
    """The database file of a `sqlite:///...` URI (None for other stores)."""
    m = re.match(r"^sqlite:///(.+)$", uri)
    return Path(m.group(1)) if m else None


def check_tracking_uri(uri: str) -> None:
    """An EvalError within seconds when the tracking URI is no usable store: a server that does not answer, a
    sqlite database that is a directory, no database, or cannot be created; a file store that is a file. MLflow
    itself retries a store it cannot open for minutes, then says only "OperationalError"."""
    check_tracking_server(uri)
    db = sqlite_path(uri)
    if db is not None:
        _check_sqlite_store(uri, db)
    elif uri.startswith("file:") or "://" not in uri:
        path = Path(urllib.parse.unquote(urllib.parse.urlparse(uri).path) if uri.startswith("file:") else uri)
        if path.exists() and not path.is_dir():
            raise EvalError(f"--mlflow-uri {uri}: {path} is not a directory (a file store is one); name a directory")


def _check_sqlite_store(uri: str, db: Path) -> None:
    where = f"--mlflow-uri {uri}"
    try:
        mode = db.stat().st_mode
    except FileNotFoundError:
        mode = None
    except OSError as exc:
        raise EvalError(f"{where}: {db}: {exc.strerror or exc}") from None
    if mode is None:  # created by the tracker: the nearest existing folder above it must take it
        folder = next(p for p in db.parents if p.exists())
        if not folder.is_dir() or not os.access(folder, os.W_OK | os.X_OK):
            raise EvalError(f"{where}: the database cannot be created under {folder} (not a writable directory)")
        return
    if not stat.S_ISREG(mode):
        hint = f"; name a file in it, e.g. sqlite:///{db / 'mlflow.db'}" if stat.S_ISDIR(mode) else ""
        raise EvalError(f"{where}: {db} is a {file_kind(mode)}, not an SQLite database file{hint}")
    if not os.access(db, os.R_OK | os.W_OK):
        raise EvalError(f"{where}: {db} is not readable and writable")
    try:
        con = sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True, timeout=TRACKING_PROBE_SECONDS)
        try:
            con.execute("PRAGMA schema_version").fetchone()
        finally:
            con.close()
    except sqlite3.OperationalError as exc:
        if "locked" not in str(exc):  # a database busy with another run's writes is a usable one
            raise EvalError(f"{where}: {db} cannot be opened as an SQLite database ({exc})") from None
    except sqlite3.DatabaseError as exc:
        raise EvalError(f"{where}: {db} is not an SQLite database ({exc})") from None
