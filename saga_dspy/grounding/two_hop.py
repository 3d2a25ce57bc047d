"""Two-hop proposals: when none of the entity's own properties is both relevant to the
question and fit for the expected answer type, but a property of its values is (cast member →
human → date of birth), propose the path `wd:E wdt:P1/wdt:P2 ?x` — checked on the graph first."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .context import QuestionContext
from .lexicon import Lexicon
from .ranking import DESCRIPTION, PropertyScore, id_order, relevance, word_groups, word_priors

FIRST_HOPS = 3
SECOND_HOPS = 4
CHECKS = 4  # path queries at most per lookup


@dataclass(frozen=True)
class TwoHop:
    first: str
    second: str
    sparql: str

    def path(self) -> str:
        return f"wdt:{self.first}/wdt:{self.second}"


def second_hop_candidates(
    question: str,
    schema,
    fits: Callable[[str], bool],
    *,
    entity_label: str = "",
    exclude: Sequence[str] = (),
    lexicon: Lexicon | None = None,
) -> list[tuple[float, str]]:
    """Schema properties whose label or aliases (or lexicon share) match the question and whose range fits the
    answer type."""
    words = word_groups(question, drop=entity_label.lower().split())
    if not words:
        return []
    out = []
    for pid in schema.pids():
        if pid in exclude:
            continue
        ps = schema.get(pid)
        if ps is None:
            continue
        score = relevance(words, ps.label, ps.aliases, prior=word_priors(words, pid, lexicon))
        if score > 0 and fits(pid):
            out.append((score, pid))
    out.sort(key=lambda t: (-t[0], id_order(t[1])))
    return out[:SECOND_HOPS]


def propose_two_hop(
    ctx: QuestionContext,
    eid: str,
    scores: Sequence[PropertyScore],
    item_valued: Callable[[str], bool],
    fits: Callable[[str], bool],
    entity_label: str = "",
) -> TwoHop | None:
    """The best path (first hop matching more than a description word, second hop relevant and fitting) with a
    non-empty answer."""
    firsts = [s for s in scores if s.relevance > DESCRIPTION and not s.niche and item_valued(s.pid)][:FIRST_HOPS]
    if not firsts:
        return None
    seconds = second_hop_candidates(
        ctx.question, ctx.schema, fits, entity_label=entity_label, exclude=[s.pid for s in firsts], lexicon=ctx.lexicon
    )
    pairs = sorted(((f.relevance + r, f.pid, p) for f in firsts for r, p in seconds), key=lambda t: -t[0])
    for _, p1, p2 in pairs[:CHECKS]:
        sparql = f"SELECT DISTINCT ?x WHERE {{ wd:{eid} wdt:{p1}/wdt:{p2} ?x }}"
        if ctx.rows(f"SELECT ?x WHERE {{ wd:{eid} wdt:{p1} ?y . ?y wdt:{p2} ?x }} LIMIT 1"):
            return TwoHop(p1, p2, sparql)
    return None


__all__ = ["TwoHop", "propose_two_hop", "second_hop_candidates"]
