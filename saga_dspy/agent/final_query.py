"""The final-query policy: the one place that decides which query an episode answers with.

At stop (`judge_stop`), in order, each step switched by the variant's `AgentFlags` (variants.py):
    execute_stop_argument   a query given to stop is executed first, so stop marks it
    run_candidate           nothing executed yet: the lookup's candidate query is run (`auto_run`)
    reject_no_query         no query at all: sent back once, with the lookup's proposal as an example
                            (`reject_no_query_stop`; else the episode ends there with no final query)
    reject_empty            an empty or blocked final query: sent back once (`reject_empty_stop`)
    reject_form             a final query of the wrong form: sent back once, unless the end rewrites it
                            (`query_form`, `form_rewrite`)
    check_answer            CheckAnswer's verdict: sent back once with extra steps (`Settings.check_answer`)
On a repeated action (`assist_repeat`, `assist_repeats`): the step it circles is taken for it.
At the end (`decide`): the accepted stop's query, else the last non-empty execution, else the lookup's candidate
run by the program, else the extract call's (not after a stop the variant ends with no query), else the last
executed one; then `seen_ids_only` and `rewrite_form`.

Why each remedy exists is in docs/DESIGN.md (the final query); the episode (`agent.episode`) runs the tools and
keeps the state these steps read."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Any

from saga_dspy.agent.parsing import parse_tool_args
from saga_dspy.agent.query_form import QUERY_FORMS, form_of, form_problem, keeps_the_question, to_form
from saga_dspy.agent.trajectory import Step
from saga_dspy.grounding.provenance import mentioned_ids, unseen_ids
from saga_dspy.kg.errors import SparqlError
from saga_dspy.kg.results import AskResult, QueryResult, SelectResult
from saga_dspy.tools.search import named_lookup

if TYPE_CHECKING:
    from saga_dspy.agent.episode import Episode

MAX_FORM_REJECTIONS = 1  # a final query of the wrong form the program cannot rewrite is sent back this many times
MAX_NO_QUERY_REJECTIONS = 1  # stop() before any executed query is sent back this many times
MAX_EMPTY_REJECTIONS = 1  # stop() on an empty / blocked final query is sent back this many times
NO_RESULT = ("unparsable", "unknown-tool", "bad-args", "repeated")  # steps that did nothing


class StepOutcome(Enum):
    """What one controller action did to the episode (`Episode.run_tool`)."""

    CONTINUE = "continue"  # a tool ran (or the program took a step for it): the loop goes on
    DONE = "done"  # stop accepted (or given up on): the loop ends
    EXTEND = "extend"  # CheckAnswer sent the stop back: the loop gets its extra steps
    REPEAT = "repeat"  # the same action again, answered with a [REPEATED] note
    INVALID = "invalid"  # no known tool, or its argument missing


@dataclass(frozen=True)
class FinalQuery:
    """The episode's final query and who chose it (`source`: stop, last-nonempty, candidate, extract,
    last-executed or repaired, `+rewritten` when its head was rewritten from `rewritten_from`); `notes`: what the
    policy says about it."""

    sparql: str | None
    source: str | None
    rewritten_from: str | None = None
    notes: tuple[str, ...] = ()
    result: QueryResult | None = None  # `sparql`'s result where the policy ran it (no step did): not run twice


# --- at stop ----------------------------------------------------------------------------------------------------


def judge_stop(episode: Episode, thought: str, raw_args: Any) -> StepOutcome:
    """The controller called stop: accept its final query, or send the stop back with what to fix."""
    execute_stop_argument(episode, thought, raw_args)
    if not episode.no_query_rejections:
        run_candidate(episode, thought)
    observation = episode.call_tool("stop", {})
    final = episode.stop_final or episode.last_executed()
    if not final:
        return reject_no_query(episode, thought, observation)
    for remedy in (reject_empty, reject_form, check_answer):
        outcome = remedy(episode, thought, final)
        if outcome is not None:
            return outcome
    episode.accepted_final = final
    episode.add_step(Step(thought, "stop", {}, observation))
    return StepOutcome.DONE


def execute_stop_argument(episode: Episode, thought: str, raw_args: Any) -> None:
    """A query given to stop as its argument, not yet executed, is executed as a step of its own."""
    given = parse_tool_args(raw_args, ["sparql"]).get("sparql")
    if (
        isinstance(given, str)
        and form_of(given) in QUERY_FORMS
        and given.strip() != (episode.last_executed() or "").strip()
    ):
        episode.program_execute(thought, given, "from-stop")


def run_candidate(episode: Episode, thought: str, at_end: bool = False) -> str | None:
    """Nothing executed yet and the model stops: the lookup's candidate query is run as a step of its own
    (`auto_run`); the query when it was run. `at_end`: the episode ended with no non-empty result; the candidate
    is run unless it was already."""
    candidate = episode.candidate
    if (
        not candidate
        or (episode.last_executed() and not at_end)
        or not episode.variant.agent.auto_run
        or episode.status_of(candidate) is not None
    ):
        return None
    episode.program_execute(
        thought, candidate, "from-suggestion" if candidate == episode.proposal else "from-candidate"
    )
    episode.auto_runs += 1
    return candidate


def reject_no_query(episode: Episode, thought: str, observation: str) -> StepOutcome:
    """No query was executed: the stop is sent back once, naming the lookup's proposal; the second one ends the
    episode without a query, as the first one does where the variant sends nothing back (`reject_no_query_stop`)."""
    if episode.no_query_rejections >= MAX_NO_QUERY_REJECTIONS or not episode.variant.agent.reject_no_query_stop:
        episode.add_step(Step(thought, "stop", {}, observation))
        episode.stopped_without_query = True
        return StepOutcome.DONE
    episode.no_query_rejections += 1
    suggestion = episode.proposal
    example = f' For example: execute_sparql({{"sparql": "{suggestion}"}}).' if suggestion else ""
    episode.add_step(
        Step(
            thought,
            "stop",
            {},
            "No query has been executed yet, so there is no final query. "
            "Execute the query that answers the question with execute_sparql, then stop." + example,
            note="rejected",
        )
    )
    return StepOutcome.CONTINUE


def reject_empty(episode: Episode, thought: str, final: str) -> StepOutcome | None:
    """A final query with no result (empty or blocked) is sent back once (`reject_empty_stop`)."""
    status = episode.status_of(final)
    if (
        status not in ("empty", "blocked")
        or not episode.variant.agent.reject_empty_stop
        or episode.empty_rejections >= MAX_EMPTY_REJECTIONS
    ):
        return None
    episode.empty_rejections += 1
    episode.add_step(
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
    return StepOutcome.CONTINUE


def reject_form(episode: Episode, thought: str, final: str) -> StepOutcome | None:
    """A final query of the wrong form is sent back once, unless `rewrite_form` can rewrite it at the end
    keeping the question (`form_rewrite`)."""
    problem = form_problem(episode.imposed_form, final, episode.result_of(final))
    if problem and episode.variant.agent.form_rewrite and keeps_the_question(final, episode.imposed_form):
        problem = None
    if not problem or episode.form_rejections >= MAX_FORM_REJECTIONS:
        return None
    episode.form_rejections += 1
    episode.add_step(Step(thought, "stop", {}, "Not accepted. " + problem, note="rejected"))
    return StepOutcome.CONTINUE


def check_answer(episode: Episode, thought: str, final: str) -> StepOutcome | None:
    """CheckAnswer's verdict on the final query, once: an incomplete one is sent back with extra steps."""
    if episode.check is None or episode.checked:
        return None
    episode.checked = True
    verdict = episode.check(episode, final)
    if not verdict:
        return None
    episode.add_step(Step(thought, "stop", {}, "Not accepted yet. " + verdict, note="rejected"))
    return StepOutcome.EXTEND


