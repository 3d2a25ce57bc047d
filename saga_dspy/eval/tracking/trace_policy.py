"""What a question's DSPy trace records, and which questions are traced (`--trace all|sample|none`).

`mlflow.dspy.autolog()` records every module, adapter and LM call with its whole inputs: the
`Episode` given to `SagaReAct.forward` (settings, program, tools, context) and the demos and
trajectory of every step, four times per LM call (Predict inputs, ChatAdapter.format inputs and
outputs, the LM's messages) — ~475 KB a question, serialised inside the eval threads.
`BoundedCallback` is that callback with:

* no ChatAdapter.format / .parse spans (the LM span holds the same prompt and reply; `_budget`'s
  measuring format calls no longer show up either), and no span for a Predict inside a traced call (its
  LM span and the tool span of the action it chose say the same): 6 spans a typical question, not 10;
* inputs and outputs as small plain values (`agent.tool_spans.small_value`): strings clipped, demos
  counted, the LM prompt as its system message, a count of the demonstration messages and the
  last message, each clipped;
* a budget per trace: once a question's spans have recorded `TRACE_BUDGET` characters, later
  spans record only a few hundred characters each;
* sampling: with `every = N` only every N-th question (root call) is traced; the others record
  no span at all;
* inputs without the program's machinery (the test firewall's guard, callbacks: objects that have no
  `trace_summary`), not shown as `<Type>`;
* the question's outputs (the root span's) open on its answers, as their values, and its final SPARQL whole,
  each up to `FINAL_CHARS` whatever the budget (the trace list's Output preview shows them first), then the rest
  of its prediction without empty values.
"""

from __future__ import annotations

import contextvars
import json
import threading
from typing import Any

import dspy
import mlflow
from mlflow.dspy.callback import MlflowCallback

from saga_dspy.agent.tool_spans import clip, small_value
from saga_dspy.eval.tracking.mlflow_values import FINAL_CHARS, answer_text

TRACE_MODES = ("all", "sample", "none")
SAMPLE_EVERY = 10  # --trace sample: the 1st, 11th, 21st ... question
TRACE_BUDGET = 25_000  # characters of inputs/outputs a question's trace records before it goes terse
INPUT_CHARS = 1200  # one input value of a module span
OUTPUT_CHARS = 1500
SYSTEM_CHARS = 1200  # the LM prompt's system message
LAST_MESSAGE_CHARS = 5000  # the LM prompt's last (per-step) message
TERSE_CHARS = 100  # any value once the trace's budget is spent

_UNTRACED = contextvars.ContextVar("saga_untraced_question", default=False)


def every_for(mode: str) -> int | None:
    """Questions per traced question for a `--trace` mode (None: no tracing)."""
    if mode not in TRACE_MODES:
        raise ValueError(f"--trace must be one of {', '.join(TRACE_MODES)}")
    return {"all": 1, "sample": SAMPLE_EVERY, "none": None}[mode]


def _messages(messages: list, terse: bool) -> list:
    """An LM prompt: the system message, a count of the demonstration messages, the last message."""
    if not isinstance(messages, list) or not messages:
        return small_value(messages, TERSE_CHARS if terse else INPUT_CHARS)
    first, middle, last = messages[0], messages[1:-1], messages[-1]
    out = []

    def one(msg: Any, limit: int) -> Any:
        if isinstance(msg, dict):
            return {"role": msg.get("role"), "content": clip(str(msg.get("content") or ""), limit)}
        return small_value(msg, limit)

    if len(messages) > 1:
        out.append(one(first, TERSE_CHARS if terse else SYSTEM_CHARS))
    if middle:
        chars = sum(len(str(m.get("content") if isinstance(m, dict) else m)) for m in middle)
        out.append({"role": "demonstrations", "content": f"({len(middle)} demonstration messages, {chars} chars)"})
    out.append(one(last, TERSE_CHARS if terse else LAST_MESSAGE_CHARS))
    return out


def bounded_inputs(inputs: dict[str, Any], terse: bool = False) -> dict[str, Any]:
    """A span's inputs as small plain values; an input that is the program's own machinery (an object with no
    `trace_summary`: the test firewall's guard, a callback, the settings) is left out, not shown as `<Type>`."""
    limit = TERSE_CHARS if terse else INPUT_CHARS
    out: dict[str, Any] = {}
    for key, value in inputs.items():
        if key == "messages":
            out[key] = _messages(value, terse)
        elif key == "demos" and isinstance(value, list):
            out[key] = f"{len(value)} demos"
        elif value is not None:
            small = small_value(value, limit)
            if not _internal(value, small):
                out[key] = small
    return out


def _internal(value: Any, small: Any) -> bool:
    """`small_value` could only name the object's type: nothing a reader of the trace can use."""
    return not isinstance(value, str) and small == f"<{type(value).__name__}>"


