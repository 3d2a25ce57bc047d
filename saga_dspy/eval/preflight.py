"""Before the first question: the endpoint answers `ASK {}`, the entity search and the schema index open, and a
served LM answers one tiny request; the MLflow tracking URI is a usable store: an http(s) server answers at all,
a sqlite database or file store can be opened there (`check_tracking_uri`, which the tracker asks when it
opens). A run against a dead server otherwise spends its whole split finding out one question at a time; here it
stops with one line (an `EvalError`: exit 2) before anything is run or written."""

from __future__ import annotations

import os
import re
import sqlite3
import stat
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import dspy

from saga_dspy.config import Settings, secret_value
from saga_dspy.eval.errors import EvalError
from saga_dspy.input_files import file_kind
from saga_dspy.kg.errors import SparqlError
from saga_dspy.services import KgServices

PROBE = [{"role": "user", "content": "Reply with the single word: ok"}]
PROBE_TOKENS = 8
ENDPOINT_TIMEOUT = 20.0  # seconds at most for ASK {}
MAX_MESSAGE = 300


def one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= MAX_MESSAGE else text[: MAX_MESSAGE - 1] + "…"


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


def check_endpoint(settings: Settings, services: KgServices) -> None:
    try:
        services.endpoint.query("ASK {}", timeout=min(settings.query_timeout, ENDPOINT_TIMEOUT))
    except SparqlError as exc:
        raise EvalError(f"preflight: the endpoint {settings.endpoint} does not answer ASK {{}} ({exc})") from None


def check_kg_data(services: KgServices) -> None:
    """The entity search and the schema index (a missing index, a search refused for this endpoint)."""
    for name in ("search", "schema"):
        try:
            getattr(services, name)
        except (OSError, ValueError) as exc:
            raise EvalError(f"preflight: {one_line(exc)}") from None


def check_lm(settings: Settings, lm: Any) -> float | None:
    """One tiny uncached request to a served LM; its seconds (None: nothing to ask, an in-process model is loaded
    by the warm-up instead)."""
    if lm is None or getattr(lm, "llama_engine", None) is not None:
        return None
    started = time.monotonic()
    try:
        with dspy.context(callbacks=[]):  # not a question: no trace, no span
            lm(messages=PROBE, max_tokens=PROBE_TOKENS, cache=False)
    except Exception as exc:  # whatever the provider raises: unreachable, refused, unknown model, bad key
        where = f" at {settings.api_base}" if settings.api_base else ""
        text = one_line(exc)
        key = secret_value(settings.api_key)
        if key:
            text = text.replace(key, "***")
        raise EvalError(f"preflight: the LM {settings.lm}{where} did not answer a one-line request ({text})") from None
    return time.monotonic() - started


def preflight(settings: Settings, services: KgServices, lm: Any = None) -> dict[str, float | None]:
    """All three checks (`lm`: the run's LM, else DSPy's configured one); the seconds each took."""
    started = time.monotonic()
    check_endpoint(settings, services)
    endpoint_seconds = time.monotonic() - started
    check_kg_data(services)
    lm_seconds = check_lm(settings, lm if lm is not None else dspy.settings.lm)
    return {"endpoint_seconds": round(endpoint_seconds, 3), "lm_seconds": lm_seconds and round(lm_seconds, 3)}
