"""The grounding lexicon: what the words of training questions meant in their gold SPARQL, counted.

Mined by `scripts/mine_lexicon.py` from the train splits of the Wikidata benchmarks (only questions that
collide with no test or dev question, `eval.loading.firewall`), committed as `data/lexicon/<kg>.json`. Its tables,
each a count of train questions:

- `properties`: a question word (stemmed) -> the gold properties of the questions that say it, with the
  direction (`out`: the question's entity is the subject, `in`: its value, `var`: between variables) and
  position (`answer`: the triple touches a projected variable, `inner` otherwise); `words`: how many questions
  say the word at all. A word that meets a property's label or alias counts for that property alone; the
  others are shared by the query's properties no word names. `property_prior(word, pid)` is the share.
- `classes`: a phrase (1-3 stemmed words) -> the class constants of the gold query (`?x wdt:P31 wd:C`,
  `?x wdt:P106 wd:C`), through the class's label and aliases or as the question's head noun.
- `answers`: a head noun phrase -> what the gold answers are: `boolean`, `quantity`, `date`, `string`, or
  the most common type (P31) of the answer entities.
- `people`: the classes the graph gives people as their occupation or position (`?x wdt:P106|P39 wd:C` for a
  human `?x`) with how many: "actors", "politicians" ask for humans, whatever the class's own instances.
- `frames`: a question frame (`words.question_frame`: "where is _ from") -> its questions (`n`) and their gold
  properties, shared as an unnamed word's; `frame_prior(frame, pid)` is the share. What a question asks when its
  content words name only the entity ("what does _ do": occupation).
- `orders`: a superlative word (`words.superlatives`: "highest", "first") -> how the gold queries of the train
  questions that say it order their answers: `DESC` / `ASC` (an `ORDER BY` of one value with a `LIMIT`), `count`
  (ordered by an aggregate), `none`. Which property orders them is the `properties` table's (the word's
  between-variables rows: "highest" -> elevation).
- `patterns`: a question pattern (`words.question_patterns`: the words that open a wh-phrase, "how often did")
  and a head noun phrase (`head:` ...) -> the gold query form (ASK / COUNT / SELECT) and answer kind.

A lookup decides only with MIN_SUPPORT questions behind it and a MIN_SHARE majority: one question's word is
an anecdote, not data; a word STRONG questions say without ever asking for a property speaks against it. No
model, no network: a dictionary lookup."""

from __future__ import annotations

import gzip
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from saga_dspy.grounding.words import head_phrases, phrase_key, question_patterns, superlatives
from saga_dspy.input_files import InputFileError, read_input_bytes, reading
from saga_dspy.kg.flavours import flavour_for

LEXICON_VERSION = 1
MAX_LEXICON_BYTES = 64 * 2**20  # inflated; the bundled one is under 1 MB
# each table's nesting: how many levels of objects (string keys) above its counts
TABLE_DEPTHS = {"words": 1, "people": 1, "classes": 2, "answers": 2, "orders": 2, "properties": 3, "patterns": 3}
MIN_SUPPORT = 2  # questions behind an entry before it decides anything
MIN_SHARE = 0.5  # the majority an entry needs to decide a class, an answer kind or a form
STRONG = 20  # train questions saying a word before none of them asking for a property is evidence against it
KINDS = ("boolean", "quantity", "date", "string", "entity")
FORMS = ("ASK", "COUNT", "SELECT")


def head_key(phrase: str) -> str:
    """The `patterns` key of a head noun phrase (kept apart from the wh-phrase openings)."""
    return f"head:{phrase}"


def question_keys(question: str) -> list[str]:
    """A question's `patterns` keys, the most specific first: its wh-phrase openings, then its head noun's."""
    return question_patterns(question) + [head_key(phrase_key(p)) for p in head_phrases(question, counted=True)]


def _majority(counts: Mapping[str, int] | None) -> str | None:
    """The value most questions of an entry agree on, when MIN_SUPPORT questions and MIN_SHARE of them do."""
    if not counts:
        return None
    total = sum(counts.values())
    best = max(sorted(counts), key=lambda k: counts[k])
    if total >= MIN_SUPPORT and counts[best] >= MIN_SUPPORT and counts[best] >= MIN_SHARE * total:
        return best
    return None


