"""The compile metric: answer F1 against the frozen gold result, the figure `eval` reports
(`eval.running.predictions.score_answers`), and for GEPA the same F1 with feedback a reflection model can act on.

`make_metric`: dspy's `(example, prediction, trace=None)`; while bootstrapping (`trace` set) it says whether F1
reaches the threshold. `feedback_metric`: GEPA's five-argument metric returning `dspy.Prediction(score,
feedback)`, the feedback naming the gold answers, what the final query returned and which step went wrong.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

import dspy

from saga_dspy.eval.loading.evalset import EvalItem
from saga_dspy.eval.running.predictions import score_answers
from saga_dspy.eval.scoring.metrics import MetricMode
from saga_dspy.kg.results import AskResult, SelectResult, parse_sparql_json

Metric = Callable[..., Any]
SHOWN_ANSWERS = 5


def to_examples(items: Sequence[EvalItem]) -> list[dspy.Example]:
    return [
        dspy.Example(
            question=i.question, id=i.id, gold=i.gold, gold_sparql=i.gold_sparql, answerable=i.answerable
        ).with_inputs("question")
        for i in items
    ]


def _get(obj: Any, key: str) -> Any:
    return obj.get(key) if isinstance(obj, dict) else getattr(obj, key, None)


def example_f1(example: Any, pred: Any, mode: MetricMode = "answers") -> float:
    """F1 of the prediction's answers against the example's frozen gold (0 without gold)."""
    return score_answers(_get(pred, "answers"), _get(example, "gold"), mode, _get(example, "answerable"))[0]


def make_metric(mode: MetricMode = "answers", threshold: float = 0.5) -> Metric:
    """F1 against frozen gold; with `trace` set (bootstrapping), whether F1 >= threshold."""

    def saga_f1(example, pred, trace=None, *args, **kwargs):
        f1 = example_f1(example, pred, mode)
        return f1 if trace is None else f1 >= threshold

    saga_f1.__name__ = f"saga_f1_{mode}"
    return saga_f1


def answer_values(result: Any, limit: int = SHOWN_ANSWERS) -> tuple[list[str], int]:
    """(the first `limit` values a result binds, how many in all); an ASK result is its truth value."""
    if result is None:
        return [], 0
    try:
        parsed = parse_sparql_json(json.loads(result) if isinstance(result, str) else result)
    except (TypeError, ValueError):
        return [str(result)[:200]], 1
    if isinstance(parsed, AskResult):
        return [str(parsed.value).lower()], 1
    if not isinstance(parsed, SelectResult):
        return [], 0
    values = list(dict.fromkeys(b.value for b in parsed.values()))
    return values[:limit], len(values)


def _shown(values: list[str], total: int) -> str:
    if not total:
        return "nothing"
    more = f" (+{total - len(values)} more)" if total > len(values) else ""
    return ", ".join(values) + more


def what_went_wrong(pred: Any) -> str:
    """The step of the episode that lost the answer, in one sentence."""
    steps = list(_get(pred, "trajectory") or [])
    source = _get(pred, "final_source") or ""
    status = _get(pred, "final_status") or "none"
    if _get(pred, "error"):
        return f"The program failed: {_get(pred, 'error')}."
    bad = next((i for i, s in enumerate(steps) if s.get("note") in ("unparsable", "bad-args", "unknown-tool")), None)
    executed = [i for i, s in enumerate(steps) if s.get("tool_name") == "execute_sparql"]
    if not steps:
        return "No step was taken."
    if not executed:
        where = f" step {bad + 1} could not be read ({steps[bad].get('note')});" if bad is not None else ""
        return (
            f"No query was executed:{where} the episode ended after {len(steps)} steps "
            f"(last tool {steps[-1].get('tool_name')}); the final query came from {source or 'nowhere'}."
        )
    if status == "empty":
        return f"The final query (from {source}) returned no rows: wrong entity or property in it."
    if status in ("error", "blocked"):
        return f"The final query (from {source}) failed ({status}): {_get(pred, 'final_error') or 'see its step'}."
    return (
        f"The final query (from {source}, after {len(steps)} steps) ran but its answers differ from the gold "
        "answers: check the entity, the property direction and the answer type."
    )


def feedback_text(example: Any, pred: Any, f1: float) -> str:
    """F1, the gold answers, what the final query returned, and which step went wrong."""
    gold, n_gold = answer_values(_get(example, "gold"))
    got, n_got = answer_values(_get(pred, "answers"))
    lines = [
        f"F1 {f1:.2f}.",
        f"Gold answers: {_shown(gold, n_gold)}.",
        f"The final query returned: {_shown(got, n_got)}.",
        f"Final query: {(_get(pred, 'sparql') or '(none)').strip()}",
    ]
    if f1 < 1.0:
        lines.append(what_went_wrong(pred))
    return "\n".join(lines)


def feedback_metric(mode: MetricMode = "answers") -> Metric:
    """GEPA's metric: (gold, pred, trace, pred_name, pred_trace) -> Prediction(score=F1, feedback=text)."""

    def saga_f1_feedback(gold, pred, trace=None, pred_name=None, pred_trace=None):
        f1 = example_f1(gold, pred, mode)
        return dspy.Prediction(score=f1, feedback=feedback_text(gold, pred, f1))

    return saga_f1_feedback


__all__ = [
    "Metric",
    "answer_values",
    "example_f1",
    "feedback_metric",
    "feedback_text",
    "make_metric",
    "to_examples",
    "what_went_wrong",
]
