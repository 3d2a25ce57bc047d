"""The expected answer type from deterministic cues in the question, no LM (issue 12).

The wh-word and the question's head noun decide where they are unambiguous: yes/no → boolean,
"how many" / "how tall" → quantity, "when" / "what year" / "birthday" → date, "who" → person,
"where" → location, "which river" → the class labelled "river" in the schema index. A cue that
`decides` is the answer type, and the answer-type LM call is not made; a confident "who" guards the
LM's prediction (`guard`: the LM's `string`, rarely right and starring Commons categories, gives way).
A cue that is not confident (a generic entity question) leaves the LM's answer, and stars nothing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from saga_dspy.agent.answer_type import SCALAR_TYPES
from saga_dspy.agent.query_form import is_yes_no_question
from saga_dspy.grounding.ranking import id_order, stem
from saga_dspy.schema.index import SchemaIndex

HUMAN, LOCATION = "Q5", "Q2221906"  # human; geographic location
_QUANTITY = re.compile(
    r"\bhow\s+(many|much|tall|high|long|big|old|large|deep|far|heavy|wide|fast|often)\b|\bnumber\s+of\b|"
    r"\bcount\s+(the|all)\b|\b(population|height|elevation|area|length|budget|revenue|net worth|salary|"
    r"altitude|depth|weight|speed|age|gdp|temperature|distance|score|capacity|duration|runtime)\s+of\b",
    re.I,
)
_DATE = re.compile(
    r"^\s*(when|since when)\b|\b(what|which|in what|in which)\s+(year|date|day|month|century|decade|time)\b|"
    r"\bbirth\s*days?\b|\bbirth\s*dates?\b|\bdate\s+of\b|\b(year|day)\s+of\b|\bwhat\s+time\b",
    re.I,
)
_WHO = re.compile(r"^\s*(who|whom|whose)\b|\b(who|whom)\s+(is|was|are|were|did|does|has|had)\b", re.I)
_WHERE = re.compile(r"^\s*(where|from where)\b|\bwhere\s+(is|was|are|were|did|does)\b", re.I)
_WORD = r"(?:[a-z](?:\.[a-z])+\.?|[a-z][a-z-]*)"  # a word, or a dotted abbreviation ("U.S.")
_HEAD = re.compile(
    r"\b(?:which|what|(?:give\s+me\s+|show\s+me\s+)?(?:a\s+)?list\s+of(?:\s+all)?|list(?:\s+all)?|"
    r"give\s+me(?:\s+all)?|show\s+me(?:\s+all)?|name(?:\s+all)?|all)\s+"
    rf"(?:(?:the|of the|are the|is the|was the|were the)\s+)?({_WORD}(?:\s+of\s+{_WORD}|\s+{_WORD})?)",
    re.I,
)
# "what form of government": the class is the whole phrase, else the noun after "of"
_OF_WORDS = frozenset({"form", "forms", "kind", "kinds", "type", "types", "sort", "sorts", "name", "names"})
_PERSON_NOUNS = frozenset(
    {
        "person",
        "people",
        "actor",
        "actress",
        "author",
        "writer",
        "president",
        "politician",
        "player",
        "singer",
        "musician",
        "scientist",
        "artist",
        "king",
        "queen",
        "director",
        "wife",
        "husband",
        "child",
        "son",
        "daughter",
        "founder",
        "member",
        "leader",
        "mayor",
        "chancellor",
        "prime",
        "governor",
        "painter",
        "poet",
        "composer",
        "astronaut",
    }
)
_PLACE_NOUNS = frozenset({"place", "location", "country", "city", "town", "state", "region", "continent", "where"})
# everyday nouns whose Wikidata class is labelled otherwise
_CLASS_WORDS = {
    "movie": "film",
    "boardgame": "board game",
    "tv show": "television series",
    "show": "television series",
    "song": "musical work",
    "firm": "business",
    "band": "musical group",
}
_NOT_HEAD = frozenset(
    {"is", "was", "are", "were", "the", "a", "an", "of", "do", "does", "did", "kind", "type", "sort", "has", "have"}
)


@dataclass(frozen=True)
class AnswerCue:
    label: str  # boolean | quantity | date | string | a class name | "entity" (unknown class)
    qid: str = ""
    confident: bool = True
    cue: str = ""  # what decided it

    @property
    def is_scalar(self) -> bool:
        return self.label in SCALAR_TYPES


def rule_answer_type(question: str, schema: SchemaIndex | None = None) -> AnswerCue:
    """The answer type the question's own words give (never None: a generic entity cue at worst)."""
    q = " ".join((question or "").split())
    if is_yes_no_question(q):
        return AnswerCue("boolean", cue="yes/no")
    if _QUANTITY.search(q):
        return AnswerCue("quantity", cue="how many / measure")
    if _DATE.search(q):
        return AnswerCue("date", cue="when / year / date")
    if _WHO.search(q):
        return AnswerCue("person", HUMAN, cue="who")
    if _WHERE.search(q):
        return AnswerCue("location", LOCATION, cue="where")
    if (found := _first_head(_HEAD.finditer(q))) is not None:
        for phrase in _head_phrases(*found):
            single = " ".join(stem(w) for w in phrase.split())
            if single in _PERSON_NOUNS or phrase in _PERSON_NOUNS:
                return AnswerCue("person", HUMAN, cue=f"head noun {phrase!r}")
            qid = _phrase_class(phrase, schema)
            if qid:
                return AnswerCue(
                    schema.class_label(qid) if schema is not None else single, qid, cue=f"head noun {phrase!r}"
                )
            if single in _PLACE_NOUNS:
                return AnswerCue("location", LOCATION, cue=f"head noun {phrase!r}")
    return AnswerCue("entity", confident=False, cue="no cue")


