"""Process helpers for tests that start servers and workers: is a pid alive, its children, wait for HTTP."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is dead for our purpose
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def children(pid: int) -> list[int]:
    return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


def wait_for_http(url: str, proc: subprocess.Popen, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            urllib.request.urlopen(url, timeout=1)
            return
        except OSError as exc:
            if getattr(exc, "code", None):  # an HTTP answer of any status: it is up
                return
            time.sleep(0.2)
    raise AssertionError(f"{url} did not come up")


def start_kg_serve(port: int, cache_dir) -> subprocess.Popen:
    """`python -m saga_dspy.kg serve` on 127.0.0.1:`port` in its own session (kill it with `os.killpg`), up."""
    serve = subprocess.Popen(
        [sys.executable, "-m", "saga_dspy.kg", "serve", "--port", str(port), "--cache-dir", str(cache_dir)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        wait_for_http(f"http://127.0.0.1:{port}/", serve)
    except AssertionError:
        os.killpg(serve.pid, 9)
        raise
    return serve
