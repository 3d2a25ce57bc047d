"""Bootstrapping for a per-question demo pool: the model's own successful runs on train questions become pool
records (`source: "bootstrap"`).

DSPy's BootstrapFewShot runs a teacher on the trainset under `dspy.context(trace=[])` and keeps the traces of
the runs the metric passes as the predictors' fixed demos, one step each. Here a demo is a whole solved
question picked per question, so a passing run is kept whole: its steps (thought, tool, arguments, the real
observation) and, from the same dspy trace, the type context and knowledge log the controller read before each
step. A run is kept only where the model authored its final query (`agent.authorship`: its own query or a shown
candidate it executed, not the program's fallback nor an extract call), so a demo never shows a step the model did
not take.
"""

from __future__ import annotations

import logging
import re
import time
from collections import Counter
from collections.abc import Sequence
from typing import Any

import dspy
from tqdm import tqdm

from saga_dspy.agent.authorship import author_of_line
from saga_dspy.agent.compiled_pool import BOOTSTRAP
from saga_dspy.eval.loading.evalset import EvalItem
from saga_dspy.eval.loading.firewall import QuestionGuard
from saga_dspy.eval.scoring.metrics import MetricMode
from saga_dspy.optimize.metric import example_f1

log = logging.getLogger(__name__)

LINE_KEYS = ("final_author", "final_source", "rewritten_from", "sparql", "trajectory")  # what authorship reads
BAD_NOTES = frozenset({"unparsable", "unknown-tool", "bad-args", "repeated", "rejected"})
_STEP = re.compile(r"^Step (\d+)$", re.M)


def controller_states(trace: Sequence[tuple[Any, dict, Any]]) -> dict[int, dict[str, str]]:
    """{steps before the call: the type context and knowledge log the controller read} from a dspy trace."""
    states: dict[int, dict[str, str]] = {}
    for _predictor, inputs, outputs in trace:
        keys = outputs.keys() if hasattr(outputs, "keys") else ()
        if "next_tool_name" not in keys or "type_context" not in inputs:
            continue
        numbers = [int(n) for n in _STEP.findall(str(inputs.get("trajectory") or ""))]
        states[max(numbers, default=0)] = {
            "type_context": str(inputs.get("type_context") or ""),
            "knowledge_log": str(inputs.get("knowledge_log") or ""),
        }
    return states


def trace_record(item: EvalItem, pred: Any, trace: Sequence, f1: float) -> tuple[dict[str, Any] | None, str]:
    """(a pool record of a passing run, "") or (None, why it cannot be a demo)."""
    author = author_of_line({key: pred.get(key) for key in LINE_KEYS})
    if not author.by_model:
        return None, f"final_query_by_{author.kind}"
    raw = list(pred.trajectory or [])
    if any(s.get("note") in BAD_NOTES for s in raw):
        return None, "has_a_failed_step"
    if not any(s.get("tool_name") == "execute_sparql" for s in raw):
        return None, "no_execution"
    states = controller_states(trace)
    steps = []
    for index, step in enumerate(raw):
        out = {k: step.get(k) for k in ("thought", "tool_name", "tool_args", "observation")}
        out.update(states.get(index, {}))
        steps.append(out)
    record = {
        "id": item.id,
        "question": item.question,
        "answer_type": pred.answer_type or "unknown",
        "answer_type_label": pred.answer_type_label,
        "answer_type_qid": pred.answer_type_qid,
        "query_form": pred.query_form if pred.query_form in ("ASK", "COUNT", "SELECT") else None,
        "sparql": pred.sparql,
        "steps": steps,
        "source": BOOTSTRAP,
        "f1": round(f1, 4),
        "variant": pred.variant,
    }
    first = states.get(0)
    if first:  # the state before any step: the fallback of steps the trace did not cover, never a later one
        record.update(first)
    return record, ""


def bootstrap_traces(
    teacher: Any,
    items: Sequence[EvalItem],
    *,
    threshold: float,
    max_traces: int,
    mode: MetricMode = "answers",
    lm: Any = None,
    deadline: float | None = None,
    progress: bool = False,
) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """Run `teacher` on `items` (behind each question's firewall) until `max_traces` runs pass `threshold`;
    returns (their records, counts of what happened to the others)."""
    records: list[dict[str, Any]] = []
    counts: Counter[str] = Counter()
    bar = tqdm(items, desc="bootstrap", unit="q", disable=not progress)
    for item in bar:
        if len(records) >= max_traces:
            break
        if deadline is not None and time.monotonic() > deadline:
            counts["not_run_budget"] += 1
            continue
        context = {"trace": []} if lm is None else {"trace": [], "lm": lm}
        with dspy.context(**context):
            pred = teacher(question=item.question, demo_guard=QuestionGuard(item.question, item.gold_sparql))
            trace = list(dspy.settings.trace or [])
        f1 = example_f1({"gold": item.gold, "answerable": item.answerable}, pred, mode)
        counts["run"] += 1
        if f1 < threshold:
            counts["below_threshold"] += 1
            continue
        record, why = trace_record(item, pred, trace, f1)
        if record is None:
            counts[why] += 1
            continue
        records.append(record)
        bar.set_postfix_str(f"kept={len(records)}")
    bar.close()
    counts["kept"] = len(records)
    return records, dict(sorted((k, v) for k, v in counts.items() if v))


__all__ = ["bootstrap_traces", "controller_states", "trace_record"]
