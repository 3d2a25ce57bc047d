"""The test firewall: when two benchmark questions are the same question.

Train and test splits share paraphrases ("when did celtics win the championship?" / "when did
the celtics win championship?"), and one benchmark's train split holds another's test questions
(QALD-10 train has 118 of the 136 QALD-9-plus test questions). A demonstration, a compiled demo
or a training question that is such a twin of an evaluated question leaks its answer. Two
questions *collide* when

* their normalised text is equal (lower case, words only), or
* the Jaccard similarity of their content words (stop words removed) is >= `JACCARD`, or
* their gold SPARQL is equal after normalisation (comments and whitespace dropped, prefixes
  expanded to full IRIs, keywords upper-cased, variables renamed in order of appearance), or
  equal up to the order of the patterns inside each group (`;` / `,` lists expanded to triples), or
* their gold SPARQL has the same query form (ASK | COUNT | SELECT) and the same non-empty set of
  constants (the graph's entity and property ids; vocabulary IRIs such as rdfs:label left out)
  and their content-word Jaccard is >= `NEAR_JACCARD` ("least inhabitants" / "most inhabitants").

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
NEAR_JACCARD = 0.5  # the text bar for two questions whose queries share their form and constants

STOPWORDS = frozenset(
    """a an the of in on at to for from by with and or is are was were be been being does do did has have had
    which what who whom whose when where how that this these those it its as into than then there their
    his her he she they them me my i you your we our us give list all name tell show please s""".split()
)
_WORD = re.compile(r"\w+", re.UNICODE)

# Prefixes a query may use without declaring them (query.wikidata.org predefines them; Freebase's ns:/fb:).
DEFAULT_PREFIXES = {**FREEBASE_PREFIXES, **WIKIDATA_PREFIXES}
RDF_TYPE = f"<{WIKIDATA_PREFIXES['rdf']}type>"
# Namespaces of vocabulary, not of the graph's data: their IRIs are no constants of a question.
VOCABULARY = tuple(
    WIKIDATA_PREFIXES[p]
    for p in ("rdf", "rdfs", "xsd", "owl", "skos", "schema", "wikibase", "bd", "prov", "geo", "geof", "mwapi", "hint")
)

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


def _normal_tokens(sparql: str | None) -> list[str]:
    """The tokens of `normalise_sparql` (prefixes expanded, variables renamed `?v0`, `?v1`, ...)."""
    if not sparql or not sparql.strip():
        return []
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
    out: list[str] = []
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
    return [t for t in out if t != "WHERE"]  # WHERE is optional too


def normalise_sparql(sparql: str | None) -> str:
    """A canonical form of a query: equal for queries that differ only in layout, prefixes,
    keyword case, variable names and optional tokens (WHERE, a dot before `}`). "" for no query."""
    return " ".join(_normal_tokens(sparql))


# --------------------------------------------------------------------------- pattern order

_CLOSE = {"{": "}", "(": ")", "[": "]"}
_QUERY_WORDS = frozenset({"SELECT", "ASK", "CONSTRUCT", "DESCRIBE"})
_BLOCK_WORDS = frozenset({"OPTIONAL", "MINUS", "GRAPH", "SERVICE", "VALUES"})  # keyword ... { group }
_CALL_WORDS = frozenset({"FILTER", "BIND"})  # keyword ... ( expression ) or EXISTS { group }
_PATH_OPS = frozenset("/|^*+?!")


def _end(tokens: list[str], i: int) -> int:
    """The index after the bracket that closes `tokens[i]` (its end when unbalanced)."""
    stack = []
    for j in range(i, len(tokens)):
        t = tokens[j]
        if t in _CLOSE:
            stack.append(_CLOSE[t])
        elif stack and t == stack[-1]:
            stack.pop()
            if not stack:
                return j + 1
    return len(tokens)


def _unordered(tokens: list[str]) -> list[str]:
    """`tokens` with every group's patterns in a canonical order (a sub-query's clauses keep theirs)."""
    out: list[str] = []
    i = 0
    while i < len(tokens):
        if tokens[i] == "{":
            j = _end(tokens, i)
            out += ["{", *_group(tokens[i + 1 : j - 1]), "}"]
            i = j
        else:
            out.append(tokens[i])
            i += 1
    return out


def _group(tokens: list[str]) -> list[str]:
    """A group's patterns (triples, FILTERs, OPTIONALs, unions, ...) sorted by their constants, each ended by `.`."""
    if tokens and tokens[0] in _QUERY_WORDS:  # a sub-query
        return _unordered(tokens)
    elements: list[list[str]] = []
    i, n = 0, len(tokens)
    while i < n:
        t = tokens[i]
        if t == ".":
            i += 1
            continue
        j = i + 1
        if t == "{":
            j = _end(tokens, i)
            while j + 1 < n and tokens[j] == "UNION" and tokens[j + 1] == "{":
                j = _end(tokens, j + 1)
        elif t in _BLOCK_WORDS or t in _CALL_WORDS:
            stop = ("{",) if t in _BLOCK_WORDS else ("{", "(")
            while j < n and tokens[j] not in stop and tokens[j] != ".":
                j = _end(tokens, j) if tokens[j] in _CLOSE else j + 1
            j = _end(tokens, j) if j < n and tokens[j] in stop else j
        else:
            j = i
            while j < n and tokens[j] not in (".", "{") and tokens[j] not in _BLOCK_WORDS | _CALL_WORDS:
                j = _end(tokens, j) if tokens[j] in _CLOSE else j + 1
            elements += _triples(tokens[i:j])
            i = j
            continue
        elements.append(_unordered(tokens[i:j]))
        i = j
    elements.sort(key=lambda e: ([t if not t.startswith("?v") else "?" for t in e], e))
    return [t for e in elements for t in (*e, ".")]


