"""The test firewall: when two benchmark questions are the same question.

Train and test splits share paraphrases ("when did celtics win the championship?" / "when did
the celtics win championship?"), and one benchmark's train split holds another's test questions
(QALD-10 train has 118 of the 136 QALD-9-plus test questions). A demonstration, a compiled demo
or a training question that is such a twin of an evaluated question leaks its answer. Two
questions *collide* when

* their normalised text is equal (lower case, words only), or
* the Jaccard similarity of their content words (stop words removed) is >= `JACCARD`, or
* their gold SPARQL is equal after normalisation (comments and whitespace dropped, prefixes
  expanded to full IRIs, keywords upper-cased, variables renamed in order of appearance).

Pure functions and one index (`Firewall`); every place that picks training material checks it:
the demo-pool build, the run-time demo choice (`QuestionGuard`, handed to the program per
question; the agent only calls its `allows` / `filter_demos`, so it never imports evaluation),
`optimize`'s train set and the dev-split carving.
"""

from __future__ import annotations

import inspect
import json
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from saga_dspy.kg.prefixes import FREEBASE_PREFIXES, WIKIDATA_PREFIXES

JACCARD = 0.8

STOPWORDS = frozenset(
    """a an the of in on at to for from by with and or is are was were be been being does do did has have had
    which what who whom whose when where how that this these those it its as into than then there their
    his her he she they them me my i you your we our us give list all name tell show please s""".split()
)
_WORD = re.compile(r"\w+", re.UNICODE)

# Prefixes a query may use without declaring them (query.wikidata.org predefines them; Freebase's ns:/fb:).
DEFAULT_PREFIXES = {**FREEBASE_PREFIXES, **WIKIDATA_PREFIXES}
RDF_TYPE = f"<{WIKIDATA_PREFIXES['rdf']}type>"

_TOKEN = re.compile(
    r"""(?P<iri><[^<>"{}|^`\\\s]*>)
      |(?P<str>\"\"\"[\s\S]*?\"\"\"|'''[\s\S]*?'''|"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')
      |(?P<var>[?$][\w\u00B7]+)
      |(?P<comment>\#[^\n]*)
      |(?P<pname>(?:[A-Za-z][\w\-.]*)?:[\w\-.%]*)
      |(?P<word>[A-Za-z_][\w\-]*)
      |(?P<num>[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)
      |(?P<other>\S)""",
    re.VERBOSE,
)


# --------------------------------------------------------------------------- normalisation


def normalise_text(text: str | None) -> str:
    """Lower-case words joined by one space ('When did the Celtics win?' -> 'when did the celtics win')."""
    return " ".join(_WORD.findall((text or "").lower()))


def content_words(text: str | None) -> frozenset[str]:
    return frozenset(w for w in _WORD.findall((text or "").lower()) if w not in STOPWORDS)


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    if not a and not b:
        return 0.0
    return len(a & b) / len(a | b)


def _tokens(sparql: str) -> list[tuple[str, str]]:
    out = []
    pos = 0
    while pos < len(sparql):
        if sparql[pos].isspace():
            pos += 1
            continue
        m = _TOKEN.match(sparql, pos)
        if m is None:  # pragma: no cover - `other` matches any non-space character
            break
        kind, value = m.lastgroup or "other", m.group()
        end = m.end()
        if kind == "pname" and value.endswith(".") and not value.endswith(":."):
            stripped = value.rstrip(".")  # `wd:Q42.` ends a triple; the dot is not part of the name
            end -= len(value) - len(stripped)
            value = stripped
        out.append((kind, value))
        pos = end
    return out