# --- on a repeated action ------------------------------------------------------------------------------------------


def assist_repeat(episode: Episode, thought: str, name: str, args: dict[str, Any], at: int) -> StepOutcome | None:
    """The step a repeated action circles, taken for it (`assist_repeats`; None: nothing left to suggest, a plain
    repeat). `at`: the step that first took the action.

    A successful query executed again is the answer: it stops with it (judged as any stop). Otherwise the repeated
    step's own `Next:` suggestion is followed where it is still open (a search's named hit is looked up), else the
    latest lookup's proposed query is executed if it never was."""
    if not episode.variant.agent.assist_repeats:
        return None
    if name == "execute_sparql":
        sparql = str(args.get("sparql") or "").strip()
        if sparql and episode.status_of(sparql) == "ok" and sparql == (episode.last_executed() or "").strip():
            _assisted(episode)
            return judge_stop(episode, thought, {})
    if name == "search_wikidata":
        eid = named_lookup(episode.steps[at - 1].observation)
        if eid and not episode.looked_up(eid):
            _assisted(episode)
            episode.program_step(thought, "get_wikidata_entry", {"qid": eid}, "from-repeat")
            return StepOutcome.CONTINUE
    suggestion = episode.proposal
    if not suggestion or episode.status_of(suggestion) is not None:
        return None
    _assisted(episode)
    episode.program_execute(thought, suggestion, "from-repeat")
    return StepOutcome.CONTINUE


