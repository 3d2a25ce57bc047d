"""What every attack module of `benchmarks/attack_suite.py` shares: the tally, deadlines, a recording server,
fresh interpreters under a memory limit, and settings on a given cache directory."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from saga_dspy.config import Settings

CROSS_JOIN = "SELECT (COUNT(*) AS ?n) WHERE { ?a ?b ?c . ?d ?e ?f . ?g ?h ?i }"
RESULTS: dict[str, list[bool]] = {}


def record(cls: str, held: bool) -> None:
    RESULTS.setdefault(cls, []).append(bool(held))


def bounded(fn, seconds: float):
    """fn() in a thread: (finished, value or exception)."""
    box: list = []

    def run():
        try:
            box.append(("ok", fn()))
        except BaseException as exc:  # noqa: BLE001 - the attack's outcome
            box.append(("error", exc))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    return (bool(box), box[0] if box else None)


class Recorder(BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.server.hits += 1
        body = b'{"head":{"vars":["a"]},"results":{"bindings":[{"a":{"type":"literal","value":"leak"}}]}}'
        self.send_response(200)
        self.send_header("Content-Type", "application/sparql-results+json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST

    def log_message(self, *a):
        pass


def serve(handler) -> ThreadingHTTPServer:
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.hits = 0
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def python(code: str, timeout: float, memory_mb: int = 2048, env: dict | None = None):
    """`code` in a fresh interpreter of this checkout under an address-space limit: (finished, rc, output)."""
    import resource

    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (memory_mb * 2**20, memory_mb * 2**20))

    try:
        out = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            timeout=timeout,
            preexec_fn=limit,
            env={**os.environ, "PYTHONPATH": os.getcwd(), **(env or {})},
        )
    except subprocess.TimeoutExpired:
        return False, None, ""
    return True, out.returncode, out.stdout + out.stderr


def settings(cache_dir: Path, **kw) -> Settings:
    base = {"cache_dir": cache_dir, "result_cache": False, "query_timeout": 20.0}
    base.update(kw)
    return Settings(**base)
