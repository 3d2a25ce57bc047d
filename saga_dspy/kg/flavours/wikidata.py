"""What differs between knowledge graphs: identifiers, vocabulary and the SPARQL the tools send.

`Flavour` is the interface and Wikidata's implementation (the default); `freebase.FreebaseFlavour`
the other one. Everything else in `saga_dspy.grounding` is KG-agnostic and talks about
entities, properties and classes by their short ids (`Q42`, `P19` / `m.0abc`,
`people.person.place_of_birth`)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..prefixes import FREEBASE_PREFIXES, WD, WDT, WIKIDATA_PREFIXES
from ..results import SelectResult
from ..values import Value

P_ = "http://www.wikidata.org/prop/"
PS = "http://www.wikidata.org/prop/statement/"
PQ = "http://www.wikidata.org/prop/qualifier/"
WDS = "http://www.wikidata.org/entity/statement/"
RDFS_LABEL = "http://www.w3.org/2000/01/rdf-schema#label"
SCHEMA_DESCRIPTION = "http://schema.org/description"
SKOS_ALT = "http://www.w3.org/2004/02/skos/core#altLabel"
RDF_TYPE = "http://www.w3.org/1999/02/22-rdf-syntax-ns#type"


def _literal(text: str) -> str:
    """A SPARQL string literal of any text (backslash, quote and line breaks escaped)."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r")
    return f'"{escaped}"'


def _named(var: str, phrases: list[str]) -> str:
    """The pattern binding `?var` to the items whose English label or alias is one of `phrases` (bound to ?l)."""
    names = " ".join(f"{_literal(p)}@en" for p in phrases)
    return f"VALUES ?l {{ {names} }} ?{var} <{RDFS_LABEL}>|<{SKOS_ALT}> ?l ."


# Well-known classes by the answer-type step's label: their ids win over the id the LM wrote for them.
WELL_KNOWN_CLASSES: dict[str, str] = {
    "person": "Q5",
    "human": "Q5",
    "people": "Q5",
    "man": "Q5",
    "woman": "Q5",
    "country": "Q6256",
    "city": "Q515",
    "film": "Q11424",
    "movie": "Q11424",
    "organization": "Q43229",
    "organisation": "Q43229",
    "company": "Q783794",
    "award": "Q618779",
    "language": "Q34770",
    "university": "Q3918",
    "sports team": "Q12973014",
    "book": "Q571",
    "river": "Q4022",
    "mountain": "Q8502",
    "lake": "Q23397",
    "album": "Q482994",
    "song": "Q7366",
    "band": "Q215380",
    "musical group": "Q215380",
    "political party": "Q7278",
    "television series": "Q5398426",
    "tv series": "Q5398426",
    "island": "Q23442",
    "continent": "Q5107",
    "planet": "Q634",
    "literary work": "Q7725634",
    "novel": "Q8261",
    "painting": "Q3305213",
    "building": "Q41176",
    "programming language": "Q9143",
    "video game": "Q7889",
    "occupation": "Q12737077",
    "religion": "Q9174",
}
_QID = re.compile(r"^Q[1-9]\d*$")
_QID_IN_TEXT = re.compile(r"(?:^|[/:\s(])(Q[1-9]\d*)\b", re.IGNORECASE)
_PID_IN_TEXT = re.compile(r"\b(P[1-9]\d*)\b")

# roles a property IRI can play
DIRECT, CLAIM, STATEMENT, QUALIFIER = "direct", "claim", "statement", "qualifier"


@dataclass(frozen=True)
class PropRef:
    """A property IRI decoded: which property, in which role."""

    pid: str
    role: str  # direct | claim | statement | qualifier


