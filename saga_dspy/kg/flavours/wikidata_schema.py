"""The SPARQL that builds a schema index from a Wikidata endpoint (`schema.build`) and names Wikidata's vocabulary:
constrained properties, their formal type constraints, the types of sampled entities, the P279 hierarchy, and the
usage evidence of the embedded sample. `{values}` and `{min}` are filled by the builder."""

from __future__ import annotations

# Properties with constraints but no property entity in the data (the sample has ~340, newer than its dump).
CONSTRAINED_BODY = """SELECT DISTINCT ?p WHERE { ?p p:P2302 [] }"""

# The formal type constraints: P2302 subject type (domain) and value type (range), with their
# P2308 classes, P2309 relation and P2316 status (a UNION, not OPTIONALs: much faster on Oxigraph).
CONSTRAINT_QUERY = """SELECT ?p ?kind ?q ?v WHERE {{
  VALUES ?p {{ {values} }}
  ?p p:P2302 ?st . ?st ps:P2302 ?kind .
  FILTER(?kind = wd:Q21503250 || ?kind = wd:Q21510865)
  {{ ?st pq:P2308 ?v BIND("class" AS ?q) }} UNION {{ ?st pq:P2309 ?v BIND("relation" AS ?q) }}
  UNION {{ ?st pq:P2316 ?v BIND("status" AS ?q) }}
}}"""

# the P31 types of sampled entities (VALUES batches)
TYPES_QUERY = "SELECT ?e ?t WHERE {{ VALUES ?e {{ {values} }} ?e wdt:P31 ?t }}"

HIERARCHY_BODY = "SELECT ?c ?sup WHERE { ?c wdt:P279 ?sup }"
HIERARCHY_COUNT = "SELECT (COUNT(*) AS ?n) WHERE { ?c wdt:P279 ?sup }"
TYPE_LABELS_BODY = (
    "SELECT ?c ?label WHERE { { SELECT DISTINCT ?c WHERE { [] wdt:P31 ?c } } "
    '?c rdfs:label ?label FILTER(LANG(?label) = "en") }'
)


# Usage evidence: instances per class, the properties their instances carry, typed subjects per property.
CLASS_SIZES_QUERY = (
    """SELECT ?t (COUNT(?x) AS ?n) WHERE {{ ?x wdt:P31 ?t }} GROUP BY ?t HAVING (COUNT(?x) >= {min}) ORDER BY ?t"""
)
CLASS_USAGE_QUERY = """SELECT ?t ?p (COUNT(DISTINCT ?x) AS ?n) WHERE {{
  VALUES ?t {{ {values} }}
  ?x wdt:P31 ?t . ?x ?p ?o . FILTER(STRSTARTS(STR(?p), "http://www.wikidata.org/prop/direct/"))
}} GROUP BY ?t ?p"""
PROPERTY_SUBJECTS_QUERY = """SELECT ?p (COUNT(DISTINCT ?x) AS ?n) WHERE {
  ?x ?p ?o . FILTER(STRSTARTS(STR(?p), "http://www.wikidata.org/prop/direct/")) ?x wdt:P31 [] .
} GROUP BY ?p ORDER BY ?p"""
TYPED_ENTITIES_QUERY = "SELECT (COUNT(DISTINCT ?x) AS ?n) WHERE { ?x wdt:P31 [] }"
