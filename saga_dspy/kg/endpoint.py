"""One endpoint interface over the bundled store (embedded) and SPARQL HTTP servers.

Every query is parsed and checked read-only (the text sent is the text checked: `kg.guard`), gets the
flavour's prefixes, has one deadline, and comes back parsed once into `SelectResult` / `AskResult` of the
form the query asked for."""

from __future__ import annotations

import base64
import email.utils
import http.client
import json
import math
import os
import pickle
import queue
import select
import signal
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from abc import ABC, abstractmethod
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pyoxigraph

from ..config import Settings
from .cache import ResultCache
from .check_memo import CheckMemo
from .errors import EndpointUnavailable, MalformedResponse, QueryRefused, QuerySyntaxError, QueryTimeout, SparqlError
from .flavours import flavour_for
from .guard import EMULATED_SERVICES, SERVICE_ALLOWLIST, check_read_only
from .label_service import rewrite_label_service
from .oxigraph_worker import term_tuple
from .prefixes import expand_dotted_names, missing_prefixes
from .results import AskResult, Binding, QueryResult, SelectResult, parse_sparql_json
from .sparql_parse import SparqlParse, hand_off, parse_sparql, with_declarations
from .store import ensure_store

WDQS_HOSTS = {"query.wikidata.org"}
RESULT_TYPES = {"SELECT": SelectResult, "CONSTRUCT": SelectResult, "DESCRIBE": SelectResult, "ASK": AskResult}


class Endpoint(ABC):
    """A SPARQL endpoint: `query(sparql) -> SelectResult | AskResult` or a SparqlError."""

    name: str
    native_label_service = False

    def __init__(self, settings: Settings):
        self.settings = settings
        self.flavour = flavour_for(settings.kg)
        self.prefixes = self.flavour.prefixes
        self.cache = ResultCache(Path(settings.cache_dir) / "results.sqlite") if settings.result_cache else None
        self.check_memo = CheckMemo()

    @property
    def cache_id(self) -> str:
        return self.name

    @property
    def service_allowlist(self) -> frozenset[str]:
        """What a query may name in SERVICE: everything WDQS serves itself, else only what is emulated."""
        return SERVICE_ALLOWLIST if self.native_label_service else EMULATED_SERVICES

    def _checked(self, sparql: str) -> tuple[str, str]:
        """(text to send, query form), remembered by the exact text (`kg.check_memo`)."""
        if len(sparql) > self.settings.max_query_chars:
            return self._check(sparql)  # refused with the reason
        return self.check_memo.checked(sparql, self._check)

    def _check(self, sparql: str) -> tuple[str, str]:
        """Every text returned is the `.text` of a parse that passed the guard (`kg.guard`): a rewrite (the
        label-service emulation, Freebase's dotted names, the prefix declarations) is parsed and checked as
        it will be sent."""
        parsed = check_read_only(self._parse(sparql), self.service_allowlist, self.prefixes)
        hand_off(parsed)
        after = self.service_allowlist if self.native_label_service else frozenset()
        text = parsed.text if self.native_label_service else rewrite_label_service(parsed, self.prefixes)
        text = expand_dotted_names(text, self.prefixes)
        sent = parsed
        if text != parsed.text:
            sent = check_read_only(self._parse(text, len(text)), after, self.prefixes)
            if sent.form != parsed.form:
                raise QueryRefused("refused: rewriting the query changed its form")
        sent = check_read_only(self._finish(sent), after, self.prefixes)
        return sent.text, sent.form

    def _parse(self, text: str, max_chars: int = 0) -> SparqlParse:
        return parse_sparql(text, self.prefixes, max(max_chars, self.settings.max_query_chars))

    def _finish(self, parsed: SparqlParse) -> SparqlParse:
        """The parse of the text as this endpoint sends it."""
        return parsed

    def prepare(self, sparql: str) -> str:
        return self._checked(sparql)[0]

    def query(self, sparql: str, timeout: float | None = None) -> QueryResult:
        prepared, form = self._checked(sparql)
        row_cap = self.settings.row_cap
        cache = self.cache
        key = ResultCache.key(self.cache_id, prepared, row_cap) if cache is not None else None
        if cache is not None and key and (hit := cache.get(key)) is not None:
            return hit
        result = self._run(prepared, timeout or self.settings.query_timeout, row_cap)
        if not isinstance(result, RESULT_TYPES[form]):
            raise MalformedResponse(f"{self.name}: a {form} query was answered with a {type(result).__name__}")
        if cache is not None and key:
            cache.put(key, result)
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

    def close(self) -> None:  # noqa: B027 - a default: most endpoints hold nothing to close
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


