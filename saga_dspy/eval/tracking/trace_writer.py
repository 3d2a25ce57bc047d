"""Traces written to the store by a child process, so the evaluation's threads do not pay for it.

mlflow writes every span batch and every trace to the tracking store through SQLAlchemy (`log_spans`,
`start_trace`): ~45 ms of interpreter time a question. Its asynchronous export moves that work to other
threads of the same process, where it still holds the one interpreter lock, so at 16 threads the export
is what the run waits for. Here mlflow's exporter hands each finished trace, with its spans, to a
`TraceWriter`, whose sender thread serialises it (`Trace.to_dict`) and pipes it to a child process
(`python -m saga_dspy.eval.tracking.trace_writer`); the child writes with mlflow's own exporter (the spans of
the traces that arrived together in one `log_spans`, then each trace), so what lands in the store is what
in-process export writes. Spans are not written one by one as they end: a question cut off mid-way
leaves no partial trace.

Protocol: pickled tuples on the child's stdin — first ("uri", tracking URI) (not on the command line, where
a password in it would show), then ("trace", trace dict) and ("flush", n) — and, on its stdout, the line `n`
once everything before flush n is written. The child runs
in its own session, so Ctrl-C reaches only the parent, which flushes before it exits; the child ends at
the end of its input. A child that cannot be started or dies takes nothing with it that it had not
written: the writer keeps every message until the child confirms a later flush and writes what is
unconfirmed, and everything after, in this process instead.
"""

from __future__ import annotations

import atexit
import contextlib
import itertools
import logging
import os
import pickle
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from typing import Any, cast

log = logging.getLogger(__name__)

FLUSH_TIMEOUT = 600.0
CLOSE_TIMEOUT = 30.0

Message = tuple  # ("uri", tracking URI) | ("trace", trace) | ("flush", n)
LocalWrite = Callable[[Message], None]  # writes a message in this process (the fallback)


