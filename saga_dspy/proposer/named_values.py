"""Another thing the question names, shared by some of the candidate's answers.

"Which movies star both Liz Taylor and Richard Burton?" looked up from Liz Taylor gives her films; some of them
have a cast member whose label, "Richard Burton", is a phrase of the question. `narrow` adds that statement to
the candidate query (`?x wdt:P161 wd:Q151973`), so a question that names two things is answered by both. The
evidence is the graph's: a value whose English label or alias is a whole phrase of the question, held by some of
the answers, at most half of them. A phrase is not another thing where it names the looked-up entity itself: its
label or an alias ("Liz Taylor"), a value most answers hold already ("states in Mexico": the few without are gaps
in the data), or, where the question never names the entity, one of its own values ("Danish movies" looked up from
Denmark: not the Danish language); nor where the candidate accounts for it already: a word of its properties'
names ("voice" of voice actor), the answers' head noun ("what language"). Class statements (type, subclass) are
left to the items class, which reads the hierarchy."""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass

from saga_dspy.grounding.context import QuestionContext
from saga_dspy.grounding.ranking import rank_properties
from saga_dspy.grounding.render import body_pids, items_body, items_query
from saga_dspy.grounding.words import STOPWORDS, WORD, head_phrases, stem

MAX_WORDS = 5  # the longest phrase tried
MAX_PHRASES = 180
COUNTED = 100_000
SHARED = 0.5  # a value more than this share of the answers hold restates the candidate (data gaps aside)
_TOKEN = re.compile(r"\w[\w.'&-]*")
_ABBREVIATION = re.compile(r"(?:\w\.)+")


@dataclass(frozen=True)
class Phrases:
    texts: list[str]  # as written, lower-cased and in a title's case, longest first
    names_entity: bool  # the question names the looked-up entity (its label or an alias)


def phrases(question: str, own_names: Collection[str], explained: Collection[str] = ()) -> Phrases:
    """The question's word n-grams that begin and end with a content word and hold no word of a mention of the
    looked-up entity (a name of `own_names`, its label and aliases, whose content words all occur in the
    question) nor consist of `explained` words alone (word stems the candidate's properties and the answers'
    head noun account for already)."""
    tokens = [t if _ABBREVIATION.fullmatch(t) else t.rstrip(".'") for t in _TOKEN.findall(question or "")]
    tokens = [t[:-2] if t.lower().endswith("'s") else t for t in tokens if t]
    stems = [stem(t) for t in tokens]
    said, explained = set(stems), set(explained)
    own: set[str] = set()
    for name in own_names:
        content = {stem(w) for w in WORD.findall(name.lower()) if w not in STOPWORDS}
        if content and content <= said:
            own |= content
    out: list[str] = []
    for n in range(min(MAX_WORDS, len(tokens)), 0, -1):
        for i in range(len(tokens) - n + 1):
            first, last = tokens[i].lower(), tokens[i + n - 1].lower()
            span = stems[i : i + n]
            if first in STOPWORDS or last in STOPWORDS or own.intersection(span) or set(span) <= explained:
                continue
            words = tokens[i : i + n]
            titled = " ".join(w if w.lower() in STOPWORDS else w[:1].upper() + w[1:] for w in words)
            out += [" ".join(words), " ".join(words).lower(), titled]  # as written, lower, a title's case
    return Phrases(list(dict.fromkeys(out))[:MAX_PHRASES], bool(own))


def property_words(ctx: QuestionContext, body: str) -> list[str]:
    """The words of the labels and aliases of the properties a query body uses: what it accounts for already."""
    words: list[str] = []
    for pid in body_pids(body):
        ps = ctx.schema.get(pid)
        for name in (ctx.property_label(pid), *(ps.aliases if ps is not None else ())):
            words += WORD.findall(name.lower())
    return [w for w in dict.fromkeys(words) if w not in STOPWORDS]


def explained(ctx: QuestionContext, body: str) -> set[str]:
    """Word stems the candidate accounts for: its properties' labels and aliases, the answers' head noun."""
    words = property_words(ctx, body)
    heads = head_phrases(ctx.question)
    if heads:
        words.append(heads[0].split()[-1])  # English noun phrases are head-final
    return {stem(w) for w in words if w not in STOPWORDS}


def narrow(ctx: QuestionContext, eid: str, sparql: str | None, own_values: Collection[str] = ()) -> str | None:
    """`sparql` (one of the lookup's `SELECT DISTINCT ?x WHERE { … }` queries) with one more statement on ?x: the
    longest question phrase naming a value that some of its answers hold, at most half (then the property most
    relevant to the question, then the most answers); the query unchanged where none does. `own_values`: the
    looked-up entity's own values."""
    body = items_body(sparql)
    if body is None:
        return sparql
    names = ctx.names(eid)
    found = phrases(ctx.question, names, explained(ctx, body))
    if not names or not found.texts:  # an entity without a name: its own mention cannot be told apart
        return sparql
    flavour = ctx.flavour
    skip = [flavour.type_pid, flavour.subclass_pid, flavour.example_pid]
    rows = ctx.rows(flavour.named_values_query(body, found.texts, skip), optional=True)
    if not rows:
        return sparql
    total = _count(ctx, body)
    held = [(row, int(float(row["n"].value))) for row in rows]  # with how many answers hold the value
    shared = {row["l"].value.lower() for row, n in held if n > SHARED * total}
    options: list[tuple[str, str, str, int]] = []  # (pid, value, phrase, answers holding it)
    for row, n in held:
        ref = flavour.prop_ref(row["p"].value)
        value = flavour.entity_id(row["o"].value)
        phrase = row["l"].value
        if ref is None or value is None or value == eid or phrase.lower() in shared:
            continue
        if not found.names_entity and value in own_values:
            continue
        options.append((ref.pid, value, phrase, n))
    if not options:
        return sparql
    relevance = {
        s.pid: s.relevance
        for s in rank_properties(
            ctx.question,
            sorted({o[0] for o in options}),
            ctx.schema,
            label_of=ctx.property_label,
            header=(),
            lexicon=ctx.lexicon,
            direction="in",
        )
    }
    pid, value, _, _ = max(options, key=lambda o: (len(o[2].split()), relevance.get(o[0], 0.0), o[3]))
    return items_query(f"{body} . ?x wdt:{pid} wd:{value}")


def _count(ctx: QuestionContext, body: str) -> int:
    """How many answers the query has, counted up to COUNTED (a live endpoint has millions of humans)."""
    rows = ctx.rows(
        f"SELECT (COUNT(*) AS ?n) WHERE {{ SELECT DISTINCT ?x WHERE {{ {body} }} LIMIT {COUNTED} }}", optional=True
    )
    return int(float(rows[0]["n"].value)) if rows and "n" in rows[0] else 0


__all__ = ["Phrases", "explained", "narrow", "phrases", "property_words"]