@dataclass(frozen=True)
class Lexicon:
    """The mined tables (module docstring); an empty lexicon decides nothing (`Lexicon()`)."""

    words: Mapping[str, int] = field(default_factory=dict)
    properties: Mapping[str, Mapping[str, Mapping[str, float]]] = field(default_factory=dict)
    classes: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    answers: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    patterns: Mapping[str, Mapping[str, Mapping[str, int]]] = field(default_factory=dict)
    people: Mapping[str, int] = field(default_factory=dict)
    frames: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    meta: Mapping[str, Any] = field(default_factory=dict)
    orders: Mapping[str, Mapping[str, int]] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.words or self.classes or self.answers or self.patterns or self.people or self.frames)

    def __hash__(self) -> int:  # immutable after loading; identity is enough for the caches keyed by it
        return id(self)

    def __eq__(self, other: object) -> bool:
        return self is other

    # --- lookups -------------------------------------------------------------------------------------------
    def property_prior(self, word: str, pid: str, direction: str | None = None) -> float:
        """The share of the train questions saying `word` (a stem) whose gold query has `pid` (in that
        direction, when given); 0 below MIN_SUPPORT questions."""
        n = self.words.get(word, 0)
        if n < MIN_SUPPORT:
            return 0.0
        rows = self.properties.get(word, {}).get(pid)
        if not rows:
            return 0.0
        count = sum(c for key, c in rows.items() if direction is None or key.split("/")[0] in (direction, "var"))
        return min(1.0, count / n)

    def speaks_against(self, word: str, pid: str, direction: str | None = None) -> bool:
        """Do STRONG train questions or more say `word` (a stem) and none of them ask for `pid` (in that
        direction, when given)? Then the word does not name the property, whatever its label says."""
        return self.words.get(word, 0) >= STRONG and self.property_prior(word, pid, direction) == 0.0

    def frame_prior(self, frame: str, pid: str, direction: str | None = None) -> float:
        """`pid`'s share in `frame_priors` (0 where it has none)."""
        return self.frame_priors(frame, direction).get(pid, 0.0)

    def frame_priors(self, frame: str, direction: str | None = None) -> dict[str, float]:
        """The share of the train questions with this frame whose gold query has the frame's most asked property
        (in that direction, when given), for that property (all of them on a tie); {} below MIN_SUPPORT questions.
        Only the most asked: a frame is wider than a word ("give me all _"), its runners-up are what its questions
        happened to ask. It need not be a majority: "who was _" asks occupation in a third of them, the best
        evidence such a question has. The share counts MIN_SUPPORT questions more than the frame has, so two
        questions do not weigh as a label."""
        return _frame_priors(self, frame, direction)

    def item_class(self, phrase: str) -> str:
        """The class the train questions' gold queries restrict their items to when they say `phrase`, or ""."""
        return _majority(self.classes.get(phrase)) or ""

    def answer(self, phrase: str) -> str:
        """What the gold answers of questions with this head noun are (a kind or a class id), or ""."""
        return _majority(self.answers.get(phrase)) or ""

    def names_people(self, qid: str) -> bool:
        """Whether the graph gives MIN_SUPPORT humans or more this class as occupation or position."""
        return self.people.get(qid, 0) >= MIN_SUPPORT

    def order(self, question: str) -> tuple[str, str] | None:
        """(word, `ASC` | `DESC`): the first superlative word of the question whose train questions' gold queries
        mostly order their answers by one value that way; None where no word decides."""
        for word in superlatives(question):
            found = _majority(self.orders.get(word))
            if found in ("ASC", "DESC"):
                return word, found
        return None

    def vote(self, keys: list[str], table: str) -> str | None:
        """The form (`table="form"`) or answer kind (`"kind"`) of the first key an entry decides, else None."""
        for key in keys:
            found = _majority(self.patterns.get(key, {}).get(table))
            if found is not None:
                return found
        return None

    # --- files ----------------------------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        return {
            "version": LEXICON_VERSION,
            "meta": dict(self.meta),
            "words": dict(sorted(self.words.items())),
            "properties": {k: self.properties[k] for k in sorted(self.properties)},
            "classes": {k: self.classes[k] for k in sorted(self.classes)},
            "answers": {k: self.answers[k] for k in sorted(self.answers)},
            "patterns": {k: self.patterns[k] for k in sorted(self.patterns)},
            "people": dict(sorted(self.people.items())),
            "frames": {k: self.frames[k] for k in sorted(self.frames)},
            "orders": {k: self.orders[k] for k in sorted(self.orders)},
        }

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> Lexicon:
        if obj.get("version") != LEXICON_VERSION:
            raise ValueError(f"lexicon version {obj.get('version')!r}, this code reads {LEXICON_VERSION}")
        return cls(
            obj.get("words", {}),
            obj.get("properties", {}),
            obj.get("classes", {}),
            obj.get("answers", {}),
            obj.get("patterns", {}),
            obj.get("people", {}),
            obj.get("frames", {}),
            obj.get("meta", {}),
            obj.get("orders", {}),
        )

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        text = json.dumps(self.to_json(), ensure_ascii=False, sort_keys=False, separators=(",", ":"))
        with gzip.open(path, "wt", encoding="utf-8", compresslevel=9) as f:
            f.write(text)
        return path

    @classmethod
    def load(cls, path: str | Path, what: str = "lexicon") -> Lexicon:
        """The lexicon file at `path`, checked whole before use: a regular file within MAX_LEXICON_BYTES, gzip or
        plain JSON of this code's version and tables; otherwise an InputFileError naming the file and what is
        wrong (FileNotFoundError when it is missing)."""
        data = read_input_bytes(path, what, MAX_LEXICON_BYTES)
        try:
            obj = json.loads(data)
        except (ValueError, RecursionError) as exc:
            raise InputFileError(f"{what} {path}: not a lexicon (not JSON: {exc})") from None
        problem = lexicon_problem(obj)
        if problem:
            raise InputFileError(f"{what} {path}: not a lexicon ({problem})")
        return cls.from_json(obj)


