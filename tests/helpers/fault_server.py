"""A loopback SPARQL server that answers wrongly on purpose, for the endpoint's deadline and malformed-answer
tests and the attack suite: the request path names the fault (`/trickle`, `/retry-<Retry-After value>`,
`/incomplete`, `/badjson`, `/html`, `/boolean`, `/shape`, `/nested` (a term value that is an object),
`/oddboolean`, `/deep` (JSON nested 100,000 levels), `/outage` (HTTP 500 with a 5 MB HTML page), `/bightml` (200
with a 5 MB HTML page)); every path asked is recorded in `server.requests`."""

from __future__ import annotations

import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class FaultyHandler(BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.server.requests.append(self.path)
        mode = self.path.strip("/")
        if mode == "trickle":
            self.send_response(200)
            self.send_header("Content-Type", "application/sparql-results+json")
            self.end_headers()
            try:
                for ch in '{"head":{},"boolean":true}' + " " * 40:
                    self.wfile.write(ch.encode())
                    self.wfile.flush()
                    time.sleep(0.5)
            except OSError:
                pass
            return
        if mode.startswith("retry-"):
            self.send_response(503)
            self.send_header("Retry-After", urllib.parse.unquote(mode[len("retry-") :]))
            self.end_headers()
            return
        bodies = {
            "badjson": ("application/sparql-results+json", b'{"head": {"vars": ["x"]}, "results": oops'),
            "html": ("text/html", b"<html><body>Maintenance</body></html>"),
            "boolean": ("application/sparql-results+json", b'{"head": {}, "boolean": true}'),
            "shape": ("application/sparql-results+json", b'{"head": {}}'),
            "nested": (
                "application/sparql-results+json",
                b'{"head": {"vars": ["x"]}, "results": {"bindings": [{"x": {"type": "literal", "value": {"a": 1}}}]}}',
            ),
            "oddboolean": ("application/sparql-results+json", b'{"head": {}, "boolean": {"a": 1}}'),
        }
        big_page = (
            b"<html><body><h1>Internal Server Error</h1>" + b"<p>maintenance</p>" * (5 * 2**20 // 18) + b"</html>"
        )
        if mode in ("outage", "bightml"):
            self.send_response(500 if mode == "outage" else 200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(big_page)))
            self.end_headers()
            try:
                self.wfile.write(big_page)
            except OSError:  # the client read what it needed and closed
                pass
            return
        if mode == "deep":
            depth = 100_000
            body = b'{"head": {"vars": ["x"]}, "results": {"bindings": ' + b"[" * depth + b"]" * depth + b"}}"
            bodies["deep"] = ("application/sparql-results+json", body)
        if mode == "incomplete":
            self.send_response(200)
            self.send_header("Content-Type", "application/sparql-results+json")
            self.send_header("Content-Length", "1000")
            self.end_headers()
            self.wfile.write(b'{"head": {"vars": ["x"]}')
            self.wfile.flush()
            self.connection.shutdown(2)
            return
        content_type, body = bodies[mode]
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def start_fault_server() -> ThreadingHTTPServer:
    """The fault server on a free loopback port, serving in a daemon thread; `.shutdown()` stops it."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), FaultyHandler)
    server.requests = []
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server