# --- embedded: the bundled store in killable worker processes ---------------------------


class _Worker:
    """One `oxigraph_worker` child process with its pipes."""

    def __init__(self, store_path: Path, memory_mb: int, cpu_seconds: float):
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "saga_dspy.kg.oxigraph_worker",
                str(store_path),
                str(os.getpid()),
                str(memory_mb),
                str(cpu_seconds),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            # glibc reserves 64 MB of address space per malloc arena (up to 8 per core): under the worker's
            # address-space limit that reservation, not the query, would abort it
            env={**os.environ, "RUST_BACKTRACE": "0", "MALLOC_ARENA_MAX": "2"},
        )
        assert self.process.stdin is not None and self.process.stdout is not None  # both are pipes
        self.stdin, self.stdout = self.process.stdin, self.process.stdout
        self.ready = False

    def request(self, message: tuple, timeout: float) -> tuple:
        """Send one request; the answer, or _Deadline when the deadline passed."""
        deadline = time.monotonic() + timeout
        if not self.ready:  # the child greets once its store is open
            self._wait(deadline)
            pickle.load(self.stdout)
            self.ready = True
        pickle.dump(message, self.stdin)
        self.stdin.flush()
        self._wait(deadline)
        return pickle.load(self.stdout)

    def _wait(self, deadline: float) -> None:
        remaining = max(0.0, deadline - time.monotonic())
        readable, _, _ = select.select([self.stdout], [], [], remaining)
        if not readable:
            raise _Deadline()

    def exit_status(self) -> int | None:
        try:
            return self.process.wait(2)
        except subprocess.TimeoutExpired:
            return None

    def kill(self) -> None:
        try:
            self.process.kill()
            self.process.wait(5)
        except (OSError, subprocess.TimeoutExpired):
            pass
        for pipe in (self.stdin, self.stdout):
            try:
                pipe.close()
            except OSError:
                pass


class _Deadline(Exception):
    pass


