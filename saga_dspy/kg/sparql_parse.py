"""A query parsed by a real SPARQL grammar (rdflib's), on text made unambiguous first.

Every decision about a query (is it read-only, which SERVICE does it call, where is
the label service) is taken on this parse, never on regex tokens. The text that was
parsed is the text that is sent: `canonical_text` first removes what parsers are
known to disagree on (`\\u` escapes, which each parser decodes at its own stage, then
line ends, which they end comments at differently) and refuses what it cannot make
unambiguous; `parse_sparql` then refuses a text that a longest-match tokenizer (how
JavaCC/ANTLR-built servers read) reads with other SERVICE calls, update keywords or form.
"""

from __future__ import annotations

import logging
import re
import threading
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import pyoxigraph
from pyparsing import ParseException
from rdflib.plugins.sparql import parser as rdflib_grammar
from rdflib.plugins.sparql.algebra import translateQuery
from rdflib.plugins.sparql.parser import parseQuery, parseUpdate  # imported once, not first in a worker thread
from rdflib.plugins.sparql.parserutils import CompValue, ParamValue

from .errors import QueryRefused, QuerySyntaxError
from .query_text import Token, matching_brace, query_form, tokenize

DEFAULT_MAX_QUERY_CHARS = 20_000
# pyparsing is not thread-safe: it learns each parse action's arity on the action's first call by
# catching TypeError, so two threads parsing at once can fail on a valid query. Parses are short; one lock.
# a literal outside Python's value space ("2020-00-00T00:00:00Z", Wikidata's year precision) is read as its lexical
# form; rdflib's per-literal warning with a traceback says nothing to a user of a parsed query
logging.getLogger("rdflib.term").setLevel(logging.ERROR)
_PARSER_LOCK = threading.Lock()
# Parse trees of checked queries, handed to the one later algebra translation of the same text (the
# execute tool checks a query, then analyses its patterns: one parse, not two). Taken at most once,
# because translating rewrites the tree in place; bounded, because most checked queries are never analysed.
_HANDED_OFF: OrderedDict[str, Any] = OrderedDict()
_HAND_OFF_SIZE = 32
_ESCAPE = re.compile(r"\\u([0-9A-Fa-f]{4})|\\U([0-9A-Fa-f]{8})")
_LEFTOVER_ESCAPE = re.compile(r"\\[uU]")
# Control characters other than tab and line feed, the characters some line splitters break at (VT, FF,
# FS/GS/RS, NEL, U+2028/9) and lone surrogates: where parsers may disagree on a comment's end, or cannot encode.
_AMBIGUOUS_CHARACTER = re.compile("[\x01-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")
# A leading run of plain `PREFIX name: <iri>` declarations (ASCII names, SPARQL's IRIREF, whitespace only
# between them): read here, not by rdflib, whose grammar spends about half of a WDQS-style query's parse on
# its fifteen declarations. A declaration binds a name and can do nothing else; whatever does not match
# exactly (a comment, BASE, a non-ASCII name) is left to the grammar with the rest of the query.
IRIREF = r'<[^<>"{}|^`\\\x00-\x20]*>'  # SPARQL 1.1's IRIREF: '<' ([^<>"{}|^`\]-[#x00-#x20])* '>'
_DECLARATION = re.compile(
    r"\s*PREFIX\s+((?:[A-Za-z](?:[\w.-]*[\w-])?)?):\s*<(" + IRIREF[1:-1] + ")>", re.IGNORECASE | re.ASCII
)
_TURTLE = pyoxigraph.RdfFormat.TURTLE
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")
# Words no query contains outside strings, IRIs and names: a tokenizer that finds one reads an update.
UPDATE_KEYWORDS = frozenset({"INSERT", "DELETE", "LOAD", "CLEAR", "DROP", "CREATE", "ADD", "MOVE", "COPY"})
_FORMS = {"SelectQuery": "SELECT", "AskQuery": "ASK", "ConstructQuery": "CONSTRUCT", "DescribeQuery": "DESCRIBE"}
_UPDATE_NAMES = {
    "InsertData": "INSERT",
    "DeleteData": "DELETE",
    "DeleteWhere": "DELETE",
    "Modify": "DELETE/INSERT",
    "Load": "LOAD",
    "Clear": "CLEAR",
    "Drop": "DROP",
    "Create": "CREATE",
    "Add": "ADD",
    "Move": "MOVE",
    "Copy": "COPY",
}


