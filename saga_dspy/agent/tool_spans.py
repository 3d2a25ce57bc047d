"""A trace span per tool call, and the small plain values spans record.

The agent's tools are plain functions (not `dspy.Tool`), so DSPy's tracing does not see them;
`tool_span` opens an MLflow span (name, arguments, a clipped observation, seconds) inside the
question's trace. It costs nothing when no trace is being recorded: mlflow is never imported
here, and without an active span (tracing off, `--trace none`, or a question left out by
`--trace sample`) the block runs bare.

`small_value` is the one rule for what a span may hold: strings clipped in the middle,
containers cut to a few items, and any other object reduced to its `trace_summary()` or its
type name — never the settings, a program or a whole episode.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

OBSERVATION_CHARS = 1500  # of a tool's observation kept in its span
FULL_TOOL_SPANS = 6  # tool spans of a trace that keep that much; later ones keep TERSE_OBSERVATION_CHARS
TERSE_OBSERVATION_CHARS = 200
ARG_CHARS = 1000  # of one tool argument (a SPARQL query, a search string)
ITEMS = 8  # items kept from a list or dict


def clip(text: str, limit: int) -> str:
    """`text` cut to `limit` characters, keeping its head and tail and saying how much is left out."""
    if len(text) <= limit:
        return text
    marker = f" …[{len(text) - limit} chars left out]… "
    keep = max(0, limit - len(marker))
    head = keep * 2 // 3
    return text[:head] + marker + text[len(text) - (keep - head) :] if keep else text[:limit]


def small_value(value: Any, limit: int = 2000, items: int = ITEMS, depth: int = 0) -> Any:
    """A JSON-ready, bounded stand-in for `value` (strings clipped, containers cut, objects summarised)."""
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, str):
        return clip(value, limit)
    summary = getattr(value, "trace_summary", None)
    if callable(summary):
        try:
            return small_value(summary(), limit, items, depth + 1)
        except Exception:  # boundary: a span records the type name instead of failing the traced call
            pass
    to_json = getattr(value, "to_json", None)  # query results: SPARQL JSON
    if callable(to_json):
        try:
            return small_value(to_json(), limit, items, depth + 1)
        except Exception:  # boundary: as above
            pass
    if depth >= 4:
        return f"<{type(value).__name__}>"
    if isinstance(value, dict):
        out = {str(k): small_value(v, limit, items, depth + 1) for k, v in list(value.items())[:items]}
        if len(value) > items:
            out["…"] = f"{len(value) - items} more keys"
        return out
    if isinstance(value, (list, tuple)):
        seq = [small_value(v, limit, items, depth + 1) for v in list(value)[:items]]
        if len(value) > items:
            seq.append(f"… {len(value) - items} more")
        return seq
    return f"<{type(value).__name__}>"


def _tracing_mlflow() -> Any:
    """The mlflow module while a span is active in this thread, else None.

    Taken from `sys.modules`, never imported: the agent layer does not depend on mlflow, and a run
    without tracking (`--no-mlflow`) must not pay mlflow's import; when a trace is being recorded,
    the tracker has imported it already."""
    mlflow = sys.modules.get("mlflow")
    if mlflow is None:
        return None
    try:
        return mlflow if mlflow.get_current_active_span() is not None else None
    except Exception:  # boundary: a tracing failure must not reach the tool call; run it untraced
        return None


_tool_spans_per_trace: dict[str, int] = {}  # trace id -> tool spans so far (the latest traces only)
_count_lock = threading.Lock()


def _nth_tool_span(trace_id: str) -> int:
    with _count_lock:
        n = _tool_spans_per_trace.pop(trace_id, 0) + 1
        _tool_spans_per_trace[trace_id] = n  # re-inserted last: the oldest entries go first
        while len(_tool_spans_per_trace) > 256:
            _tool_spans_per_trace.pop(next(iter(_tool_spans_per_trace)))
        return n


class _Recorder:
    """Where the tool's observation goes; a no-op outside a trace."""

    def __init__(self, span: Any = None, limit: int = OBSERVATION_CHARS):
        self.span = span
        self.limit = limit

    def observation(self, text: str) -> None:
        if self.span is not None:
            self.span.set_outputs(clip(text, self.limit))


@contextlib.contextmanager
def tool_span(name: str, args: dict[str, Any]) -> Iterator[_Recorder]:
    """A span `tool <name>` around one tool call, when the question is being traced."""
    mlflow = _tracing_mlflow()
    if mlflow is None:
        yield _Recorder()
        return
    started = time.monotonic()
    with mlflow.start_span(name=f"tool {name}", span_type="TOOL") as span:
        span.set_inputs({k: small_value(v, ARG_CHARS) for k, v in args.items()})
        span.set_attribute("tool", name)
        terse = _nth_tool_span(span.trace_id) > FULL_TOOL_SPANS
        recorder = _Recorder(span, TERSE_OBSERVATION_CHARS if terse else OBSERVATION_CHARS)
        try:
            yield recorder
        finally:
            span.set_attribute("seconds", round(time.monotonic() - started, 4))


__all__ = ["clip", "small_value", "tool_span"]