class EmbeddedEndpoint(Endpoint):
    """The bundled Wikidata sample in pyoxigraph, queried in worker processes.

    pyoxigraph cannot cancel a query, so a query past its deadline is stopped by
    killing its worker; a fresh worker takes its place. Workers are started from one
    long-lived thread, because the parent-death signal follows the thread that forked."""

    def __init__(self, settings: Settings, store_path: Path | None = None):
        super().__init__(settings)
        self.store_path = Path(store_path) if store_path else ensure_store(settings)
        self.name = "embedded"
        self._idle: queue.Queue[_Worker | None] = queue.Queue()
        self._live: set[_Worker] = set()
        self._lock = threading.Lock()
        self._closed = False
        self._spawner = ThreadPoolExecutor(1, thread_name_prefix="oxigraph-spawner")
        for _ in range(max(1, settings.embedded_workers)):
            self._idle.put(self._spawn())

    @property
    def cache_id(self) -> str:
        return f"embedded:{self.store_path.name}"

    def _spawn(self) -> _Worker:
        limits = (self.settings.worker_memory_mb, self.settings.worker_cpu_seconds)
        worker = self._spawner.submit(_Worker, self.store_path, *limits).result()
        with self._lock:
            if self._closed:
                worker.kill()
                raise EndpointUnavailable("endpoint is closed")
            self._live.add(worker)
        return worker

    def _retire(self, worker: _Worker) -> None:
        worker.kill()
        with self._lock:
            self._live.discard(worker)

    def _checkout(self) -> _Worker:
        worker = self._idle.get()
        if worker is not None and worker.process.poll() is None:
            return worker
        if worker is not None:
            self._retire(worker)
        try:
            return self._spawn()
        except Exception as exc:
            self._idle.put(None)  # the slot stays, empty: the next query tries again
            if isinstance(exc, SparqlError):
                raise
            raise EndpointUnavailable(f"could not start an embedded store worker: {exc}") from None

    def _run(self, sparql: str, timeout: float, row_cap: int) -> QueryResult:
        if self._closed:
            raise EndpointUnavailable("endpoint is closed")
        worker = self._checkout()
        healthy = False
        try:
            message = worker.request((sparql, row_cap, self.prefixes), timeout)
            healthy = True
        except _Deadline:
            raise QueryTimeout(f"query timed out after {timeout:g}s") from None
        except (EOFError, OSError, ValueError, pickle.UnpicklingError):
            if self._closed:
                raise EndpointUnavailable("endpoint was closed while the query ran") from None
            raise EndpointUnavailable(self._death_note(worker)) from None
        finally:
            if healthy:
                self._idle.put(worker)
            else:
                self._retire(worker)
                self._idle.put(None)  # replaced at the next checkout
        return _decode(message, self.settings)

    def _death_note(self, worker: _Worker) -> str:
        status = worker.exit_status()
        memory, cpu = self.settings.worker_memory_mb, self.settings.worker_cpu_seconds
        if status in (-signal.SIGABRT, -signal.SIGSEGV, -signal.SIGBUS) and memory:
            return (
                f"the query ran out of memory: the embedded store worker is limited to {memory} MB "
                "(worker_memory_mb) and was stopped; narrow the query"
            )
        if status == -signal.SIGXCPU:
            return f"the query used more than {cpu:g} s of CPU (worker_cpu_seconds) and was stopped; narrow the query"
        how = f"signal {signal.Signals(-status).name}" if status and status < 0 else f"exit status {status}"
        return f"the embedded store worker stopped while answering ({how}); it is replaced for the next query"

    def close(self) -> None:
        with self._lock:
            self._closed = True
            workers = list(self._live)
            self._live.clear()
        for worker in workers:  # idle and checked-out alike
            worker.kill()
        while True:
            try:
                self._idle.get_nowait()
            except queue.Empty:
                break
        self._spawner.shutdown(wait=False)

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


def _decode(message: tuple, settings: Settings) -> QueryResult:
    kind = message[0]
    if kind == "ask":
        return AskResult(message[1])
    if kind == "select":
        _, variables, rows, capped = message
        typed = [{var: Binding(*term) for var, term in zip(variables, row) if term is not None} for row in rows]
        return SelectResult(variables, typed, capped)
    if kind == "syntax":
        raise QuerySyntaxError(f"syntax error: {message[1]}")
    if kind == "memory":
        raise EndpointUnavailable(
            f"the query ran out of memory: the embedded store worker is limited to "
            f"{settings.worker_memory_mb} MB (worker_memory_mb); narrow the query"
        )
    raise SparqlError(message[1])


# --- HTTP: any SPARQL 1.1 protocol server --------------------------------------------------

MAX_RESPONSE_BYTES = 64 * 1024 * 1024
ACCEPT = "application/sparql-results+json, application/n-triples;q=0.9"