class TraceWriter:
    """The parent's end: a queue the span exporter puts into, a sender thread, the child, its acknowledgements.
    Only the sender thread writes (to the child, or here once the child is gone)."""

    def __init__(self, tracking_uri: str, write_locally: LocalWrite, *, command: list[str] | None = None):
        self.tracking_uri = tracking_uri
        self._write_locally = write_locally
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._unconfirmed: list[tuple[int, Message]] = []  # (flushes sent before it, message), sender's own
        self._flushes = itertools.count(1)
        self._flushes_sent = 0
        self._done = 0  # the last flush whose messages are all written
        self._cond = threading.Condition()
        self._local = False  # the child is gone: everything is written here
        self.sent = self.written_locally = 0
        env = {**os.environ, "MLFLOW_ENABLE_ASYNC_TRACE_LOGGING": "false"}  # the child writes as it reads
        try:
            self._child: subprocess.Popen | None = subprocess.Popen(
                command or [sys.executable, "-m", __name__],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                env=env,
                start_new_session=True,
            )
        except OSError as exc:
            log.warning("trace writer process could not start (%s): traces are written in this process", exc)
            self._child, self._local = None, True
        if self._child is not None:  # the store's URI on stdin, not the command line (it may hold a password)
            self._queue.put(("uri", tracking_uri))
        self._sender = threading.Thread(target=self._send_loop, name="saga-trace-sender", daemon=True)
        self._sender.start()
        if self._child is not None:
            threading.Thread(target=self._read_loop, name="saga-trace-acks", daemon=True).start()

    # -- what the exporter and the tracker call (any thread) ------------------------------------------------

    def put(self, message: Message) -> None:
        self._queue.put(message)

    def flush(self, timeout: float = FLUSH_TIMEOUT) -> bool:
        """Wait until everything put before this call is in the store; False on timeout."""
        n = next(self._flushes)
        self._queue.put(("flush", n))
        with self._cond:
            return self._cond.wait_for(lambda: self._done >= n, timeout)

    def close(self, timeout: float = CLOSE_TIMEOUT) -> None:
        """Flush, end the child (end of its input), stop the sender."""
        self.flush(timeout)
        self._queue.put(None)
        self._sender.join(timeout)
        if self._child is not None:
            with contextlib.suppress(OSError):
                if self._child.stdin is not None:
                    self._child.stdin.close()
            try:
                self._child.wait(timeout)
            except subprocess.TimeoutExpired:
                self._child.kill()

    @property
    def local(self) -> bool:
        """True once the child is gone and messages are written in this process."""
        return self._local

    # -- the sender thread ------------------------------------------------------------------------------------

    def _send_loop(self) -> None:
        while (message := self._queue.get()) is not None:
            if message[0] == "child-gone":
                self._fall_back("the trace writer process ended")
                continue
            if not self._local:
                try:
                    self._send(message)
                    continue
                except (OSError, ValueError) as exc:  # a broken pipe: the child died
                    self._fall_back(f"the trace writer process stopped ({exc})")
            self._handle_locally(message)

    def _send(self, message: Message) -> None:
        """Write one message to the child. A failed write raises before the message counts as sent, so the
        caller writes it here (a cut-off pickle is nothing the child can read)."""
        data = pickle.dumps(_serialise(message), protocol=pickle.HIGHEST_PROTOCOL)
        stdin = self._child.stdin if self._child is not None else None
        assert stdin is not None  # sent only while the child runs (its stdin a pipe)
        stdin.write(data)
        if message[0] == "flush":
            stdin.flush()
            self._flushes_sent = message[1]
        elif message[0] == "trace":
            with self._cond:
                self._unconfirmed.append((self._flushes_sent, message))
        self.sent += 1

    def _handle_locally(self, message: Message) -> None:
        if message[0] == "flush":
            self._confirm(message[1])
            return
        if message[0] != "trace":
            return
        try:
            self._write_locally(message)
            self.written_locally += 1
        except Exception as exc:  # noqa: BLE001 - as mlflow's exporter: a failed write is logged, the run goes on
            log.debug("trace write failed: %s", exc)

    def _fall_back(self, why: str) -> None:
        """Write here what the child did not confirm; everything after goes the same way."""
        if self._local:
            return
        with self._cond:
            self._local = True
            pending, self._unconfirmed = self._unconfirmed, []
        log.warning(
            "%s: its %d unconfirmed trace messages and all later ones are written in this process", why, len(pending)
        )
        for _, message in pending:
            self._handle_locally(message)
        self._confirm(self._flushes_sent)  # the flushes the child took and never answered

    def _confirm(self, n: int) -> None:
        with self._cond:
            self._done = max(self._done, n)
            self._cond.notify_all()

    # -- the acknowledgement reader ---------------------------------------------------------------------------

    def _read_loop(self) -> None:
        stdout = self._child.stdout if self._child is not None else None
        assert stdout is not None  # started only with the child (its stdout a pipe)
        for line in stdout:
            with contextlib.suppress(ValueError):
                n = int(line)
                with self._cond:
                    if self._local:
                        continue
                    self._unconfirmed = [(k, m) for k, m in self._unconfirmed if k >= n]
                self._confirm(n)
        self._queue.put(("child-gone",))  # end of output: the sender falls back (a no-op after close)


def _serialise(message: Message) -> tuple:
    return ("trace", message[1].to_dict()) if message[0] == "trace" else message


# --- mlflow's side: an exporter that hands its writes to the writer ------------------------------------------------


_live: TraceWriter | None = None  # the process's writer (one store at a time)
_live_lock = threading.Lock()
_original_factory: Callable[..., Any] | None = None  # mlflow's span processor factory while ours is installed


def writer_for(tracking_uri: str, write_locally: LocalWrite) -> TraceWriter:
    """The process's writer for this store: started once and kept for later runs (the child's start, ~3 s of
    imports, is paid once a process, like the evaluation's own), closed at exit or when another store is used."""
    global _live
    with _live_lock:
        if _live is not None and _live.tracking_uri == tracking_uri and not _live.local:
            _live._write_locally = write_locally
            return _live
        if _live is not None:
            _live.close()
        _live = TraceWriter(tracking_uri, write_locally)
        return _live


def shutdown() -> None:
    """Close the process's writer (everything written, the child ended)."""
    global _live
    with _live_lock:
        if _live is not None:
            _live.close()
        _live = None


atexit.register(shutdown)