def _first_head(matches) -> tuple[list[str], list[str]] | None:
    """(head words, those that may name a class) of the first head match with any such word."""
    for m in matches:
        head = m.group(1).lower().split()
        words = [w for w in head if w not in _NOT_HEAD]
        if words:
            return head, words
    return None


def _head_phrases(head: list[str], words: list[str]) -> list[str]:
    """The phrases of a head that may name the class, best first: "danish movies" → itself, "danish", "movies";
    "form of government" → itself, "government"; "capital of france" → itself, "capital"."""
    phrases: tuple[str, ...] = (" ".join(words), words[0], words[-1])
    if len(head) == 3 and head[1] == "of":
        phrases = (" ".join(head), head[2]) if head[0] in _OF_WORDS else (" ".join(head), head[0])
    return list(dict.fromkeys(phrases))


def _phrase_class(phrase: str, schema: SchemaIndex | None) -> str:
    """The class a phrase names: its stemmed form's label, the phrase's own, or an everyday synonym's."""
    single = " ".join(stem(w) for w in phrase.split())
    return (
        class_for(single, schema)
        or class_for(phrase, schema)
        or class_for(_CLASS_WORDS.get(single) or _CLASS_WORDS.get(phrase.removesuffix("s"), ""), schema)
    )


_HOW_MANY = re.compile(rf"\bhow\s+many\s+({_WORD}(?:\s+{_WORD})?)", re.I)


def items_class(question: str, schema: SchemaIndex | None) -> str:
    """The class the question names its answer items by, however broad the answer type: the head noun ("films
    produced by Hal Roach" → film, "politicians" → politician, where the answer type is human) or the counted
    noun ("How many airlines …" → airline, where the answer type is a quantity); "" when no phrase names one.
    An items query may be restricted to it (`grounding.incoming`): only where the data shows it narrows."""
    q = " ".join((question or "").split())
    if is_yes_no_question(q):
        return ""
    count = _HOW_MANY.search(q)
    found = _first_head([count] if count else _HEAD.finditer(q))
    if found is None:
        return ""
    return next((qid for phrase in _head_phrases(*found) if (qid := _phrase_class(phrase, schema))), "")


def class_for(name: str, schema: SchemaIndex | None) -> str:
    """The class whose English label is `name` (the lowest Q-id of several), via the schema index's labels."""
    if schema is None or not name:
        return ""
    return _label_table(schema).get(name.lower(), "")


@lru_cache(maxsize=4)  # one schema index per process in practice (keyed by identity: the index is immutable)
def _label_table(schema: SchemaIndex) -> dict[str, str]:
    table: dict[str, str] = {}
    for qid, label in schema.class_labels.items():
        low = label.lower()
        if low not in table or id_order(qid) < id_order(table[low]):
            table[low] = qid
    return table


def decides(cue: AnswerCue) -> bool:
    """Whether the cue alone settles the answer type: `guard` returns it whatever the LM says (a yes/no, a measure,
    a date, "where", the question's own head noun). Then the answer-type LM call is not made at all."""
    return cue.confident and (cue.is_scalar or (bool(cue.qid) and cue.cue != "who"))


def guard(cue: AnswerCue, lm_label: str, lm_qid: str) -> tuple[str, str]:
    """The LM's answer type checked against the cue: a cue that `decides` wins; a confident "who" gives way to
    the LM's more specific class (an organization, a musician), not to its `string` or a scalar.
    Returns (label, qid)."""
    lm_label = (lm_label or "").strip()
    if not cue.confident:
        return lm_label, lm_qid
    if decides(cue) or not lm_label or lm_label == "string" or lm_label in SCALAR_TYPES:
        return cue.label, cue.qid
    return lm_label, lm_qid


__all__ = ["AnswerCue", "rule_answer_type", "items_class", "class_for", "decides", "guard"]
