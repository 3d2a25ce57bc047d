"""A decision as a dspy module of its own: what a per-decision compile optimizes and what its accuracy is measured on.

`decision_module(program, name)` is the program's decision, made as the program makes it: `AnswerTypeDecision` the
answer-type call (its demos, `max_tokens`, the question's cue guarding the reply), `ControllerDecision` the
controller's turn in the decision's state (its instructions; its own demos where it has any, else the question's pool
demos; the flavour's protocol line when it is shown none: `agent.decisions.controller_prompt`). Each holds one
predictor (`predict` / `step`) for an optimizer to rewrite; the program itself is held by reference, not as a module,
so an optimizer sees that predictor alone. Every call's demos pass the example question's firewall
(`eval.firewall.QuestionGuard`): no demo of the question itself, nor of a twin of it.

`compiled_decision` turns a compiled module back into the `CompiledDecision` a program carries, and `score_decision`
gives a module's accuracy on examples (a score per example, for the paired interval against the default).
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import dspy

from saga_dspy.agent.decisions import (
    ANSWER_TYPE,
    CONTROLLER_DECISIONS,
    DECISIONS,
    CompiledDecision,
    DecisionPrompt,
    controller_prompt,
)
from saga_dspy.agent.formatting import StringFieldsAdapter
from saga_dspy.agent.program import ANSWER_TYPE_MAX_TOKENS, SagaProgram
from saga_dspy.agent.react import turn_signature
from saga_dspy.eval.loading.firewall import QuestionGuard
from saga_dspy.kg.flavours import flavour_for
from saga_dspy.optimize.decision_metric import Metric
from saga_dspy.services import SharedOnCopy
from saga_dspy.signatures import QUERY_FORM_GUIDE

FORM_OF_GUIDE = {text: form for form, text in QUERY_FORM_GUIDE.items()}


class _ProgramRef(SharedOnCopy):
    """The program a decision module calls into: shared by its copies, and no module (an optimizer does not see its
    predictors)."""

    def __init__(self, program: SagaProgram):
        self.program = program


def _adapter_context(program: SagaProgram):
    """The program's adapter, its closing line, where none is configured (`SagaProgram.forward` does the same)."""
    if dspy.settings.adapter is not None:
        return contextlib.nullcontext()
    return dspy.context(adapter=StringFieldsAdapter(closing=program.settings.closing_line))


class AnswerTypeDecision(dspy.Module):
    """The answer-type step: the program's predictor, its reply kept as the program keeps it."""

    decision = ANSWER_TYPE

    def __init__(self, program: SagaProgram):
        super().__init__()
        self.predict = program.answer_type.deepcopy()
        self.default_instructions = program.answer_type.signature.instructions
        self._ref = _ProgramRef(program)

    def forward(self, question: str) -> dspy.Prediction:
        program = self._ref.program
        demos, _ = QuestionGuard(question).filter_demos(self.predict.demos)
        with _adapter_context(program):
            raw = self.predict(question=question, demos=demos, config={"max_tokens": ANSWER_TYPE_MAX_TOKENS})
        info = program.typed_answer(raw, program.answer_type_cue(question), question)
        return dspy.Prediction(answer_type_label=info.label, answer_type_qid=info.qid)


class ControllerDecision(dspy.Module):
    """The controller's turn in one decision's state (`entity`, `candidate`)."""

    def __init__(self, program: SagaProgram, decision: str):
        super().__init__()
        if decision not in CONTROLLER_DECISIONS:
            raise ValueError(f"{decision!r} is no controller decision (one of {', '.join(CONTROLLER_DECISIONS)})")
        self.decision = decision
        self.step = program.react.react.deepcopy()
        self.step.demos = []
        self.default_instructions = program.react.react.signature.instructions
        compiled = program.compiled_decisions.get(decision) if program.compiled_decisions is not None else None
        if compiled is not None:
            compiled.apply(self.step)
        self._ref = _ProgramRef(program)

    def forward(self, **inputs: Any) -> dspy.Prediction:
        program = self._ref.program
        question = str(inputs.get("question") or "")
        guard = QuestionGuard(question)
        own, _ = guard.filter_demos(self.step.demos)
        form = FORM_OF_GUIDE.get(str(inputs.get("query_form") or ""), "SELECT")
        pool, _ = program.question_demos(question, form, guard)
        protocol = flavour_for(program.settings.kg).protocol_example
        signature = turn_signature(self.step.signature, program.settings)  # as the agent's turn reads it
        signature, demos = controller_prompt(signature, DecisionPrompt(None, tuple(own)), pool, protocol)
        with _adapter_context(program):
            return self.step(**inputs, demos=demos, signature=signature)


def decision_module(program: SagaProgram, decision: str) -> AnswerTypeDecision | ControllerDecision:
    """The program's `decision` as a module (its compiled instructions and demos where the program has them)."""
    if decision == ANSWER_TYPE:
        return AnswerTypeDecision(program)
    if decision not in DECISIONS:
        raise ValueError(f"unknown decision {decision!r} (one of {', '.join(DECISIONS)})")
    return ControllerDecision(program, decision)


def module_predictor(module: dspy.Module) -> dspy.Predict:
    """The one predictor a decision module holds."""
    predictors = [p for _, p in module.named_predictors()]
    if len(predictors) != 1:
        raise ValueError(f"a decision module holds one predictor, not {len(predictors)}")
    return predictors[0]


def compiled_decision(module: Any, info: dict[str, Any] | None = None) -> CompiledDecision:
    """What a (compiled) decision module carries into a program: its instructions where changed, its demos."""
    return CompiledDecision.of(
        module.decision, module_predictor(module), default_instructions=module.default_instructions, info=info
    )


@dataclass
class DecisionScore:
    """A module's accuracy on examples: the mean and each example's score (by example id)."""

    accuracy: float
    per_example: dict[str, float] = field(default_factory=dict)
    errors: int = 0

    def __len__(self) -> int:
        return len(self.per_example)


def score_decision(
    module: dspy.Module, examples: Sequence[dspy.Example], metric: Metric, *, num_threads: int = 1
) -> DecisionScore:
    """The module's accuracy on `examples` (an example whose call fails scores 0)."""
    if not examples:
        return DecisionScore(0.0)
    evaluate = dspy.Evaluate(
        devset=list(examples),
        metric=metric,
        num_threads=num_threads,
        display_progress=False,
        display_table=False,
        failure_score=0.0,
        provide_traceback=False,
    )
    result = evaluate(module)
    per_example: dict[str, float] = {}
    errors = 0
    for example, pred, score in result.results:
        per_example[str(example.id)] = float(score or 0.0)
        errors += pred is None or (isinstance(pred, dspy.Prediction) and not pred.keys())
    return DecisionScore(sum(per_example.values()) / len(per_example), per_example, errors)


__all__ = [
    "AnswerTypeDecision",
    "ControllerDecision",
    "DecisionScore",
    "compiled_decision",
    "decision_module",
    "module_predictor",
    "score_decision",
]
