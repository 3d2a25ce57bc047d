"""DSPy signatures of the SAGA agent (paper Appendix F, in our own words).

* `AnswerType`: the expected answer type, once per question (Appendix F.1).
* `SagaController` / `SpinachController`: the ReAct controller (Appendix F.2); the
  SAGA one carries the schema-guided property selection guidance and reads the
  current type context and knowledge log, refreshed at every step by the program.
* `PruneNeighborhood`: the fallback neighbourhood pruning for an entity without
  types (Appendix F.3; SPINACH prunes every neighbourhood this way).
* `CheckAnswer`: a bounded completeness check of the final query (beyond the
  paper; Appendix E.6's remedies). Off by default.

LM output is never trusted as typed data: `AnswerTypeInfo.from_raw` and
`parse_pids` normalise whatever came back and never raise.
"""

from __future__ import annotations

import re
from typing import Any, Literal

import dspy
from pydantic import BaseModel, field_validator

# --- answer type ----------------------------------------------------------------

SCALAR_TYPES = ("boolean", "quantity", "date", "string")

_SCALAR_SYNONYMS: dict[str, str] = {}
for _word in ("boolean", "bool", "yes/no", "yes or no", "yes-no", "yesno", "true/false", "true or false",
              "truth value", "binary", "ask"):
    _SCALAR_SYNONYMS[_word] = "boolean"
for _word in ("quantity", "number", "numeric", "numerical", "count", "integer", "int", "float", "decimal",
              "amount", "numeric value", "number of", "measure", "measurement", "percentage", "age",
              "population", "height", "length", "area", "price"):
    _SCALAR_SYNONYMS[_word] = "quantity"
for _word in ("date", "time", "datetime", "date time", "year", "day", "month", "point in time", "time point",
              "birth date", "date of birth", "death date", "timestamp", "century", "decade"):
    _SCALAR_SYNONYMS[_word] = "date"
for _word in ("string", "text", "literal", "name", "label", "word", "code", "identifier", "id",
              "phrase", "motto", "slogan"):
    _SCALAR_SYNONYMS[_word] = "string"

# Well-known classes: their QIDs win over whatever the LM wrote (small models get them wrong).
COMMON_TYPE_QIDS: dict[str, str] = {
    "person": "Q5", "human": "Q5", "people": "Q5", "man": "Q5", "woman": "Q5",
    "country": "Q6256", "city": "Q515", "film": "Q11424", "movie": "Q11424",
    "organization": "Q43229", "organisation": "Q43229", "company": "Q783794", "award": "Q618779",
    "language": "Q34770", "university": "Q3918", "sports team": "Q12973014", "book": "Q571",
    "river": "Q4022", "mountain": "Q8502", "lake": "Q23397", "album": "Q482994", "song": "Q7366",
    "band": "Q215380", "musical group": "Q215380", "political party": "Q7278", "television series": "Q5398426",
    "tv series": "Q5398426", "island": "Q23442", "continent": "Q5107", "planet": "Q634",
    "literary work": "Q7725634", "novel": "Q8261", "painting": "Q3305213", "building": "Q41176",
    "programming language": "Q9143", "video game": "Q7889", "occupation": "Q12737077", "religion": "Q9174",
}

_WIKIDATA_QID = re.compile(r"^Q[1-9]\d*$")
_FREEBASE_TYPE = re.compile(r"^[a-z0-9_]+(\.[a-z0-9_]+)+$")
_QID_IN_TEXT = re.compile(r"(?:^|[/:\s(])(Q[1-9]\d*)\b", re.IGNORECASE)
MAX_LABEL_WORDS = 4
MAX_LABEL_CHARS = 40


def normalize_answer_label(raw: Any) -> str:
    """`boolean` / `quantity` / `date` / `string`, or a short lower-case type name ('' if nothing usable)."""
    text = str(raw or "").strip().strip("\"'`").strip()
    text = re.sub(r"\s*\((?:wd:)?Q\d+\)\s*$", "", text, flags=re.IGNORECASE)  # "person (Q5)" -> "person"
    text = re.sub(r"[_\s]+", " ", text).strip().lower()
    text = text.strip(" .,:;!?")
    if not text:
        return ""
    if text in _SCALAR_SYNONYMS:
        return _SCALAR_SYNONYMS[text]
    head = re.split(r"\s*[,;/|]\s*|\s+or\s+", text)[0].strip()
    if head in _SCALAR_SYNONYMS:
        return _SCALAR_SYNONYMS[head]
    if re.match(r"(number|count|amount|quantity) of\b", head):
        return "quantity"
    head = re.sub(r"^(a|an|the|list of|set of|some)\s+", "", head)
    words = re.findall(r"[\w'-]+", head)[:MAX_LABEL_WORDS]
    label = " ".join(words)[:MAX_LABEL_CHARS].strip()
    return _SCALAR_SYNONYMS.get(label, label)


