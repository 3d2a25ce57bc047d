"""The final-query policy: the one place that decides which query an episode answers with. It reads the episode
(`EpisodeView`) and returns decisions the episode applies (`agent.episode`): steps the program takes for the model
(`ProgramStep`), what a stop comes to (`Verdict`), the final query (`FinalQuery`); it writes no episode field.

At stop, in order, each step switched by the variant's `AgentFlags` (variants.py):
    stop_argument           a query given to stop (or a shown candidate it names by number) is executed first,
                            so stop marks it
    fallback_at_stop        nothing executed yet: the lookup's first candidate is run, the program's (`auto_run`)
    judge_stop              the verdict on the stop:
      reject_no_query       no query at all: sent back once, with the lookup's proposal as an example
                            (`reject_no_query_stop`; else the episode ends there with no final query)
      reject_empty          an empty or blocked final query: sent back once (`reject_empty_stop`)
      reject_form           a final query of the wrong form: sent back once, unless the end rewrites it
                            (`query_form`, `form_rewrite`)
      check_answer          CheckAnswer's verdict: sent back once with extra steps (`Settings.check_answer`)
On a repeated action (`assist_repeat`, `assist_repeats`): the step it circles is taken for it.
At the end (`fallback_at_end`, then `decide`): the accepted stop's query, else the lookup's candidate run by the
program as the episode's fallback, else the last non-empty execution, else the extract call's (not after a stop
the variant ends with no query), else the last executed one; then `seen_ids_only` and `rewrite_form`. Who wrote
the final query: `agent.authorship`.

Why each remedy exists is in docs/DESIGN.md (the final query)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any, Protocol

from saga_dspy.agent.query_form import QUERY_FORMS, form_of, form_problem, keeps_the_question, to_form
from saga_dspy.agent.trajectory import Step
from saga_dspy.grounding.context import Execution, QuestionContext
from saga_dspy.grounding.provenance import mentioned_ids, unseen_ids
from saga_dspy.kg.errors import SparqlError
from saga_dspy.kg.results import AskResult, QueryResult, SelectResult
from saga_dspy.tools.search import named_lookup
from saga_dspy.variants import Variant

MAX_FORM_REJECTIONS = 1  # a final query of the wrong form the program cannot rewrite is sent back this many times
MAX_NO_QUERY_REJECTIONS = 1  # stop() before any executed query is sent back this many times
MAX_EMPTY_REJECTIONS = 1  # stop() on an empty / blocked final query is sent back this many times
NO_RESULT = ("unparsable", "unknown-tool", "bad-args", "repeated")  # steps that did nothing
ENDED = "The episode ended without an answer."  # the thought of the fallback run at the end

STOP_ARGUMENTS = ("sparql", "candidate")  # what stop() may be given: a query, or a shown candidate's number


class StepOutcome(Enum):
    """What one controller action did to the episode (`Episode.run_tool`)."""

    CONTINUE = "continue"  # a tool ran (or the program took a step for it): the loop goes on
    DONE = "done"  # stop accepted (or given up on): the loop ends
    EXTEND = "extend"  # CheckAnswer sent the stop back: the loop gets its extra steps
    REPEAT = "repeat"  # the same action again, answered with a [REPEATED] note
    INVALID = "invalid"  # no known tool, or its argument missing


class EpisodeView(Protocol):
    """What the policy reads of an episode (`agent.episode.Episode`)."""

    variant: Variant
    ctx: QuestionContext
    form: str
    steps: list[Step]
    proposal: str | None
    candidate: str | None
    stop_final: str | None
    shown: list[tuple[int, str]]
    accepted_final: str | None
    no_query_rejections: int
    stopped_without_query: bool
    empty_rejections: int
    form_rejections: int
    checked: bool
    check: Any  # (episode, final query) -> what to fix, or None; None: no check

    @property
    def imposed_form(self) -> str: ...

    def last_executed(self) -> str | None: ...

    def status_of(self, sparql: str) -> str | None: ...

    def result_of(self, sparql: str) -> QueryResult | None: ...

    def executions(self) -> list[Execution]: ...

    def looked_up(self, eid: str) -> bool: ...


@dataclass(frozen=True)
class ProgramStep:
    """A step the program takes for the model (`tool` with `args`; `note` says why: from-stop, from-candidate,
    from-suggestion, from-repeat); `auto_run`: the lookup's candidate run as the fallback."""

    tool: str
    args: dict[str, Any]
    note: str
    auto_run: bool = False

    @classmethod
    def execute(cls, sparql: str, note: str, auto_run: bool = False) -> ProgramStep:
        return cls("execute_sparql", {"sparql": sparql}, note, auto_run)


