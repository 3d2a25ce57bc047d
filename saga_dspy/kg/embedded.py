"""The bundled store in killable worker processes: pyoxigraph cannot cancel a query, so each runs in a
`kg.oxigraph_worker` child that is killed at its deadline and replaced."""

from __future__ import annotations

import os
import pickle
import queue
import select
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ..config import Settings
from .base import Endpoint, too_large
from .errors import (
    EndpointUnavailable,
    QuerySyntaxError,
    QueryTimeout,
    QueryTooCostly,
    SparqlError,
)
from .results import AskResult, Binding, QueryResult, SelectResult
from .store import ensure_store


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

    def _run(self, sparql: str, form: str, timeout: float, row_cap: int) -> QueryResult:
        if self._closed:
            raise EndpointUnavailable("endpoint is closed")
        worker = self._checkout()
        healthy = False
        try:
            message = worker.request((sparql, row_cap, self.prefixes, self.settings.max_result_bytes), timeout)
            healthy = True
        except _Deadline:
            raise QueryTimeout(f"query timed out after {timeout:g}s") from None
        except (EOFError, OSError, ValueError, pickle.UnpicklingError):
            if self._closed:
                raise EndpointUnavailable("endpoint was closed while the query ran") from None
            raise self._death_note(worker) from None
        finally:
            if healthy:
                self._idle.put(worker)
            else:
                self._retire(worker)
                self._idle.put(None)  # replaced at the next checkout
        return _decode(message, self.settings)

    def _death_note(self, worker: _Worker) -> SparqlError:
        """Why a worker died under a query: the query's own cost (memory, CPU limit), or the worker's failure."""
        status = worker.exit_status()
        memory, cpu = self.settings.worker_memory_mb, self.settings.worker_cpu_seconds
        if status in (-signal.SIGABRT, -signal.SIGSEGV, -signal.SIGBUS) and memory:
            return QueryTooCostly(
                f"the query ran out of memory: the embedded store worker is limited to {memory} MB "
                "(worker_memory_mb) and was stopped; narrow the query"
            )
        if status == -signal.SIGXCPU:
            return QueryTooCostly(
                f"the query used more than {cpu:g} s of CPU (worker_cpu_seconds) and was stopped; narrow the query"
            )
        how = f"signal {signal.Signals(-status).name}" if status and status < 0 else f"exit status {status}"
        return EndpointUnavailable(
            f"the embedded store worker stopped while answering ({how}); it is replaced for the next query"
        )

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
    if kind == "too_large":
        raise too_large(message[2], message[1], settings.max_result_bytes)
    if kind == "syntax":
        raise QuerySyntaxError(f"syntax error: {message[1]}")
    if kind == "memory":
        raise QueryTooCostly(
            f"the query ran out of memory: the embedded store worker is limited to "
            f"{settings.worker_memory_mb} MB (worker_memory_mb); narrow the query"
        )
    raise SparqlError(message[1])
