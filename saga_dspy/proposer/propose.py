"""The proposer's entry point: from the question and a lookup, a ranked list of executable candidate queries, each
with how it was built, its executed answer preview and whether its answers fit the expected answer type.

Rank 1 is the lookup's candidate (its best one-hop query through the rules the question calls for,
`candidate.build`); then the same best query before those rules changed it, then the lookup's other relevant
one-hop queries (the first through the same rules, the rest as they are: the rules run queries). Each is executed
once: one that fails is dropped, one with no answer goes after those with answers (order kept otherwise)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from saga_dspy.grounding.answer_fit import values_fit
from saga_dspy.grounding.context import QuestionContext
from saga_dspy.grounding.incoming import IncomingView
from saga_dspy.grounding.lookup_view import Arrangement
from saga_dspy.grounding.neighbourhood import Neighbourhood
from saga_dspy.grounding.render import clip, entity_text, literal_text
from saga_dspy.kg.errors import SparqlError
from saga_dspy.kg.results import AskResult, Binding, QueryResult, SelectResult

from .candidate import ONE_HOP, alternatives, answers_class, best_candidate, build

PREVIEWED = 3  # labelled answers a preview shows
LABEL_CHARS = 40
EXTRA_BASES = 2  # candidates tried beyond the number wanted (some fail, return nothing, or repeat another)
RULED_BASES = 1  # other one-hop queries the rules are also run on (each rule may run a query or two)


@dataclass(frozen=True)
class Preview:
    """A candidate's executed answers: how many (`capped`: the endpoint cut them off), up to three of them labelled
    (`Label (Q1)`, a literal, or `true` / `false` for an ASK)."""

    count: int
    answers: tuple[str, ...] = ()
    capped: bool = False

    def render(self) -> str:
        if self.count == 0:
            return "no answers"
        n = f"{self.count}{'+' if self.capped else ''} answer{'s' if self.count != 1 else ''}"
        more = " …" if self.count > len(self.answers) else ""
        return f"{n}: {'; '.join(self.answers)}{more}" if self.answers else n


@dataclass(frozen=True)
class Candidate:
    """One executable candidate query: its rank (1 = best), the query, how it was built (`built`: `one-hop` and
    each rule that changed it: relation, narrowed by a named value, one hop further, comparative, superlative,
    ASK), its preview, and whether its answers fit the expected answer type (None: nothing tells)."""

    rank: int
    sparql: str
    built: tuple[str, ...]
    preview: Preview | None  # None: not executed (none are shown)
    fits: bool | None = None


def propose(
    ctx: QuestionContext,
    nb: Neighbourhood,
    arrangement: Arrangement,
    incoming: IncomingView | None,
    limit: int,
) -> list[Candidate]:
    """Up to `limit` ranked candidates of the lookup of `nb`, executed; with `limit` 0, the first one alone,
    unexecuted (its `preview` None: nothing is shown, it is kept as the fallback)."""
    if limit <= 0:
        first = next(_built(ctx, nb, arrangement, incoming, 0), None)
        return [Candidate(1, first[0], first[1], None)] if first else []
    ranked: list[tuple[bool, str, tuple[str, ...], QueryResult]] = []
    seen: set[str] = set()
    for sparql, how in _built(ctx, nb, arrangement, incoming, limit + EXTRA_BASES):
        if sum(1 for r in ranked if r[0]) >= limit or len(seen) >= limit + EXTRA_BASES:
            break
        if sparql in seen:
            continue
        seen.add(sparql)
        try:
            result = ctx.query(sparql)
        except SparqlError:
            continue
        ranked.append((_answers(result) > 0, sparql, how, result))
    ranked.sort(key=lambda r: not r[0])  # stable: those with answers first, in their order
    kept = ranked[:limit]
    labels = _labels(ctx, [result for *_, result in kept])
    return [
        Candidate(rank, sparql, how, preview(ctx, result, labels), _fits(ctx, result))
        for rank, (_, sparql, how, result) in enumerate(kept, start=1)
    ]


def _built(
    ctx: QuestionContext, nb: Neighbourhood, arrangement: Arrangement, incoming: IncomingView | None, bases: int
) -> Iterator[tuple[str, tuple[str, ...]]]:
    """The candidates in rank order, built one at a time (the rules run queries): the lookup's best query through
    the rules, the best query as it was where they changed it, then the other one-hop queries through the rules."""
    best = best_candidate(nb.id, arrangement, incoming, ctx.flavour.type_pid, answers_class(ctx, nb))
    first = build(ctx, nb, best)
    if first is not None:
        yield first
    if best and (first is None or first[0] != best):
        yield best, (ONE_HOP,)
    for n, base in enumerate(b for b in alternatives(nb.id, arrangement, incoming, bases) if b != best):
        if n >= RULED_BASES:  # the rules run queries: the later ones stay one-hop
            yield base, (ONE_HOP,)
        elif (built := build(ctx, nb, base)) is not None:
            yield built


def _answers(result: QueryResult) -> int:
    if isinstance(result, AskResult):
        return 1
    return len(result.rows) if isinstance(result, SelectResult) else 0


def _firsts(result: QueryResult) -> list[Binding]:
    """The first PREVIEWED values of a SELECT result's first variable."""
    if not isinstance(result, SelectResult) or not result.variables:
        return []
    var = result.variables[0]
    return [row[var] for row in result.rows if var in row][:PREVIEWED]


def _labels(ctx: QuestionContext, results: list[QueryResult]) -> dict[str, str]:
    """The labels of the entities the previews show, in one query."""
    ids = [i for r in results for b in _firsts(r) if b.is_iri and (i := ctx.flavour.entity_id(b.value))]
    return ctx.labels(list(dict.fromkeys(ids))) if ids else {}


def preview(ctx: QuestionContext, result: QueryResult, labels: dict[str, str]) -> Preview:
    """The answer preview of a candidate's result: its count and the first answers, labelled (`labels`)."""
    if isinstance(result, AskResult):
        return Preview(1, ("true" if result.value else "false",))
    if not isinstance(result, SelectResult) or not result.rows:
        return Preview(0)
    texts = []
    for b in _firsts(result):
        eid = ctx.flavour.entity_id(b.value) if b.is_iri else None
        if eid:
            texts.append(entity_text(eid, labels.get(eid) or ctx.seen.get(eid, ""), LABEL_CHARS))
        else:
            texts.append(clip(b.value, LABEL_CHARS) if b.is_iri else literal_text(b, LABEL_CHARS))
    return Preview(len(result.rows), tuple(texts), result.capped)


def _fits(ctx: QuestionContext, result: QueryResult) -> bool | None:
    """Do the candidate's answers fit the expected answer type? An ASK fits a yes/no question."""
    at = ctx.state.answer_type
    if isinstance(result, AskResult):
        return None if at is None else at.yes_no
    if not isinstance(result, SelectResult) or not result.rows or not result.variables:
        return None
    if at is not None and at.yes_no:
        return False
    var = result.variables[0]
    return values_fit(ctx, [row[var] for row in result.rows if var in row])


__all__ = ["Candidate", "Preview", "propose", "preview"]
