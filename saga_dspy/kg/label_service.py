"""Emulate WDQS's `SERVICE wikibase:label` on stores that lack it (Oxigraph, QLever).

The SERVICE block is replaced by OPTIONAL label patterns: explicit
`?x rdfs:label ?xLabel` lines inside the block are kept as they are, and every
`?fooLabel` / `?fooDescription` / `?fooAltLabel` variable of the query whose base
`?foo` also occurs gets the matching English term, as WDQS would bind it.
"""

from __future__ import annotations

from .prefixes import WIKIDATA_PREFIXES
from .query_text import Token, declared_prefixes, expand, matching_brace, tokenize

LABEL_SERVICE = "http://wikiba.se/ontology#label"
SUFFIX_PREDICATES = {
    "AltLabel": "<http://www.w3.org/2004/02/skos/core#altLabel>",
    "Label": "<http://www.w3.org/2000/01/rdf-schema#label>",
    "Description": "<http://schema.org/description>",
}


def _service_target(tokens: list[Token], i: int, prefixes: dict[str, str]) -> tuple[str | None, int]:
    j = i + 1
    if j < len(tokens) and tokens[j].upper == "SILENT":
        j += 1
    if j >= len(tokens):
        return None, j
    tok = tokens[j]
    iri = tok.text[1:-1] if tok.kind == "iri" else expand(tok.text, prefixes) if tok.kind == "pname" else None
    return iri, j + 1


def _explicit_patterns(inner: list[Token]) -> list[str]:
    """`?x rdfs:label ?y` style triples written inside the SERVICE block."""
    out = []
    for a, b, c in zip(inner, inner[1:], inner[2:]):
        if a.kind == "var" and b.kind == "pname" and c.kind == "var" and b.text != "bd:serviceParam":
            out.append(f"OPTIONAL {{ {a.text} {b.text} {c.text} . FILTER(LANGMATCHES(LANG({c.text}), \"en\")) }}")
    return out


def rewrite_label_service(query: str) -> str:
    """The query with every wikibase:label SERVICE block replaced by OPTIONAL patterns."""
    tokens = tokenize(query)
    prefixes = {**WIKIDATA_PREFIXES, **declared_prefixes(tokens)}
    variables = {t.text[1:] for t in tokens if t.kind == "var"}
    edits: list[tuple[int, int, str]] = []
    for i, tok in enumerate(tokens):
        if tok.kind != "name" or tok.upper != "SERVICE":
            continue
        iri, j = _service_target(tokens, i, prefixes)
        if iri != LABEL_SERVICE or j >= len(tokens) or tokens[j].text != "{":
            continue
        end = matching_brace(tokens, j)
        if end < 0:
            continue
        inner = tokens[j + 1 : end]
        patterns = _explicit_patterns(inner)
        bound = {p.split()[4] for p in patterns}
        for var in sorted(variables):
            for suffix, predicate in SUFFIX_PREDICATES.items():
                base = var[: -len(suffix)]
                if var.endswith(suffix) and base in variables and f"?{var}" not in bound:
                    if suffix == "Label" and var.endswith("AltLabel"):
                        continue
                    patterns.append(
                        f"OPTIONAL {{ ?{base} {predicate} ?{var} . FILTER(LANGMATCHES(LANG(?{var}), \"en\")) }}"
                    )
                    break
        edits.append((tok.start, tokens[end].end, " ".join(patterns)))
    for start, end, text in reversed(edits):
        query = query[:start] + text + query[end:]
    return query