def lexicon_problem(obj: Any) -> str:
    """What makes a parsed file no lexicon of this version ("" when it is one): the lookups trust its shape."""
    if not isinstance(obj, dict):
        return f"a JSON object is expected, found {type(obj).__name__}"
    if obj.get("version") != LEXICON_VERSION:
        return f"version {obj.get('version')!r}, this code reads {LEXICON_VERSION}; mine it again"
    if not isinstance(obj.get("meta", {}), dict):
        return "meta: an object is expected"
    for table, depth in TABLE_DEPTHS.items():
        problem = _counts_problem(obj.get(table, {}), depth, table)
        if problem:
            return problem
    frames = obj.get("frames", {})
    if not isinstance(frames, dict):
        return "frames: an object is expected"
    for frame, entry in frames.items():
        if not isinstance(entry, dict) or not _is_count(entry.get("n", 0)):
            return f"frames/{frame}: an object with a count n is expected"
        for pid, rows in entry.items():
            problem = "" if pid == "n" else _counts_problem(rows, 1, f"frames/{frame}/{pid}")
            if problem:
                return problem
    return ""


def _is_count(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value >= 0


def _counts_problem(value: Any, depth: int, where: str) -> str:
    """ "" when `value` is `depth` levels of objects with counts (finite numbers >= 0) at the bottom."""
    if not isinstance(value, dict):
        return f"{where}: an object is expected, found {type(value).__name__}"
    for key, inner in value.items():
        if depth == 1:
            if not _is_count(inner):
                return f"{where}/{key}: a count is expected, found {inner!r:.40}"
        else:
            problem = _counts_problem(inner, depth - 1, f"{where}/{key}")
            if problem:
                return problem
    return ""


@lru_cache(maxsize=1024)  # per question, asked once for every lookup's ranking
def _frame_priors(lexicon: Lexicon, frame: str, direction: str | None) -> dict[str, float]:
    entry = lexicon.frames.get(frame) if frame else None
    if not entry or entry.get("n", 0) < MIN_SUPPORT:
        return {}
    totals = {pid: sum(rows.values()) for pid, rows in entry.items() if pid != "n"}
    top = max(totals.values(), default=0.0)
    out = {}
    for pid, total in totals.items():
        if total >= top:
            rows = entry[pid]
            count = sum(c for key, c in rows.items() if direction is None or key.split("/")[0] in (direction, "var"))
            out[pid] = min(1.0, count / (entry["n"] + MIN_SUPPORT))
    return out


def bundled_lexicon_path(data_dir: str | Path, kg: str) -> Path:
    return Path(data_dir) / "lexicon" / f"{kg}.json.gz"


@lru_cache(maxsize=8)
def _load(path: str, what: str) -> Lexicon:
    with reading(path, what):
        return Lexicon.load(path, what)


def load_lexicon(settings) -> Lexicon:
    """The lexicon `settings.lexicon` names: `bundled` (the graph's committed file; empty for a graph that has none
    bundled, an error when the file is missing), `none` (the grammar alone: an ablation), or a file path. Read and
    checked once per process (the run's file checks call it before the first question); a bad file is a
    ValueError or FileNotFoundError naming it."""
    choice = getattr(settings, "lexicon", "bundled")
    if choice == "none":
        return Lexicon()
    if choice != "bundled":
        return _load(str(Path(choice).expanduser()), "--lexicon")
    if not flavour_for(settings.kg).bundled_lexicon:
        return Lexicon()
    path = bundled_lexicon_path(settings.data_dir, settings.kg)
    if not path.exists():
        raise FileNotFoundError(
            f"the bundled lexicon {path} is missing: restore it (scripts/mine_lexicon.py), or pass --lexicon none"
        )
    return _load(str(path), "the bundled lexicon")


__all__ = [
    "FORMS",
    "KINDS",
    "Lexicon",
    "MIN_SHARE",
    "MIN_SUPPORT",
    "STRONG",
    "bundled_lexicon_path",
    "head_key",
    "lexicon_problem",
    "load_lexicon",
    "question_keys",
]
