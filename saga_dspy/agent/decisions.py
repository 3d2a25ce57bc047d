"""The program's decisions that are compiled one by one, and what a compiled one carries.

Three choices decide most questions, and each can be scored against train gold without running the agent: the
answer type (the `answer_type` predictor), the entity a search's hits are looked up by (the controller's turn right
after a search), the candidate a lookup showed that the model takes, or none of them (its turn right after a lookup
that showed candidates). A compiled decision is instructions and fixed demos for that one choice
(`CompiledDecision`): the answer type's go to its predictor; a controller decision's are used for the controller's
turns in that state only (`decision_after`, `controller_prompt`), every other turn keeps the per-question demos.
They are saved in program.json under `STATE_KEY`, beside dspy's per-predictor state, so `eval --program` /
`ask --program` run them as compiled; a program.json without that key loads as before.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import dspy

from saga_dspy.agent.demos import DemoGuard
from saga_dspy.agent.trajectory import Step

ANSWER_TYPE = "answer-type"
ENTITY = "entity"
CANDIDATE = "candidate"
DECISIONS = (ANSWER_TYPE, ENTITY, CANDIDATE)
CONTROLLER_DECISIONS = (ENTITY, CANDIDATE)
SEARCH_TOOL = "search_wikidata"
LOOKUP_TOOL = "get_wikidata_entry"
EXECUTE_TOOL = "execute_sparql"
# the candidate decision's choice where no shown candidate answers: take none (execute a query written instead)
NO_CANDIDATE = "none"
STATE_KEY = "saga_decisions"
FORMAT = 1


def decision_after(step: Step | None, shown_candidates: bool) -> str | None:
    """The controller decision the state after `step` asks for: `entity` after a search the model made, `candidate`
    after a lookup it made that showed candidates (`shown_candidates`), else None (a turn of no compiled decision).
    A step the program took or answered (a repeat, bad arguments) has a note and is no such state."""
    if step is None or step.note:
        return None
    if step.tool_name == SEARCH_TOOL:
        return ENTITY
    if step.tool_name == LOOKUP_TOOL and shown_candidates:
        return CANDIDATE
    return None


def demo_examples(demos: Iterable[Mapping[str, Any]], inputs: Sequence[str]) -> list[dspy.Example]:
    """Saved demos as the `dspy.Example`s a predictor is given (their `inputs` marked as such)."""
    return [dspy.Example(**dict(d)).with_inputs(*(k for k in inputs if k in d)) for d in demos]


@dataclass(frozen=True)
class DecisionPrompt:
    """A compiled controller decision as one question's turns use it: its instructions (None: the controller's) and
    its demos that the question's firewall allows."""

    instructions: str | None
    demos: tuple[Any, ...]


@dataclass(frozen=True)
class CompiledDecision:
    """One compiled decision: `instructions` (None: the predictor's own are kept) and its fixed `demos` (each the
    signature's fields), with `info` on how it was compiled (optimizer, accuracies, the dataset)."""

    name: str
    instructions: str | None = None
    demos: tuple[dict[str, Any], ...] = ()
    info: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(
        cls,
        name: str,
        predictor: dspy.Predict,
        *,
        default_instructions: str,
        info: Mapping[str, Any] | None = None,
    ) -> CompiledDecision:
        """The decision a compiled predictor makes: its instructions where they differ from the default, its demos
        cut to the signature's fields."""
        fields = list(predictor.signature.fields)
        demos = tuple({k: str(d[k]) for k in fields if k in d} for d in predictor.demos)
        instructions = predictor.signature.instructions
        return cls(name, None if instructions == default_instructions else instructions, demos, dict(info or {}))

    def apply(self, predictor: dspy.Predict) -> None:
        """Give `predictor` this decision's instructions (where compiled) and demos."""
        if self.instructions is not None:
            predictor.signature = predictor.signature.with_instructions(self.instructions)
        predictor.demos = demo_examples(self.demos, list(predictor.signature.input_fields))

    def to_state(self) -> dict[str, Any]:
        return {"instructions": self.instructions, "demos": list(self.demos), "info": self.info}


