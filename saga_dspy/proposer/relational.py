"""The entity reached through a relation the question puts on it: "Obama's wife", "the daughter of Ingrid Bergman".

"In which school did Obama's wife study?" looked up from Obama ranks his own schools first; the question asks
for his spouse's. A relational noun on the entity's mention (after "'s", or before "of") that names one of its
item-valued properties the candidate does not use already (spouse) moves the candidate one step:
`wd:Q76 wdt:P26 ?y . ?y wdt:P69 ?x`. What is asked of ?y is the property of theirs the rest of the question names
as an alias would ("married to": spouse), else the candidate's own property where they hold it. The evidence is
the graph's: the relation is the entity's, and what follows it has answers that do not misfit the answer type.
A relational noun the candidate accounts for already ("the mayor of Paris" with head of government) changes
nothing, nor does one naming the entity's own class, which is apposition ("the country of Panama")."""

from __future__ import annotations

from collections.abc import Collection

from saga_dspy.grounding.answer_fit import answers_fit, held_properties
from saga_dspy.grounding.context import QuestionContext
from saga_dspy.grounding.neighbourhood import Neighbourhood
from saga_dspy.grounding.ranking import ALIAS, rank_properties
from saga_dspy.grounding.render import body_pids, items_body, items_query
from saga_dspy.grounding.words import STOPWORDS, WORD, content_run, stem

from .named_values import property_words

NOUN_WORDS = 2  # a relational noun phrase's longest form ("political leader")
TRIED = 3  # properties of ?y checked at most
_POSSESSIVE = "s"  # "Obama's" reads as the words "obama", "s"


def relation_phrases(question: str, names: Collection[str]) -> list[str]:
    """The noun phrases a mention of the entity (one of its `names` whose content words all occur in the
    question) is the possessor of: "Obama's wife" -> "wife"; "the daughter of Ingrid Bergman" -> "daughter". The
    word next to the mention first, then with the one beyond it ("political leader")."""
    words = WORD.findall((question or "").lower())
    stems = [stem(w) for w in words]
    spans: list[tuple[int, int]] = []
    for name in names:
        content = [stem(w) for w in WORD.findall(name.lower()) if w not in STOPWORDS]
        at = [i for i, s in enumerate(stems) if s in content]
        if content and set(content) <= {stems[i] for i in at}:
            spans.append((min(at), max(at)))
    out: list[str] = []
    for first, last in dict.fromkeys(spans):
        if words[last + 1 : last + 2] == [_POSSESSIVE]:  # head-initial after the possessive: "wife", "style of"
            noun = content_run(words[last + 2 :], (_POSSESSIVE,))[:NOUN_WORDS]
            out += [" ".join(noun[:1]), " ".join(noun)]
        before = words[:first]
        while before and before[-1] in ("the", "a", "an"):  # grammar: the articles
            before.pop()
        if before[-1:] == ["of"]:  # head-final before "of": "daughter", "political leader"
            noun = content_run(before[:-1][::-1], (_POSSESSIVE,))[:NOUN_WORDS][::-1]
            out += [" ".join(noun[-1:]), " ".join(noun)]
    return list(dict.fromkeys(p for p in out if p))


def through(ctx: QuestionContext, nb: Neighbourhood, sparql: str | None) -> str | None:
    """`sparql` (a lookup's one-hop `SELECT DISTINCT ?x WHERE { … }` query from the looked-up entity `nb`) asked of
    the entity's values for the relation the question puts on it; unchanged where the question names none of its
    item-valued properties but the candidate's own, or nothing asked of those values has answers."""
    body = items_body(sparql)
    entity = f"wd:{nb.id}"
    if body is None or "?y" in body or body.count(entity) != 1 or " . " in body:
        return sparql
    names = [n for n in (nb.label, *ctx.names(nb.id)) if n]
    phrases = relation_phrases(ctx.question, names)
    said = {stem(w) for w in property_words(ctx, body)}  # what the candidate's properties account for
    relation = _named(ctx, nb, [p for p in phrases if not {stem(w) for w in p.split()} <= said])
    if relation is None or relation[0] in body_pids(body):
        return sparql
    pid, noun = relation
    first = f"{entity} wdt:{pid} ?y"
    scores = rank_properties(
        ctx.question,
        held_properties(ctx, f"{entity} wdt:{pid} ?x"),
        ctx.schema,
        entity_label=" ".join([*names, noun]),  # what is named already
        label_of=ctx.property_label,
        header=(),
        lexicon=ctx.lexicon,
        direction="out",
    )
    asked = [f"{first} . ?y wdt:{s.pid} ?x" for s in scores if s.relevance >= ALIAS and not s.niche][:TRIED]
    asked.append(f"{first} . {body.replace(entity, '?y')}")  # the candidate's own property, where they have it
    for hop in asked:
        fit = answers_fit(ctx, hop)  # its sample query also says whether there are answers, where it runs one
        if fit or (fit is None and ctx.rows(f"SELECT ?x WHERE {{ {hop} }} LIMIT 1", optional=True)):
            return items_query(hop)
    return sparql


def _named(ctx: QuestionContext, nb: Neighbourhood, phrases: list[str]) -> tuple[str, str] | None:
    """(property, phrase): the first relational phrase that names one of the entity's item-valued properties as an
    alias would. A phrase whose head names the entity's own class is its apposition, no relation: "the country of
    Panama", "the character of Sherlock Holmes"."""
    own = {stem(w) for t in nb.types.types for w in WORD.findall(ctx.class_label(t).lower())}
    pids = sorted(p for p, values in nb.edges.items() if any(v.id for v in values))
    for phrase in phrases:
        if stem(phrase.split()[-1]) in own or stem(phrase.split()[0]) in own:
            return None
        scores = rank_properties(phrase, pids, ctx.schema, label_of=ctx.property_label, header=())
        best = next((s for s in scores if not s.niche), None)
        if best is not None and best.relevance >= ALIAS:
            return best.pid, phrase
    return None


__all__ = ["relation_phrases", "through"]
