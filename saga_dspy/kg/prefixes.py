"""The prefixes query.wikidata.org predeclares (Oxigraph and QLever do not)."""

from __future__ import annotations

from .query_text import declared_prefixes, tokenize, used_prefixes

WIKIDATA_PREFIXES: dict[str, str] = {
    "wd": "http://www.wikidata.org/entity/",
    "wds": "http://www.wikidata.org/entity/statement/",
    "wdv": "http://www.wikidata.org/value/",
    "wdt": "http://www.wikidata.org/prop/direct/",
    "wdtn": "http://www.wikidata.org/prop/direct-normalized/",
    "p": "http://www.wikidata.org/prop/",
    "ps": "http://www.wikidata.org/prop/statement/",
    "psv": "http://www.wikidata.org/prop/statement/value/",
    "pq": "http://www.wikidata.org/prop/qualifier/",
    "pqv": "http://www.wikidata.org/prop/qualifier/value/",
    "pr": "http://www.wikidata.org/prop/reference/",
    "prov": "http://www.w3.org/ns/prov#",
    "wikibase": "http://wikiba.se/ontology#",
    "bd": "http://www.bigdata.com/rdf#",
    "rdf": "http://www.w3.org/1999/02/22-rdf-syntax-ns#",
    "rdfs": "http://www.w3.org/2000/01/rdf-schema#",
    "xsd": "http://www.w3.org/2001/XMLSchema#",
    "owl": "http://www.w3.org/2002/07/owl#",
    "skos": "http://www.w3.org/2004/02/skos/core#",
    "schema": "http://schema.org/",
    "geo": "http://www.opengis.net/ont/geosparql#",
    "geof": "http://www.opengis.net/def/function/geosparql/",
    "mwapi": "https://www.mediawiki.org/ontology#API/",
    "hint": "http://www.bigdata.com/queryHints#",
}

# The Wikidata namespaces code compares IRIs against (defined once, here).
WD = WIKIDATA_PREFIXES["wd"]  # entities: http://www.wikidata.org/entity/
WDT = WIKIDATA_PREFIXES["wdt"]  # truthy statements
WIKIBASE = WIKIDATA_PREFIXES["wikibase"]

FREEBASE_PREFIXES: dict[str, str] = {
    "ns": "http://rdf.freebase.com/ns/",
    "fb": "http://rdf.freebase.com/ns/",
    "rdf": "http://www.w3.org/1999/02/22-rdf-syntax-ns#",
    "rdfs": "http://www.w3.org/2000/01/rdf-schema#",
    "xsd": "http://www.w3.org/2001/XMLSchema#",
}


def with_prefixes(query: str, prefixes: dict[str, str] = WIKIDATA_PREFIXES) -> str:
    """Prepend declarations for the known prefixes a query uses but does not declare."""
    missing = missing_prefixes(query, prefixes)
    if not missing:
        return query
    head = "".join(f"PREFIX {p}: <{ns}>\n" for p, ns in missing.items())
    return head + query


def missing_prefixes(query: str, prefixes: dict[str, str] = WIKIDATA_PREFIXES) -> dict[str, str]:
    """The known prefixes a query uses but does not declare (only those: two known prefixes may
    share a namespace, and declaring both would rebind it)."""
    tokens = tokenize(query)
    missing = sorted((used_prefixes(tokens) - set(declared_prefixes(tokens))) & set(prefixes))
    return {p: prefixes[p] for p in missing}


def expand_dotted_names(query: str, prefixes: dict[str, str]) -> str:
    """Write prefixed names with dots in their local part (Freebase's `ns:people.person.place_of_birth`)
    as full IRIs: Oxigraph's parser rejects a local name with two or more dots."""
    tokens = tokenize(query)
    known = {**prefixes, **declared_prefixes(tokens)}
    out, last = [], 0
    for tok in tokens:
        if tok.kind != "pname" or "." not in tok.text.split(":", 1)[1]:
            continue
        prefix, local = tok.text.split(":", 1)
        if prefix in known:
            out.append(query[last : tok.start] + f"<{known[prefix]}{local}>")
            last = tok.end
    return "".join(out) + query[last:] if out else query
