"""The check a yes/no question asks of the lookup's candidate.

"Does Neymar play for Real Madrid?" looked up from Neymar gives his teams (`wd:Q142794 wdt:P54 ?x`); the question
asks whether one of them is the thing it names. An ASK of the pattern alone is true whenever Neymar has a team, so
the value is put in: an answer whose English label or alias is a phrase of the question ("Is Rita Wilson the wife
of Tom Hanks?": Rita Wilson), else a thing so named that is of the answers' kind (an instance of a class
some answer is an instance of: Real Madrid, a football club like his teams), which makes the ASK false. Where the
question names no such thing ("Did Elvis Presley have children?"), the ASK asks whether the pattern has answers."""

from __future__ import annotations

import re
from collections.abc import Collection

from saga_dspy.grounding.context import QuestionContext
from saga_dspy.grounding.render import items_body

from .named_values import explained, narrow, phrases

_ANSWER = re.compile(r"\?x\b")


def ask(ctx: QuestionContext, eid: str, sparql: str | None, own_values: Collection[str] = ()) -> str | None:
    """`sparql` (one of the lookup's `SELECT DISTINCT ?x WHERE { … }` queries from `eid`) as the ASK a yes/no
    question means: its answer fixed to the value the question names (the longest phrase naming one), else the
    ASK of its pattern (narrowed by another thing the question names, `narrow`). Any other query unchanged: the
    program rewrites a final query's head to the question's form."""
    body = items_body(sparql)
    if body is None:
        return sparql
    found = phrases(ctx.question, ctx.names(eid), explained(ctx, body))
    if found.texts:
        flavour = ctx.flavour
        for query, var in (
            (flavour.named_answers_query(body, found.texts), "x"),
            (flavour.named_peers_query(body, found.texts), "v"),
        ):
            rows = [r for r in ctx.rows(query, optional=True) if var in r and "l" in r]
            named = [
                (r["l"].value, value) for r in rows if (value := flavour.entity_id(r[var].value)) not in (None, eid)
            ]
            if named:
                _, value = max(named, key=lambda n: (len(n[0].split()), len(n[0]), n[1]))
                return f"ASK WHERE {{ {_ANSWER.sub('wd:' + value, body)} }}"
    narrowed = items_body(narrow(ctx, eid, sparql, own_values)) or body
    return f"ASK WHERE {{ {narrowed} }}"


__all__ = ["ask"]
