"""The rules that build the proposer's candidates from a lookup: the first is the lookup's candidate query, which
the program also runs as a fallback when an episode would otherwise end with no executed query.

The best one-hop query of the lookup (`best_candidate`), then, each only where the graph and the question say so:
asked of the entity's values for a relation the question puts on it (`relational`: "Obama's wife"), narrowed by
another thing the question names (`named_values`), followed one hop further where its answers are not of the type
asked (`chain`), kept to the answers a comparative bounds (`comparison`), ordered by a superlative and cut to its
first answer (`superlative`); for a yes/no question, the ASK of the value it names (`yes_no`)."""

from __future__ import annotations

from saga_dspy.grounding.context import QuestionContext
from saga_dspy.grounding.incoming import OCCUPATION, POSITION, IncomingView
from saga_dspy.grounding.lookup_view import Arrangement
from saga_dspy.grounding.neighbourhood import Neighbourhood
from saga_dspy.grounding.render import one_hop_query
from saga_dspy.grounding.words import head_phrases, phrase_key

from .chain import follow
from .comparison import compare
from .named_values import narrow
from .relational import through
from .superlative import order_by_superlative
from .yes_no import ask

# how a candidate was built: its first step, then each rule that changed it (in the order they apply)
ONE_HOP = "one-hop"
RELATION = "relation"
NARROWED = "narrowed by a named value"
FURTHER = "one hop further"
COMPARATIVE = "comparative"
SUPERLATIVE = "superlative"
ASK = "ASK"


def lookup_candidate(
    ctx: QuestionContext, nb: Neighbourhood, arrangement: Arrangement, incoming: IncomingView | None
) -> str | None:
    """The candidate of a lookup of `nb` whose properties are arranged as `arrangement` (and `incoming`)."""
    built = build(ctx, nb, best_candidate(nb.id, arrangement, incoming, ctx.flavour.type_pid, answers_class(ctx, nb)))
    return built[0] if built else None


def answers_class(ctx: QuestionContext, nb: Neighbourhood) -> bool:
    """Are the entity's instances the answers (it is the answer type's class, or the question's head noun)?"""
    at = ctx.state.answer_type
    return (at is not None and nb.id in (at.qid, at.items)) or _names_the_answers(ctx, nb)


def build(ctx: QuestionContext, nb: Neighbourhood, base: str | None) -> tuple[str, tuple[str, ...]] | None:
    """`base` (a one-hop query of the lookup) through the rules the question calls for, with the steps that
    changed it: (query, how it was built); None without a base or where a rule leaves nothing."""
    if not base:
        return None
    steps = [ONE_HOP]
    own_values = frozenset(v.id for values in nb.edges.values() for v in values if v.id)

    def step(name: str, before: str | None, after: str | None) -> str | None:
        if after and after != before:
            steps.append(name)
        return after

    moved = step(RELATION, base, through(ctx, nb, base))
    at = ctx.state.answer_type
    if at is not None and at.yes_no:
        final = step(ASK, moved, ask(ctx, nb.id, moved, own_values))
    else:
        narrowed = step(NARROWED, moved, narrow(ctx, nb.id, moved, own_values))
        further = step(FURTHER, narrowed, follow(ctx, narrowed, nb.label))
        compared = step(COMPARATIVE, further, compare(ctx, further))
        final = step(SUPERLATIVE, compared, order_by_superlative(ctx, compared))
    return (final, tuple(steps)) if final else None


def _names_the_answers(ctx: QuestionContext, nb: Neighbourhood) -> bool:
    """Is the entity what the question's head noun names its answers by, by its label or an alias ("Give me all
    cosmonauts" looked up from astronaut, alias cosmonaut), whatever the answer type says?"""
    heads = {phrase_key(p) for p in head_phrases(ctx.question, counted=True)}
    return bool(heads) and any(phrase_key(name) in heads for name in (nb.label, *ctx.names(nb.id)) if name)


def best_candidate(
    eid: str,
    arrangement: Arrangement,
    incoming: IncomingView | None,
    type_pid: str | None = None,
    answers_class: bool = False,
) -> str | None:
    """The query of the lookup's best candidate: its proposal, else the most question-relevant property, one that
    fits the answer type first (outgoing `wd:E wdt:P ?x`, or incoming `?x wdt:P wd:E` when that is at least as
    relevant and its subjects fit the answer type, or it is the only one); with none of those, a class's instances
    (`?x <type_pid> wd:E`). `answers_class`: the entity
    is the class the question names its answers by ("Give me all Czech movies" looked up from film): its instances
    are the answers, whatever the class's own properties match."""
    members = [p for p in (type_pid, OCCUPATION, POSITION) if p and incoming is not None and p in incoming.edges]
    if answers_class and incoming is not None and members:  # its instances, or the people of an occupation, office
        return incoming.query(eid, max(members, key=lambda p: incoming.edges[p].count))
    if arrangement.proposal:
        return arrangement.proposal
    if incoming is not None and incoming.proposal:
        return incoming.proposal
    relevant = [s for s in arrangement.scores if s.relevance > 0 and not s.niche]
    # of the question-relevant properties, one whose range or values fit the answer type goes first ("in which city
    # did X die": place of death, not cause of death); relevance decides among the fitting ones and without any
    out = next((s for s in relevant if s.fits), relevant[0] if relevant else None)
    inc = next(
        (
            s
            for s in (incoming.scores[: len(incoming.shown)] if incoming else [])
            if (s.relevance > 0 or s.fits) and not s.niche
        ),
        None,
    )
    if (
        incoming is not None
        and inc is not None
        and (
            out is None
            or inc.relevance > out.relevance
            or (inc.relevance == out.relevance and inc.fits and not out.fits)
        )
    ):
        return incoming.query(eid, inc.pid)
    if out is not None:
        return one_hop_query(eid, out.pid)
    if incoming is not None and type_pid and type_pid in incoming.shown:
        return incoming.query(eid, type_pid)
    return None


def alternatives(eid: str, arrangement: Arrangement, incoming: IncomingView | None, limit: int) -> list[str]:
    """The lookup's other one-hop queries after its best one, most relevant first: the question-relevant outgoing
    properties (those fitting the answer type first), then the relevant incoming ones shown."""
    relevant = [s for s in arrangement.scores if s.relevance > 0 and not s.niche]
    out = [one_hop_query(eid, s.pid) for s in sorted(relevant, key=lambda s: not s.fits)]
    if incoming is not None:
        out += [
            incoming.query(eid, s.pid)
            for s in incoming.scores[: len(incoming.shown)]
            if (s.relevance > 0 or s.fits) and not s.niche
        ]
    return list(dict.fromkeys(out))[:limit]


__all__ = ["alternatives", "answers_class", "best_candidate", "build", "lookup_candidate"]
