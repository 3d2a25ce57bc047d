"""Read-only by construction: decided on the parse tree, before any endpoint sees the query.

The one rule: the text that is parsed and judged is, byte for byte, the text that is sent. Every text an
endpoint sends is the `.text` of a `SparqlParse` that passed `check_read_only`; whatever rewrites a query
(canonical form, label-service emulation, prefix declarations) does so before that parse, never after it.
Where parsers could read one text two ways (escapes, line ends, `<` as comparison or IRI, control
characters) the parse refuses it rather than guess (`kg.sparql_parse`).

An update never parses as a query, so parsing is the update check; SERVICE clauses are
found by walking the tree, and only the allowlisted ones pass."""

from __future__ import annotations

from .errors import QueryRefused
from .prefixes import WIKIDATA_PREFIXES
from .sparql_parse import SparqlParse, parse_sparql

LABEL_SERVICE = "http://wikiba.se/ontology#label"
MWAPI_SERVICE = "http://wikiba.se/ontology#mwapi"
SERVICE_ALLOWLIST = frozenset({LABEL_SERVICE, MWAPI_SERVICE})
EMULATED_SERVICES = frozenset({LABEL_SERVICE})


def check_read_only(
    query: str | SparqlParse,
    allowlist: frozenset[str] | set[str] = SERVICE_ALLOWLIST,
    prefixes: dict[str, str] = WIKIDATA_PREFIXES,
) -> SparqlParse:
    """The parsed query, whose `.text` is what may be sent; QueryRefused for an update or a SERVICE outside
    the allowlist, QuerySyntaxError for a text that is not a query."""
    parsed = query if isinstance(query, SparqlParse) else parse_sparql(query, prefixes)
    names = ", ".join(f"<{iri}>" for iri in sorted(allowlist)) or "none"
    for service in parsed.services:
        if service.iri is None:
            raise QueryRefused(
                f"refused: SERVICE {service.target}: only named services may be called (allowed: {names})"
            )
        if service.iri not in allowlist:
            if service.iri == MWAPI_SERVICE:
                raise QueryRefused("refused: SERVICE wikibase:mwapi is only available on query.wikidata.org")
            raise QueryRefused(f"refused: federated SERVICE <{service.iri}> is not allowed (allowed: {names})")
    return parsed
