"""One endpoint interface over the bundled store (embedded) and SPARQL HTTP servers.

Every query is checked read-only, gets the Wikidata prefixes, has a deadline,
and comes back parsed once into `SelectResult` / `AskResult`."""

from __future__ import annotations

import json
import pickle
import select
import subprocess
import sys
import queue
import time
import urllib.error
import urllib.parse
from abc import ABC, abstractmethod
from pathlib import Path

from ..config import Settings
from .cache import ResultCache
from .errors import EndpointUnavailable, QueryRefused, QuerySyntaxError, QueryTimeout, SparqlError
from .guard import check_read_only
from .label_service import rewrite_label_service
from .prefixes import FREEBASE_PREFIXES, WIKIDATA_PREFIXES, expand_dotted_names, with_prefixes
from .results import AskResult, Binding, QueryResult, SelectResult, parse_sparql_json
from .store import ensure_store

WDQS_HOSTS = {"query.wikidata.org"}


class Endpoint(ABC):
    """A SPARQL endpoint: `query(sparql) -> SelectResult | AskResult` or a SparqlError."""

    name: str
    native_label_service = False

    def __init__(self, settings: Settings):
        self.settings = settings
        self.prefixes = FREEBASE_PREFIXES if settings.kg == "freebase" else WIKIDATA_PREFIXES
        self.cache = ResultCache(Path(settings.cache_dir) / "results.sqlite") if settings.result_cache else None

    @property
    def cache_id(self) -> str:
        return self.name

    def prepare(self, sparql: str) -> str:
        if not isinstance(sparql, str) or not sparql.strip():
            raise QuerySyntaxError("empty query")
        check_read_only(sparql)
        if not self.native_label_service:
            sparql = rewrite_label_service(sparql)
        return expand_dotted_names(sparql, self.prefixes)

    def query(self, sparql: str, timeout: float | None = None) -> QueryResult:
        prepared = self.prepare(sparql)
        row_cap = self.settings.row_cap
        key = ResultCache.key(self.cache_id, prepared, row_cap) if self.cache is not None else None
        if key and (hit := self.cache.get(key)) is not None:
            return hit
        result = self._run(prepared, timeout or self.settings.query_timeout, row_cap)
        if key:
            self.cache.put(key, result)
        return result

    def select(self, sparql: str, timeout: float | None = None) -> SelectResult:
        result = self.query(sparql, timeout)
        if not isinstance(result, SelectResult):
            raise QuerySyntaxError("expected a SELECT query")
        return result

    def ask(self, sparql: str, timeout: float | None = None) -> bool:
        result = self.query(sparql, timeout)
        if not isinstance(result, AskResult):
            raise QuerySyntaxError("expected an ASK query")
        return result.value

    @abstractmethod
    def _run(self, sparql: str, timeout: float, row_cap: int) -> QueryResult: ...

    def close(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


# --- embedded: the bundled store in killable worker processes ---------------------------

class _Worker:
    """One `oxigraph_worker` child process with its pipes."""

    def __init__(self, store_path: Path):
        self.process = subprocess.Popen(
            [sys.executable, "-m", "saga_dspy.kg.oxigraph_worker", str(store_path)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        self.ready = False

    def request(self, message: tuple, timeout: float) -> tuple:
        """Send one request; the answer, or None when the deadline passed."""
        deadline = time.monotonic() + timeout
        if not self.ready:  # the child greets once its store is open
            self._wait(deadline)
            pickle.load(self.process.stdout)
            self.ready = True
        pickle.dump(message, self.process.stdin)
        self.process.stdin.flush()
        self._wait(deadline)
        return pickle.load(self.process.stdout)

    def _wait(self, deadline: float) -> None:
        remaining = max(0.0, deadline - time.monotonic())
        readable, _, _ = select.select([self.process.stdout], [], [], remaining)
        if not readable:
            raise _Deadline()

    def kill(self) -> None:
        self.process.kill()
        self.process.wait(5)
        for pipe in (self.process.stdin, self.process.stdout):
            try:
                pipe.close()
            except OSError:
                pass


class _Deadline(Exception):
    pass


class EmbeddedEndpoint(Endpoint):
    """The bundled Wikidata sample in pyoxigraph, queried in worker processes.

    pyoxigraph cannot cancel a query, so a query past its deadline is stopped by
    killing its worker; a fresh worker takes its place."""

    def __init__(self, settings: Settings, store_path: Path | None = None):
        super().__init__(settings)
        self.store_path = Path(store_path) if store_path else ensure_store(settings)
        self.name = "embedded"
        self._idle: queue.Queue[_Worker] = queue.Queue()
        self._closed = False
        for _ in range(max(1, settings.embedded_workers)):
            self._idle.put(_Worker(self.store_path))

    @property
    def cache_id(self) -> str:
        return f"embedded:{self.store_path.name}"

    def _run(self, sparql: str, timeout: float, row_cap: int) -> QueryResult:
        if self._closed:
            raise EndpointUnavailable("endpoint is closed")
        worker = self._idle.get()
        try:
            message = worker.request((sparql, row_cap, self.prefixes), timeout)
        except _Deadline:
            worker.kill()
            worker = _Worker(self.store_path)
            raise QueryTimeout(f"query timed out after {timeout:g}s") from None
        except (EOFError, OSError, pickle.UnpicklingError) as exc:
            worker.kill()
            worker = _Worker(self.store_path)
            raise EndpointUnavailable(f"embedded store worker died: {exc}") from None
        finally:
            self._idle.put(worker)
        return _decode(message)

    def close(self) -> None:
        self._closed = True
        while True:
            try:
                self._idle.get_nowait().kill()
            except queue.Empty:
                break

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


def _decode(message: tuple) -> QueryResult:
    kind = message[0]
    if kind == "ask":
        return AskResult(message[1])
    if kind == "select":
        _, variables, rows, capped = message
        typed = [
            {var: Binding(*term) for var, term in zip(variables, row) if term is not None} for row in rows
        ]
        return SelectResult(variables, typed, capped)
    if kind == "syntax":
        raise QuerySyntaxError(f"syntax error: {message[1]}")
    raise SparqlError(message[1])


# --- HTTP: any SPARQL 1.1 protocol server --------------------------------------------------

class HttpEndpoint(Endpoint):
    """query.wikidata.org, QLever, Virtuoso, an Oxigraph server… via SPARQLWrapper."""

    def __init__(self, settings: Settings, url: str):
        super().__init__(settings)
        self.url = url
        self.name = url
        host = urllib.parse.urlparse(url).hostname or ""
        self.native_label_service = host in WDQS_HOSTS

    def prepare(self, sparql: str) -> str:
        return with_prefixes(super().prepare(sparql), self.prefixes)

    def _run(self, sparql: str, timeout: float, row_cap: int) -> QueryResult:
        attempts = max(1, self.settings.http_retries)
        delay = 1.0
        for attempt in range(1, attempts + 1):
            try:
                return self._once(sparql, timeout, row_cap)
            except _Retryable as exc:
                if attempt == attempts:
                    raise EndpointUnavailable(f"{self.url}: {exc.reason} (after {attempts} attempts)") from None
                time.sleep(min(exc.retry_after if exc.retry_after is not None else delay, 60.0))
                delay *= 2
        raise AssertionError("unreachable")

    def _once(self, sparql: str, timeout: float, row_cap: int) -> QueryResult:
        from SPARQLWrapper import JSON, POST, SPARQLWrapper
        from SPARQLWrapper.SPARQLExceptions import (
            EndPointInternalError,
            EndPointNotFound,
            QueryBadFormed,
            SPARQLWrapperException,
            Unauthorized,
            URITooLong,
        )

        client = SPARQLWrapper(self.url, agent=self.settings.user_agent)
        client.setMethod(POST)
        client.setReturnFormat(JSON)
        client.setTimeout(max(1, int(round(timeout))))
        client.setQuery(sparql)
        started = time.monotonic()
        try:
            response = client.query().response
            status = getattr(response, "status", 200)
            body = response.read()
        except QueryBadFormed as exc:
            raise QuerySyntaxError(_server_message(exc)) from None
        except EndPointInternalError as exc:
            message = _server_message(exc)
            if "timeout" in message.lower() or "timed out" in message.lower():
                raise QueryTimeout(message) from None
            raise _Retryable(f"server error: {message}") from None
        except (EndPointNotFound, Unauthorized, URITooLong) as exc:
            raise EndpointUnavailable(_server_message(exc)) from None
        except urllib.error.HTTPError as exc:
            if exc.code == 429 or exc.code >= 500:
                retry_after = exc.headers.get("Retry-After") if exc.headers else None
                raise _Retryable(f"HTTP {exc.code}", _seconds(retry_after)) from None
            raise EndpointUnavailable(f"HTTP {exc.code}: {exc.reason}") from None
        except (TimeoutError, OSError) as exc:
            if "timed out" in str(exc).lower() or isinstance(exc, TimeoutError):
                raise QueryTimeout(f"query timed out after {timeout:g}s") from None
            raise _Retryable(f"connection failed: {exc}") from None
        except SPARQLWrapperException as exc:
            raise EndpointUnavailable(str(exc)) from None
        try:
            payload = json.loads(body.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError):
            # Oxigraph (and others) stream results: a timeout mid-stream leaves a
            # truncated body behind a 200 status.
            elapsed = time.monotonic() - started
            raise QueryTimeout(
                f"the endpoint cut the result off after {elapsed:.1f}s (HTTP {status}, truncated JSON): query timed out"
            ) from None
        return _cap(payload, row_cap)


def _cap(payload: dict, row_cap: int) -> QueryResult:
    if isinstance(payload, dict) and "results" in payload:
        bindings = payload["results"].get("bindings", [])
        if len(bindings) > row_cap:
            payload = {**payload, "results": {"bindings": bindings[:row_cap]}, "capped": True}
    return parse_sparql_json(payload)


class _Retryable(Exception):
    def __init__(self, reason: str, retry_after: float | None = None):
        super().__init__(reason)
        self.reason = reason
        self.retry_after = retry_after


def _seconds(value: str | None) -> float | None:
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


def _server_message(exc: Exception) -> str:
    text = str(exc)
    if "Response:" in text:
        text = text.split("Response:", 1)[1].strip()
        if text.startswith(("b'", 'b"')):
            text = text[2:-1].encode().decode("unicode_escape", errors="replace")
    return text


def open_endpoint(settings: Settings) -> Endpoint:
    """'embedded' → the bundled store; a URL → that SPARQL server."""
    if settings.is_embedded:
        return EmbeddedEndpoint(settings)
    if settings.endpoint.startswith(("http://", "https://")):
        return HttpEndpoint(settings, settings.endpoint)
    raise ValueError(f"endpoint must be 'embedded' or an http(s) URL, not {settings.endpoint!r}")


__all__ = [
    "Endpoint",
    "EmbeddedEndpoint",
    "HttpEndpoint",
    "open_endpoint",
    "QueryRefused",
]
