"""Controller and answer-type demonstrations from gold-teacher records (`gold_teacher.gold_traces`): one
`dspy.Example` a step with the controller's exact fields, and a program's demos set from them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import dspy

from saga_dspy.agent.demos import DEMO_STEPS, controller_example, state_before
from saga_dspy.agent.program import SagaProgram
from saga_dspy.agent.trajectory import Step


def step_example(record: dict[str, Any], index: int, *, spinach: bool = False) -> dspy.Example:
    """The controller demo for step `index` of a record: the trajectory before it as input, the
    step's thought / tool / arguments as output (rendered as `saga_dspy.agent.demos` renders pools)."""
    raw = record["steps"]
    if not -len(raw) <= index < len(raw):
        raise IndexError(f"record has {len(raw)} steps, no step {index}")
    index %= len(raw)
    steps = [
        Step(
            str(s.get("thought") or ""),
            str(s["tool_name"]),
            dict(s.get("tool_args") or {}),
            str(s.get("observation") or ""),
        )
        for s in raw
    ]
    seen = state_before(record, index)  # the context in force at this step (stored only where it changed)
    shown = steps[:index][-DEMO_STEPS:]
    form = str(record.get("query_form") or "SELECT").upper()
    return controller_example(
        record["question"],
        shown,
        index - len(shown),
        steps[index],
        spinach=spinach,
        answer_type=str(record.get("answer_type") or "unknown"),
        form=form,
        type_context=seen["type_context"],
        knowledge_log=seen["knowledge_log"],
    )


STEP_CHOICES = ("execute", "last", "all")


def trace_examples(record: dict[str, Any], which: str = "execute", *, spinach: bool = False) -> list[dspy.Example]:
    """Controller demos of one record: the step that writes and executes the query ('execute'),
    the final stop ('last'), or every step ('all')."""
    steps = record.get("steps") or []
    if which == "all":
        indices = list(range(len(steps)))
    elif which == "last":
        indices = [len(steps) - 1]
    elif which == "execute":
        found = [i for i, s in enumerate(steps) if s.get("tool_name") == "execute_sparql"]
        indices = found[-1:] or [len(steps) - 1]
    else:
        raise ValueError(f"which must be one of {STEP_CHOICES}")
    return [step_example(record, i, spinach=spinach) for i in indices]


def answer_type_example(record: dict[str, Any]) -> dspy.Example | None:
    label = record.get("answer_type_label")
    if not label or (label == "entity" and not record.get("answer_type_qid")):
        return None
    return dspy.Example(
        question=record["question"], answer_type_label=label, answer_type_qid=record.get("answer_type_qid") or ""
    ).with_inputs("question")


def pick_records(records: Sequence[dict[str, Any]], k: int) -> list[dict[str, Any]]:
    """k records that cover the query forms (ASK / COUNT / SELECT) and keep prompts short:
    round-robin over forms, shortest trajectories first."""
    by_form: dict[str, list[dict[str, Any]]] = {}
    for rec in sorted(
        records, key=lambda r: (sum(len(str(s.get("observation", ""))) for s in r.get("steps", [])), str(r.get("id")))
    ):
        by_form.setdefault(str(rec.get("query_form") or "SELECT"), []).append(rec)
    order = [f for f in ("SELECT", "ASK", "COUNT") if f in by_form] + [
        f for f in by_form if f not in ("SELECT", "ASK", "COUNT")
    ]
    picked: list[dict[str, Any]] = []
    while len(picked) < k and any(by_form.values()):
        for form in order:
            if by_form.get(form) and len(picked) < k:
                picked.append(by_form[form].pop(0))
    return picked


def controller_predictor(program: SagaProgram) -> dspy.Predict:
    """The predictor that chooses the next tool (outputs next_tool_name)."""
    for _name, predictor in program.named_predictors():
        if "next_tool_name" in predictor.signature.output_fields:
            return predictor
    raise ValueError("the program has no controller predictor (no next_tool_name output)")


def apply_gold_demos(
    program: SagaProgram, records: Sequence[dict[str, Any]], *, which: str = "execute", answer_types: bool = True
) -> SagaProgram:
    """Set the controller's demos (and the answer-type step's) from gold-teacher records."""
    spinach = not program.variant_def.agent.schema_controller
    demos: list[dspy.Example] = []
    for rec in records:
        demos.extend(trace_examples(rec, which, spinach=spinach))
    controller_predictor(program).demos = demos
    if answer_types and hasattr(program, "answer_type") and not spinach:
        program.answer_type.demos = [ex for ex in (answer_type_example(r) for r in records) if ex is not None]
    return program


__all__ = [
    "STEP_CHOICES",
    "answer_type_example",
    "apply_gold_demos",
    "controller_predictor",
    "pick_records",
    "step_example",
    "trace_examples",
]