class HttpEndpoint(Endpoint):
    """query.wikidata.org, QLever, Virtuoso, an Oxigraph server… over the SPARQL protocol.

    Always sent as `query=` (never `update=`), with one monotonic deadline across
    connecting, retries and reading the body."""

    def __init__(self, settings: Settings, url: str):
        super().__init__(settings)
        self.url = url
        self.name = url
        host = urllib.parse.urlparse(url).hostname or ""
        self.native_label_service = host in WDQS_HOSTS

    def _finish(self, parsed: SparqlParse) -> SparqlParse:
        """With declarations of the known prefixes it uses: a server's own predeclared ones may differ."""
        return with_declarations(parsed, missing_prefixes(parsed.text, self.prefixes), self.prefixes)

    def _run(self, sparql: str, timeout: float, row_cap: int) -> QueryResult:
        deadline = time.monotonic() + timeout
        attempts = max(1, self.settings.http_retries)
        delay = 1.0
        for attempt in range(1, attempts + 1):
            try:
                return self._once(sparql, deadline, row_cap)
            except _Retryable as exc:
                if attempt == attempts:
                    raise EndpointUnavailable(f"{self.url}: {exc.reason} (after {attempts} attempts)") from None
                wait = exc.retry_after if exc.retry_after is not None else delay
                remaining = deadline - time.monotonic()
                if wait >= remaining:
                    raise EndpointUnavailable(
                        f"{self.url}: {exc.reason}; retrying in {wait:.0f}s would pass the query's deadline"
                    ) from None
                time.sleep(wait)
                delay *= 2
        raise AssertionError("unreachable")

    def _once(self, sparql: str, deadline: float, row_cap: int) -> QueryResult:
        status, content_type, body, headers = self._post(sparql, deadline)
        if status == 200:
            return _cap(_parse_body(self.url, content_type, body), row_cap)
        message = _clip_body(body)
        if status == 400:
            raise QuerySyntaxError(message or "HTTP 400: the endpoint rejected the query")
        if status == 429 or status >= 500:
            if status == 500 and ("timeout" in message.lower() or "timed out" in message.lower()):
                raise QueryTimeout(message)
            raise _Retryable(
                f"HTTP {status}" + (f": {message[:200]}" if message else ""),
                retry_after_seconds(headers.get("Retry-After")),
            )
        raise EndpointUnavailable(f"{self.url}: HTTP {status}" + (f": {message[:200]}" if message else ""))

    def _post(self, sparql: str, deadline: float) -> tuple[int, str, bytes, http.client.HTTPMessage]:
        body = urllib.parse.urlencode({"query": sparql}).encode()
        headers = {
            "Content-Type": "application/x-www-form-urlencoded",
            "Accept": ACCEPT,
            "User-Agent": self.settings.user_agent,
        }
        timeout = deadline - time.monotonic()
        started = time.monotonic()
        if timeout <= 0:
            raise QueryTimeout("query timed out before it could be sent")
        conn, path = open_connection(self.url, timeout, headers)
        try:
            conn.request("POST", path, body, headers)
            _arm(conn, deadline)
            response = conn.getresponse()
            chunks, size = [], 0
            while True:
                _arm(conn, deadline)
                chunk = response.read1(65536)
                if not chunk:
                    break
                size += len(chunk)
                if size > MAX_RESPONSE_BYTES:
                    raise MalformedResponse(f"{self.url}: the response exceeds {MAX_RESPONSE_BYTES // 2**20} MB")
                chunks.append(chunk)
            if response.length:  # the server closed before Content-Length bytes came
                raise http.client.IncompleteRead(b"".join(chunks), response.length)
            return response.status, response.getheader("Content-Type", ""), b"".join(chunks), response.headers
        except (TimeoutError, _Deadline):
            raise QueryTimeout(f"query timed out after {time.monotonic() - started:.1f}s") from None
        except http.client.IncompleteRead as exc:
            raise MalformedResponse(f"{self.url}: the response was cut off after {len(exc.partial)} bytes") from None
        except (http.client.HTTPException, ConnectionError) as exc:
            raise _Retryable(f"connection failed: {type(exc).__name__}: {exc}") from None
        except OSError as exc:
            raise _Retryable(f"connection failed: {exc}") from None
        finally:
            conn.close()


LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})


