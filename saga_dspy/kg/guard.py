"""Read-only by construction: refuse updates and federated calls before any endpoint sees them."""

from __future__ import annotations

from .errors import QueryRefused
from .prefixes import WIKIDATA_PREFIXES
from .query_text import declared_prefixes, expand, query_form, tokenize

UPDATE_KEYWORDS = {"INSERT", "DELETE", "LOAD", "CLEAR", "DROP", "CREATE", "ADD", "MOVE", "COPY", "WITH"}
READ_FORMS = {"SELECT", "ASK", "CONSTRUCT", "DESCRIBE"}
SERVICE_ALLOWLIST = {"http://wikiba.se/ontology#label", "http://wikiba.se/ontology#mwapi"}


def check_read_only(query: str, allowlist: set[str] = SERVICE_ALLOWLIST) -> None:
    """Raise QueryRefused for an update form or a SERVICE outside the allowlist."""
    tokens = tokenize(query)
    if not tokens:
        raise QueryRefused("empty query")
    form = query_form(tokens)
    updates = [t.upper for t in tokens if t.kind == "name" and t.upper in UPDATE_KEYWORDS]
    if form in UPDATE_KEYWORDS or updates:
        word = form if form in UPDATE_KEYWORDS else updates[0]
        raise QueryRefused(f"refused: {word} is a SPARQL update; only SELECT, ASK, CONSTRUCT and DESCRIBE queries are run")
    prefixes = {**WIKIDATA_PREFIXES, **declared_prefixes(tokens)}
    for i, tok in enumerate(tokens):
        if tok.kind != "name" or tok.upper != "SERVICE":
            continue
        j = i + 1
        if j < len(tokens) and tokens[j].upper == "SILENT":
            j += 1
        target = tokens[j] if j < len(tokens) else None
        if target is None:
            raise QueryRefused("refused: SERVICE without a target")
        if target.kind == "iri":
            iri = target.text[1:-1]
        elif target.kind == "pname":
            iri = expand(target.text, prefixes) or target.text
        else:
            raise QueryRefused(f"refused: SERVICE {target.text}: only {', '.join(sorted(allowlist))} may be called")
        if iri not in allowlist:
            raise QueryRefused(f"refused: federated SERVICE <{iri}> is not allowed (allowed: wikibase:label, wikibase:mwapi)")