class Flavour:
    """KG-specific vocabulary and queries (Wikidata by default)."""

    name = "wikidata"
    kg_label = "Wikidata"
    prefixes: dict[str, str] = WIKIDATA_PREFIXES
    entity_ns = WD
    type_pid = "P31"
    subclass_pid = "P279"
    example_pid = "P1855"
    root_class = "Q35120"
    entity_re = re.compile(r"^Q[1-9]\d*$")
    property_re = re.compile(r"^P[1-9]\d*$")
    # qualifier-bearing statement nodes exist (Wikidata) / CVT mediator nodes (Freebase)
    has_qualifiers = True
    has_cvt = False
    # the tool sequence shown to a controller that has no demonstrations (one line of its instructions)
    protocol_example = (
        'For example, for "Where was Douglas Adams born?": search_wikidata({"query": "Douglas Adams"}), then '
        'get_wikidata_entry({"qid": "Q42"}), then execute_sparql({"sparql": "SELECT ?x WHERE { wd:Q42 wdt:P19 ?x }"}), '
        "then stop({})."
    )
    # a closed, flat type system: every class is known, and a missing type is a real mismatch, not a gap
    closed_types = False
    # the source tag of types read off the type property (`schema.EntityTypes.source`)
    types_source = "p31"
    # an id says its kind (Q… an item, P… a property), so a wrong-kind id gets a pointed hint
    ids_say_kind = True
    # the lookup may propose one-hop queries in this vocabulary (its ★ property, an incoming property,
    # restricted by class or occupation)
    proposes_queries = True
    # ids error messages give as examples
    entity_example = "Q42"
    property_example = "P19"
    token_examples = "wd:Q42 for items, wdt:P19 for properties"
    # the demo pool of every bundled train pool on this graph (`--demo-pool shared`, scripts/build_demos.py)
    shared_demo_pool: str | None = "shared"
    # a mined grounding lexicon is bundled (data/lexicon/<name>.json.gz): a missing one is an error, not an empty one
    bundled_lexicon = True
    # the subclass property as the hierarchy's closure query writes it
    subclass_edge = "wdt:P279"
    # classes whose ids win over the id an LM wrote for them (by the answer-type step's label)
    well_known_classes: dict[str, str] = WELL_KNOWN_CLASSES
    # the classes the answer-type step's built-in examples name
    example_classes: dict[str, str] = {"person": "Q5", "country": "Q6256"}
    # the answer type can be read off the question's words (the mined lexicon and its classes are this graph's)
    rule_answer_types = True

    # --- identifiers -------------------------------------------------------------------
    def normalise_entity(self, text: str) -> str | None:
        """'Q42', 'wd:Q42', '<http://www.wikidata.org/entity/Q42>', ' q42 ' → 'Q42' (None if not an entity id)."""
        t = str(text).strip().strip("<>").strip()
        for prefix in (WD, "wd:"):
            if t.startswith(prefix):
                t = t[len(prefix) :]
        t = t.upper() if re.fullmatch(r"[qQ][1-9]\d*", t) else t
        return t if self.entity_re.match(t) else None

    def normalise_class_text(self, text: str) -> str:
        """A class id as an LM wrote it ('wd:Q5', its URL, 'human (Q5)') -> 'Q5'; '' when there is none."""
        text = re.sub(r"^(?:wd:|https?://(?:www\.)?wikidata\.org/(?:entity|wiki)/)", "", text, flags=re.IGNORECASE)
        if _QID.match(text.upper()):
            return text.upper()
        match = _QID_IN_TEXT.search(" " + text)
        return match.group(1).upper() if match and len(text) <= 40 else ""

    def property_ids_in(self, text: str) -> list[str]:
        """The property ids written anywhere in `text` (an LM's list or prose), in order."""
        return [m.group(1) for m in _PID_IN_TEXT.finditer(text.upper())]

    def normalise_property(self, text: str) -> str | None:
        t = str(text).strip().strip("<>").strip()
        for prefix in (WDT, PS, PQ, P_, WD, "wdt:", "wd:", "p:", "ps:", "pq:"):
            if t.startswith(prefix):
                t = t[len(prefix) :]
                break
        t = t.upper() if re.fullmatch(r"[pP][1-9]\d*", t) else t
        return t if self.property_re.match(t) else None

    def entity_iri(self, eid: str) -> str:
        return WD + eid

    def entity_id(self, iri: str) -> str | None:
        """Short id of an entity IRI (None for anything else)."""
        if iri.startswith(WD):
            local = iri[len(WD) :]
            return local if (self.entity_re.match(local) or self.property_re.match(local)) else None
        return None

    def direct_iri(self, pid: str) -> str:
        return WDT + pid

    def prop_ref(self, iri: str) -> PropRef | None:
        for ns, role in ((WDT, DIRECT), (PS, STATEMENT), (PQ, QUALIFIER), (P_, CLAIM)):
            if iri.startswith(ns):
                local = iri[len(ns) :]
                return PropRef(local, role) if self.property_re.match(local) else None
        return None

    def is_type_property(self, iri: str) -> bool:
        ref = self.prop_ref(iri)
        return bool(ref and ref.pid == self.type_pid and ref.role in (DIRECT, STATEMENT)) or iri == RDF_TYPE

    def is_subclass_property(self, iri: str) -> bool:
        ref = self.prop_ref(iri)
        return bool(ref and ref.pid == self.subclass_pid and ref.role in (DIRECT, STATEMENT))

    def is_class_id(self, cid: str) -> bool:
        """A short id that can name a class (what the hierarchy fetches closures for)."""
        return len(cid) > 1 and cid[0] == "Q" and cid[1:].isdigit()

    def short(self, iri: str) -> str:
        """A compact prefixed form for display (wd:Q42, wdt:P19, or the IRI)."""
        for prefix, ns in (("wdt", WDT), ("ps", PS), ("pq", PQ), ("wds", WDS), ("p", P_), ("wd", WD)):
            if iri.startswith(ns) and "/" not in iri[len(ns) :]:
                return f"{prefix}:{iri[len(ns) :]}"
        return f"<{iri}>"

    def entity_token(self, eid: str) -> str:
        return f"wd:{eid}"

    def property_token(self, pid: str) -> str:
        return f"wdt:{pid}"

    # --- IRIs written by an agent that may not exist --------------------------------------
    # prefix → (kind, regex a well-formed local name must match)
    def id_prefixes(self) -> dict[str, tuple[str, re.Pattern[str]]]:
        return {
            "wd": ("entity", re.compile(r"^[QP][1-9]\d*$")),
            "wdt": ("property", self.property_re),
            "p": ("property", self.property_re),
            "ps": ("property", self.property_re),
            "pq": ("property", self.property_re),
            "psv": ("property", self.property_re),
            "pqv": ("property", self.property_re),
            "wdtn": ("property", self.property_re),
        }

    # --- SPARQL ----------------------------------------------------------------------------
    def values_clause(self, var: str, ids: list[str]) -> str:
        return f"VALUES ?{var} {{ {' '.join('<' + self.entity_iri(i) + '>' for i in ids)} }}"

    def neighbourhood_query(self, eid: str) -> str:
        """Outgoing edges with English value labels, and the entity's own English label and description.
        Statement links (p:) and aliases are left out in the query; other non-claim predicates in Python.
        The entity comes in a VALUES block, as in every per-entity query."""
        return (
            f"SELECT ?p ?v ?l WHERE {{ {self.values_clause('e', [eid])} ?e ?p ?v . "
            f'FILTER(!STRSTARTS(STR(?p), "{P_}P") && ?p != <{SKOS_ALT}> '
            f'&& (!isLiteral(?v) || LANG(?v) = "" || LANG(?v) = "en" || STRSTARTS(STR(?p), "{WDT}"))) '
            f'OPTIONAL {{ ?v <{RDFS_LABEL}> ?l FILTER(LANG(?l) = "en") }} }}'
        )

    def incoming_query(self, eid: str, limit: int) -> str | None:
        """The direct-claim properties whose value is this entity, with how many subjects have it and
        one of them (the largest id: stable), most used first."""
        return (
            f"SELECT ?p (COUNT(?s) AS ?n) (MAX(STR(?s)) AS ?ex) WHERE {{ {self.values_clause('e', [eid])} ?s ?p ?e . "
            f'FILTER(STRSTARTS(STR(?p), "{WDT}")) }} GROUP BY ?p ORDER BY DESC(?n) LIMIT {int(limit)}'
        )

    def incoming_types_query(self, eid: str, limit: int) -> str | None:
        """The P31 types of the subjects of each incoming direct-claim property, with counts."""
        return (
            f"SELECT ?p ?t (COUNT(?s) AS ?n) WHERE {{ {self.values_clause('e', [eid])} ?s ?p ?e . "
            f'FILTER(STRSTARTS(STR(?p), "{WDT}")) ?s <{WDT}{self.type_pid}> ?t }} '
            f"GROUP BY ?p ?t ORDER BY DESC(?n) LIMIT {int(limit)}"
        )

    def qualifier_query(self, eid: str) -> str | None:
        """One row per qualifier: the statement's property and value, the qualifier and its value."""
        return (
            f"SELECT ?ps ?v ?pp ?o ?l WHERE {{ {self.values_clause('e', [eid])} ?e ?pc ?st . "
            f'FILTER(STRSTARTS(STR(?pc), "{P_}P")) '
            f'?st ?pp ?o . FILTER(STRSTARTS(STR(?pp), "{PQ}")) '
            f'?st ?ps ?v . FILTER(STRSTARTS(STR(?ps), "{PS}")) '
            f'OPTIONAL {{ ?o <{RDFS_LABEL}> ?l FILTER(LANG(?l) = "en") }} }}'
        )

    def value_types_query(self, eid: str) -> str:
        return (
            f"SELECT DISTINCT ?v ?t WHERE {{ {self.values_clause('e', [eid])} ?e ?p ?v . "
            "?prop <http://wikiba.se/ontology#directClaim> ?p . "
            f"?v <{WDT}{self.type_pid}> ?t }}"
        )

    def types_query(self, ids: list[str]) -> str:
        """P31 types (?k "i") and P279 superclasses (?k "s", for class-level entities) of several entities."""
        values = " ".join(f"<{self.entity_iri(i)}>" for i in ids)
        return f"""SELECT ?e ?k ?t WHERE {{
  VALUES ?e {{ {values} }}
  {{ ?e wdt:P31 ?t BIND("i" AS ?k) }} UNION {{ ?e wdt:P279 ?t BIND("s" AS ?k) }}
}}"""

    def closure_query(self, ids: list[str]) -> str:
        """The subclass edges (?sub ?sup) above these classes, each class included."""
        values = " ".join(f"<{self.entity_iri(i)}>" for i in ids)
        edge = self.subclass_edge
        return f"""SELECT DISTINCT ?sub ?sup WHERE {{
  VALUES ?c {{ {values} }}
  ?c {edge}* ?sub . ?sub {edge} ?sup .
}}"""

    def labels_query(self, ids: list[str]) -> str:
        return (
            f"SELECT ?e ?l ?d WHERE {{ {self.values_clause('e', ids)} "
            f'OPTIONAL {{ ?e <{RDFS_LABEL}> ?l FILTER(LANG(?l) = "en") }} '
            f'OPTIONAL {{ ?e <{SCHEMA_DESCRIPTION}> ?d FILTER(LANG(?d) = "en") }} }}'
        )

    def names_query(self, eid: str) -> str:
        """The entity's English label and aliases (?l)."""
        return (
            f"SELECT ?l WHERE {{ {self.values_clause('e', [eid])} ?e <{RDFS_LABEL}>|<{SKOS_ALT}> ?l "
            f'FILTER(LANG(?l) = "en") }}'
        )

    def named_values_query(self, body: str, phrases: list[str], skip: list[str]) -> str | None:
        """The item values of the answers `?x` of `body` whose English label or alias is one of `phrases`, by
        direct-claim property (`skip`: pids left out): property, value, phrase, how many answers have it."""
        skipped = "".join(f" && ?p != <{WDT}{pid}>" for pid in skip)
        return (
            f"SELECT ?p ?o ?l (COUNT(DISTINCT ?x) AS ?n) WHERE {{ {_named('o', phrases)} ?x ?p ?o . "
            f'FILTER(STRSTARTS(STR(?p), "{WDT}"){skipped}) {body} }} GROUP BY ?p ?o ?l'
        )

    def named_answers_query(self, body: str, phrases: list[str]) -> str | None:
        """The answers `?x` of `body` whose English label or alias is one of `phrases`, with that phrase (?l)."""
        return f"SELECT DISTINCT ?x ?l WHERE {{ {_named('x', phrases)} {body} }}"

    def named_peers_query(self, body: str, phrases: list[str]) -> str | None:
        """The items whose English label or alias is one of `phrases` (?l) and that are an instance of a class
        some answer `?x` of `body` is an instance of: things of the answers' kind."""
        typed = f"<{WDT}{self.type_pid}>"
        return (
            f"SELECT DISTINCT ?v ?l WHERE {{ {_named('v', phrases)} "
            f"?v {typed} ?t . {{ SELECT DISTINCT ?t WHERE {{ {body} . ?x {typed} ?t }} }} }}"
        )

    def exists_query(self, ids: list[str]) -> str:
        """Which of these entities occur as a subject at all."""
        return f"SELECT DISTINCT ?e WHERE {{ {self.values_clause('e', ids)} ?e ?p ?o . }}"

    def examples_query(self, pid: str, limit: int) -> str:
        """Usage examples (P1855): the example subject, with the example value (qualifier) or the
        subject's own value for the property when the knowledge graph has it."""
        prop = f"<{self.entity_iri(pid)}>"

        def label(var: str) -> str:
            return f'OPTIONAL {{ ?{var} <{RDFS_LABEL}> ?{var}l FILTER(LANG(?{var}l) = "en") }}'

        return (
            "SELECT ?s ?sl ?v ?vl WHERE { "
            f"{{ {prop} <{WDT}{self.example_pid}> ?s . OPTIONAL {{ ?s <{WDT}{pid}> ?v . {label('v')} }} }} UNION "
            f"{{ {prop} <{P_}{self.example_pid}> ?st . ?st <{PS}{self.example_pid}> ?s . "
            f"?st <{PQ}{pid}> ?v . {label('v')} }} "
            f"{label('s')} }} LIMIT {limit * 4}"
        )

    def sample_triples_query(self, pid: str, limit: int) -> str:
        return (
            f"SELECT ?s ?sl ?v ?vl WHERE {{ ?s <{WDT}{pid}> ?v . "
            f'OPTIONAL {{ ?s <{RDFS_LABEL}> ?sl FILTER(LANG(?sl) = "en") }} '
            f'OPTIONAL {{ ?v <{RDFS_LABEL}> ?vl FILTER(LANG(?vl) = "en") }} }} LIMIT {limit}'
        )

    # --- reading results -----------------------------------------------------------------
    def label_predicates(self) -> tuple[str, str]:
        return RDFS_LABEL, SCHEMA_DESCRIPTION

    def statement_property(self, iri: str) -> str | None:
        ref = self.prop_ref(iri)
        return ref.pid if ref and ref.role == STATEMENT else None

    def qualifier_property(self, iri: str) -> str | None:
        ref = self.prop_ref(iri)
        return ref.pid if ref and ref.role == QUALIFIER else None

    def edge_property(self, iri: str) -> str | None:
        """The property of an outgoing neighbourhood edge (direct claims only)."""
        ref = self.prop_ref(iri)
        return ref.pid if ref and ref.role == DIRECT else None

    def attach_qualifiers(self, result: SelectResult, by_key: dict[tuple[str, str], Value]) -> None:
        """Hang each qualifier on the neighbourhood value its statement carries."""
        for row in result.rows:
            ps, v, pp, o = row.get("ps"), row.get("v"), row.get("pp"), row.get("o")
            if ps is None or v is None or pp is None or o is None:
                continue
            ref, qref = self.prop_ref(ps.value), self.prop_ref(pp.value)
            if ref is None or qref is None or ref.role != STATEMENT or qref.role != QUALIFIER:
                continue
            value = by_key.get((ref.pid, v.value))
            if value is None or any(q == qref.pid and x.binding.value == o.value for q, x in value.qualifiers):
                continue
            vid = self.entity_id(o.value) if o.is_iri else None
            value.qualifiers.append((qref.pid, Value(o, vid, row["l"].value if "l" in row else "")))


WIKIDATA = Flavour()

__all__ = ["Flavour", "PropRef", "WIKIDATA", "DIRECT", "CLAIM", "STATEMENT", "QUALIFIER", "FREEBASE_PREFIXES"]