def normalize_answer_qid(raw: Any, kg: str = "wikidata") -> str:
    """A Wikidata QID (`Q5`) or a Freebase type id (`people.person`); anything invalid becomes ''."""
    text = str(raw or "").strip().strip("\"'`<>").strip()
    if not text or text.lower() in {"none", "null", "n/a", "na", "unknown", "-"}:
        return ""
    if kg == "freebase":
        text = re.sub(r"^(?:ns:|fb:|https?://rdf\.freebase\.com/ns/)", "", text)
        text = text.lstrip("/").replace("/", ".")
        return text if _FREEBASE_TYPE.match(text) else ""
    text = re.sub(r"^(?:wd:|https?://(?:www\.)?wikidata\.org/(?:entity|wiki)/)", "", text, flags=re.IGNORECASE)
    if _WIKIDATA_QID.match(text.upper()):
        return text.upper()
    match = _QID_IN_TEXT.search(" " + text)
    return match.group(1).upper() if match and len(text) <= 40 else ""


class AnswerTypeInfo(BaseModel):
    """A validated expected answer type. Building one never fails: bad parts become ''."""

    label: str = ""
    qid: str = ""

    @field_validator("label", mode="before")
    @classmethod
    def _label(cls, value: Any) -> str:
        return normalize_answer_label(value)

    @field_validator("qid", mode="before")
    @classmethod
    def _qid(cls, value: Any) -> str:
        text = str(value or "").strip()
        return text if (_WIKIDATA_QID.match(text) or _FREEBASE_TYPE.match(text)) else normalize_answer_qid(text)

    @classmethod
    def from_raw(cls, label: Any, qid: Any, kg: str = "wikidata") -> "AnswerTypeInfo":
        norm_label = normalize_answer_label(label)
        norm_qid = "" if norm_label in SCALAR_TYPES else normalize_answer_qid(qid, kg)
        if kg == "wikidata" and norm_label in COMMON_TYPE_QIDS:
            norm_qid = COMMON_TYPE_QIDS[norm_label]
        elif kg == "wikidata" and norm_label.endswith("s") and norm_label[:-1] in COMMON_TYPE_QIDS:
            norm_label = norm_label[:-1]
            norm_qid = COMMON_TYPE_QIDS[norm_label]
        return cls.model_construct(label=norm_label, qid=norm_qid)

    @property
    def is_boolean(self) -> bool:
        return self.label == "boolean"

    @property
    def is_scalar(self) -> bool:
        return self.label in SCALAR_TYPES

    def render(self) -> str:
        """`person (Q5)`, `boolean`, or `unknown`."""
        if not self.label and not self.qid:
            return "unknown"
        if self.qid:
            return f"{self.label or 'entity'} ({self.qid})"
        return self.label


class AnswerType(dspy.Signature):
    """Name the type of the answer a knowledge-graph question expects, before any lookup.

    Use `boolean` for yes/no questions (they start with is, are, was, does, did, has, can, ...),
    `quantity` for numbers and counts ("how many", "how much", "how high"), `date` for dates and
    years ("when", "in which year"), `string` for free text that is no entity; otherwise a short
    English class name of the answer entity such as person, country, city, film, organization,
    award, language, university, sports team. Give the class's Wikidata item when you know it
    (human Q5, country Q6256, city Q515, film Q11424, organization Q43229, award Q618779,
    language Q34770, university Q3918, sports team Q12973014); leave it empty for the scalar
    types and when unsure."""

    question: str = dspy.InputField(desc="the natural-language question")
    answer_type_label: str = dspy.OutputField(
        desc="boolean, quantity, date, string, or a short class name (e.g. person, country, film)"
    )
    answer_type_qid: str = dspy.OutputField(desc="Wikidata QID of that class (e.g. Q5), or empty")


FREEBASE_ANSWER_TYPE_INSTRUCTIONS = AnswerType.instructions.split("Give the class's Wikidata item")[0] + (
    "Give the class's Freebase type id when you know it (people.person, location.country, location.citytown, "
    "film.film, organization.organization, award.award, language.human_language, education.university, "
    "sports.sports_team); leave it empty for the scalar types and when unsure."
)


