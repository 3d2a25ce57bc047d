"""A superlative orders the candidate's answers and keeps the first: "What is the highest mountain?" is the
mountains by elevation, descending, one.

Both halves are data mined from train gold (`grounding.lexicon`): which way a word orders (`Lexicon.order`:
"highest" DESC, "first" ASC) and by which property (the word's between-variables rows of the `properties` table:
"highest" → elevation above sea level, "longest" → length), kept to time and quantity properties the answers hold.
A word no train question decides, or a property none of the answers has, leaves the candidate as it was."""

from __future__ import annotations

from .context import QuestionContext
from .render import items_body, items_query

ORDERED = ("Time", "Quantity")  # datatypes a value orders by
BETWEEN = "var/answer"  # a property between the answer and a variable: what a gold ORDER BY orders by


def order_by_superlative(ctx: QuestionContext, sparql: str | None) -> str | None:
    """`sparql` (a lookup's `SELECT DISTINCT ?x WHERE { … }` query) ordered by the question's superlative and cut
    to its first answer; unchanged where the lexicon decides no order or no ordering property the answers hold."""
    body = items_body(sparql)
    found = ctx.lexicon.order(ctx.question) if body is not None else None
    if body is None or found is None:
        return sparql
    word, direction = found
    rows = ctx.lexicon.properties.get(word, {})
    pids = sorted(
        (
            pid
            for pid, slots in rows.items()
            if BETWEEN in slots and (ps := ctx.schema.get(pid)) is not None and ps.datatype in ORDERED
        ),
        key=lambda pid: -ctx.lexicon.property_prior(word, pid),
    )
    for pid in pids:
        ordered = f"{body} . ?x wdt:{pid} ?v"
        if ctx.rows(f"SELECT ?x WHERE {{ {ordered} }} LIMIT 1", optional=True):
            return items_query(ordered, f" ORDER BY {direction}(?v) LIMIT 1")
    return sparql


__all__ = ["order_by_superlative"]
