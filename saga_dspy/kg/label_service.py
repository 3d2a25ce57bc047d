"""Emulate WDQS's `SERVICE wikibase:label` on stores that lack it (Oxigraph, QLever).

Works on the parse: each label SERVICE clause the parser found (at its span in the text, not
a copy of its text elsewhere, say in a string literal) is replaced by OPTIONAL label patterns:
explicit `?x rdfs:label ?xLabel` triples inside the clause are kept, and every `?fooLabel` /
`?fooDescription` / `?fooAltLabel` variable of the query whose base `?foo` also occurs gets the
matching English term, as WDQS would bind it. The rewritten text is what the endpoint then parses, checks (no SERVICE
left) and sends.
"""

from __future__ import annotations

from .errors import QueryRefused
from .guard import LABEL_SERVICE, check_read_only
from .prefixes import WIKIDATA_PREFIXES
from .sparql_parse import Service, SparqlParse, resolve_iri, simple_triples, term_text

SUFFIX_PREDICATES = {
    "AltLabel": "<http://www.w3.org/2004/02/skos/core#altLabel>",
    "Label": "<http://www.w3.org/2000/01/rdf-schema#label>",
    "Description": "<http://schema.org/description>",
}
SERVICE_PARAM = "http://www.bigdata.com/rdf#serviceParam"


def _optional(subject: str, predicate: str, var: str) -> str:
    return f'OPTIONAL {{ {subject} {predicate} {var} . FILTER(LANGMATCHES(LANG({var}), "en")) }}'


def _explicit_patterns(service: Service, prefixes: dict[str, str]) -> list[tuple[str, str]]:
    """(variable, pattern) for `?x rdfs:label ?y` style triples written inside the clause."""
    out = []
    for s, p, o in simple_triples(service.graph):
        if type(s).__name__ != "Variable" or type(o).__name__ != "Variable":
            continue
        iri = resolve_iri(p, prefixes)
        if iri is None or iri == SERVICE_PARAM:
            continue
        out.append((f"?{o}", _optional(f"?{s}", term_text(p), f"?{o}")))
    return out


def _replacement(service: Service, variables: set[str], prefixes: dict[str, str]) -> str:
    explicit = _explicit_patterns(service, prefixes)
    patterns = [p for _, p in explicit]
    bound = {v for v, _ in explicit}
    for var in sorted(variables):
        for suffix, predicate in SUFFIX_PREDICATES.items():
            base = var[: -len(suffix)]
            if var.endswith(suffix) and base in variables and f"?{var}" not in bound:
                if suffix == "Label" and var.endswith("AltLabel"):
                    continue
                patterns.append(_optional(f"?{base}", predicate, f"?{var}"))
                break
    return " ".join(patterns)


def rewrite_label_service(query: str | SparqlParse, prefixes: dict[str, str] = WIKIDATA_PREFIXES) -> str:
    """The query text with every wikibase:label SERVICE clause replaced by OPTIONAL patterns."""
    parsed = query if isinstance(query, SparqlParse) else check_read_only(query, prefixes=prefixes)
    text = parsed.text
    known = {**prefixes, **parsed.prefixes}
    labels = sorted((s for s in parsed.services if s.iri == LABEL_SERVICE), key=lambda s: s.span, reverse=True)
    end = len(text) + 1
    for service in labels:  # from the last: the spans before it stay where they are
        start, stop = service.span
        if stop > end:
            raise QueryRefused("refused: a label service nested in another cannot be emulated")
        text = text[:start] + _replacement(service, parsed.variables, known) + text[stop:]
        end = start
    return text
