"""Triple patterns of a SPARQL query, read with rdflib's SPARQL parser and algebra.

Every triple pattern comes out with the context it sits in (required, optional, one
branch of a UNION, negated, inside a FILTER), its subject and object terms, and the
property steps that touch the subject and the object (through property paths too), so
the type state and the conflict check can reason about which property constrains which
term. A query rdflib cannot parse gives `None`: callers then leave their state unchanged.
"""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass, field

from ..kg.errors import SparqlError
from ..kg.flavours import CLAIM, DIRECT, STATEMENT, Flavour
from ..kg.prefixes import missing_prefixes
from ..kg.sparql_parse import canonical_text, close_spaced_operators, query_algebra

log = logging.getLogger(__name__)

REQUIRED, OPTIONAL, UNION, NEGATED, FILTERED = "required", "optional", "union", "negated", "filter"


@dataclass(frozen=True)
class Term:
    kind: str  # var | iri | literal | bnode
    value: str

    @property
    def is_var(self) -> bool:
        return self.kind in ("var", "bnode")


@dataclass(frozen=True)
class Step:
    """One property touched by a pattern end: `inverse` when the term is the step's object."""

    iri: str
    inverse: bool = False


@dataclass(frozen=True)
class Pattern:
    subject: Term
    predicate: str | None  # a plain predicate IRI; None for a property path
    obj: Term
    context: str
    subject_steps: tuple[Step, ...] | None  # None: undeterminable (zero-length or negated path)
    object_steps: tuple[Step, ...] | None
    alternative: bool = False  # the steps are alternatives (p1|p2)
    type_kind: str | None = None  # "exact" (?x P31 C) / "closure" (?x P31/P279* C) for type patterns
    path_text: str = ""

    @property
    def simple(self) -> bool:
        return self.predicate is not None


@dataclass
class ParsedQuery:
    form: str  # SELECT | ASK | CONSTRUCT | DESCRIBE
    patterns: list[Pattern] = field(default_factory=list)
    projected: list[str] = field(default_factory=list)
    iris: set[str] = field(default_factory=set)

    def required(self) -> list[Pattern]:
        return [p for p in self.patterns if p.context == REQUIRED]


# --- path ends -----------------------------------------------------------------------------


def _flip(steps: tuple[Step, ...] | None) -> tuple[Step, ...] | None:
    return tuple(Step(s.iri, not s.inverse) for s in steps) if steps is not None else None


def _ends(path) -> tuple[tuple[Step, ...] | None, tuple[Step, ...] | None, bool]:
    """(steps touching the path's subject, steps touching its object, alternative?)."""
    from rdflib.paths import AlternativePath, InvPath, MulPath, NegatedPath, SequencePath
    from rdflib.term import URIRef

    if isinstance(path, URIRef):
        step = (Step(str(path)),)
        return step, step, False
    if isinstance(path, InvPath):
        first, last, alt = _ends(path.arg)
        return _flip(last), _flip(first), alt
    if isinstance(path, SequencePath):
        args = list(path.args)
        first, _, alt1 = _ends(args[0])
        _, last, alt2 = _ends(args[-1])
        if isinstance(args[0], MulPath) and args[0].mod in ("*", "?"):
            first = None
        if isinstance(args[-1], MulPath) and args[-1].mod in ("*", "?"):
            last = None
        return first, last, alt1 or alt2
    if isinstance(path, AlternativePath):
        firsts: list[Step] = []
        lasts: list[Step] = []
        for arg in path.args:
            head, tail, _ = _ends(arg)
            if head is None or tail is None:
                return None, None, True
            firsts.extend(head)
            lasts.extend(tail)
        return tuple(firsts), tuple(lasts), True
    if isinstance(path, MulPath):
        if path.mod == "+":
            return _ends(path.path)
        return None, None, False
    if isinstance(path, NegatedPath):
        return None, None, False
    return None, None, False