def _service_clause(instring: str, loc: int, tokens: Any) -> CompValue:
    """rdflib's SERVICE clause node without its `service_string`, which rdflib finds by searching the whole
    text for the first SERVICE-like run: a copy in a string literal, or none at all (a parse failure) where
    a `#` in an IRI stands before the clause on its line. The clause's text comes from its span instead."""
    node = CompValue("ServiceGraphPattern")
    for token in tokens:
        if isinstance(token, ParamValue):
            if token.isList:
                node.setdefault(token.name, []).append(token.tokenList)
            else:
                node[token.name] = token.tokenList
    return node


rdflib_grammar.ServiceGraphPattern.postParse = _service_clause  # type: ignore[method-assign,assignment]


@dataclass(frozen=True)
class Service:
    """One SERVICE clause: its target IRI (None for a variable or an unresolvable name), the target as written,
    the clause's source text and its span in the parsed text (as a longest-match tokenizer reads it, which
    agrees with the grammar on every clause of an accepted query)."""

    iri: str | None
    target: str
    source: str
    graph: Any = field(repr=False, compare=False)
    span: tuple[int, int] = (0, 0)


@dataclass(frozen=True)
class SparqlParse:
    text: str
    form: str
    prefixes: dict[str, str]
    services: list[Service]
    variables: set[str]
    tree: Any = field(default=None, repr=False, compare=False)  # of `body`: the text after `leading`'s declarations
    leading: dict[str, str] = field(default_factory=dict, repr=False, compare=False)  # declared before the tree
    body: str = field(default="", repr=False, compare=False)
    base: str | None = None


def canonical_text(query: str, max_chars: int = DEFAULT_MAX_QUERY_CHARS) -> str:
    """The query with codepoint escapes decoded once (SPARQL 1.1 §19.2: before any other reading), *then*
    line breaks as `\\n`, and spaced path operators closed.

    Decoding comes first because every server decodes before it tokenizes: a `\\u000D` decoded after
    line ends were normalised would stay a carriage return, which ends a comment for Oxigraph but not for
    rdflib. Refuses a query over `max_chars` before any other work, one that still holds an escape after
    decoding (a second decoder would read it differently), and one with a character that parsers split
    lines at differently (form feed, NEL, U+2028 …), another control character or a lone surrogate."""
    if not isinstance(query, str) or not query.strip():
        raise QuerySyntaxError("empty query")
    if len(query) > max_chars:
        raise QueryRefused(f"refused: the query has {len(query):,} characters; at most {max_chars:,} are accepted")
    try:
        text = _ESCAPE.sub(lambda m: chr(int(m.group(1) or m.group(2), 16)), query)
    except (ValueError, OverflowError):
        raise QuerySyntaxError("syntax error: a \\U escape names no Unicode code point") from None
    if _LEFTOVER_ESCAPE.search(text):
        raise QueryRefused(
            "refused: \\u escapes that spell another escape are not accepted; write the characters themselves"
        )
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    if "\x00" in text:
        raise QuerySyntaxError("syntax error: the query contains a NUL character")
    if odd := _AMBIGUOUS_CHARACTER.search(text):
        raise QueryRefused(
            f"refused: the query contains U+{ord(odd.group()):04X} (a control, line-separator or surrogate "
            "character), which SPARQL parsers read differently: remove it"
        )
    return close_spaced_operators(text)


