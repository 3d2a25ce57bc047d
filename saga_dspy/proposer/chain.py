"""One more hop, where the candidate's answers are not what the question asks for but a property of theirs is.

"To which party does the mayor of Paris belong?" looked up from Paris gives its mayor, a human; the question asks
for a party, and "party" names a property the mayor holds (member of political party). The candidate follows it:
`wd:Q90 wdt:P6 ?y . ?y wdt:P102 ?x`. The evidence is the graph's and the question's: the answers' own types do not
fit the expected answer type, the next property is one the answers hold, words of the question the candidate
does not account for already (the entity's name, its properties' names) name it as an alias would (a
description word is not enough), and what it leads to fits. Answers that fit, or whose fit nothing
tells, are left as they are."""

from __future__ import annotations

import re

from saga_dspy.grounding.answer_fit import answers_fit, held_properties
from saga_dspy.grounding.context import QuestionContext
from saga_dspy.grounding.ranking import ALIAS, rank_properties
from saga_dspy.grounding.render import items_body, items_query

from .named_values import property_words

TRIED = 3  # next properties checked at most
_ANSWER = re.compile(r"\?x\b")


def follow(ctx: QuestionContext, sparql: str | None, entity_label: str = "") -> str | None:
    """`sparql` (a lookup's `SELECT DISTINCT ?x WHERE { … }` query) followed one hop further, through the property
    of its answers the question names best whose values fit the answer type; unchanged where its answers fit, or
    no such property leads to answers that do."""
    body = items_body(sparql)
    if body is None or "?y" in body or answers_fit(ctx, body) is not False:
        return sparql
    pids = held_properties(ctx, body)
    scores = rank_properties(
        ctx.question,
        pids,
        ctx.schema,
        entity_label=" ".join([entity_label, *property_words(ctx, body)]),  # what is named already
        label_of=ctx.property_label,
        header=(),
        lexicon=ctx.lexicon,
        direction="out",
    )
    first = _ANSWER.sub("?y", body)
    for score in [s for s in scores if s.relevance >= ALIAS and not s.niche][:TRIED]:
        hop = f"{first} . ?y wdt:{score.pid} ?x"
        if answers_fit(ctx, hop):
            return items_query(hop)
    return sparql


__all__ = ["follow"]