def proxy_for(url: str) -> str | None:
    """The proxy URL for `url` from the environment (`HTTP_PROXY` / `HTTPS_PROXY`, `NO_PROXY`) or the
    system settings, as urllib reads them; None for a direct connection. Loopback is always direct:
    no proxy can reach this machine's own servers."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    if host in LOOPBACK_HOSTS or host.startswith("127."):
        return None
    proxy = urllib.request.getproxies().get(parts.scheme)
    if not proxy or urllib.request.proxy_bypass(host):
        return None
    return proxy if "://" in proxy else f"http://{proxy}"


def open_connection(url: str, timeout: float, headers: dict[str, str]) -> tuple[http.client.HTTPConnection, str]:
    """(an unopened connection for `url`, the request target to send). Through a proxy: HTTPS is
    tunnelled with CONNECT, plain HTTP is sent to the proxy in absolute form; a `user:password@` in the
    proxy URL becomes a Proxy-Authorization header (added to `headers` for plain HTTP)."""
    target = urllib.parse.urlsplit(url)
    host = target.hostname
    if not host:
        raise EndpointUnavailable(f"{url}: no host to connect to")
    path = (target.path or "/") + (f"?{target.query}" if target.query else "")
    https = target.scheme == "https"
    proxy = proxy_for(url)
    if proxy is None:
        connection_type = http.client.HTTPSConnection if https else http.client.HTTPConnection
        return connection_type(host, target.port, timeout=timeout), path
    via = urllib.parse.urlsplit(proxy)
    if via.scheme != "http" or not via.hostname:
        raise EndpointUnavailable(f"proxy {proxy.split('@')[-1]!r} for {url}: only http:// proxy URLs are supported")
    auth = {}
    if via.username is not None:
        user = urllib.parse.unquote(via.username) + ":" + urllib.parse.unquote(via.password or "")
        auth["Proxy-Authorization"] = "Basic " + base64.b64encode(user.encode()).decode("ascii")
    proxy_port = via.port or (443 if via.scheme == "https" else 80)
    if https:
        conn = http.client.HTTPSConnection(via.hostname, proxy_port, timeout=timeout)
        conn.set_tunnel(host, target.port or 443, headers=auth)
        return conn, path
    headers.update(auth)
    return http.client.HTTPConnection(via.hostname, proxy_port, timeout=timeout), urllib.parse.urlunsplit(
        (target.scheme, target.netloc, target.path or "/", target.query, "")
    )


def _arm(conn: http.client.HTTPConnection, deadline: float) -> None:
    """Give the socket only the time left: a trickled body cannot outlive the deadline."""
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise _Deadline()
    if conn.sock is not None:
        conn.sock.settimeout(remaining)


def _parse_body(url: str, content_type: str, body: bytes) -> QueryResult:
    kind = content_type.split(";", 1)[0].strip().lower()
    if "html" in kind:
        raise MalformedResponse(f"{url}: answered with an HTML page ({kind}), not SPARQL results")
    if kind in ("application/n-triples", "text/plain") and not body.lstrip().startswith((b"{", b"[")):
        return _triples(url, body)
    try:
        payload = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        tail = body[-300:].decode("utf-8", "replace").lower()
        if any(word in tail for word in ("cancelled", "canceled", "timeout", "timed out")):
            # Oxigraph streams results: its own timeout mid-stream leaves an unfinished
            # JSON body and a note behind a 200 status.
            raise QueryTimeout(f"the endpoint cut the result off: {_clip_body(body[-200:])}") from None
        raise MalformedResponse(f"{url}: the response is not valid SPARQL-JSON ({exc})") from None
    try:
        return parse_sparql_json(payload)
    except ValueError as exc:
        raise MalformedResponse(f"{url}: the response is not valid SPARQL-JSON ({exc})") from None


def _triples(url: str, body: bytes) -> SelectResult:
    """A CONSTRUCT / DESCRIBE answer as subject/predicate/object rows."""
    try:
        triples = list(pyoxigraph.parse(body, format=pyoxigraph.RdfFormat.N_TRIPLES))
    except (SyntaxError, ValueError) as exc:
        raise MalformedResponse(f"{url}: the response is not valid N-Triples ({exc})") from None
    rows = [
        {
            v: Binding(*term_tuple(t))
            for v, t in zip(("subject", "predicate", "object"), (q.subject, q.predicate, q.object))
        }
        for q in triples
    ]
    return SelectResult(["subject", "predicate", "object"], rows)


def _cap(result: QueryResult, row_cap: int) -> QueryResult:
    if isinstance(result, SelectResult) and len(result.rows) > row_cap:
        return SelectResult(result.variables, result.rows[:row_cap], True)
    return result


class _Retryable(Exception):
    def __init__(self, reason: str, retry_after: float | None = None):
        super().__init__(reason)
        self.reason = reason
        self.retry_after = retry_after


def retry_after_seconds(value: str | None, now: float | None = None) -> float | None:
    """Retry-After as seconds from now: a number of seconds or an HTTP-date; None when unusable."""
    if not value:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        if when is None:
            return None
        seconds = when.timestamp() - (time.time() if now is None else now)
    if not math.isfinite(seconds):
        return None
    return max(0.0, seconds)


def _clip_body(body: bytes) -> str:
    return " ".join(body.decode("utf-8", "replace").split())[:400]


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
