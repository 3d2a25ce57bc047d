"""One question's run (an Episode): the controller's inputs, the tool calls and what they returned; it applies the
decisions of the final-query policy (`agent.final_query`), which reads it and writes none of its fields."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from saga_dspy.agent import final_query
from saga_dspy.agent.answer_type import AnswerTypeInfo
from saga_dspy.agent.calls import QuestionCalls
from saga_dspy.agent.decisions import DecisionPrompt, decision_after
from saga_dspy.agent.failures import InfrastructureError, is_infrastructure_error
from saga_dspy.agent.final_query import FinalQuery, JudgeAsStop, ProgramStep, StepOutcome, Verdict
from saga_dspy.agent.parsing import normalize_tool_name, params_of, parse_tool_args
from saga_dspy.agent.state_delta import StateLines
from saga_dspy.agent.tool_spans import tool_span
from saga_dspy.agent.trajectory import KEEP_FULL_STEPS, NO_STEPS, Step, one_line, render_trajectory
from saga_dspy.config import Settings
from saga_dspy.grounding.context import Execution, QuestionContext
from saga_dspy.grounding.state import controller_state
from saga_dspy.kg.errors import EndpointUnavailable
from saga_dspy.kg.results import QueryResult, SelectResult
from saga_dspy.signatures import QUERY_FORM_GUIDE
from saga_dspy.tools.results import ExecuteResult, LookupResult, StopResult, ToolOutput, observation_of
from saga_dspy.variants import Variant

log = logging.getLogger(__name__)

NO_TYPE_STATE_TEXT = "(not kept in this configuration)"

AnswerCheck = Callable[["Episode", str], "str | None"]  # (episode, final query) -> what to fix, or None


@dataclass
class Episode:
    """Everything that belongs to one question (one forward() call)."""

    settings: Settings
    question: str
    ctx: QuestionContext
    tools: dict[str, Callable[..., ToolOutput]]
    variant: Variant
    answer_type: AnswerTypeInfo | None
    form: str
    demos: list | None = None
    on_event: Callable[..., None] | None = None
    check: AnswerCheck | None = None  # CheckAnswer's verdict on a final query (None: no check)
    max_steps: int = 15
    calls: QuestionCalls = field(default_factory=QuestionCalls)  # this question's LM calls and their bound
    steps: list[Step] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    demos_dropped: int = 0  # demos the test firewall refused for this question
    lm_errors: list[str] = field(default_factory=list)
    accepted_final: str | None = None  # the final query stop accepted (`final_query.judge_stop`)
    form_rejections: int = 0
    no_query_rejections: int = 0
    empty_rejections: int = 0
    checked: bool = False
    overflows: int = 0
    budget_scale: float = 1.0
    trajectory_cap: int | None = None  # after an overflow: at most half the trajectory that did not fit
    last_trajectory_chars: int = 0
    prompt_sizes: dict[tuple[int, str | None], tuple[int, int]] = field(
        default_factory=dict
    )  # (id(predictor), compiled decision of the turn) -> (fixed chars, inputs' chars)
    extra_executions: int = (
        0  # queries the program ran itself: stop's argument, the lookup's proposal (at stop or a repeat)
    )
    auto_runs: int = 0  # of which the lookup's proposed query (the auto-run)
    done: dict[tuple[str, str], int] = field(default_factory=dict)  # action -> the step that ran it
    repeats: int = 0  # identical actions in a row
    assisted: int = 0  # repeated actions the program answered with the step they circle (`final_query.assist_repeat`)
    invalid: int = 0  # actions in a row that named no tool or lacked its argument
    deadline: float | None = None  # time.monotonic() past which no step is taken (settings.question_budget)
    budget_exceeded: bool = False
    proposal: str | None = None  # the query the latest lookup that proposed one proposed (its ★ property)
    candidate: str | None = None  # the latest lookup's first candidate: the program's fallback
    shown: list[tuple[int, str]] = field(default_factory=list)  # (rank, query) of each candidate a lookup showed
    latest_showed: bool = False  # the latest lookup showed candidates
    decisions: dict[str, DecisionPrompt] = field(default_factory=dict)  # compiled controller decisions, by name
    stop_final: str | None = None  # the query the latest stop marked (the last successful execution)
    stopped_without_query: bool = False  # the episode ended on a stop with no query executed (`reject_no_query`)
    final: FinalQuery | None = None  # once decided (`final_query.decide`)
    state_lines: StateLines = field(init=False)  # the state lines the trajectory has shown

    def __post_init__(self) -> None:
        self.state_lines = StateLines(compact=self.settings.compact_observations)

    def trace_summary(self) -> dict[str, Any]:
        """What a trace span records for this episode (`agent.tool_spans.small_value`): plain values, no objects."""
        return {"question": self.question, "variant": self.variant.name, "form": self.form, "steps": len(self.steps)}

    # -- what the controller reads at each step --------------------------------------------

    def inputs(self) -> dict[str, Any]:
        """The controller's input fields but the trajectory (`state_in_trajectory`: the state is in it)."""
        if not self.variant.agent.schema_controller:
            return {"question": self.question}
        fields = {
            "question": self.question,
            "answer_type": self.answer_type.render() if self.answer_type is not None else "unknown",
            "query_form": QUERY_FORM_GUIDE[self.imposed_form],
        }
        if self.state_in_steps:
            return fields
        type_context, knowledge_log = controller_state(
            _rendered(self.ctx.type_context, "type_context"), _rendered(self.ctx.knowledge_log, "knowledge_log")
        )
        if not self.ctx.flags.type_state:
            type_context = type_context or NO_TYPE_STATE_TEXT
            knowledge_log = knowledge_log or NO_TYPE_STATE_TEXT
        return {**fields, "type_context": type_context or "(none yet)", "knowledge_log": knowledge_log or "(none yet)"}

    @property
    def state_in_steps(self) -> bool:
        """The state's new lines go into the trajectory, after the step that brought them (not input fields)."""
        return self.settings.state_in_trajectory and self.variant.agent.schema_controller

    def trajectory_text(self, budget: int | None = None) -> str:
        """The steps as the controller reads them, within `budget` characters (None: all of them)."""
        stable = self.settings.stable_history and self.variant.agent.stable_history
        return render_trajectory(
            self.steps,
            budget,
            observation_chars=self.settings.observation_chars,
            keep_full=None if stable else KEEP_FULL_STEPS,
            empty="" if self.state_in_steps else NO_STEPS,  # the prompt only grows: no placeholder to replace
            compact=self.settings.compact_observations,
        )

    def decision(self) -> str | None:
        """The controller decision the current state asks for (`agent.decisions.decision_after`), or None."""
        return decision_after(self.steps[-1] if self.steps else None, self.latest_showed)

    def decision_prompt(self) -> DecisionPrompt | None:
        """The compiled decision the controller's next turn uses, where the state is one and it is compiled."""
        return self.decisions.get(self.decision() or "") if self.decisions else None

    @property
    def imposed_form(self) -> str:
        """The form the controller is held to: the decided one, or 'ANY' where the variant imposes none."""
        return self.form if self.variant.agent.query_form else "ANY"

    def emit(self, kind: str, **payload) -> None:
        if self.on_event is not None:
            try:
                self.on_event(kind, **payload)
            except Exception:  # a printer must not break the question
                log.debug("on_event failed", exc_info=True)

    def add_step(self, step: Step) -> None:
        if self.state_in_steps:  # what the step added to the state, written once after its observation
            step.state = self.state_lines.added(
                _rendered(self.ctx.type_context, "type_context"),
                _rendered(self.ctx.knowledge_log, "knowledge_log"),
                step.observation,
            )
        self.steps.append(step)
        self.emit("step", index=len(self.steps), step=step)

    # -- acting -------------------------------------------------------------------------------

    def run_tool(self, pred: Any) -> StepOutcome:
        """Run the chosen tool (stop goes to the final-query policy) and say what it did to the episode."""
        thought = str(getattr(pred, "next_thought", "") or "").strip()
        raw_name = getattr(pred, "next_tool_name", "")
        raw_args = getattr(pred, "next_tool_args", {})
        name = normalize_tool_name(raw_name, self.tools)
        if name is None:
            self.invalid += 1
            self.add_step(
                Step(
                    thought,
                    str(raw_name),
                    _as_dict(raw_args),
                    f"There is no tool {str(raw_name)!r}. Use one of: {', '.join(self.tools)}.",
                    note="unknown-tool",
                )
            )
            return StepOutcome.INVALID
        params = params_of(self.tools[name])
        args = parse_tool_args(raw_args, params)
        missing = [p for p in params if p not in args] if name != "stop" else []
        if missing:
            self.invalid += 1
            self.add_step(
                Step(
                    thought,
                    name,
                    args,
                    f'{name} needs the argument {missing[0]!r}, e.g. {{"{missing[0]}": "..."}}.',
                    note="bad-args",
                )
            )
            return StepOutcome.INVALID
        self.invalid = 0  # a valid action, a stop included, ends the streak
        if name == "stop":
            return self.stop(thought, raw_args)
        key = _action_key(name, args)
        if key in self.done:  # the same call again: its result would be the same
            assist = final_query.assist_repeat(self, name, args, self.done[key])
            if assist is not None:  # the program answers the repeat with the step it circles
                self.repeats, self.assisted = 0, self.assisted + 1
                if isinstance(assist, JudgeAsStop):
                    return self.stop(thought, {})
                self.take(thought, assist)
                return StepOutcome.CONTINUE
            self.repeats += 1
            self.add_step(
                Step(
                    thought,
                    name,
                    args,
                    (
                        f"[REPEATED] You already called {name} with these arguments at step {self.done[key]}; "
                        "the result is the same (see above). Do something else: use what you found, e.g. write the "
                        "SPARQL query with the ids you have and execute it, or stop if the last query answered the "
                        "question."
                    ),
                    note="repeated",
                )
            )
            return StepOutcome.REPEAT
        self.repeats = 0
        self.add_step(Step(thought, name, args, self.call_tool(name, args)))
        self.done[key] = len(self.steps)
        return StepOutcome.CONTINUE

    def call_tool(self, name: str, args: dict[str, Any]) -> str:
        """The tool's observation (inside a trace span when tracing), its typed result recorded (`record`); an
        InfrastructureError when the endpoint could not be reached."""
        executed = len(self.ctx.executions)
        with tool_span(name, args) as span:  # a span per tool call in the question's trace; a no-op when not tracing
            try:
                result = self.tools[name](**args)
                self.record(result)
                typed = (str, LookupResult, ExecuteResult, StopResult)
                out = observation_of(result) if isinstance(result, typed) else str(result)
            except Exception as exc:  # boundary: a tool call returns an observation, never raises into the loop
                if is_infrastructure_error(exc):
                    raise InfrastructureError(f"endpoint: {type(exc).__name__}: {one_line(str(exc), 300)}") from exc
                log.debug("tool %s failed", name, exc_info=True)
                out = f"Error in {name}: {type(exc).__name__}: {one_line(str(exc), 300)}"
            span.observation(out)
        for ex in self.ctx.executions[executed:]:  # the tool caught it and told the LM; the question stops
            if ex.error_kind == EndpointUnavailable.kind:
                raise InfrastructureError(f"endpoint unavailable: {one_line(str(ex.error), 300)}")
        return out

    def record(self, result: ToolOutput) -> None:
        """What a tool returned beside its observation: the lookup's queries (a lookup that proposes none keeps the
        earlier ones), the query stop marked."""
        if isinstance(result, LookupResult):
            self.proposal = result.proposal or self.proposal
            self.candidate = result.candidate or self.candidate
            self.shown += [(c.rank, c.sparql) for c in result.shown]
            self.latest_showed = bool(result.shown)
        elif isinstance(result, StopResult):
            sparql = result.final.sparql.strip() if result.final is not None and result.final.sparql else ""
            self.stop_final = sparql or None

    def stop(self, thought: str, raw_args: Any) -> StepOutcome:
        """The controller stops: the policy's steps before the stop (a query given to it, the fallback), then its
        verdict on the stop."""
        given = parse_tool_args(raw_args, list(final_query.STOP_ARGUMENTS))
        for decide in (lambda: final_query.stop_argument(self, given), lambda: final_query.fallback_at_stop(self)):
            if (program_step := decide()) is not None:
                self.take(thought, program_step)
        observation = self.call_tool("stop", {})
        return self.settle(thought, final_query.judge_stop(self, observation), given)

    def settle(self, thought: str, verdict: Verdict, given: dict[str, Any] | None = None) -> StepOutcome:
        """Apply the policy's verdict on a stop: the allowances it spends, the query it accepts, its step (with the
        arguments the model `given` stop, as it gave them)."""
        for spent in verdict.spends:
            if spent == "checked":
                self.checked = True
            elif spent == "no_query_rejections":
                self.no_query_rejections += 1
            elif spent == "empty_rejections":
                self.empty_rejections += 1
            elif spent == "form_rejections":
                self.form_rejections += 1
        if verdict.accepted is not None:
            self.accepted_final = verdict.accepted
        elif verdict.outcome is StepOutcome.DONE:
            self.stopped_without_query = True
        self.add_step(Step(thought, "stop", given or {}, verdict.observation, note=verdict.note))
        return verdict.outcome

    def take(self, thought: str, program_step: ProgramStep) -> None:
        """Take a step the program chose, done like the model's: the same action from the model next is a repeat
        (an executed query that answered is then taken as its stop)."""
        name, args = program_step.tool, program_step.args
        if name == "execute_sparql":
            self.extra_executions += 1
        self.auto_runs += program_step.auto_run
        observation = self.call_tool(name, args)
        self.add_step(Step(thought, name, args, observation, note=program_step.note))
        self.done.setdefault(_action_key(name, args), len(self.steps))

    def looked_up(self, eid: str) -> bool:
        """The entity's lookup is among the steps taken."""
        flavour = self.ctx.flavour
        return any(
            s.tool_name == "get_wikidata_entry" and flavour.normalise_entity(str(s.tool_args.get("qid", ""))) == eid
            for s in self.steps
            if s.note not in ("repeated", "bad-args")
        )

    def out_of_time(self) -> bool:
        """True once the question's wall-clock budget is spent (then no more steps are taken)."""
        if self.deadline is None or time.monotonic() < self.deadline:
            return False
        if not self.budget_exceeded:
            self.budget_exceeded = True
            self.notes.append(
                f"question budget of {self.settings.question_budget:g} s spent after "
                f"{len(self.steps)} steps: finished with what it had"
            )
        return True

    # -- executions ---------------------------------------------------------------------------

    def executions(self) -> list[Execution]:
        return list(self.ctx.executions)

    def last_executed(self) -> str | None:
        for ex in reversed(self.executions()):
            if ex.sparql:
                return ex.sparql
        return None

    def result_of(self, sparql: str) -> QueryResult | None:
        for ex in reversed(self.executions()):
            if (ex.sparql or "").strip() == sparql.strip():
                return ex.result
        return None

    def answer_labels(self, result: QueryResult | None, limit: int = 50) -> dict[str, str]:
        """English labels of a result's entities (id -> label), for display: what the agent saw, else one bounded
        labels query; {} for an ASK result or when none are known."""
        if not isinstance(result, SelectResult):
            return {}
        flavour = self.ctx.flavour
        ids = [flavour.entity_id(b.value) for row in result.rows for b in row.values() if b.is_iri]
        wanted = list(dict.fromkeys(i for i in ids if i))[:limit]
        return {eid: label for eid, label in self.ctx.labels(wanted).items() if label} if wanted else {}

    def status_of(self, sparql: str) -> str | None:
        for ex in reversed(self.executions()):
            if (ex.sparql or "").strip() == sparql.strip():
                return ex.status
        return None


def _action_key(name: str, args: dict[str, Any]) -> tuple[str, str]:
    text = json.dumps(args, sort_keys=True, ensure_ascii=False, default=str)
    return name, " ".join(text.split()).lower() if name != "execute_sparql" else " ".join(text.split())


def _as_dict(value: Any) -> dict[str, Any]:
    if isinstance(value, dict):
        return value
    return {"raw": str(value)} if value not in (None, "") else {}


def _rendered(render: Callable[[], str], name: str) -> str:
    try:
        value = render()
    except Exception as exc:  # a rendering bug must not end the question: the controller reads "(none yet)"
        log.debug("ctx.%s() failed: %s", name, exc)
        return ""
    return str(value or "").strip()