def _triples(block: list[str]) -> list[list[str]]:
    """A triples block as one triple per element (`s p o ; p2 o2 , o3` expanded); as it is when it
    holds anything this does not read (blank nodes, collections)."""
    if not block or any(t in _CLOSE for t in block):
        return [block] if block else []
    subject, rest = block[0], block[1:]
    out: list[list[str]] = []
    for segment in _split(rest, ";"):
        p = 0
        while p < len(segment) and segment[p] in _PATH_OPS:  # a path's leading ^ or !
            p += 1
        p += 1  # the first path element
        while p < len(segment) and segment[p] in _PATH_OPS:
            p += 2 if segment[p] in "/|" else 1
        predicate, objects = segment[:p], segment[p:]
        if not predicate or not objects:
            return [block]
        out += [[subject, *predicate, *obj] for obj in _split(objects, ",")]
    return out


def _split(tokens: list[str], sep: str) -> list[list[str]]:
    parts: list[list[str]] = [[]]
    for t in tokens:
        if t == sep:
            parts.append([])
        else:
            parts[-1].append(t)
    return [p for p in parts if p]


def _renamed(tokens: list[str]) -> list[str]:
    names: dict[str, str] = {}
    return [names.setdefault(t, f"?v{len(names)}") if t.startswith("?v") else t for t in tokens]


def unordered_sparql(sparql: str | None) -> str:
    """`normalise_sparql` up to the order of the patterns inside each group: equal for the same
    query written with its triples in another order or as a `;` list. "" for no query."""
    tokens = _normal_tokens(sparql)
    return " ".join(_renamed(_unordered(tokens))) if tokens else ""


def _form(tokens: list[str]) -> str:
    """ASK | COUNT | SELECT (also for CONSTRUCT / DESCRIBE) of normalised tokens."""
    for i, t in enumerate(tokens):
        if t == "ASK":
            return "ASK"
        if t == "SELECT":
            head = [x for x in tokens[i + 1 : i + 4] if x not in ("DISTINCT", "REDUCED")]
            return "COUNT" if head[:2] == ["(", "COUNT"] else "SELECT"
    return "SELECT"


_LANGUAGE_LITERAL = re.compile(r"(?:\[auto_language\],?)?(?:[a-z]{2,3}(?:-[a-z]+)?,?)*")  # "en", "[AUTO_LANGUAGE],en"


def _constants(tokens: list[str]) -> frozenset[str]:
    """The graph's ids and the values a query names: the local name of each IRI outside the vocabularies
    (`wd:Q42` and `<…/entity/Q42>` are `Q42`; `wdt:P26`, `p:P26`, `ps:P26` are all `P26`) and each
    string or number inside its pattern ("twitter", 1000000), language codes left out."""
    out = set()
    depth = 0
    for t in tokens:
        depth += (t == "{") - (t == "}")
        if t.startswith("<") and t.endswith(">"):
            if not t[1:].startswith(VOCABULARY):
                out.add(re.split(r"[/#]", t[1:-1])[-1])
        elif depth > 0 and t[:1] in "\"'":
            value = t.strip("\"'").lower()
            if not _LANGUAGE_LITERAL.fullmatch(value):
                out.add(repr(value))
        elif depth > 0 and (t[:1].isdigit() or t[:1] in "+-." and t[1:2].isdigit()):
            out.add(t)
    return frozenset(out - {""})


