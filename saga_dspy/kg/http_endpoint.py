"""Any SPARQL 1.1 protocol server (query.wikidata.org, QLever, Virtuoso, an Oxigraph server) over HTTP."""

from __future__ import annotations

import email.utils
import http.client
import math
import re
import time
import urllib.error
import urllib.parse
import urllib.request
import warnings
from email.message import Message

import pyoxigraph
from SPARQLWrapper import JSON, POST, URLENCODED, SPARQLWrapper

from ..config import Settings, header_value_problem
from .base import Endpoint, result_bytes, size_text, too_large
from .errors import (
    EndpointUnavailable,
    MalformedResponse,
    QueryRefused,
    QuerySyntaxError,
    QueryTimeout,
    QueryTooCostly,
)
from .oxigraph_worker import term_tuple
from .prefixes import missing_prefixes
from .results import Binding, QueryResult, SelectResult, load_json, parse_sparql_json
from .sparql_parse import SparqlParse, with_declarations

WDQS_HOSTS = {"query.wikidata.org"}
MAX_RESPONSE_BYTES = 64 * 1024 * 1024
MAX_ERROR_BYTES = 64 * 1024  # of an error page: its message is all that is shown
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

    def _run(self, sparql: str, form: str, timeout: float, row_cap: int) -> QueryResult:
        deadline = time.monotonic() + timeout
        attempts = max(1, self.settings.http_retries)
        delay = 1.0
        for attempt in range(1, attempts + 1):
            try:
                return self._once(sparql, form, deadline, row_cap)
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

    def _once(self, sparql: str, form: str, deadline: float, row_cap: int) -> QueryResult:
        """The reply judged by what happened, in order: its HTTP status, its content type, whether it parses (with
        a depth bound), and only then its size (the agent's to narrow)."""
        status, content_type, body, headers = self._post(sparql, form, deadline)
        if status == 200:
            result = _cap(_parse_body(self.url, content_type, body), row_cap)
            size = result_bytes(result)
            if isinstance(result, SelectResult) and size > self.settings.max_result_bytes:
                raise too_large(size, len(result.rows), self.settings.max_result_bytes)
            return result
        message = _clip_body(body, content_type)
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

    def _post(self, sparql: str, form: str, deadline: float) -> tuple[int, str, bytes, Message]:
        """(status, content type, body, headers) of one POST of `sparql` as `query=`, read within the deadline."""
        started = time.monotonic()
        if deadline - started <= 0:
            raise QueryTimeout("query timed out before it could be sent")
        if problem := header_value_problem(self.settings.user_agent):  # settings built without validation
            raise EndpointUnavailable(f"{self.url}: the user_agent setting {problem}")
        client = SparqlClient(self.url, sparql, form, self.settings.user_agent, opener_for(self.url))
        try:
            try:
                response = client.send(deadline - started)
            except urllib.error.HTTPError as error:  # a status other than 2xx: its headers and the start of its message
                try:
                    body = _read(error, deadline, MAX_ERROR_BYTES, clip=True)
                finally:
                    error.close()
                return error.code, error.headers.get("Content-Type", ""), body, error.headers
            try:
                content_type = response.headers.get("Content-Type", "")
                if not _holds_results(content_type):  # a page, not results: its start says what it is
                    body = _read(response, deadline, MAX_ERROR_BYTES, clip=True)
                    return response.status, content_type, body, response.headers
                limit = max(MAX_RESPONSE_BYTES, 4 * self.settings.max_result_bytes)
                body = _read(response, deadline, limit)
                if response.length:  # the server closed before Content-Length bytes came
                    raise http.client.IncompleteRead(body, response.length)
                return response.status, content_type, body, response.headers
            finally:
                response.close()
        except (TimeoutError, _Deadline):
            raise QueryTimeout(f"query timed out after {time.monotonic() - started:.1f}s") from None
        except http.client.IncompleteRead as exc:
            raise MalformedResponse(f"{self.url}: the response was cut off after {len(exc.partial)} bytes") from None
        except urllib.error.URLError as exc:
            if isinstance(exc.reason, TimeoutError):
                raise QueryTimeout(f"query timed out after {time.monotonic() - started:.1f}s") from None
            raise _Retryable(f"connection failed: {exc.reason}") from None
        except (http.client.HTTPException, ConnectionError) as exc:
            raise _Retryable(f"connection failed: {type(exc).__name__}: {exc}") from None
        except OSError as exc:
            raise _Retryable(f"connection failed: {exc}") from None