def normalise_sparql(sparql: str | None) -> str:
    """A canonical form of a query: equal for queries that differ only in layout, prefixes,
    keyword case, variable names and optional tokens (WHERE, a dot before `}`). "" for no query."""
    if not sparql or not sparql.strip():
        return ""
    tokens = [t for t in _tokens(sparql) if t[0] != "comment"]
    prefixes = dict(DEFAULT_PREFIXES)
    body: list[tuple[str, str]] = []
    i = 0
    while i < len(tokens):
        kind, value = tokens[i]
        if kind == "word" and value.upper() == "PREFIX" and i + 2 < len(tokens) and tokens[i + 2][0] == "iri":
            prefixes[tokens[i + 1][1].rstrip(":")] = tokens[i + 2][1][1:-1]
            i += 3
            continue
        if kind == "word" and value.upper() == "BASE" and i + 1 < len(tokens):
            i += 2
            continue
        body.append((kind, value))
        i += 1
    variables: dict[str, str] = {}
    out = []
    for kind, value in body:
        if kind == "var":
            out.append(variables.setdefault(value[1:], f"?v{len(variables)}"))
        elif kind == "pname":
            prefix, _, local = value.partition(":")
            base = prefixes.get(prefix)
            out.append(f"<{base}{local}>" if base is not None else value)
        elif kind == "word":
            out.append(RDF_TYPE if value == "a" else value.upper())
        elif value == "}" and out and out[-1] == ".":
            out[-1] = value  # the dot before a closing brace is optional
        else:
            out.append(value)
    return " ".join(t for t in out if t != "WHERE")  # WHERE is optional too


# --------------------------------------------------------------------------- collisions


@dataclass(frozen=True)
class Entry:
    """One question as the firewall sees it."""

    id: str | None
    source: str  # e.g. 'qald10/test'
    text: str
    words: frozenset[str]
    sparql: str

    @classmethod
    def of(cls, question: str | None, sparql: str | None = None, *, id: Any = None, source: str = "") -> Entry:
        return cls(
            None if id is None else str(id),
            source,
            normalise_text(question),
            content_words(question),
            normalise_sparql(sparql),
        )


@dataclass(frozen=True)
class Collision:
    id: str | None
    source: str
    reason: str  # 'text' | 'jaccard' | 'sparql'


def collision_reason(a: Entry, b: Entry) -> str | None:
    """Why `a` and `b` are the same question, or None."""
    if a.text and a.text == b.text:
        return "text"
    if a.words and b.words and jaccard(a.words, b.words) >= JACCARD:
        return "jaccard"
    if a.sparql and a.sparql == b.sparql:
        return "sparql"
    return None


class Firewall:
    """The questions that must not be shown or trained on, indexed for fast collision checks."""

    def __init__(self, entries: Iterable[Entry] = ()):
        self.entries: list[Entry] = []
        self._by_text: dict[str, list[int]] = {}
        self._by_sparql: dict[str, list[int]] = {}
        self._by_word: dict[str, list[int]] = {}
        for entry in entries:
            self.add(entry)

    @classmethod
    def of_records(cls, records: Iterable[dict[str, Any]], source: str = "") -> Firewall:
        """From benchmark records (`question`, `sparql`, `id`)."""
        return cls(Entry.of(r.get("question"), r.get("sparql"), id=r.get("id"), source=source) for r in records)

    def add(self, entry: Entry) -> None:
        n = len(self.entries)
        self.entries.append(entry)
        if entry.text:
            self._by_text.setdefault(entry.text, []).append(n)
        if entry.sparql:
            self._by_sparql.setdefault(entry.sparql, []).append(n)
        for w in entry.words:
            self._by_word.setdefault(w, []).append(n)

    def extend(self, other: Firewall) -> Firewall:
        for entry in other.entries:
            self.add(entry)
        return self

    def __len__(self) -> int:
        return len(self.entries)

    def collisions(self, question: str | None, sparql: str | None = None) -> list[Collision]:
        """Every indexed question that collides with this one (first reason that applies)."""
        probe = Entry.of(question, sparql)
        found: dict[int, str] = {}
        for i in self._by_text.get(probe.text, ()) if probe.text else ():
            found.setdefault(i, "text")
        if probe.words:
            shared = Counter(i for w in probe.words for i in self._by_word.get(w, ()))
            for i, n in shared.items():
                if i not in found and n / (len(probe.words) + len(self.entries[i].words) - n) >= JACCARD:
                    found[i] = "jaccard"
        for i in self._by_sparql.get(probe.sparql, ()) if probe.sparql else ():
            found.setdefault(i, "sparql")
        return [Collision(self.entries[i].id, self.entries[i].source, why) for i, why in sorted(found.items())]

    def collides(self, question: str | None, sparql: str | None = None) -> bool:
        return bool(self.collisions(question, sparql))

    def partition(self, records: Sequence[dict[str, Any]]) -> tuple[list[dict[str, Any]], dict[str, int]]:
        """(records that collide with nothing here, counts of the dropped ones by colliding source)."""
        kept: list[dict[str, Any]] = []
        dropped: Counter[str] = Counter()
        for rec in records:
            hits = self.collisions(rec.get("question"), rec.get("sparql"))
            if hits:
                dropped[hits[0].source or "?"] += 1
            else:
                kept.append(rec)
        return kept, dict(sorted(dropped.items()))


