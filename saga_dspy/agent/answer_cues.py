"""The expected answer type from the question's own words, no LM.

General grammar decides where it is unambiguous: yes/no -> boolean, "how many" and a degree question ("how
tall", "how often": "how" before a content word) -> quantity, "when" -> date, "who" -> person, "where" ->
location. Beyond grammar the mined lexicon decides (`grounding.lexicon`, from train questions' gold): the kind
the answers to a wh-phrase opening ("what year" -> date) or a head noun ("population" -> quantity) were, and
the head noun's class: the class labelled by it in the schema index, else the class the lexicon learnt for it
("movies" -> film); a class under human or person ("players"), or one the graph gives people as occupation or
position ("actors"), asks for a person.
A cue that `decides` is the answer type, and the answer-type LM call is not made; a confident "who" guards the
LM's prediction (`guard`: the LM's `string`, rarely right and starring Commons categories, gives way).
A cue that is not confident (a generic entity question) leaves the LM's answer, and stars nothing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from saga_dspy.agent.answer_type import SCALAR_TYPES
from saga_dspy.agent.query_form import is_yes_no_question
from saga_dspy.grounding.lexicon import Lexicon
from saga_dspy.grounding.words import STOPWORDS, head_phrases, phrase_key, question_patterns
from saga_dspy.kg.flavours.wikidata_ids import HUMAN, LOCATION, PEOPLE
from saga_dspy.schema.hierarchy import ClassHierarchy
from saga_dspy.schema.index import SchemaIndex

# grammar: "how many", and "how" before a content word asks a degree ("how tall", "how often"), not a manner
_HOW_MANY = re.compile(r"\bhow\s+many\b", re.I)
_HOW = re.compile(r"\bhow\s+([a-z]+)", re.I)
_WHEN = re.compile(r"^\s*(when|since when)\b", re.I)  # grammar: the question word "when"
_WHO = re.compile(r"^\s*(who|whom|whose)\b|\b(who|whom)\s+(is|was|are|were|did|does|has|had)\b", re.I)
_WHERE = re.compile(r"^\s*(where|from where)\b|\bwhere\s+(is|was|are|were|did|does)\b", re.I)


@dataclass(frozen=True)
class AnswerCue:
    label: str  # boolean | quantity | date | string | a class name | "entity" (unknown class)
    qid: str = ""
    confident: bool = True
    cue: str = ""  # what decided it

    @property
    def is_scalar(self) -> bool:
        return self.label in SCALAR_TYPES


def rule_answer_type(question: str, schema: SchemaIndex | None = None, lexicon: Lexicon | None = None) -> AnswerCue:
    """The answer type the question's own words give (never None: a generic entity cue at worst)."""
    q = " ".join((question or "").split())
    lexicon = lexicon or Lexicon()
    if is_yes_no_question(q):
        return AnswerCue("boolean", cue="yes/no")
    if _HOW_MANY.search(q) or any(m.group(1).lower() not in STOPWORDS for m in _HOW.finditer(q)):
        return AnswerCue("quantity", cue="how many / how + degree")
    kind = lexicon.vote(question_patterns(q), "kind")
    if kind in SCALAR_TYPES:
        return AnswerCue(kind, cue="question pattern (lexicon)")
    if _WHEN.search(q):
        return AnswerCue("date", cue="when")
    if _WHO.search(q):
        return AnswerCue("person", HUMAN, cue="who")
    if _WHERE.search(q):
        return AnswerCue("location", LOCATION, cue="where")
    for phrase in head_phrases(q):
        key, cue = phrase_key(phrase), f"head noun {phrase!r}"
        answer = lexicon.answer(key)
        if answer in SCALAR_TYPES:
            return AnswerCue(answer, cue=f"{cue} (lexicon)")
        qid = _phrase_class(phrase, schema, lexicon, answer if answer.startswith("Q") else "")
        if qid:
            if lexicon.names_people(qid) or PEOPLE & ({qid} | _ancestors(schema, qid)):
                return AnswerCue("person", HUMAN, cue=cue)
            return AnswerCue(schema.class_label(qid) if schema is not None else key, qid, cue=cue)
    return AnswerCue("entity", confident=False, cue="no cue")


def _label_class(phrase: str, schema: SchemaIndex | None) -> str:
    """The class whose label the phrase is: its stemmed form's label, else the phrase's own."""
    if schema is None:
        return ""
    return schema.class_named(phrase_key(phrase)) or schema.class_named(phrase.lower())


def _phrase_class(phrase: str, schema: SchemaIndex | None, lexicon: Lexicon, answer: str = "") -> str:
    """The class a head phrase names: the class it labels, else the class of the train answers to it (`answer`),
    else the class the train questions' items had; of these, the first the graph uses (holds instances of it or of a
    kind of it, or gives people it as occupation or position) where the graph's usage evidence tells: the label
    "party" is a festivity of which the graph holds none, the train answers' "party" the political party."""
    found = [
        q for q in dict.fromkeys((_label_class(phrase, schema), answer, lexicon.item_class(phrase_key(phrase)))) if q
    ]
    if schema is None or schema.usage is None:
        return found[0] if found else ""
    used = [q for q in found if lexicon.names_people(q) or _has_instances(schema, q)]
    return (used or found or [""])[0]


@lru_cache(maxsize=1024)
def _has_instances(schema: SchemaIndex, qid: str) -> bool:
    """Does the graph's usage evidence record instances of the class or of a class below it?"""
    usage = schema.usage
    return usage is not None and any(c == qid or qid in _ancestors(schema, c) for c in usage)


def items_class(question: str, schema: SchemaIndex | None, lexicon: Lexicon | None = None) -> str:
    """The class the question names its answer items by, however broad the answer type: the head noun ("films
    produced by Hal Roach" -> film, "politicians" -> politician, where the answer type is human) or the counted
    noun ("How many airlines ..." -> airline, where the answer type is a quantity), by its label or the
    lexicon's class for it; "" when no phrase names one. An items query may be restricted to it
    (`grounding.incoming`): only where the data shows it narrows."""
    q = " ".join((question or "").split())
    if is_yes_no_question(q):
        return ""
    lexicon = lexicon or Lexicon()
    for phrase in head_phrases(q, counted=True):
        qid = _phrase_class(phrase, schema, lexicon)
        if qid:
            return qid
    return ""


@lru_cache(maxsize=4)  # one schema index per process in practice (keyed by identity: the index is immutable)
def _hierarchy(schema: SchemaIndex) -> ClassHierarchy:
    return ClassHierarchy.from_index(schema)


def _ancestors(schema: SchemaIndex | None, qid: str) -> frozenset[str]:
    return _hierarchy(schema).ancestors(qid) if schema is not None and schema.p279_edges else frozenset()


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


__all__ = ["AnswerCue", "rule_answer_type", "items_class", "decides", "guard"]