class SparqlClient(SPARQLWrapper):
    """SPARQLWrapper's request for one checked query: POST, URL-encoded `query=` of exactly the checked text, the
    guard's query form (never SPARQLWrapper's own regex reading, which could send an `update=`), content
    negotiation only (no extra format parameters), our Accept and User-Agent; sent through `opener`."""

    def __init__(self, url: str, text: str, form: str, agent: str, opener: urllib.request.OpenerDirector):
        super().__init__(url, agent=agent)
        self.setMethod(POST)
        self.setRequestMethod(URLENCODED)
        self.setOnlyConneg(True)
        self.setReturnFormat(JSON)
        self.addCustomHttpHeader("Accept", ACCEPT)
        with warnings.catch_warnings():  # it warns on forms its regex does not know; the guard knows the form
            warnings.simplefilter("ignore")
            self.setQuery(text)
        self.queryType = form
        self.opener = opener

    def send(self, timeout: float) -> http.client.HTTPResponse:
        """The open response (2xx), or urllib's HTTPError for any other status."""
        if self.isSparqlUpdateRequest():
            raise QueryRefused("refused: only queries are sent")
        return self.opener.open(self._createRequest(), timeout=timeout)  # its request, our opener and deadline


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """A redirect is an answer, not a new request: a POST turned into a GET would lose its query."""

    def redirect_request(self, *args, **kwargs):
        return None


def opener_for(url: str) -> urllib.request.OpenerDirector:
    """urllib's opener for `url` with `proxy_for`'s choice (loopback always direct) and no redirects; urllib
    tunnels HTTPS through the proxy with CONNECT and sends a `user:password@` in the proxy URL as
    Proxy-Authorization."""
    proxy = proxy_for(url)
    if proxy is not None:
        via = urllib.parse.urlsplit(proxy)
        if via.scheme != "http" or not via.hostname:
            raise EndpointUnavailable(
                f"proxy {proxy.split('@')[-1]!r} for {url}: only http:// proxy URLs are supported"
            )
    scheme = urllib.parse.urlsplit(url).scheme
    return urllib.request.build_opener(urllib.request.ProxyHandler({scheme: proxy} if proxy else {}), _NoRedirects())


def _read(response, deadline: float, limit: int, *, clip: bool = False) -> bytes:
    """The body, each read given only the time left (a trickled body cannot outlive the deadline), at most
    `limit` bytes: more is the query's own cost, or with `clip` (an error page) simply not read."""
    sock = getattr(getattr(getattr(response, "fp", None), "raw", None), "_sock", None)
    chunks: list[bytes] = []
    size = 0
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise _Deadline()
        if sock is not None:
            sock.settimeout(remaining)
        chunk = response.read1(65536) if hasattr(response, "read1") else response.read(65536)
        if not chunk:
            return b"".join(chunks)
        size += len(chunk)
        if size > limit and clip:
            chunks.append(chunk)
            return b"".join(chunks)[:limit]
        if size > limit:
            raise QueryTooCostly(
                "result too large: add LIMIT (or select fewer or shorter values): the response passed "
                + size_text(size)
            )
        chunks.append(chunk)


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


def _media_type(content_type: str) -> str:
    return content_type.split(";", 1)[0].strip().lower()


def _holds_results(content_type: str) -> bool:
    """Whether a reply of this content type may hold results (read up to the result cap): not a page (HTML, XML)."""
    return not _media_type(content_type).endswith(("html", "xml"))


def _parse_body(url: str, content_type: str, body: bytes) -> QueryResult:
    kind = _media_type(content_type)
    if "html" in kind:
        raise MalformedResponse(f"{url}: answered with an HTML page ({kind}), not SPARQL results")
    if not _holds_results(content_type):
        raise MalformedResponse(f"{url}: answered with {kind}, not SPARQL-JSON results")
    if kind in ("application/n-triples", "text/plain") and not body.lstrip().startswith((b"{", b"[")):
        return _triples(url, body)
    try:
        payload = load_json(body)
    except ValueError as exc:
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


class _Deadline(Exception):
    pass


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


_TAG = re.compile(r"<[^<>]*>")


def _clip_body(body: bytes, content_type: str = "") -> str:
    """The start of an error message on one line (an HTML page's text without its tags)."""
    text = body[:MAX_ERROR_BYTES].decode("utf-8", "replace")
    if "html" in _media_type(content_type):
        text = _TAG.sub(" ", text)
    return " ".join(text.split())[:400]
