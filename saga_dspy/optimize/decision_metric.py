"""The per-decision metric: did the reply make the gold choice, and for GEPA the feedback that says which one and why.

A reply's choice (`reply_choice`): for `answer-type` the class id it named (its kind for a scalar type), as the program
keeps it; for `entity` the id in a `get_wikidata_entry` action's arguments; for `candidate` the number in a `stop`
action's `{"candidate": N}`, or `NO_CANDIDATE` for any other action (the candidates left; a bare `stop` makes no
choice). It scores 1 when it is the example's `choice` or one of its `accepted`, else 0 (`make_decision_metric`:
dspy's `(example, prediction, trace=None)`, a pass while bootstrapping).
`decision_feedback_metric` is GEPA's five-argument metric: the score, and a text naming the gold choice, why it is
the gold one (the example's `why`) and what the reply did instead.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import dspy

from saga_dspy.agent.answer_type import AnswerTypeInfo
from saga_dspy.agent.decisions import ANSWER_TYPE, CANDIDATE, DECISIONS, ENTITY, LOOKUP_TOOL, NO_CANDIDATE
from saga_dspy.agent.parsing import normalize_tool_name, parse_tool_args
from saga_dspy.config import DEFAULT_KG
from saga_dspy.kg.flavours import flavour_for
from saga_dspy.tools.specs import TOOL_NAMES

Metric = Callable[..., Any]


def _get(obj: Any, key: str) -> Any:
    return obj.get(key) if isinstance(obj, dict) else getattr(obj, key, None)


def reply_action(pred: Any) -> tuple[str | None, dict[str, Any]]:
    """(the tool a controller reply names, its arguments)."""
    name = normalize_tool_name(_get(pred, "next_tool_name") or "", TOOL_NAMES)
    raw = _get(pred, "next_tool_args") or {}
    params = ["qid"] if name == LOOKUP_TOOL else ["sparql", "candidate"] if name == "stop" else []
    return name, parse_tool_args(raw, params)


def reply_choice(decision: str, pred: Any, kg: str = DEFAULT_KG) -> str | None:
    """The choice a reply makes for `decision` (see the module docstring), None when it makes none."""
    if decision == ANSWER_TYPE:
        info = AnswerTypeInfo.from_raw(_get(pred, "answer_type_label"), _get(pred, "answer_type_qid"), kg)
        return info.qid or info.label or None
    name, args = reply_action(pred)
    if decision == ENTITY and name == LOOKUP_TOOL:
        return flavour_for(kg).normalise_entity(str(args.get("qid") or ""))
    if decision == CANDIDATE and name == "stop":  # read as the stop reads it (`final_query.stop_argument`)
        text = str(args.get("candidate", args.get("sparql", ""))).strip().strip("#.")
        if text.isdigit():
            return str(int(text))
        return NO_CANDIDATE if "candidate" not in args and text else None
    if decision == CANDIDATE and name is not None:
        return NO_CANDIDATE
    return None


def choice_score(decision: str, example: Any, pred: Any, kg: str = DEFAULT_KG) -> float:
    """1.0 when the reply makes the example's gold choice (or one it accepts), else 0.0."""
    if decision not in DECISIONS:
        raise ValueError(f"unknown decision {decision!r} (one of {', '.join(DECISIONS)})")
    got = reply_choice(decision, pred, kg)
    wanted = {str(_get(example, "choice")), *(str(a) for a in (_get(example, "accepted") or ()))}
    return 1.0 if got is not None and got in wanted else 0.0


def make_decision_metric(decision: str, kg: str = DEFAULT_KG) -> Metric:
    """The decision's metric for dspy: its score; with `trace` set (bootstrapping), whether it is the gold choice."""

    def decision_choice(example, pred, trace=None, *args, **kwargs):
        score = choice_score(decision, example, pred, kg)
        return score if trace is None else score >= 1.0

    decision_choice.__name__ = f"decision_{decision.replace('-', '_')}"
    return decision_choice


def _what_it_did(decision: str, pred: Any, kg: str) -> str:
    if decision == ANSWER_TYPE:
        label, qid = _get(pred, "answer_type_label") or "", _get(pred, "answer_type_qid") or ""
        return f"The reply named the type {label!r} ({qid or 'no class id'})."
    name, args = reply_action(pred)
    if name is None:
        return f"The reply named no tool ({_get(pred, 'next_tool_name')!r})."
    return f"The reply called {name} with {args or '{}'}."


def feedback_text(decision: str, example: Any, pred: Any, score: float, kg: str = DEFAULT_KG) -> str:
    """The gold choice, why it is the gold one, and what the reply did."""
    choice, why = _get(example, "choice"), _get(example, "why")
    if score >= 1.0:
        return f"Correct: the gold choice is {choice} ({why})."
    wanted = {
        ANSWER_TYPE: f"the answer type {choice}",
        ENTITY: f'get_wikidata_entry with {{"qid": "{choice}"}}',
        CANDIDATE: "to leave the shown candidates and execute a query written for the question"
        if choice == NO_CANDIDATE
        else f'stop with {{"candidate": {choice}}}',
    }[decision]
    return f"Wrong. The gold choice is {wanted}: {why}. {_what_it_did(decision, pred, kg)}"


def decision_feedback_metric(decision: str, kg: str = DEFAULT_KG) -> Metric:
    """GEPA's metric: (gold, pred, trace, pred_name, pred_trace) -> Prediction(score, feedback)."""

    def decision_choice_feedback(gold, pred, trace=None, pred_name=None, pred_trace=None):
        score = choice_score(decision, gold, pred, kg)
        return dspy.Prediction(score=score, feedback=feedback_text(decision, gold, pred, score, kg))

    return decision_choice_feedback


__all__ = [
    "Metric",
    "choice_score",
    "decision_feedback_metric",
    "feedback_text",
    "make_decision_metric",
    "reply_action",
    "reply_choice",
]