def close_spaced_operators(text: str) -> str:
    """`wdt:P279 * wd:Q5`, `wdt:P131 ? ?x` and `"1" ^^ xsd:int` as `wdt:P279* wd:Q5`, `wdt:P131? ?x` and
    `"1"^^xsd:int`.

    The grammar allows the space, Oxigraph and WDQS accept it, and gold queries use it, but
    rdflib's parser does not. Only a gap of plain whitespace is closed (never a comment), and the
    closed text is what is parsed, checked and sent."""
    tokens = tokenize(text)
    cuts: list[tuple[int, int]] = []
    for i, tok in enumerate(tokens):
        if i == 0:
            continue
        prev = tokens[i - 1]
        if tok.text in ("*", "+", "?") and (prev.kind in ("iri", "pname") or prev.text == ")"):
            cuts.append((prev.end, tok.start))
        elif tok.text == "^^":
            cuts.append((prev.end, tok.start))
            if i + 1 < len(tokens):
                cuts.append((tok.end, tokens[i + 1].start))
    for start, end in sorted(cuts, reverse=True):
        if start < end and not text[start:end].strip():
            text = text[:start] + text[end:]
    return text


def hand_off(parsed: SparqlParse) -> None:
    """Offer a checked query's parse tree to `query_algebra` (call when the check is done with it)."""
    if parsed.tree is None:
        return
    with _PARSER_LOCK:
        _HANDED_OFF[parsed.text] = (parsed.tree, parsed.leading)
        _HANDED_OFF.move_to_end(parsed.text)
        while len(_HANDED_OFF) > _HAND_OFF_SIZE:
            _HANDED_OFF.popitem(last=False)


def query_algebra(text: str, prefixes: dict[str, str] | None = None):
    """rdflib's algebra of a query (for pattern analysis), with `prefixes` bound unless the query
    declares its own; the tree a check handed off for this text is used instead of a second parse."""
    with _PARSER_LOCK:
        tree, leading = _HANDED_OFF.pop(text, (None, {}))
        if tree is None:
            tree = parseQuery(text)
    # a handed-off tree lacks the leading declarations `split_declarations` read: they are bound here,
    # before the tree's own prologue, as they stood in the text
    return translateQuery(tree, initNs={**(prefixes or {}), **leading})


def split_declarations(text: str) -> tuple[dict[str, str], str]:
    """(the prefixes a leading run of plain PREFIX declarations binds, the rest of the text)."""
    declared: dict[str, str] = {}
    end = 0
    while match := _DECLARATION.match(text, end):
        declared[match.group(1)] = match.group(2)
        end = match.end()
    return declared, text[end:]


def parse_sparql(query: str, base_prefixes: dict[str, str], max_chars: int = DEFAULT_MAX_QUERY_CHARS) -> SparqlParse:
    """Parse a read query; an update is refused, anything else that does not parse is a syntax error."""
    text = canonical_text(query, max_chars)
    leading, rest = split_declarations(text)
    try:
        try:
            with _PARSER_LOCK:
                tree = parseQuery(rest)
        except Exception:
            if not leading:
                raise
            leading, rest = {}, text  # an error is reported on the whole text, at its own line and column
            with _PARSER_LOCK:
                tree = parseQuery(text)
    except ParseException as exc:
        _refuse_if_update(text)
        _refuse_if_update(text[exc.loc :].lstrip().lstrip(";"))  # `query ; update`
        raise QuerySyntaxError(
            f"syntax error: {exc.msg} at line {exc.lineno}, column {exc.col}: {exc.line.strip()[:120]!r}"
        ) from None
    except RecursionError:
        raise QuerySyntaxError("syntax error: the query is nested too deeply") from None
    except Exception as exc:  # rdflib's parse actions raise plain exceptions on bad terms
        raise QuerySyntaxError(f"syntax error: {type(exc).__name__}: {exc}") from None
    return _analysed(text, tree, leading, rest, base_prefixes)


