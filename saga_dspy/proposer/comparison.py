"""A comparative bounds an amount by a number: "Which countries have more than two official languages?" keeps the
candidate's answers with more than two values of official language; "cities with more than 250000 inhabitants"
those whose population is above it.

Grammar finds the comparative, the number and what is compared (`words.compared_amount`); the graph names the
property: one the answers hold whose label or alias those words meet (`superlative.amount_property`). A quantity
is compared by its value, an item-valued property by how many values each answer has. A comparison no answer
passes leaves the candidate as it was."""

from __future__ import annotations

from saga_dspy.grounding.context import QuestionContext
from saga_dspy.grounding.render import counted_query, items_body, items_query
from saga_dspy.grounding.words import compared_amount
from saga_dspy.kg.flavours.datatypes import ITEM_DATATYPES, QUANTITY

from .superlative import amount_property


def compare(ctx: QuestionContext, sparql: str | None) -> str | None:
    """`sparql` (a lookup's `SELECT DISTINCT ?x WHERE { … }` query) kept to the answers whose amount the question's
    comparative bounds; unchanged where it has none, or its words name no property the answers hold."""
    body = items_body(sparql)
    found = compared_amount(ctx.question) if body is not None else None
    if body is None or found is None:
        return sparql
    phrase, op, number = found
    named = amount_property(ctx, body, phrase, (*QUANTITY, *ITEM_DATATYPES))
    if named is None:
        return sparql
    pid, datatype = named
    bound = f"{number:g}" if number != int(number) else str(int(number))
    if datatype in QUANTITY:
        compared = items_query(f"{body} . ?x wdt:{pid} ?v FILTER(?v {op} {bound})")
    else:
        compared = counted_query(f"{body} . ?x wdt:{pid} ?v", f"HAVING(COUNT(DISTINCT ?v) {op} {bound})")
    return compared if ctx.rows(f"{compared} LIMIT 1", optional=True) else sparql  # some answer passes


__all__ = ["compare"]
