"""What the lookup shows, in which order, and what it proposes.

The entity's properties are ranked by relevance to the question (`ranking`); the top ones are
shown with their values (the first two also with description, qualifiers and annotations), the
rest as one compact line of `label (Pid)`.
Hints only when relevance and the answer type agree (`agreed`): the ★ and the "Next:" proposal go to
the top-ranked property only when its range fits the expected answer type, it matches more than one
description word, no other fitting property is within half a word match of it (ambiguous) and no
unfitting property is as relevant (the type alone would decide). When no property is both relevant
and fitting, a checked two-hop path may be proposed (its first hop matching more than a description
word); otherwise the observation names the best two or three candidates."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from .context import QuestionContext
from .ranking import DESCRIPTION, PropertyScore, rank_properties
from .render import Block, clip, one_hop_query
from .two_hop import TwoHop, propose_two_hop

TOP_FULL = 3  # properties shown with their values
WITH_DESCRIPTION = 2  # of those, the first ones also with description and annotations (the others compact)
STRONG_EXTRA = 2  # more shown with values when their relevance is strong
STRONG = 1.0
REST_CHARS = 600
REST_LABEL = 28  # a label in the compact rest line is clipped
CANDIDATES = 3
WEAK = DESCRIPTION  # one description word: too little to hint with
MARGIN = 0.5  # a fitting rival within half a word match makes the choice ambiguous
EPS = 1e-6


@dataclass
class Arrangement:
    scores: list[PropertyScore]
    full: list[str]
    rest: list[str]
    starred: set[str] = field(default_factory=set)
    proposal: str | None = None  # the proposed query
    two_hop: TwoHop | None = None

    @property
    def order(self) -> list[str]:
        return self.full + self.rest


def agreed(scores: Sequence[PropertyScore]) -> PropertyScore | None:
    """The top-ranked property when relevance and answer type agree on it: it fits, matches more than one
    description word, no other fitting property comes within MARGIN of it and no unfitting one ties it."""
    if not scores or not scores[0].fits or scores[0].relevance <= WEAK:
        return None
    top = scores[0]
    for s in scores[1:]:
        if s.relevance > 0 and s.relevance >= top.relevance - (MARGIN if s.fits else 0.0) - EPS:
            return None
    return top


def arrange(
    ctx: QuestionContext,
    eid: str,
    entity_label: str,
    pids: Sequence[str],
    fits: Callable[[str], bool],
    item_valued: Callable[[str], bool],
    *,
    confident: bool,
    values: Mapping[str, Sequence[str]] | None = None,
    echoes: frozenset[str] = frozenset(),
) -> Arrangement:
    """`echoes`: properties whose only value is the entity itself ("France: country France"); they answer nothing
    about it, so they are neither ranked nor proposed, only listed last."""
    ranked = [pid for pid in pids if pid not in echoes]
    fit_map = {pid: bool(confident and fits(pid)) for pid in ranked}
    scores = rank_properties(
        ctx.question,
        ranked,
        ctx.schema,
        entity_label=entity_label,
        fits=fit_map,
        label_of=ctx.property_label,
        header=(ctx.flavour.type_pid, ctx.flavour.subclass_pid),
        values=values,
        lexicon=ctx.lexicon,
        direction="out",
    )
    full = [s.pid for s in scores[:TOP_FULL]]
    full += [s.pid for s in scores[TOP_FULL : TOP_FULL + STRONG_EXTRA] if s.relevance >= STRONG and not s.niche]
    rest = [s.pid for s in scores if s.pid not in full] + [pid for pid in pids if pid in echoes]
    top = agreed(scores)
    starred = {top.pid} if top is not None and top.pid in full else set()
    out = Arrangement(scores, full, rest, starred)
    if not ctx.flavour.proposes_queries or not ctx.flags.proposals or not confident or not scores:
        return out
    if top is not None:
        out.proposal = one_hop_query(eid, top.pid)
    elif not any(s.fits and s.relevance > 0 for s in scores):
        hop = propose_two_hop(ctx, eid, scores, item_valued, fits, entity_label)
        if hop is not None:
            out.two_hop = hop
            out.proposal = hop.sparql
    return out


def rest_block(ctx: QuestionContext, rest: Sequence[str]) -> Block | None:
    if not rest:
        return None
    names = [f"{clip(ctx.property_label(pid), REST_LABEL)} ({pid})" for pid in rest]
    text = "Other properties: " + ", ".join(names)
    if len(text) > REST_CHARS:
        shown, used = [], len("Other properties: ")
        for name in names:
            if used + len(name) + 2 > REST_CHARS - 20:
                break
            shown.append(name)
            used += len(name) + 2
        text = "Other properties: " + ", ".join(shown) + f" (+{len(names) - len(shown)} more)"
    return Block(text, text, "other properties")


def tail_lines(ctx: QuestionContext, arrangement: Arrangement, incoming_proposal: str | None = None) -> list[str]:
    if arrangement.proposal is None and incoming_proposal:
        return [f"Next: the items asked for point at this entity; execute e.g. {incoming_proposal}"]
    if arrangement.two_hop is not None:
        hop = arrangement.two_hop
        return [
            f"Two hops: no property of this entity gives the expected answer type, but "
            f"{ctx.property_label(hop.first)} ({hop.first}) → {ctx.property_label(hop.second)} ({hop.second}) does "
            f"(path {hop.path()}). Next: execute {arrangement.proposal}"
        ]
    if arrangement.proposal:
        return [f"Next: execute a query with the property that leads to the answer, e.g. {arrangement.proposal}"]
    best = [s for s in arrangement.scores if s.relevance > 0][:CANDIDATES]
    if best:
        names = ", ".join(f"{clip(ctx.property_label(s.pid), 40)} ({s.pid})" for s in best)
        return [f"Best matches for the question: {names}. Next: execute a query with the one that leads to the answer."]
    return ["Next: execute a query with the property above that leads to the answer."]


__all__ = ["Arrangement", "agreed", "arrange", "rest_block", "tail_lines"]
