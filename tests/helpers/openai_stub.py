"""A loopback OpenAI-compatible chat server for LM transport tests and the throughput benchmark: it
answers every chat completion `delay` seconds after its request line arrived (reading the request and
making the reply included: a served model's latency is what its client waits, HTTP handling and all) with a
fixed reply (or `reply(messages)` when it is callable), with TCP_NODELAY and HTTP/1.1 keep-alive, and
records the requests it received (path, headers, body parsed as JSON). `status` other than 200 answers
every request with that HTTP status and an OpenAI-style error body whose message is the reply."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class OpenAIStub:
    def __init__(
        self,
        reply: str | Callable[[list[dict]], str] = "[[ ## completed ## ]]",
        delay: float = 0.0,
        port: int = 0,
        status: int = 200,
    ):
        self.reply = reply
        self.status = status
        self.delay = delay
        self.requests: list[dict] = []
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as LM servers (llama.cpp, vLLM, Ollama) and their clients do

            def setup(self):
                super().setup()
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

            def log_message(self, *args):  # quiet
                pass

            def parse_request(self):  # the request line has just been read: the latency starts here
                self.arrived = time.monotonic()
                return super().parse_request()

            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length).decode("utf-8", "replace") or "{}")
                stub.requests.append({"path": self.path, "headers": dict(self.headers), "body": body})
                text = stub.reply(body.get("messages") or []) if callable(stub.reply) else stub.reply
                if stub.status != 200:
                    reply = {"error": {"message": text, "code": stub.status}}
                else:
                    reply = {
                        "id": "stub",
                        "object": "chat.completion",
                        "created": int(time.time()),
                        "model": body.get("model") or "stub",
                        "choices": [
                            {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}
                        ],
                        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
                    }
                payload = json.dumps(reply).encode()
                time.sleep(max(0.0, stub.delay - (time.monotonic() - self.arrived)))  # a fixed latency, all included
                try:
                    self.send_response(stub.status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except OSError:  # the client gave up (timeout)
                    pass

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.api_base = f"http://127.0.0.1:{self.port}/v1"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> OpenAIStub:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