def install(tracking_uri: str) -> TraceWriter:
    """Make mlflow's span processor for the next traces one whose exporter hands spans and traces to the
    process's TraceWriter (mlflow builds its processor lazily: this replaces the factory it calls).
    `uninstall` undoes it."""
    import mlflow.tracing.provider as provider
    from mlflow.tracing.export.mlflow_v3 import MlflowV3SpanExporter
    from mlflow.tracing.processor.mlflow_v3 import MlflowV3SpanProcessor

    class ProcessSpanExporter(MlflowV3SpanExporter):
        """mlflow's exporter, synchronous in the span's thread up to the write, which goes to the writer; what
        the child could not write as in-process export does (a workspace, prompts, attachments) stays here."""

        writer: TraceWriter

        def _should_enable_async_logging(self) -> bool:
            return False  # the child process is the asynchrony

        def _log_spans(self, experiment_id, spans, workspace=None, *args: Any, **kwargs: Any) -> None:
            if workspace or args or kwargs.get("remote_trace_ids"):  # a workspace's, or a remote trace's (mlflow 3.18)
                return super()._log_spans(experiment_id, spans, workspace, *args, **kwargs)
            # not span by span: the finished trace carries all its spans to the writer (fewer, larger writes;
            # a question cut off mid-way leaves no partial trace)

        def _log_trace(self, trace, prompts, workspace=None) -> None:
            if workspace:  # its spans went span by span (above)
                return super()._log_trace(trace, prompts, workspace)
            if prompts or any(span._attachments for span in trace.data.spans):
                return self.write_here(("trace", trace), prompts)
            self.writer.put(("trace", trace))

        def write_here(self, message: Message, prompts=()) -> None:
            trace = message[1]
            super()._log_spans(trace.info.experiment_id, trace.data.spans)
            super()._log_trace(trace, list(prompts))

    exporter = ProcessSpanExporter(tracking_uri=tracking_uri)
    writer = writer_for(tracking_uri, exporter.write_here)
    exporter.writer = writer
    global _original_factory
    original = _original_factory or provider._get_mlflow_span_processor

    def processor_factory(tracking_uri: str):
        return MlflowV3SpanProcessor(
            span_exporter=exporter, export_metrics=provider.should_export_otlp_metrics(), use_batch_processor=False
        )

    _original_factory = original
    provider._get_mlflow_span_processor = processor_factory
    provider.reset()
    return writer


def uninstall() -> None:
    """mlflow's own span processor again for the next traces."""
    import mlflow.tracing.provider as provider

    global _original_factory
    if _original_factory is not None:
        provider._get_mlflow_span_processor = _original_factory
        _original_factory = None
        provider.reset()


# --- the child ---------------------------------------------------------------------------------------------


BATCH = 256  # messages the child writes together at most


def main() -> int:
    """Read the store's URI, then messages, from stdin until its end and write them with mlflow's exporter:
    what has arrived meanwhile together (the spans of all its traces in one `log_spans` per experiment, then
    each trace)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when to stop: it closes our input
    try:
        _, uri = pickle.load(sys.stdin.buffer)
    except EOFError:
        return 0
    for name in ("mlflow.store.db.utils", "alembic"):  # as in the parent: no schema chatter on the terminal
        logging.getLogger(name).setLevel(logging.WARNING)
    from mlflow.entities import Trace
    from mlflow.tracing.export.mlflow_v3 import MlflowV3SpanExporter

    exporter = MlflowV3SpanExporter(tracking_uri=uri)
    inbox: queue.SimpleQueue = queue.SimpleQueue()
    threading.Thread(target=_read_messages, args=(sys.stdin.buffer, inbox), daemon=True).start()
    stdout = sys.stdout.buffer
    while True:
        batch = [inbox.get()]
        while len(batch) < BATCH and batch[-1] is not None:
            try:
                batch.append(inbox.get_nowait())
            except queue.Empty:
                break
        traces = [Trace.from_dict(m[1]) for m in batch if m is not None and m[0] == "trace"]
        by_experiment: dict[str | None, list] = {}
        for trace in traces:
            by_experiment.setdefault(trace.info.experiment_id, []).extend(trace.data.spans)
        for experiment_id, spans in by_experiment.items():
            exporter._log_spans(cast(str, experiment_id), spans)  # a trace sent to the store has its experiment
        for trace in traces:
            exporter._log_trace(trace, [])
        for message in batch:
            if message is None:
                return 0
            if message[0] == "flush":
                stdout.write(f"{message[1]}\n".encode())
                stdout.flush()


def _read_messages(stream, inbox: queue.SimpleQueue) -> None:
    while True:
        try:
            inbox.put(pickle.load(stream))
        except EOFError:
            inbox.put(None)
            return


if __name__ == "__main__":
    sys.exit(main())