# --------------------------------------------------------------------------- collisions


@dataclass(frozen=True)
class Entry:
    """One question as the firewall sees it."""

    id: str | None
    source: str  # e.g. 'qald10/test'
    text: str
    words: frozenset[str]
    sparql: str
    unordered: str = ""  # the query up to pattern order (`unordered_sparql`)
    shape: tuple[str, frozenset[str]] | None = None  # (query form, constants); None without constants

    @classmethod
    def of(cls, question: str | None, sparql: str | None = None, *, id: Any = None, source: str = "") -> Entry:
        tokens = _normal_tokens(sparql)
        names = _constants(tokens)
        return cls(
            None if id is None else str(id),
            source,
            normalise_text(question),
            content_words(question),
            " ".join(tokens),
            " ".join(_renamed(_unordered(tokens))) if tokens else "",
            (_form(tokens), names) if names else None,
        )


@dataclass(frozen=True)
class Collision:
    id: str | None
    source: str
    reason: str  # 'text' | 'jaccard' | 'sparql' | 'pattern_order' | 'constants'


def collision_reason(a: Entry, b: Entry, near: bool = True) -> str | None:
    """Why `a` and `b` are the same question, or None. `near=False`: the first rule only (text, Jaccard,
    equal normalised SPARQL), under which the bundled dev splits were carved."""
    if a.text and a.text == b.text:
        return "text"
    similarity = jaccard(a.words, b.words) if a.words and b.words else 0.0
    if similarity >= JACCARD:
        return "jaccard"
    if a.sparql and a.sparql == b.sparql:
        return "sparql"
    if not near:
        return None
    if a.unordered and a.unordered == b.unordered:
        return "pattern_order"
    if a.shape is not None and a.shape == b.shape and similarity >= NEAR_JACCARD:
        return "constants"
    return None


class Firewall:
    """The questions that must not be shown or trained on, indexed for fast collision checks."""

    def __init__(self, entries: Iterable[Entry] = (), *, near: bool = True):
        """`near`: also the near-twin reasons (pattern order, shared constants); see `collision_reason`."""
        self.near = near
        self.entries: list[Entry] = []
        self._by_text: dict[str, list[int]] = {}
        self._by_sparql: dict[str, list[int]] = {}
        self._by_unordered: dict[str, list[int]] = {}
        self._by_shape: dict[tuple[str, frozenset[str]], list[int]] = {}
        self._by_word: dict[str, list[int]] = {}
        for entry in entries:
            self.add(entry)

    @classmethod
    def of_records(cls, records: Iterable[dict[str, Any]], source: str = "", *, near: bool = True) -> Firewall:
        """From benchmark records (`question`, `sparql`, `id`)."""
        return cls(
            (Entry.of(r.get("question"), r.get("sparql"), id=r.get("id"), source=source) for r in records), near=near
        )

    def add(self, entry: Entry) -> None:
        n = len(self.entries)
        self.entries.append(entry)
        if entry.text:
            self._by_text.setdefault(entry.text, []).append(n)
        if entry.sparql:
            self._by_sparql.setdefault(entry.sparql, []).append(n)
            self._by_unordered.setdefault(entry.unordered, []).append(n)
        if entry.shape is not None:
            self._by_shape.setdefault(entry.shape, []).append(n)
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
        if self.near:
            for i in self._by_unordered.get(probe.unordered, ()) if probe.unordered else ():
                found.setdefault(i, "pattern_order")
            for i in self._by_shape.get(probe.shape, ()) if probe.shape is not None and probe.words else ():
                if i not in found and jaccard(probe.words, self.entries[i].words) >= NEAR_JACCARD:
                    found[i] = "constants"
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
    "NEAR_JACCARD",
    "QuestionGuard",
    "collision_reason",
    "content_words",
    "demo_queries",
    "guard_kwargs",
    "jaccard",
    "normalise_sparql",
    "normalise_text",
    "unordered_sparql",
]