def kg_signature(signature: type[dspy.Signature], kg: str) -> type[dspy.Signature]:
    """The signature worded for the knowledge graph in use (Wikidata wording is the default)."""
    if kg != "freebase":
        return signature
    if signature is AnswerType:
        return signature.with_instructions(FREEBASE_ANSWER_TYPE_INSTRUCTIONS)
    return signature.with_instructions(signature.instructions.replace("Wikidata", "Freebase"))


# --- query form ---------------------------------------------------------------------

QueryForm = Literal["ASK", "COUNT", "SELECT", "ANY"]

_HOW_MANY = re.compile(r"\bhow\s+(many|much)\b|\bnumber\s+of\b|\bcount\s+(the|all)\b", re.IGNORECASE)
_YES_NO = re.compile(
    r"^\s*(is|are|was|were|does|do|did|has|have|had|can|could|will|would|should|shall|may|might)\b",
    re.IGNORECASE,
)


def is_yes_no_question(question: str) -> bool:
    return bool(_YES_NO.match(question or ""))


def is_how_many_question(question: str) -> bool:
    return bool(_HOW_MANY.search(question or ""))


def decide_query_form(answer_type: AnswerTypeInfo | None, question: str) -> QueryForm:
    """ASK for a boolean answer, COUNT for a 'how many' quantity, SELECT otherwise.

    `None` (no answer-type step: the `no-answer-type` and `spinach` variants) leaves the
    form to the controller ('ANY')."""
    if answer_type is None:
        return "ANY"
    if answer_type.is_boolean:
        return "ASK"
    if answer_type.label == "quantity" and is_how_many_question(question):
        return "COUNT"
    if not answer_type.label and is_yes_no_question(question):
        return "ASK"
    return "SELECT"


QUERY_FORM_GUIDE: dict[str, str] = {
    "ASK": "ASK - a yes/no question: the final query must be `ASK WHERE { ... }` (true/false), not a SELECT.",
    "COUNT": (
        "COUNT - a 'how many' question: the final query is `SELECT (COUNT(DISTINCT ?x) AS ?count) WHERE { ... }`, "
        "unless the graph stores the number itself as a value (population, capacity, ...): then SELECT that value."
    ),
    "SELECT": "SELECT - the final query is `SELECT DISTINCT ?x WHERE { ... }` projecting the answer entities or values; not ASK.",
    "ANY": "not fixed: use ASK WHERE for a yes/no question, SELECT otherwise.",
}


# --- controller -------------------------------------------------------------------------

_BUILD_STEPS = """\
Write one SPARQL query over {kg} that answers the question. Work in small verified steps:
1. Find the entities of the question with search_wikidata and check you have the right one (its
   description and types must fit the question).
2. Inspect an entity with get_wikidata_entry to see which properties it really has.
3. Execute small fragments of the query with execute_sparql before adding the next triple; build the
   final query one pattern at a time.
4. Never repeat an action that already failed: its result will be the same.
5. The question has an answer in the graph; keep going until a query returns it.
6. Project the answer entities themselves (?x), not their labels.
7. When the last executed query returns the answer, call stop to make it the final query.
A typical short path: search_wikidata("name") -> get_wikidata_entry(QID of the right hit) -> pick the
property (PID) that leads to the answer -> execute_sparql("SELECT ?x WHERE {{ wd:QID wdt:PID ?x }}") -> stop.
Use the real ids you found, never the placeholders QID and PID."""

_SCHEMA_GUIDANCE = """\
Schema-aware property selection:
- Entries of properties carry `[domain | range]` annotations when the schema knows them: the domain is
  the type the subject (left side) must have, the range the type of the value (right side).
- Prefer a property whose domain fits the known type of your subject and whose range fits the expected
  answer type. Use the annotations to choose between properties with similar names.
- get_wikidata_entry shows the entity's types and leaves out properties whose domain conflicts with them:
  if the property the question needs is missing, you probably have the wrong entity, so search again.
- `[BLOCKED]` from execute_sparql means the property cannot apply to a subject of that type: pick another
  property or another entity. An empty result means the same: change property, direction or entity;
  read the knowledge log and do not retry what failed."""

_FORM_RULES = """\
The query form field says how the final query must start (ASK for yes/no questions, COUNT for counts,
SELECT otherwise); a final query of another form is sent back."""

