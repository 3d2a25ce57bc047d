"""HTTP endpoints behind a proxy: HTTP(S)_PROXY and NO_PROXY are honoured, loopback is always direct.

The proxy is a real loopback server: plain-HTTP requests (absolute form) are forwarded to the real
Oxigraph server whatever host they name, and CONNECT requests are recorded and refused (no TLS here)."""

from __future__ import annotations

import http.client
import socketserver
import threading
import urllib.parse

import pytest

from saga_dspy.kg.endpoint import HttpEndpoint, proxy_for
from saga_dspy.kg.errors import EndpointUnavailable
from tests.conftest import make_settings

REMOTE = "http://sparql.example.test/query"
QUERY = "ASK { <http://www.wikidata.org/entity/Q42> ?p ?o }"


class _Proxy(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, upstream: str):
        self.upstream = urllib.parse.urlsplit(upstream)
        self.seen: list[tuple[str, dict[str, str]]] = []
        super().__init__(("127.0.0.1", 0), _ProxyHandler)


class _ProxyHandler(socketserver.StreamRequestHandler):
    def handle(self):
        request_line = self.rfile.readline().decode("latin-1").strip()
        headers = {}
        while line := self.rfile.readline().decode("latin-1").strip():
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        self.server.seen.append((request_line, headers))
        method, target, _ = request_line.split(" ", 2)
        if method == "CONNECT":
            self.wfile.write(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n")
            return
        body = self.rfile.read(int(headers.get("content-length", "0")))
        up = self.server.upstream
        conn = http.client.HTTPConnection(up.hostname, up.port, timeout=10)
        forward = {k: v for k, v in headers.items() if k not in ("host", "proxy-authorization", "connection")}
        conn.request(method, up.path, body, forward)
        response = conn.getresponse()
        payload = response.read()
        self.wfile.write(f"HTTP/1.1 {response.status} {response.reason}\r\n".encode())
        self.wfile.write(f"Content-Type: {response.getheader('Content-Type')}\r\n".encode())
        self.wfile.write(f"Content-Length: {len(payload)}\r\nConnection: close\r\n\r\n".encode() + payload)


@pytest.fixture()
def proxy(oxigraph_server):
    server = _Proxy(oxigraph_server)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def _clear_proxy_env(monkeypatch):
    for name in ("http_proxy", "https_proxy", "no_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)


def test_http_endpoints_go_through_http_proxy_with_its_credentials(proxy, monkeypatch):
    _clear_proxy_env(monkeypatch)
    monkeypatch.setenv("HTTP_PROXY", f"http://user:s%3Dcret@127.0.0.1:{proxy.server_address[1]}")
    endpoint = HttpEndpoint(make_settings(http_retries=1), REMOTE)
    assert endpoint.ask(QUERY) is True
    ((line, headers),) = proxy.seen
    assert line.startswith(f"POST {REMOTE} HTTP/1.1")  # absolute form, to the proxy
    assert headers["proxy-authorization"] == "Basic dXNlcjpzPWNyZXQ="  # user:s=cret


def test_https_endpoints_are_tunnelled_with_connect(proxy, monkeypatch):
    _clear_proxy_env(monkeypatch)
    monkeypatch.setenv("HTTPS_PROXY", f"http://u:p@127.0.0.1:{proxy.server_address[1]}")
    endpoint = HttpEndpoint(make_settings(http_retries=1), "https://sparql.example.test/sparql")
    with pytest.raises(EndpointUnavailable, match="403"):
        endpoint.ask(QUERY)
    ((line, headers),) = proxy.seen
    assert line == "CONNECT sparql.example.test:443 HTTP/1.0"
    assert headers["proxy-authorization"].startswith("Basic ")


def test_no_proxy_and_loopback_are_direct(proxy, monkeypatch, oxigraph_server):
    _clear_proxy_env(monkeypatch)
    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{proxy.server_address[1]}")
    monkeypatch.setenv("NO_PROXY", "example.test")
    assert proxy_for(REMOTE) is None
    assert proxy_for(oxigraph_server) is None  # loopback, whatever NO_PROXY says
    monkeypatch.delenv("NO_PROXY")
    assert proxy_for(REMOTE) == f"http://127.0.0.1:{proxy.server_address[1]}"
    assert HttpEndpoint(make_settings(), oxigraph_server).ask(QUERY) is True
    assert proxy.seen == []


def test_an_unsupported_proxy_scheme_is_a_clear_error_without_the_credentials(monkeypatch):
    _clear_proxy_env(monkeypatch)
    monkeypatch.setenv("HTTP_PROXY", "socks5://user:secret@proxy.example.test:1080")
    with pytest.raises(EndpointUnavailable, match="only http:// proxy") as err:
        HttpEndpoint(make_settings(http_retries=1), REMOTE).ask(QUERY)
    assert "secret" not in str(err.value)


def test_http_queries_are_sparqlwrapper_requests_of_exactly_the_checked_text(oxigraph_server, monkeypatch):
    """SPARQLWrapper builds every request (POST, URL-encoded `query=`), of the guard's form: an update never goes."""
    from SPARQLWrapper import SPARQLWrapper

    _clear_proxy_env(monkeypatch)
    built = []
    real = SPARQLWrapper._createRequest
    monkeypatch.setattr(SPARQLWrapper, "_createRequest", lambda self: built.append(real(self)) or built[-1])
    endpoint = HttpEndpoint(make_settings(http_retries=1), oxigraph_server)
    query = "# INSERT DATA { <x:a> <x:b> <x:c> } in a comment\nASK { wd:Q42 ?p ?o }"
    assert endpoint.ask(query) is True
    (request,) = built
    assert request.get_method() == "POST" and request.full_url == oxigraph_server
    assert urllib.parse.parse_qs(request.data.decode()) == {"query": [endpoint.prepare(query)]}
    assert request.get_header("User-agent") == make_settings().user_agent


@pytest.mark.parametrize("agent", ["saga\r\nX-Evil: 1", "saga \udc80", "saga ☃"])
def test_a_user_agent_that_is_no_header_value_is_a_sparql_error_even_past_the_settings(agent, monkeypatch):
    """Settings built without validation (model_copy) still never reach urllib with a header it cannot send."""
    from saga_dspy.kg.errors import SparqlError

    _clear_proxy_env(monkeypatch)
    settings = make_settings(http_retries=1).model_copy(update={"user_agent": agent})
    with pytest.raises(SparqlError, match="user_agent"):
        HttpEndpoint(settings, "http://127.0.0.1:9/sparql").ask(QUERY)
