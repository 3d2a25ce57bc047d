"""The expected answer type: what the answer-type step returned, normalised (LM output is never trusted as typed data),
and its built-in demonstrations."""

from __future__ import annotations

import re
from typing import Any

import dspy
from pydantic import BaseModel, field_validator

from saga_dspy.config import DEFAULT_KG
from saga_dspy.kg.flavours import flavour_for

SCALAR_TYPES = ("boolean", "quantity", "date", "string")
_SCALAR_SYNONYMS: dict[str, str] = {}
for _word in (
    "boolean",
    "bool",
    "yes/no",
    "yes or no",
    "yes-no",
    "yesno",
    "true/false",
    "true or false",
    "truth value",
    "binary",
    "ask",
):
    _SCALAR_SYNONYMS[_word] = "boolean"
for _word in (
    "quantity",
    "number",
    "numeric",
    "numerical",
    "count",
    "integer",
    "int",
    "float",
    "decimal",
    "amount",
    "numeric value",
    "number of",
    "measure",
    "measurement",
    "percentage",
    "age",
    "population",
    "height",
    "length",
    "area",
    "price",
):
    _SCALAR_SYNONYMS[_word] = "quantity"
for _word in (
    "date",
    "time",
    "datetime",
    "date time",
    "year",
    "day",
    "month",
    "point in time",
    "time point",
    "birth date",
    "date of birth",
    "death date",
    "timestamp",
    "century",
    "decade",
):
    _SCALAR_SYNONYMS[_word] = "date"
for _word in (
    "string",
    "text",
    "literal",
    "name",
    "label",
    "word",
    "code",
    "identifier",
    "id",
    "phrase",
    "motto",
    "slogan",
):
    _SCALAR_SYNONYMS[_word] = "string"


_WIKIDATA_QID = re.compile(r"^Q[1-9]\d*$")
_FREEBASE_TYPE = re.compile(r"^[a-z0-9_]+(\.[a-z0-9_]+)+$")
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


def normalize_answer_qid(raw: Any, kg: str = DEFAULT_KG) -> str:
    """A Wikidata QID (`Q5`) or a Freebase type id (`people.person`); anything invalid becomes ''."""
    text = str(raw or "").strip().strip("\"'`<>").strip()
    if not text or text.lower() in {"none", "null", "n/a", "na", "unknown", "-"}:
        return ""
    return flavour_for(kg).normalise_class_text(text)


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
    def from_raw(cls, label: Any, qid: Any, kg: str = DEFAULT_KG) -> AnswerTypeInfo:
        norm_label = normalize_answer_label(label)
        norm_qid = "" if norm_label in SCALAR_TYPES else normalize_answer_qid(qid, kg)
        well_known = flavour_for(kg).well_known_classes
        if norm_label in well_known:
            norm_qid = well_known[norm_label]
        elif norm_label.endswith("s") and norm_label[:-1] in well_known:
            norm_label = norm_label[:-1]
            norm_qid = well_known[norm_label]
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


def answer_type_demos(kg: str = DEFAULT_KG) -> list[dspy.Example]:
    """The answer-type step's built-in examples (one per kind of answer; replaced by a compiled program's).
    None collides with a benchmark's test or dev question (tests/eval/test_firewall.py)."""
    classes = flavour_for(kg).example_classes
    rows = [
        ("Who is the mayor of Paris?", "person", classes["person"]),
        ("In which country is the Matterhorn?", "country", classes["country"]),
        ("Is the Rhine longer than the Danube?", "boolean", ""),
        ("How many strings does a violin have?", "quantity", ""),
        ("When did the Berlin Wall fall?", "date", ""),
    ]
    return [
        dspy.Example(question=q, answer_type_label=label, answer_type_qid=qid).with_inputs("question")
        for q, label, qid in rows
    ]
