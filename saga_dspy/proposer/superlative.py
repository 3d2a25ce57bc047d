"""A superlative orders the candidate's answers and keeps the first: "What is the highest mountain?" is the
mountains by elevation, descending, one.

Both halves are data mined from train gold (`grounding.lexicon`): which way a word orders (`Lexicon.order`:
"highest" DESC, "first" ASC) and by which property (the word's between-variables rows of the `properties` table:
"highest" → elevation above sea level, "longest" → length), kept to time and quantity properties the answers hold.
A word no train question decides, or a property none of the answers has, leaves the candidate as it was.

An amount ("the most official languages", "the least inhabitants") names its property itself: one the answers
hold whose label or alias the words after the degree word meet. A quantity orders by its value; an item-valued
property by how many values each answer has. Where the words name a class instead ("the most films"), the answers
are ordered by how many of its members point to each of them."""

from __future__ import annotations

from saga_dspy.grounding.answer_fit import HELD_SAMPLE, direct_properties, held_properties
from saga_dspy.grounding.context import QuestionContext
from saga_dspy.grounding.ranking import ALIAS, rank_properties
from saga_dspy.grounding.render import counted_query, items_body, items_query
from saga_dspy.grounding.words import WORD, amount_phrase, phrase_key
from saga_dspy.kg.flavours.datatypes import ITEM_DATATYPES, ORDERED

BETWEEN = "var/answer"  # a property between the answer and a variable: what a gold ORDER BY orders by
TRIED = 3  # properties an amount's words meet, checked at most


def order_by_superlative(ctx: QuestionContext, sparql: str | None) -> str | None:
    """`sparql` (a lookup's `SELECT DISTINCT ?x WHERE { … }` query) ordered by the question's superlative and cut
    to its first answer; unchanged where neither the lexicon's order nor an amount finds a property the answers
    hold."""
    body = items_body(sparql)
    if body is None:
        return sparql
    found = ctx.lexicon.order(ctx.question)
    ordered = _by_word(ctx, body, *found) if found is not None else None
    amount = amount_phrase(ctx.question) if ordered is None else None
    if amount is not None:
        ordered = _by_amount(ctx, body, *amount) or _by_members(ctx, body, *amount)
    return ordered or sparql


def _by_word(ctx: QuestionContext, body: str, word: str, direction: str) -> str | None:
    """Ordered by the word's mined property (time or quantity) that the answers hold."""
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
    return None


def _by_amount(ctx: QuestionContext, body: str, phrase: str, direction: str) -> str | None:
    """Ordered by the property the amount's words name: by its value (a quantity), or by how many values each
    answer has (item-valued: "the most official languages")."""
    named = amount_property(ctx, body, phrase, (*ORDERED, *ITEM_DATATYPES))
    if named is None:
        return None
    pid, datatype = named
    ordered = f"{body} . ?x wdt:{pid} ?v"
    if datatype in ORDERED:
        return items_query(ordered, f" ORDER BY {direction}(?v) LIMIT 1")
    return counted_query(ordered, f"ORDER BY {direction}(COUNT(DISTINCT ?v)) LIMIT 1")


def _by_members(ctx: QuestionContext, body: str, phrase: str, direction: str) -> str | None:
    """Ordered by how many members of the class the amount's words name point to each answer, through the property
    of theirs the question's other words name: "Who produced the most films?" (films' producer), "Which actor was
    casted in the most movies?" (films' cast member, among actors). Where the body is about that class itself (the
    lookup was of "film"), the answers are whatever its members point to."""
    counted = ctx.schema.class_named(phrase_key(phrase)) or ctx.lexicon.item_class(phrase_key(phrase))
    if not counted:
        return None
    members = f"?v wdt:{ctx.flavour.type_pid} wd:{counted}"
    answers = "" if f"wd:{counted}" in body.split() else body
    sample = (
        f"{{ SELECT DISTINCT ?x WHERE {{ {answers} }} LIMIT {HELD_SAMPLE} }} ?v ?p ?x . {members}"
        if answers
        else f"{{ SELECT ?v WHERE {{ {members} }} LIMIT {HELD_SAMPLE} }} ?v ?p ?x . FILTER(isIRI(?x))"
    )
    pids = direct_properties(ctx, sample)
    rest = " ".join(w for w in WORD.findall(ctx.question.lower()) if w not in phrase.split())
    scores = rank_properties(rest, pids, ctx.schema, label_of=ctx.property_label, header=(), lexicon=ctx.lexicon)
    best = next((s for s in scores if s.relevance >= ALIAS and not s.niche), None)
    if best is None:
        return None
    linked = " . ".join(p for p in (answers, members, f"?v wdt:{best.pid} ?x") if p)
    return counted_query(linked, f"ORDER BY {direction}(COUNT(DISTINCT ?v)) LIMIT 1")


def amount_property(ctx: QuestionContext, body: str, phrase: str, datatypes: tuple[str, ...]) -> tuple[str, str] | None:
    """(property, datatype): the property of one of `datatypes` that the answers hold and the amount's words name
    as its label or an alias would ("official languages", "inhabitants": population); None for none."""
    scores = rank_properties(phrase, held_properties(ctx, body), ctx.schema, label_of=ctx.property_label, header=())
    for score in [s for s in scores if s.relevance >= ALIAS and not s.niche][:TRIED]:  # held: some answer has it
        ps = ctx.schema.get(score.pid)
        if ps is not None and ps.datatype in datatypes:
            return score.pid, ps.datatype
    return None


__all__ = ["ORDERED", "amount_property", "order_by_superlative"]