class BoundedCallback(MlflowCallback):
    """mlflow.dspy's tracing callback with bounded span contents and question sampling."""

    def __init__(self, every: int = 1):
        super().__init__()
        self.every = max(1, int(every))
        self._lock = threading.Lock()
        self._roots = 0
        self._used: dict[str, int] = {}  # trace id -> characters recorded
        self._skipped: dict[str, contextvars.Token] = {}  # call id of an untraced question -> its token

    # the LM span carries the same prompt and reply
    def on_adapter_format_start(self, call_id, instance, inputs):
        return None

    def on_adapter_format_end(self, call_id, outputs, exception=None):
        return None

    def on_adapter_parse_start(self, call_id, instance, inputs):
        return None

    def on_adapter_parse_end(self, call_id, outputs, exception=None):
        return None

    # a Predict inside a traced call: its LM span (prompt, reply) and the tool span (the action it chose) say
    # the same, so it records none (a Predict called on its own, as the root, still does)
    def on_module_start(self, call_id, instance, inputs):
        if isinstance(instance, dspy.Predict) and mlflow.get_current_active_span() is not None:
            return None
        return super().on_module_start(call_id, instance, inputs)

    def on_module_end(self, call_id, outputs, exception=None):
        if call_id not in self._call_id_to_module:  # a Predict that recorded no span
            return None
        return super().on_module_end(call_id, outputs, exception)

    def _take_root(self) -> bool:
        with self._lock:
            self._roots += 1
            return (self._roots - 1) % self.every == 0

    def _charge(self, trace_id: str, value: Any) -> None:
        size = len(json.dumps(value, ensure_ascii=False, default=str))
        with self._lock:
            self._used[trace_id] = self._used.get(trace_id, 0) + size

    def _terse(self, trace_id: str | None) -> bool:
        return trace_id is not None and self._used.get(trace_id, 0) >= TRACE_BUDGET

    def _start_span(self, call_id, name, span_type, inputs, attributes):
        parent = mlflow.get_current_active_span()
        if parent is None:
            if _UNTRACED.get():
                return None  # a call inside a question that sampling left out
            if not self._take_root():
                self._skipped[call_id] = _UNTRACED.set(True)
                return None
        trace_id = parent.trace_id if parent is not None else None
        small = bounded_inputs(inputs, self._terse(trace_id))
        span = super()._start_span(call_id, name, span_type, small, attributes)
        if span is not None and getattr(span, "trace_id", None):
            self._charge(span.trace_id, small)
        return span

    def _end_span(self, call_id, outputs, exception=None, attributes=None):
        token = self._skipped.pop(call_id, None)
        if token is not None:
            _UNTRACED.reset(token)
            return
        held = self._call_id_to_span.get(call_id)
        if held is None or not held.span:
            self._call_id_to_span.pop(call_id, None)
            return
        trace_id = held.span.trace_id
        small = small_value(outputs, TERSE_CHARS if self._terse(trace_id) else OUTPUT_CHARS, items=20)
        is_root = held.span.parent_id is None
        if is_root:
            small = final_outputs(outputs, small)
        self._charge(trace_id, small)
        try:
            super()._end_span(call_id, small, exception, attributes)
        finally:
            if is_root:
                with self._lock:
                    self._used.pop(trace_id, None)


FIRST_OUTPUTS = ("answers", "sparql")  # what a question's outputs open on (the UI and the trace list's preview)
LEFT_OUT_OUTPUTS = frozenset({"question"})  # already the trace's input


def final_outputs(outputs: Any, small: Any) -> Any:
    """A question's bounded outputs led by its answers, as a line of values (IRIs as their ids and labels), and
    its final SPARQL whole, each up to `FINAL_CHARS`; then the rest without empty values or the question."""
    if not isinstance(small, dict):
        return small
    get = getattr(outputs, "get", None)
    if not callable(get):
        return small
    sparql, answers, labels = get("sparql"), get("answers"), get("answer_labels")
    first: dict[str, Any] = {}
    if answers is not None:
        to_json = getattr(answers, "to_json", None)
        try:
            value = to_json() if callable(to_json) else answers
            first["answers"] = answer_text(value, FINAL_CHARS, labels if isinstance(labels, dict) else None)
        except Exception:  # boundary: the bounded stand-in stays
            first["answers"] = small.get("answers")
    else:
        first["answers"] = ""
    first["sparql"] = clip(sparql, FINAL_CHARS) if isinstance(sparql, str) else small.get("sparql", "")
    rest = {
        key: value
        for key, value in small.items()
        if key not in FIRST_OUTPUTS and key not in LEFT_OUT_OUTPUTS and value not in (None, "", [], {})
    }
    return {**first, **rest}


__all__ = [
    "FIRST_OUTPUTS",
    "SAMPLE_EVERY",
    "TRACE_BUDGET",
    "TRACE_MODES",
    "BoundedCallback",
    "bounded_inputs",
    "every_for",
    "final_outputs",
]