SAGA_CONTROLLER_INSTRUCTIONS = "\n\n".join(
    [_BUILD_STEPS.format(kg="Wikidata"), _SCHEMA_GUIDANCE, _FORM_RULES,
     "The type context lists the types of the entities explored so far; the knowledge log summarises what "
     "the recent steps found and what failed. Both are refreshed at every step."]
)

SPINACH_CONTROLLER_INSTRUCTIONS = "\n\n".join(
    [_BUILD_STEPS.format(kg="Wikidata"),
     "For a yes/no question, finish with an ASK WHERE query."]
)


class SagaController(dspy.Signature):
    __doc__ = SAGA_CONTROLLER_INSTRUCTIONS

    question: str = dspy.InputField(desc="the question (earlier turns of a conversation first, if any)")
    answer_type: str = dspy.InputField(desc="expected type of the answer, e.g. 'person (Q5)', 'boolean', 'quantity'")
    query_form: str = dspy.InputField(desc="how the final query must start")
    type_context: str = dspy.InputField(desc="types of the most recently explored entities and variables")
    knowledge_log: str = dspy.InputField(desc="outcomes of the recent steps: [ok], [fail], [info]")
    sparql: str = dspy.OutputField(desc="the final SPARQL query")


class SpinachController(dspy.Signature):
    __doc__ = SPINACH_CONTROLLER_INSTRUCTIONS

    question: str = dspy.InputField(desc="the question (earlier turns of a conversation first, if any)")
    sparql: str = dspy.OutputField(desc="the final SPARQL query")


# --- fallback pruning ---------------------------------------------------------------------


class PruneNeighborhood(dspy.Signature):
    """An entity's outgoing edges are listed, one property per line. Keep only the properties that
    could help write a SPARQL query answering the question (the relation asked about, properties that
    lead towards the answer, and the entity's type); drop the rest."""

    question: str = dspy.InputField()
    neighborhood: str = dspy.InputField(desc="the entity (label, id, description) and its properties with example values")
    relevant_pids: list[str] = dspy.OutputField(desc="ids of the relevant properties, e.g. [\"P31\", \"P19\"]")


_PID = re.compile(r"\b(P[1-9]\d*)\b")
_FB_PROP = re.compile(r"\b([a-z0-9_]+(?:\.[a-z0-9_]+){2,})\b")


def parse_pids(raw: Any, kg: str = "wikidata") -> list[str]:
    """Property ids from whatever the LM returned (list, JSON-ish text, prose); never raises."""
    if raw is None:
        return []
    if isinstance(raw, (list, tuple, set)):
        text = " ".join(str(x) for x in raw)
    else:
        text = str(raw)
    pattern = _FB_PROP if kg == "freebase" else _PID
    seen: list[str] = []
    for match in pattern.finditer(text if kg == "freebase" else text.upper()):
        pid = match.group(1)
        if pid not in seen:
            seen.append(pid)
    return seen


# --- answer check (beyond the paper) --------------------------------------------------------


class CheckAnswer(dspy.Signature):
    """Judge whether a final SPARQL query fully answers the question before it is returned.
    Check the form (ASK for yes/no, COUNT for 'how many', SELECT otherwise), the polarity of a yes/no
    question (e.g. 'still alive' means no death date), that the query reaches the last hop the question
    asks for (e.g. the population of the capital, not the capital), and that the result has the expected
    answer type. Say what is missing when it is not complete."""

    question: str = dspy.InputField()
    answer_type: str = dspy.InputField(desc="expected answer type")
    query_form: str = dspy.InputField(desc="the required form of the final query")
    sparql: str = dspy.InputField(desc="the final query")
    result_sample: str = dspy.InputField(desc="the first rows of its result")
    complete: bool = dspy.OutputField(desc="true when the query answers the question as asked")
    problem: str = dspy.OutputField(desc="what to fix when not complete, else empty")


__all__ = [
    "AnswerType",
    "AnswerTypeInfo",
    "COMMON_TYPE_QIDS",
    "CheckAnswer",
    "PruneNeighborhood",
    "QUERY_FORM_GUIDE",
    "QueryForm",
    "SAGA_CONTROLLER_INSTRUCTIONS",
    "SCALAR_TYPES",
    "SPINACH_CONTROLLER_INSTRUCTIONS",
    "SagaController",
    "SpinachController",
    "decide_query_form",
    "is_how_many_question",
    "kg_signature",
    "is_yes_no_question",
    "normalize_answer_label",
    "normalize_answer_qid",
    "parse_pids",
]