# --------------------------------------------------------------------------- run time


_QUERY_ARG = re.compile(r'"query"\s*:\s*("(?:[^"\\]|\\.)*")')


def demo_queries(demo: Any) -> list[str]:
    """The SPARQL a demonstration shows: its `sparql`/`gold_sparql` field and every `query`
    argument of an execute step in its trajectory or output."""
    get = demo.get if hasattr(demo, "get") else (lambda k, d=None: getattr(demo, k, d))
    out = [str(get(k)) for k in ("sparql", "gold_sparql") if get(k, None)]
    for key in ("trajectory", "next_tool_args"):
        text = get(key, None)
        if not text:
            continue
        for m in _QUERY_ARG.finditer(str(text)):
            try:
                out.append(json.loads(m.group(1)))
            except ValueError:
                continue
    return out


class QuestionGuard:
    """The firewall for one evaluated question: which demonstrations may be shown to it.

    Handed to the program per question (`program(question=..., demo_guard=guard)`): the program
    asks `allows(question, sparql)` of each pool record it would pick and `filter_demos` of a
    compiled program's fixed demos, and reports how many it dropped."""

    def __init__(self, question: str, gold_sparql: str | None = None):
        self._firewall = Firewall([Entry.of(question, gold_sparql, source="question")])

    def allows(self, question: str | None, sparql: str | None = None) -> bool:
        return not self._firewall.collides(question, sparql)

    def allows_demo(self, demo: Any) -> bool:
        get = demo.get if hasattr(demo, "get") else (lambda k, d=None: getattr(demo, k, d))
        if not self.allows(get("question", None)):
            return False
        return all(self.allows(None, q) for q in demo_queries(demo))

    def filter_demos(self, demos: Sequence[Any]) -> tuple[list[Any], int]:
        """(the demos that do not collide, how many were dropped)."""
        kept = [d for d in demos if self.allows_demo(d)]
        return kept, len(demos) - len(kept)


def guard_kwargs(program: Any, question: str, gold_sparql: str | None) -> dict[str, Any]:
    """`{"demo_guard": QuestionGuard(...)}` for a program whose forward takes one, else {}."""
    forward = getattr(type(program), "forward", None)  # (an instance attribute lookup warns in dspy)
    try:
        accepts = forward is not None and "demo_guard" in inspect.signature(forward).parameters
    except (TypeError, ValueError):
        accepts = False
    return {"demo_guard": QuestionGuard(question, gold_sparql)} if accepts else {}


__all__ = [
    "Collision",
    "Entry",
    "Firewall",
    "JACCARD",
    "QuestionGuard",
    "collision_reason",
    "content_words",
    "demo_queries",
    "guard_kwargs",
    "jaccard",
    "normalise_sparql",
    "normalise_text",
]
