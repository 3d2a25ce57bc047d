"""A query parsed by a real SPARQL grammar (rdflib's), on text made unambiguous first.

Every decision about a query (is it read-only, which SERVICE does it call, where is
the label service) is taken on this parse, never on regex tokens. The text that was
parsed is the text that is sent: `canonical_text` first removes what parsers are
known to disagree on (a lone carriage return ending a comment, `\\u` escapes that
each parser decodes its own way), so the endpoint reads what the guard read.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from pyparsing import ParseException
from rdflib.plugins.sparql.algebra import translateQuery
from rdflib.plugins.sparql.parser import parseQuery, parseUpdate  # imported once, not first in a worker thread

from .errors import QueryRefused, QuerySyntaxError
from .query_text import tokenize

DEFAULT_MAX_QUERY_CHARS = 20_000
# pyparsing is not thread-safe: it learns each parse action's arity on the action's first call by
# catching TypeError, so two threads parsing at once can fail on a valid query. Parses are short; one lock.
_PARSER_LOCK = threading.Lock()
# Parse trees of checked queries, handed to the one later algebra translation of the same text (the
# execute tool checks a query, then analyses its patterns: one parse, not two). Taken at most once,
# because translating rewrites the tree in place; bounded, because most checked queries are never analysed.
_HANDED_OFF: OrderedDict[str, Any] = OrderedDict()
_HAND_OFF_SIZE = 32
_ESCAPE = re.compile(r"\\u([0-9A-Fa-f]{4})|\\U([0-9A-Fa-f]{8})")
_LEFTOVER_ESCAPE = re.compile(r"\\[uU]")
# A leading run of plain `PREFIX name: <iri>` declarations (ASCII names, SPARQL's IRIREF, whitespace only
# between them): read here, not by rdflib, whose grammar spends about half of a WDQS-style query's parse on
# its fifteen declarations. A declaration binds a name and can do nothing else; whatever does not match
# exactly (a comment, BASE, a non-ASCII name) is left to the grammar with the rest of the query.
IRIREF = r'<[^<>"{}|^`\\\x00-\x20]*>'  # SPARQL 1.1's IRIREF: '<' ([^<>"{}|^`\]-[#x00-#x20])* '>'
_DECLARATION = re.compile(
    r"\s*PREFIX\s+((?:[A-Za-z](?:[\w.-]*[\w-])?)?):\s*<(" + IRIREF[1:-1] + ")>", re.IGNORECASE | re.ASCII
)
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


@dataclass(frozen=True)
class Service:
    """One SERVICE clause: its target IRI (None for a variable or an unresolvable name) and source text."""

    iri: str | None
    target: str
    source: str
    graph: Any = field(repr=False, compare=False)


@dataclass(frozen=True)
class SparqlParse:
    text: str
    form: str
    prefixes: dict[str, str]
    services: list[Service]
    variables: set[str]
    tree: Any = field(default=None, repr=False, compare=False)  # of the text after `leading`'s declarations
    leading: dict[str, str] = field(default_factory=dict, repr=False, compare=False)  # declared before the tree


def canonical_text(query: str, max_chars: int = DEFAULT_MAX_QUERY_CHARS) -> str:
    """The query with line breaks as `\\n` and codepoint escapes decoded once (SPARQL 1.1 §19.2).

    Refuses a query over `max_chars` before any other work, and one that still holds an
    escape after decoding (a second decoder would read it differently)."""
    if not isinstance(query, str) or not query.strip():
        raise QuerySyntaxError("empty query")
    if len(query) > max_chars:
        raise QueryRefused(f"refused: the query has {len(query):,} characters; at most {max_chars:,} are accepted")
    text = query.replace("\r\n", "\n").replace("\r", "\n")
    try:
        text = _ESCAPE.sub(lambda m: chr(int(m.group(1) or m.group(2), 16)), text)
    except (ValueError, OverflowError):
        raise QuerySyntaxError("syntax error: a \\U escape names no Unicode code point") from None
    if _LEFTOVER_ESCAPE.search(text):
        raise QueryRefused(
            "refused: \\u escapes that spell another escape are not accepted; write the characters themselves"
        )
    if "\x00" in text:
        raise QuerySyntaxError("syntax error: the query contains a NUL character")
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
            leading = {}  # an error is reported on the whole text, at its own line and column
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
    prologue, body = tree[0], tree[1]
    declared: dict[str, str] = dict(leading)
    for decl in prologue:
        if getattr(decl, "name", None) == "PrefixDecl":
            declared[str(decl.get("prefix") or "")] = str(decl["iri"])
    prefixes = {**base_prefixes, **declared}
    services, variables = [], set()
    for node in _walk(body):
        if _is_comp(node, "ServiceGraphPattern"):
            term = node["term"]
            services.append(
                Service(resolve_iri(term, prefixes), term_text(term), str(node["service_string"]), node["graph"])
            )
        elif type(node).__name__ == "Variable":
            variables.add(str(node))
    form = _FORMS.get(getattr(body, "name", ""), "")
    if not form:
        raise QuerySyntaxError("syntax error: not a SELECT, ASK, CONSTRUCT or DESCRIBE query")
    return SparqlParse(text, form, declared, services, variables, tree, leading)


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
    """Every node under root, iteratively (a deep tree must not overflow the stack)."""
    stack = [root]
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, dict):
            stack.extend(node.values())
        elif isinstance(node, (list, tuple)) or type(node).__name__ == "ParseResults":
            stack.extend(list(node))


def resolve_iri(term: Any, prefixes: dict[str, str]) -> str | None:
    if _is_comp(term, "pname"):
        base = prefixes.get(str(term.get("prefix") or ""))
        return None if base is None else base + str(term.get("localname") or "")
    if type(term).__name__ == "URIRef":
        return str(term)
    return None


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