@dataclass(frozen=True)
class Verdict:
    """What a stop comes to: the observation its step records (`note` "rejected" when sent back), the outcome, the
    bounded allowances it spends (`spends`: names of the episode's counters, `checked` for the answer check) and
    the final query it accepts (None: not accepted)."""

    outcome: StepOutcome
    observation: str
    note: str = ""
    spends: tuple[str, ...] = ()
    accepted: str | None = None


@dataclass(frozen=True)
class JudgeAsStop:
    """A repeated action that is the answer: the episode judges it as a stop."""


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


def stop_argument(episode: EpisodeView, args: dict[str, Any]) -> ProgramStep | None:
    """A query given to stop as its argument, not yet executed, is executed as a step of its own (the model wrote
    it: its note is `from-stop`); so is the shown candidate the model names by its number (`{"candidate": N}`):
    the model chose it, the program only runs it. `args`: stop's arguments as parsed (`STOP_ARGUMENTS`)."""
    given = chosen_candidate(episode, args.get("candidate", args.get("sparql")))
    given = given or args.get("sparql")
    if (
        isinstance(given, str)
        and form_of(given) in QUERY_FORMS
        and given.strip() != (episode.last_executed() or "").strip()
    ):
        return ProgramStep.execute(given, "from-stop")
    return None


def chosen_candidate(episode: EpisodeView, number: Any) -> str | None:
    """The query of the shown candidate numbered `number` (the latest lookup's of that rank), else None."""
    text = str(number).strip().strip("#.") if isinstance(number, (int, str)) else ""
    if not text.isdigit():
        return None
    return next((query for rank, query in reversed(episode.shown) if rank == int(text)), None)


def fallback_at_stop(episode: EpisodeView) -> ProgramStep | None:
    """Nothing executed yet and the model stops (the first time): the lookup's candidate is run as the program's
    fallback (`auto_run`)."""
    if episode.no_query_rejections or episode.last_executed():
        return None
    return _fallback(episode)


def _fallback(episode: EpisodeView) -> ProgramStep | None:
    """The lookup's candidate as the program's step, where the variant runs it and it never ran."""
    candidate = episode.candidate
    if not candidate or not episode.variant.agent.auto_run or episode.status_of(candidate) is not None:
        return None
    note = "from-suggestion" if candidate == episode.proposal else "from-candidate"
    return ProgramStep.execute(candidate, note, auto_run=True)


def judge_stop(episode: EpisodeView, observation: str) -> Verdict:
    """The verdict on a stop whose tool answered `observation`: accept its final query, or send it back."""
    final = episode.stop_final or episode.last_executed()
    if not final:
        return reject_no_query(episode, observation)
    for remedy in (reject_empty, reject_form):
        verdict = remedy(episode, final)
        if verdict is not None:
            return verdict
    return check_answer(episode, final, observation)


def reject_no_query(episode: EpisodeView, observation: str) -> Verdict:
    """No query was executed: the stop is sent back once, naming the lookup's proposal; the second one ends the
    episode without a query, as the first one does where the variant sends nothing back (`reject_no_query_stop`)."""
    if episode.no_query_rejections >= MAX_NO_QUERY_REJECTIONS or not episode.variant.agent.reject_no_query_stop:
        return Verdict(StepOutcome.DONE, observation)
    suggestion = episode.proposal
    example = f' For example: execute_sparql({{"sparql": "{suggestion}"}}).' if suggestion else ""
    return Verdict(
        StepOutcome.CONTINUE,
        "No query has been executed yet, so there is no final query. "
        "Execute the query that answers the question with execute_sparql, then stop." + example,
        "rejected",
        ("no_query_rejections",),
    )


def reject_empty(episode: EpisodeView, final: str) -> Verdict | None:
    """A final query with no result (empty or blocked) is sent back once (`reject_empty_stop`)."""
    status = episode.status_of(final)
    if (
        status not in ("empty", "blocked")
        or not episode.variant.agent.reject_empty_stop
        or episode.empty_rejections >= MAX_EMPTY_REJECTIONS
    ):
        return None
    return Verdict(
        StepOutcome.CONTINUE,
        f"Not accepted: the final query returns no result ({status}). "
        "The question has an answer in the graph: change the property, its direction or the entity, "
        "execute the query again, then stop.",
        "rejected",
        ("empty_rejections",),
    )