@dataclass(frozen=True)
class CompiledDecisions:
    """The compiled decisions of a program, by name (one of `DECISIONS`)."""

    decisions: tuple[CompiledDecision, ...] = ()

    def get(self, name: str | None) -> CompiledDecision | None:
        return next((d for d in self.decisions if d.name == name), None)

    def names(self) -> list[str]:
        return [d.name for d in self.decisions]

    def with_decision(self, decision: CompiledDecision) -> CompiledDecisions:
        """These decisions with `decision` added (replacing one of its name)."""
        kept = tuple(d for d in self.decisions if d.name != decision.name)
        return CompiledDecisions(tuple(sorted((*kept, decision), key=lambda d: DECISIONS.index(d.name))))

    def prompts(
        self, inputs: Sequence[str], demo_guard: DemoGuard | None = None
    ) -> tuple[dict[str, DecisionPrompt], int]:
        """(the compiled controller decisions as one question's turns use them, by name; the demos `demo_guard`, the
        question's test firewall, dropped from them). `inputs`: the controller's input fields."""
        out: dict[str, DecisionPrompt] = {}
        dropped = 0
        for decision in (d for d in self.decisions if d.name in CONTROLLER_DECISIONS):
            demos = demo_examples(decision.demos, inputs)
            if demo_guard is not None:
                demos, gone = demo_guard.filter_demos(demos)
                dropped += gone
            out[decision.name] = DecisionPrompt(decision.instructions, tuple(demos))
        return out, dropped

    def to_state(self) -> dict[str, Any]:
        return {"format": FORMAT, "compiled": self.names(), "decisions": {d.name: d.to_state() for d in self.decisions}}

    @classmethod
    def from_state(cls, state: Any) -> CompiledDecisions | None:
        """The decisions saved under `STATE_KEY` (None when there are none); a ValueError in one line when they are
        unusable."""
        if state is None:
            return None
        if not isinstance(state, dict) or not isinstance(state.get("decisions"), dict):
            raise ValueError(f"its {STATE_KEY} entry is not an object with its decisions")
        if state.get("format") != FORMAT:
            raise ValueError(
                f"its compiled decisions have format {state.get('format')!r}; this saga-dspy reads format {FORMAT} "
                "(compile them again with this version)"
            )
        out = []
        for name, entry in state["decisions"].items():
            if name not in DECISIONS:
                raise ValueError(f"it has a compiled decision {name!r} (one of {', '.join(DECISIONS)})")
            demos = entry.get("demos") if isinstance(entry, dict) else None
            instructions = entry.get("instructions") if isinstance(entry, dict) else None
            if not isinstance(demos, list) or not all(isinstance(d, dict) for d in demos):
                raise ValueError(f"its compiled decision {name!r} has no list of demos")
            if instructions is not None and not isinstance(instructions, str):
                raise ValueError(f"its compiled decision {name!r} has instructions that are not text")
            out.append(CompiledDecision(name, instructions, tuple(demos), dict(entry.get("info") or {})))
        return cls(tuple(sorted(out, key=lambda d: DECISIONS.index(d.name))))


def controller_prompt(
    signature: type[dspy.Signature],
    own: DecisionPrompt | None,
    pool_demos: Sequence[Any] | None,
    protocol_example: str,
) -> tuple[type[dspy.Signature], list[Any]]:
    """(signature, demos) of a controller turn in a decision's state: the decision's instructions and demos where it
    is compiled (its demos, where it has any, replace the question's pool demos for this turn), and the flavour's
    one-line protocol example after the instructions when the turn is shown no demo."""
    if own is not None and own.instructions is not None:
        signature = signature.with_instructions(own.instructions)
    demos = list(own.demos) if own is not None and own.demos else list(pool_demos or ())
    if not demos:
        signature = signature.with_instructions(f"{signature.instructions}\n{protocol_example}")
    return signature, demos


__all__ = [
    "ANSWER_TYPE",
    "CANDIDATE",
    "CONTROLLER_DECISIONS",
    "DECISIONS",
    "ENTITY",
    "STATE_KEY",
    "CompiledDecision",
    "CompiledDecisions",
    "DecisionPrompt",
    "controller_prompt",
    "decision_after",
    "demo_examples",
]