def with_declarations(parsed: SparqlParse, declarations: dict[str, str], base_prefixes: dict[str, str]) -> SparqlParse:
    """The parse of `PREFIX name: <iri>` lines for `declarations` followed by `parsed.text`.

    Reuses the parse already made when the whole text splits into declarations and the very body that
    was parsed (after a line break), which is exactly what `parse_sparql` of the whole text would read;
    parses in full otherwise."""
    if not declarations:
        return parsed
    text = "".join(f"PREFIX {name}: <{iri}>\n" for name, iri in declarations.items()) + parsed.text
    leading, body = split_declarations(text)
    gap = body[: len(body) - len(parsed.body)]  # the line break after the declarations: no token
    same_body = body.endswith(parsed.body) and not gap.strip(" \t\n")
    if parsed.tree is None or not same_body or canonical_text(text, len(text)) != text:
        return parse_sparql(text, base_prefixes, max_chars=len(text))
    return _analysed(text, parsed.tree, leading, body, base_prefixes)


def _analysed(text: str, tree: Any, leading: dict[str, str], body: str, base_prefixes: dict[str, str]) -> SparqlParse:
    """What the guard judges of a parsed text: its form, prefixes, SERVICE clauses and variables."""
    prologue, query = tree[0], tree[1]
    declared: dict[str, str] = dict(leading)
    base = None
    for decl in prologue:  # in order: a relative IRI is resolved against the BASE in effect where it stands
        if getattr(decl, "name", None) == "Base":
            base = _absolute(str(decl["iri"]), base)
        elif getattr(decl, "name", None) == "PrefixDecl":
            declared[str(decl.get("prefix") or "")] = _absolute(str(decl["iri"]), base)
    prefixes = {**base_prefixes, **declared}
    services, variables = [], set()
    for node in _walk(query):
        if _is_comp(node, "ServiceGraphPattern"):
            term = node["term"]
            iri = resolve_iri(term, prefixes)
            services.append(Service(iri if iri is None else _absolute(iri, base), term_text(term), "", node["graph"]))
        elif type(node).__name__ == "Variable":
            variables.add(str(node))
    form = _FORMS.get(getattr(query, "name", ""), "")
    if not form:
        raise QuerySyntaxError("syntax error: not a SELECT, ASK, CONSTRUCT or DESCRIBE query")
    services = _as_tokenized(text, form, services)
    return SparqlParse(text, form, declared, services, variables, tree, leading, body, base)


def _as_tokenized(text: str, form: str, services: list[Service]) -> list[Service]:
    """The grammar's SERVICE clauses with their spans, once a longest-match tokenizer (the way servers built
    with JavaCC or ANTLR read a query: `<…>` is an IRI wherever one fits) reads the same text with the same
    form, the same SERVICE targets in the same order and no update keyword; QueryRefused where it does not."""
    tokens = tokenize(text)
    for tok in tokens:
        if tok.kind == "name" and tok.upper in UPDATE_KEYWORDS:
            raise QueryRefused(
                f"refused: {tok.upper} reads as a SPARQL update keyword to other SPARQL parsers; "
                "only SELECT, ASK, CONSTRUCT and DESCRIBE queries are run"
            )
    spans = _service_spans(tokens)
    read = query_form(tokens)
    if read != form or spans is None or [target for *_, target in spans] != [s.target for s in services]:
        raise QueryRefused(
            "refused: SPARQL parsers read this query differently (a `<` comparison that reads as an IRI, "
            "an unusual SERVICE clause …); write it plainly"
        )
    return [
        replace(service, source=text[start:end], span=(start, end)) for service, (start, end, _) in zip(services, spans)
    ]