def reject_form(episode: EpisodeView, final: str) -> Verdict | None:
    """A final query of the wrong form is sent back once, unless `rewrite_form` can rewrite it at the end
    keeping the question (`form_rewrite`)."""
    problem = form_problem(episode.imposed_form, final, episode.result_of(final))
    if problem and episode.variant.agent.form_rewrite and keeps_the_question(final, episode.imposed_form):
        problem = None
    if not problem or episode.form_rejections >= MAX_FORM_REJECTIONS:
        return None
    return Verdict(StepOutcome.CONTINUE, "Not accepted. " + problem, "rejected", ("form_rejections",))


def check_answer(episode: EpisodeView, final: str, observation: str) -> Verdict:
    """CheckAnswer's verdict on the final query, once: an incomplete one is sent back with extra steps; else the
    stop is accepted."""
    if episode.check is None or episode.checked:
        return Verdict(StepOutcome.DONE, observation, accepted=final)
    verdict = episode.check(episode, final)
    if not verdict:
        return Verdict(StepOutcome.DONE, observation, spends=("checked",), accepted=final)
    return Verdict(StepOutcome.EXTEND, "Not accepted yet. " + verdict, "rejected", ("checked",))


# --- on a repeated action ------------------------------------------------------------------------------------------


def assist_repeat(episode: EpisodeView, name: str, args: dict[str, Any], at: int) -> ProgramStep | JudgeAsStop | None:
    """The step a repeated action circles, to be taken for it (`assist_repeats`; None: nothing left to suggest, a
    plain repeat). `at`: the step that first took the action.

    A successful query executed again is the answer: it is judged as a stop. Otherwise the repeated step's own
    `Next:` suggestion is followed where it is still open (a search's named hit is looked up), else the latest
    lookup's proposed query is executed if it never was."""
    if not episode.variant.agent.assist_repeats:
        return None
    if name == "execute_sparql":
        sparql = str(args.get("sparql") or "").strip()
        if sparql and episode.status_of(sparql) == "ok" and sparql == (episode.last_executed() or "").strip():
            return JudgeAsStop()
    if name == "search_wikidata":
        eid = named_lookup(episode.steps[at - 1].observation)
        if eid and not episode.looked_up(eid):
            return ProgramStep("get_wikidata_entry", {"qid": eid}, "from-repeat")
    suggestion = episode.proposal
    if not suggestion or episode.status_of(suggestion) is not None:
        return None
    return ProgramStep.execute(suggestion, "from-repeat")


# --- at the end ------------------------------------------------------------------------------------------------------


def fallback_at_end(episode: EpisodeView) -> ProgramStep | None:
    """The steps are over with no accepted stop and no non-empty result: the lookup's candidate is run as the
    program's fallback (`auto_run`), unless it already ran."""
    if episode.accepted_final or last_nonempty(episode)[0] or not _acted(episode.steps):
        return None
    return _fallback(episode)


def _acted(steps: Sequence[Step]) -> bool:
    return any(s.note not in NO_RESULT for s in steps)


def decide(
    episode: EpisodeView, extract: Callable[[Any], str | None] | None = None, ran: str | None = None
) -> FinalQuery:
    """The episode's final query once its steps are over. `extract`: the extract call (None: no LM call);
    `ran`: the fallback the program ran at the end (`fallback_at_end`)."""
    notes: list[str] = []
    final: str | None = episode.accepted_final
    source: str | None = "stop"
    if not final and ran and episode.status_of(ran) == "ok" and nonempty(episode.result_of(ran)):
        final, source = ran, "candidate"
    if not final:
        final, source = last_nonempty(episode)
    acted = _acted(episode.steps)
    ended_bare = episode.stopped_without_query and not episode.variant.agent.reject_no_query_stop
    if not final and acted and extract is not None and not ended_bare:
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


def last_nonempty(episode: EpisodeView) -> tuple[str | None, str | None]:
    """The last execution with a non-empty result (neither blocked nor failed)."""
    for ex in reversed(episode.executions()):
        if ex.status not in ("blocked", "error") and nonempty(ex.result):
            return ex.sparql, "last-nonempty"
    return None, None


def seen_ids_only(
    episode: EpisodeView, final: str, source: str | None, notes: list[str]
) -> tuple[str | None, str | None]:
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


def rewrite_form(episode: EpisodeView, final: str, source: str | None, notes: list[str]) -> FinalQuery:
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


def unstepped_result(episode: EpisodeView, final: str) -> QueryResult | None:
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


__all__ = [
    "ENDED",
    "EpisodeView",
    "FinalQuery",
    "JudgeAsStop",
    "ProgramStep",
    "StepOutcome",
    "Verdict",
    "assist_repeat",
    "decide",
    "fallback_at_end",
    "fallback_at_stop",
    "judge_stop",
    "nonempty",
    "stop_argument",
]