def _type_kind(path, flavour: Flavour) -> str | None:
    """'exact' for P31 (or p:P31/ps:P31), 'closure' for P31/P279* (or P31/P279+)."""
    from rdflib.paths import MulPath, SequencePath
    from rdflib.term import URIRef

    if isinstance(path, URIRef):
        return "exact" if flavour.is_type_property(str(path)) else None
    if isinstance(path, SequencePath):
        args = list(path.args)
        refs = [flavour.prop_ref(str(a)) if isinstance(a, URIRef) else None for a in args]
        # p:P31 / ps:P31
        if (
            len(args) == 2
            and refs[0]
            and refs[1]
            and refs[0].pid == refs[1].pid == flavour.type_pid
            and refs[0].role == CLAIM
            and refs[1].role == STATEMENT
        ):
            return "exact"
        if (
            len(args) == 2
            and isinstance(args[0], URIRef)
            and flavour.is_type_property(str(args[0]))
            and isinstance(args[1], MulPath)
            and isinstance(args[1].path, URIRef)
            and flavour.is_subclass_property(str(args[1].path))
            and args[1].mod in ("*", "+")
        ):
            return "closure"
    return None


# --- the walk ---------------------------------------------------------------------------------


def _term(node) -> Term | None:
    from rdflib.term import BNode, Literal, URIRef, Variable

    if isinstance(node, Variable):
        return Term("var", str(node))
    if isinstance(node, BNode):
        return Term("bnode", str(node))
    if isinstance(node, URIRef):
        return Term("iri", str(node))
    if isinstance(node, Literal):
        return Term("literal", str(node))
    return None


def _triples(raw) -> list[tuple]:
    out: list[tuple] = []
    if not raw:
        return out
    items = list(raw)
    if items and isinstance(items[0], (list, tuple)):
        for t in items:
            t = list(t)
            for i in range(0, len(t) - 2, 3):
                out.append((t[i], t[i + 1], t[i + 2]))
    else:
        for i in range(0, len(items) - 2, 3):
            out.append((items[i], items[i + 1], items[i + 2]))
    return out


_NEGATED_CHILD = {"Minus": {"p2"}, "MinusGraphPattern": {"graph"}}
_OPTIONAL_CHILD = {"LeftJoin": {"p2", "expr"}, "OptionalGraphPattern": {"graph"}}


def _walk(node, context: str, emit, seen: set[int]) -> None:
    from rdflib.plugins.sparql.parserutils import CompValue, Expr

    if id(node) in seen:
        return
    if isinstance(node, (CompValue, Expr, dict)):
        seen.add(id(node))
        name = getattr(node, "name", "")
        if name in ("BGP", "TriplesBlock"):
            emit(node.get("triples"), context)
            return
        if name in ("ServiceGraphPattern",):
            return
        for key, child in node.items():
            if key in ("_vars", "PV", "res", "datasetClause"):
                continue
            ctx = context
            if key in _NEGATED_CHILD.get(name, ()):
                ctx = NEGATED
            elif key in _OPTIONAL_CHILD.get(name, ()) and context == REQUIRED:
                ctx = OPTIONAL
            elif name in ("Union", "GroupOrUnionGraphPattern") and context == REQUIRED:
                graphs = node.get("graph")
                if name == "Union" or (isinstance(graphs, list) and len(graphs) > 1):
                    ctx = UNION
            elif name == "Builtin_NOTEXISTS":
                ctx = NEGATED
            elif name == "Builtin_EXISTS" and context == REQUIRED:
                ctx = FILTERED
            _walk(child, ctx, emit, seen)
    elif isinstance(node, (list, tuple)):
        for child in node:
            _walk(child, context, emit, seen)


