"""One question's run (an Episode): the controller's inputs, the tool calls, and the stop policy that judges a final
query."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from saga_dspy.agent.answer_type import AnswerTypeInfo
from saga_dspy.agent.calls import QuestionCalls
from saga_dspy.agent.failures import InfrastructureError, is_infrastructure_error
from saga_dspy.agent.parsing import normalize_tool_name, params_of, parse_tool_args
from saga_dspy.agent.query_form import QUERY_FORMS, form_of, form_problem, keeps_the_question
from saga_dspy.agent.tool_spans import tool_span
from saga_dspy.agent.trajectory import Step, one_line
from saga_dspy.config import Settings
from saga_dspy.grounding.context import Execution, QuestionContext
from saga_dspy.grounding.state import controller_state
from saga_dspy.kg.errors import EndpointUnavailable
from saga_dspy.kg.results import AskResult, QueryResult, SelectResult
from saga_dspy.signatures import QUERY_FORM_GUIDE
from saga_dspy.tools.search import named_lookup
from saga_dspy.variants import Variant

log = logging.getLogger(__name__)

MAX_FORM_REJECTIONS = 1  # a final query of the wrong form the program cannot rewrite is sent back this many times
MAX_NO_QUERY_REJECTIONS = 1  # stop() before any executed query is sent back this many times
MAX_EMPTY_REJECTIONS = 1  # stop() on an empty / blocked final query is sent back this many times (not in spinach)
NO_TYPE_STATE_TEXT = "(not kept in this configuration)"

AnswerCheck = Callable[["Episode", str], "str | None"]  # (episode, final query) -> what to fix, or None


@dataclass
class Episode:
    """Everything that belongs to one question (one forward() call)."""

    settings: Settings
    question: str
    ctx: QuestionContext
    tools: dict[str, Callable]
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
    accepted_final: str | None = None
    form_rejections: int = 0
    no_query_rejections: int = 0
    empty_rejections: int = 0
    checked: bool = False
    overflows: int = 0
    budget_scale: float = 1.0
    trajectory_cap: int | None = None  # after an overflow: at most half the trajectory that did not fit
    last_trajectory_chars: int = 0
    prompt_sizes: dict[int, tuple[int, int]] = field(
        default_factory=dict
    )  # id(predictor) -> (fixed chars, inputs' chars)
    extra_executions: int = (
        0  # queries the program ran itself: stop's argument, the lookup's proposal (at stop or a repeat)
    )
    auto_runs: int = 0  # of which the lookup's proposed query (the auto-run)
    done: dict[tuple[str, str], int] = field(default_factory=dict)  # action -> the step that ran it
    repeats: int = 0  # identical actions in a row
    assisted: int = 0  # repeated actions the program answered with the step they circle (`_assist_repeat`)
    invalid: int = 0  # actions in a row that named no tool or lacked its argument
    deadline: float | None = None  # time.monotonic() past which no step is taken (settings.question_budget)
    budget_exceeded: bool = False
    final: str | None = None
    final_source: str | None = None
    rewritten_from: str | None = None

    def trace_summary(self) -> dict[str, Any]:
        """What a trace span records for this episode (`agent.tool_spans.small_value`): plain values, no objects."""
        return {"question": self.question, "variant": self.variant.name, "form": self.form, "steps": len(self.steps)}

    # -- what the controller reads at each step --------------------------------------------

    def inputs(self) -> dict[str, Any]:
        if not self.variant.agent.schema_controller:
            return {"question": self.question}
        kept = self.ctx.flags.type_state
        type_context, knowledge_log = controller_state(
            _rendered(self.ctx.type_context, "type_context"), _rendered(self.ctx.knowledge_log, "knowledge_log")
        )
        if not kept:
            type_context = type_context or NO_TYPE_STATE_TEXT
            knowledge_log = knowledge_log or NO_TYPE_STATE_TEXT
        return {
            "question": self.question,
            "answer_type": self.answer_type.render() if self.answer_type is not None else "unknown",
            "query_form": QUERY_FORM_GUIDE[self.imposed_form],
            "type_context": type_context or "(none yet)",
            "knowledge_log": knowledge_log or "(none yet)",
        }

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
        self.steps.append(step)
        self.emit("step", index=len(self.steps), step=step)

    # -- acting -------------------------------------------------------------------------------

    def run_tool(self, pred) -> bool | str:
        """Run the chosen tool; True when the episode is finished, 'extend' for CheckAnswer's extra steps,
        'repeat' for an action already taken, 'invalid' for one without a known tool or its argument."""
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
            return "invalid"
        func = self.tools[name]
        params = params_of(func)
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
            return "invalid"
        self.invalid = 0  # a valid action, a stop included, ends the streak
        if name == "stop":
            return self._stop(thought, raw_args)
        key = _action_key(name, args)
        if key in self.done:  # the same call again: its result would be the same
            assisted = self._assist_repeat(thought, name, args, key) if self.variant.agent.assist_repeats else None
            if assisted is not None:
                return assisted
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
            return "repeat"
        self.repeats = 0
        self.add_step(Step(thought, name, args, self._call_tool(name, func, args)))
        self.done[key] = len(self.steps)
        return False

    def _call_tool(self, name: str, func: Callable, args: dict[str, Any]) -> str:
        """The tool's observation (inside a trace span when tracing); an InfrastructureError when the endpoint
        could not be reached."""
        executed = len(self.ctx.executions)
        with tool_span(name, args) as span:  # a span per tool call in the question's trace; a no-op when not tracing
            try:
                out = func(**args)
            except Exception as exc:  # boundary: a tool call returns an observation, never raises into the loop
                if is_infrastructure_error(exc):
                    raise InfrastructureError(f"endpoint: {type(exc).__name__}: {one_line(str(exc), 300)}") from exc
                log.debug("tool %s failed", name, exc_info=True)
                out = f"Error in {name}: {type(exc).__name__}: {one_line(str(exc), 300)}"
            out = out if isinstance(out, str) else str(out)
            span.observation(out)
        for ex in self.ctx.executions[executed:]:  # the tool caught it and told the LM; the question stops
            if ex.error_kind == EndpointUnavailable.kind:
                raise InfrastructureError(f"endpoint unavailable: {one_line(str(ex.error), 300)}")
        return out

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

    def suggested_query(self) -> str | None:
        """The query the latest lookup proposed (its ★ property), if any."""
        return self.ctx.suggested_sparql or None

    def candidate_query(self) -> str | None:
        """The query the latest lookup puts forward: its proposal, else its best candidate (never shown)."""
        return self.ctx.candidate_sparql or None

    def run_candidate(self, thought: str, at_end: bool = False) -> str | None:
        """Nothing executed yet and the model stops: the program runs the lookup's candidate query (a full-variant
        step, `auto_run`; docs/DESIGN.md, the lookup's candidate); the query when it was run.
        `at_end`: the episode ended with no non-empty result; the candidate is run unless it was already."""
        candidate = self.candidate_query()
        if (
            not candidate
            or (self.last_executed() and not at_end)
            or not self.variant.agent.auto_run
            or self.status_of(candidate) is not None
        ):
            return None
        self._program_execute(
            thought, candidate, "from-suggestion" if candidate == self.suggested_query() else "from-candidate"
        )
        self.auto_runs += 1
        return candidate

    def _assist_repeat(self, thought: str, name: str, args: dict[str, Any], key: tuple[str, str]) -> bool | str | None:
        """The step a repeated action circles, taken for it (None: nothing left to suggest, a plain repeat).

        A successful query executed again is the answer: it stops with it (stop judges it as usual). Otherwise
        the repeated step's own `Next:` suggestion is followed where it is still open (a search's named hit is
        looked up), else the latest lookup's proposed query is executed if it never was."""
        if name == "execute_sparql":
            sparql = str(args.get("sparql") or "").strip()
            if sparql and self.status_of(sparql) == "ok" and sparql == (self.last_executed() or "").strip():
                self.repeats, self.assisted = 0, self.assisted + 1
                return self._stop(thought, {})
        if name == "search_wikidata":
            eid = named_lookup(self.steps[self.done[key] - 1].observation)
            if eid and not self._looked_up(eid):
                self.repeats, self.assisted = 0, self.assisted + 1
                self._program_step(thought, "get_wikidata_entry", {"qid": eid}, "from-repeat")
                return False
        suggestion = self.suggested_query()
        if not suggestion or self.status_of(suggestion) is not None:
            return None
        self.repeats, self.assisted = 0, self.assisted + 1
        self._program_execute(thought, suggestion, "from-repeat")
        return False

    def _looked_up(self, eid: str) -> bool:
        flavour = self.ctx.flavour
        return any(
            s.tool_name == "get_wikidata_entry" and flavour.normalise_entity(str(s.tool_args.get("qid", ""))) == eid
            for s in self.steps
            if s.note not in ("repeated", "bad-args")
        )

    def _program_execute(self, thought: str, sparql: str, note: str) -> None:
        """Run a query the program chose (stop's argument, the lookup's proposal) as a step of its own."""
        self.extra_executions += 1
        self._program_step(thought, "execute_sparql", {"sparql": sparql}, note)

    def _program_step(self, thought: str, name: str, args: dict[str, Any], note: str) -> None:
        """Take an action the program chose as a step of its own, done like the model's: the same action from the
        model next is a repeat (an executed query that answered is then taken as its stop)."""
        observation = self._call_tool(name, self.tools[name], args)
        self.add_step(Step(thought, name, args, observation, note=note))
        self.done.setdefault(_action_key(name, args), len(self.steps))

    def _stop(self, thought: str, raw_args: Any) -> bool | str:
        # A query given to stop is executed first, so stop marks it.
        given = parse_tool_args(raw_args, ["sparql"]).get("sparql")
        if (
            isinstance(given, str)
            and form_of(given) in QUERY_FORMS
            and given.strip() != (self.last_executed() or "").strip()
        ):
            self._program_execute(thought, given, "from-stop")
        if not self.no_query_rejections:
            # Stop with nothing executed (often right after a lookup): the lookup's candidate is run for it.
            self.run_candidate(thought)
        observation = self._call_tool("stop", self.tools["stop"], {})
        final = _ctx_final(self.ctx) or self.last_executed()
        if not final:
            if self.no_query_rejections < MAX_NO_QUERY_REJECTIONS:
                self.no_query_rejections += 1
                suggestion = self.suggested_query()
                example = f' For example: execute_sparql({{"sparql": "{suggestion}"}}).' if suggestion else ""
                self.add_step(
                    Step(
                        thought,
                        "stop",
                        {},
                        "No query has been executed yet, so there is no final query. "
                        "Execute the query that answers the question with execute_sparql, then stop." + example,
                        note="rejected",
                    )
                )
                return False
            self.add_step(Step(thought, "stop", {}, observation))
            return True
        status = self.status_of(final)
        if (
            status in ("empty", "blocked")
            and self.variant.agent.reject_empty_stop
            and self.empty_rejections < MAX_EMPTY_REJECTIONS
        ):
            self.empty_rejections += 1
            self.add_step(
                Step(
                    thought,
                    "stop",
                    {},
                    (
                        f"Not accepted: the final query returns no result ({status}). "
                        "The question has an answer in the graph: change the property, its direction or the entity, "
                        "execute the query again, then stop."
                    ),
                    note="rejected",
                )
            )
            return False
        problem = form_problem(self.imposed_form, final, self.result_of(final))
        if problem and self.variant.agent.form_rewrite and keeps_the_question(final, self.imposed_form):
            # the program rewrites it when the episode ends (SagaProgram._finish); sending it back spent a call
            # the model answered with the same stop in all 32 recorded rejections (all of them counts)
            problem = None
        if problem and self.form_rejections < MAX_FORM_REJECTIONS:
            self.form_rejections += 1
            self.add_step(Step(thought, "stop", {}, "Not accepted. " + problem, note="rejected"))
            return False
        if self.check is not None and not self.checked:
            self.checked = True
            verdict = self.check(self, final)
            if verdict:
                self.add_step(Step(thought, "stop", {}, "Not accepted yet. " + verdict, note="rejected"))
                return "extend"
        self.accepted_final = final
        self.add_step(Step(thought, "stop", {}, observation))
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


def _ctx_final(ctx: QuestionContext) -> str | None:
    value = ctx.final_sparql
    return value.strip() if isinstance(value, str) and value.strip() else None


def nonempty(result: Any) -> bool:
    if isinstance(result, AskResult):
        return True
    if isinstance(result, SelectResult):
        return bool(result.rows)
    return False