def _assisted(episode: Episode) -> None:
    """The program answered a repeat with the step it circles: counted, and the run of repeats starts again."""
    episode.repeats, episode.assisted = 0, episode.assisted + 1


# --- at the end ------------------------------------------------------------------------------------------------------


def decide(
    episode: Episode, extract: Callable[[Episode], str | None] | None = None, candidate: bool = True
) -> FinalQuery:
    """The episode's final query once its steps are over. `extract`: the extract call (None: no LM call);
    `candidate`: the lookup's candidate may be run (a query, not an LM call)."""
    notes: list[str] = []
    final: str | None = episode.accepted_final
    source: str | None = "stop"
    if not final:
        final, source = last_nonempty(episode)
    acted = any(s.note not in NO_RESULT for s in episode.steps)
    if not final and acted and candidate:
        ran = run_candidate(episode, "The episode ended without an answer.", at_end=True)
        if ran and episode.status_of(ran) == "ok" and nonempty(episode.result_of(ran)):
            final, source = ran, "candidate"
    if (
        not final
        and acted
        and extract is not None
        and not (episode.stopped_without_query and not episode.variant.agent.reject_no_query_stop)
    ):
        final = extract(episode)
        source = "extract" if final else None
    if not final:
        final = episode.last_executed()
        source = "last-executed" if final else None
    if final and episode.variant.agent.seen_ids_only and not nonempty(episode.result_of(final)):
        final, source = seen_ids_only(episode, final, source, notes)
    if not final:
        return FinalQuery(None, source, None, tuple(notes))
    return rewrite_form(episode, final, source, notes)


def last_nonempty(episode: Episode) -> tuple[str | None, str | None]:
    """The last execution with a non-empty result (neither blocked nor failed)."""
    for ex in reversed(episode.executions()):
        if ex.status not in ("blocked", "error") and nonempty(ex.result):
            return ex.sparql, "last-nonempty"
    return None, None


def seen_ids_only(episode: Episode, final: str, source: str | None, notes: list[str]) -> tuple[str | None, str | None]:
    """(final query, source) once every id it names is one an observation showed or the KG knows: a query
    with an unseen, unknown id is replaced by the lookup's candidate query ("repaired"), else dropped."""
    seen: set[str] = set()
    for s in episode.steps:
        seen |= mentioned_ids(s.observation)
    unseen = unseen_ids(episode.ctx, final, seen)
    if not unseen:
        return final, source
    what = f"the {source or 'final'} query names {', '.join(unseen[:4])}, in no observation nor the graph"
    candidate = episode.candidate
    if candidate and candidate != final and episode.status_of(candidate) in (None, "ok"):
        notes.append(f"{what}: replaced by the lookup's candidate query")
        return candidate, "repaired"
    notes.append(f"{what}: no final query")
    return None, None


def rewrite_form(episode: Episode, final: str, source: str | None, notes: list[str]) -> FinalQuery:
    """The final query with its head rewritten to the question's form where it has another one and the rewrite
    keeps the question (`form_rewrite`)."""
    result = episode.result_of(final)
    if result is None and episode.form == "COUNT" and form_of(final) == "SELECT":
        result = unstepped_result(episode, final)
    problem = form_problem(episode.form, final, result)
    if problem and not episode.variant.agent.form_rewrite:
        notes.append(
            f"the final query has the wrong form ({form_of(final)} for {episode.form}); not rewritten in this variant"
        )
    elif problem:
        rewritten = to_form(episode.form, final, result)
        if rewritten:
            return FinalQuery(rewritten, f"{source}+rewritten", final, tuple(notes))
        notes.append(f"the final query has the wrong form ({form_of(final)} for {episode.form})")
    return FinalQuery(final, source, None, tuple(notes), result)


def unstepped_result(episode: Episode, final: str) -> QueryResult | None:
    """The result of a final query no step ran (the extract call's): whether a COUNT question's SELECT is to be
    counted depends on its values (stored numbers are the answer); None when it fails or is refused."""
    try:
        return episode.ctx.query(final)
    except SparqlError:
        return None


def nonempty(result: QueryResult | None) -> bool:
    """An ASK's answer, or a SELECT with at least one row."""
    if isinstance(result, AskResult):
        return True
    if isinstance(result, SelectResult):
        return bool(result.rows)
    return False


__all__ = ["FinalQuery", "StepOutcome", "assist_repeat", "decide", "judge_stop", "nonempty", "run_candidate"]