def _service_spans(tokens: tuple[Token, ...]) -> list[tuple[int, int, str]] | None:
    """(start, end, target as the grammar's `term_text` writes it) of each `SERVICE [SILENT] target { … }`;
    None where a SERVICE keyword is not followed by that."""
    spans = []
    for i, tok in enumerate(tokens):
        if tok.kind != "name" or tok.upper != "SERVICE":
            continue
        j = i + 2 if i + 1 < len(tokens) and tokens[i + 1].upper == "SILENT" else i + 1
        if j + 1 >= len(tokens) or tokens[j].kind not in ("iri", "pname", "var") or tokens[j + 1].text != "{":
            return None
        close = matching_brace(tokens, j + 1)
        if close < 0:
            return None
        target = tokens[j].text if tokens[j].kind != "var" else "?" + tokens[j].text[1:]
        spans.append((tok.start, tokens[close].end, target))
    return spans


def _refuse_if_update(text: str) -> None:
    """A text that parses as an update gets a refusal that names the operation."""
    try:
        with _PARSER_LOCK:
            update = parseUpdate(text)
    except Exception:
        return
    requests = update.get("request", [])  # type: ignore[arg-type]  # rdflib's stub types the default as bool
    names = [getattr(op, "name", "") for op in requests if getattr(op, "name", "")]
    if not names:  # an empty text is a valid (empty) update: nothing to refuse
        return
    word = _UPDATE_NAMES.get(names[0], names[0])
    raise QueryRefused(f"refused: {word} is a SPARQL update; only SELECT, ASK, CONSTRUCT and DESCRIBE queries are run")


def _is_comp(node: Any, name: str) -> bool:
    return getattr(node, "name", None) == name and isinstance(node, dict)


def _walk(root: Any) -> Iterator[Any]:
    """Every node under root in document order (pre-order), iteratively: a deep tree must not overflow the stack."""
    stack = [root]
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, dict):
            stack.extend(reversed(list(node.values())))
        elif isinstance(node, (list, tuple)) or type(node).__name__ == "ParseResults":
            stack.extend(reversed(list(node)))


def resolve_iri(term: Any, prefixes: dict[str, str]) -> str | None:
    if _is_comp(term, "pname"):
        base = prefixes.get(str(term.get("prefix") or ""))
        return None if base is None else base + str(term.get("localname") or "")
    if type(term).__name__ == "URIRef":
        return str(term)
    return None


def _absolute(iri: str, base: str | None) -> str:
    """`iri` resolved against `base` when it is relative and a base is declared, by Oxigraph's own RFC 3987
    resolver (Python's `urljoin` drops an empty fragment: `<ontology#>` would lose its `#`)."""
    if base is None or _SCHEME.match(iri):
        return iri
    try:
        quad = next(iter(pyoxigraph.parse(f"<{iri}> <{iri}> <{iri}> .", format=_TURTLE, base_iri=base)))
    except (SyntaxError, ValueError, StopIteration):
        raise QueryRefused(f"refused: <{iri}> cannot be resolved against BASE <{base}>") from None
    return quad.subject.value


def term_text(term: Any) -> str:
    """A parsed IRI, prefixed name or variable as SPARQL text."""
    if _is_comp(term, "pname"):
        return f"{term.get('prefix') or ''}:{term.get('localname') or ''}"
    if type(term).__name__ == "URIRef":
        return f"<{term}>"
    if type(term).__name__ == "Variable":
        return f"?{term}"
    return str(term)


def simple_triples(graph: Any) -> Iterator[tuple[Any, Any, Any]]:
    """(subject, predicate, object) of plain triples directly inside a group (no paths with modifiers)."""
    for part in graph.get("part", []) if isinstance(graph, dict) else []:
        if not _is_comp(part, "TriplesBlock"):
            continue
        for flat in part.get("triples", []):
            items = list(flat)
            for i in range(0, len(items) - 2, 3):
                yield items[i], _plain_predicate(items[i + 1]), items[i + 2]


def _plain_predicate(path: Any) -> Any:
    node = path
    for name in ("PathAlternative", "PathSequence"):
        if _is_comp(node, name) and len(node["part"]) == 1:
            node = node["part"][0]
    if _is_comp(node, "PathElt") and "mod" not in node:
        return node["part"]
    return node
