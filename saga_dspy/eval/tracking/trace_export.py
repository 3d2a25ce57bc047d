"""Writing mlflow's in-process trace export queue to the store now (`--trace-writer inline`), and stopping its
threads without the consumer's one-second poll."""

from __future__ import annotations

import contextlib
import queue
from typing import Any


def drain_trace_queue(timeout: float = 600.0) -> Any:
    """Write every finished trace now: the span processor's batch goes to the exporter (OpenTelemetry's
    `force_flush`), then this waits until the exporter's asynchronous queue has written all of it.

    Returns that export queue; None when the exporter is not the plain queue this knows (no asynchronous
    export, a span batcher in front of it) or a wait timed out: the caller then flushes the public way."""
    from mlflow.tracing.provider import _get_span_processor

    processor = _get_span_processor()
    exporter = getattr(processor, "span_exporter", None)
    if exporter is None or getattr(exporter, "_span_batcher", None) is not None:
        return None
    export_queue = getattr(exporter, "_async_queue", None)
    pending = getattr(export_queue, "_queue", None)
    if pending is None or not hasattr(pending, "all_tasks_done"):
        return None
    if not processor.force_flush(int(timeout * 1000)):
        return None
    with pending.all_tasks_done:  # a task is done once written (mlflow's worker calls task_done after it)
        drained = pending.all_tasks_done.wait_for(lambda: pending.unfinished_tasks == 0, timeout)
    return export_queue if drained else None


class _NoTask:
    """An export task that writes nothing: it only wakes the consumer from its wait on the queue."""

    def handle(self) -> None:
        pass


_EXPORT_QUEUE_PARTS = (
    "_flush_lock",
    "_lock",
    "_is_active",
    "_stop_event",
    "_consumer_thread",
    "_queue",
    "_worker_threadpool",
)


def terminate_trace_export(export_queue: Any) -> bool:
    """Stop mlflow's trace export threads without waiting for the consumer's one-second poll.

    mlflow's terminating flush marks its queue inactive (later traces are written synchronously), sets
    the stop flag and joins the consumer, which only sees the flag after its `get(timeout=1)` returns:
    up to a second, once per evaluate call. This does the same steps and puts an empty task on the
    queue to end that wait; anything the consumer left is written here. `export_queue`: the one
    `drain_trace_queue` emptied. False when it is not the queue this knows (the caller then uses the
    public flush)."""
    if not all(hasattr(export_queue, part) for part in _EXPORT_QUEUE_PARTS):
        return False
    pending = export_queue._queue
    with export_queue._flush_lock:
        with export_queue._lock:
            if not export_queue._is_active:
                return True
            export_queue._is_active = False
            export_queue._stop_event.set()
        with contextlib.suppress(queue.Full):
            pending.put_nowait(_NoTask())
        export_queue._consumer_thread.join()
        while True:  # what the consumer did not take (the wake-up task when it had already stopped)
            try:
                task = pending.get_nowait()
            except queue.Empty:
                break
            task.handle()
            pending.task_done()
        pending.join()
        export_queue._worker_threadpool.shutdown(wait=True)
    return True


__all__ = ["drain_trace_queue", "terminate_trace_export"]