def _collect_iris(node, out: set[str], seen: set[int]) -> None:
    from rdflib.paths import Path
    from rdflib.plugins.sparql.parserutils import CompValue, Expr
    from rdflib.term import URIRef

    if isinstance(node, URIRef):
        out.add(str(node))
        return
    if id(node) in seen:
        return
    if isinstance(node, Path):
        seen.add(id(node))
        for attr in ("args", "arg", "path"):
            child = getattr(node, attr, None)
            if child is not None:
                _collect_iris(child, out, seen)
        return
    if isinstance(node, (CompValue, Expr, dict)):
        seen.add(id(node))
        for key, child in node.items():
            if key not in ("_vars",):
                _collect_iris(child, out, seen)
    elif isinstance(node, (list, tuple, set, frozenset)):
        seen.add(id(node))
        for child in node:
            _collect_iris(child, out, seen)


def _path_text(pred, flavour: Flavour) -> str:
    from rdflib.term import URIRef

    if isinstance(pred, URIRef):
        return flavour.short(str(pred))
    text = str(pred.n3()) if hasattr(pred, "n3") else str(pred)
    for prefix, ns in sorted(flavour.prefixes.items(), key=lambda kv: -len(kv[1])):
        text = text.replace(f"<{ns}", f"{prefix}:<").replace(f"{prefix}:<", f"{prefix}:")
    return text.replace(">", "")


@functools.lru_cache(maxsize=512)
def _parse_cached(sparql: str, flavour: Flavour) -> ParsedQuery | None:
    from rdflib.term import URIRef, Variable

    try:
        text = canonical_text(sparql)  # the text an endpoint check parsed (and may have handed off)
    except SparqlError:
        return None
    prefixes = missing_prefixes(text, flavour.prefixes)
    try:
        query = query_algebra(text, prefixes)
    except Exception:  # rdflib raises pyparsing errors, ValueError, KeyError, …
        try:
            query = query_algebra(close_spaced_operators(text), prefixes)
        except Exception as exc:
            log.debug("rdflib could not parse the query: %s", exc)
            return None
    algebra = query.algebra
    form = {"SelectQuery": "SELECT", "AskQuery": "ASK", "ConstructQuery": "CONSTRUCT", "DescribeQuery": "DESCRIBE"}.get(
        algebra.name, algebra.name
    )
    parsed = ParsedQuery(form)
    pv = algebra.get("PV") or []
    parsed.projected = [str(v) for v in pv if isinstance(v, Variable)]

    def emit(raw, context):
        for s, p, o in _triples(raw):
            st, ot = _term(s), _term(o)
            if st is None or ot is None:
                continue
            if isinstance(p, Variable):
                parsed.patterns.append(Pattern(st, None, ot, context, None, None, False, None, "?" + str(p)))
                continue
            first, last, alt = _ends(p)
            predicate = str(p) if isinstance(p, URIRef) else None
            parsed.patterns.append(
                Pattern(st, predicate, ot, context, first, last, alt, _type_kind(p, flavour), _path_text(p, flavour))
            )

    _walk(algebra, REQUIRED, emit, set())
    _collect_iris(algebra, parsed.iris, set())
    return parsed


def parse_query(sparql: str, flavour: Flavour) -> ParsedQuery | None:
    """The query's patterns, or None when rdflib cannot parse it."""
    if not isinstance(sparql, str) or not sparql.strip():
        return None
    return _parse_cached(sparql, flavour)


def render_term(term: Term, flavour: Flavour) -> str:
    if term.kind == "var":
        return "?" + term.value
    if term.kind == "bnode":
        return "[]"
    if term.kind == "iri":
        return flavour.short(term.value)
    return '"' + term.value[:40] + '"'


def render_pattern(p: Pattern, flavour: Flavour) -> str:
    return f"{render_term(p.subject, flavour)} {p.path_text} {render_term(p.obj, flavour)}"


__all__ = [
    "Term",
    "Step",
    "Pattern",
    "ParsedQuery",
    "parse_query",
    "render_pattern",
    "render_term",
    "REQUIRED",
    "OPTIONAL",
    "UNION",
    "NEGATED",
    "FILTERED",
    "DIRECT",
    "CLAIM",
    "STATEMENT",
]
