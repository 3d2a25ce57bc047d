"""The Freebase flavour of the tools: MIDs (`m.0abc`, `g.11b…`), dotted properties
(`people.person.place_of_birth`), types through `type.object.type`, names through
`type.object.name`, and CVT (mediator) nodes flattened one hop: a value without a name
is shown with its own outgoing edges, the way Wikidata values carry qualifiers."""

from __future__ import annotations

import re

from ..prefixes import FREEBASE_PREFIXES
from ..results import SelectResult
from ..values import Value
from .wikidata import DIRECT, Flavour, PropRef

NS = "http://rdf.freebase.com/ns/"
NAME = NS + "type.object.name"
DESCRIPTION = NS + "common.topic.description"
TYPE = NS + "type.object.type"
INCLUDED = NS + "freebase.type_hints.included_types"
# bookkeeping predicates that are not neighbourhood edges
SKIP = {
    NAME,
    DESCRIPTION,
    NS + "type.object.key",
    NS + "type.object.permission",
    NS + "common.topic.alias",
    NS + "type.object.id",
    NS + "common.topic.topic_equivalent_webpage",
    NS + "common.topic.article",
}

ENTITY = re.compile(r"^[mg]\.[0-9a-z_]+$")
PROPERTY = re.compile(r"^[a-z][a-z0-9_]*(\.[a-z0-9_]+){2,}$")
TYPE_ID = re.compile(r"^[a-z][a-z0-9_]*\.[a-z0-9_]+$")
CLASS_TEXT = re.compile(r"^[a-z0-9_]+(\.[a-z0-9_]+)+$")  # a type id as an LM may write it
PROPERTY_IN_TEXT = re.compile(r"\b([a-z0-9_]+(?:\.[a-z0-9_]+){2,})\b")


class FreebaseFlavour(Flavour):
    name = "freebase"
    kg_label = "Freebase"
    prefixes = FREEBASE_PREFIXES
    entity_ns = NS
    type_pid = "type.object.type"
    subclass_pid = ""
    example_pid = ""
    root_class = ""
    entity_re = ENTITY
    property_re = PROPERTY
    has_qualifiers = False
    has_cvt = True
    protocol_example = (
        'For example, for "Where was Douglas Adams born?": search_wikidata({"query": "Douglas Adams"}), then '
        'get_wikidata_entry({"qid": "m.0282x"}), then '
        'execute_sparql({"sparql": "SELECT ?x WHERE { ns:m.0282x ns:people.person.place_of_birth ?x }"}), '
        "then stop({})."
    )
    closed_types = True
    types_source = "freebase"
    ids_say_kind = False
    proposes_queries = False
    entity_example = "m.0abc"
    property_example = "people.person.place_of_birth"
    token_examples = "ns:m.0abc / ns:type.property"
    shared_demo_pool = None  # no Freebase pool is bundled
    bundled_lexicon = False  # nor a lexicon: the grammar alone
    subclass_edge = f"<{INCLUDED}>"  # included types: Freebase's only type hierarchy
    well_known_classes: dict[str, str] = {}
    example_classes: dict[str, str] = {"person": "people.person", "country": "location.country"}
    rule_answer_types = False

    def normalise_class_text(self, text: str) -> str:
        """A type id as an LM wrote it ('ns:people.person', '/people/person', its URL) -> 'people.person'."""
        text = re.sub(r"^(?:ns:|fb:|https?://rdf\.freebase\.com/ns/)", "", text)
        text = text.lstrip("/").replace("/", ".")
        return text if CLASS_TEXT.match(text) else ""

    def property_ids_in(self, text: str) -> list[str]:
        return [m.group(1) for m in PROPERTY_IN_TEXT.finditer(text)]

    # --- identifiers -----------------------------------------------------------------------------
    @staticmethod
    def _local(text: str) -> str:
        t = str(text).strip().strip("<>").strip()
        for prefix in (NS, "ns:", "fb:"):
            if t.startswith(prefix):
                return t[len(prefix) :]
        if t.startswith("/"):  # /m/0abc, /people/person
            t = t[1:].replace("/", ".")
        return t

    def normalise_entity(self, text: str) -> str | None:
        t = self._local(text)
        return t if ENTITY.match(t) else None

    def normalise_property(self, text: str) -> str | None:
        t = self._local(text)
        return t if PROPERTY.match(t) else None

    def entity_iri(self, eid: str) -> str:
        return NS + eid

    def entity_id(self, iri: str) -> str | None:
        if iri.startswith(NS):
            local = iri[len(NS) :]
            if ENTITY.match(local) or TYPE_ID.match(local) or PROPERTY.match(local):
                return local
        return None

    def direct_iri(self, pid: str) -> str:
        return NS + pid

    def prop_ref(self, iri: str) -> PropRef | None:
        if iri.startswith(NS):
            local = iri[len(NS) :]
            if PROPERTY.match(local):
                return PropRef(local, DIRECT)
        return None

    def is_type_property(self, iri: str) -> bool:
        return iri == TYPE

    def is_subclass_property(self, iri: str) -> bool:
        return False

    def is_class_id(self, cid: str) -> bool:
        return bool(cid) and "." in cid

    def short(self, iri: str) -> str:
        return f"ns:{iri[len(NS) :]}" if iri.startswith(NS) else f"<{iri}>"

    def entity_token(self, eid: str) -> str:
        return f"ns:{eid}"

    def property_token(self, pid: str) -> str:
        return f"ns:{pid}"

    def id_prefixes(self) -> dict[str, tuple[str, re.Pattern[str]]]:
        any_id = re.compile(rf"({ENTITY.pattern})|({PROPERTY.pattern})|({TYPE_ID.pattern})")
        return {"ns": ("any", any_id), "fb": ("any", any_id)}

    # --- SPARQL ----------------------------------------------------------------------------------------
    def values_clause(self, var: str, ids: list[str]) -> str:
        return f"VALUES ?{var} {{ {' '.join('<' + NS + i + '>' for i in ids)} }}"

    def neighbourhood_query(self, eid: str) -> str:
        return (
            f"SELECT ?p ?v ?l WHERE {{ <{NS}{eid}> ?p ?v . "
            f'OPTIONAL {{ ?v <{NAME}> ?l FILTER(LANG(?l) = "en" || LANG(?l) = "") }} }}'
        )

    def incoming_query(self, eid: str, limit: int) -> str | None:  # not shown on Freebase (CVT-heavy)
        return None

    def incoming_types_query(self, eid: str, limit: int) -> str | None:
        return None

    def names_query(self, eid: str) -> str:
        return (
            f"SELECT ?l WHERE {{ <{NS}{eid}> <{NAME}>|<{NS}common.topic.alias> ?l "
            f'FILTER(LANG(?l) = "en" || LANG(?l) = "") }}'
        )

    def named_values_query(self, body: str, phrases: list[str], skip: list[str]) -> str | None:
        return None  # the lookup proposes no queries on Freebase

    def named_answers_query(self, body: str, phrases: list[str]) -> str | None:
        return None

    def named_peers_query(self, body: str, phrases: list[str]) -> str | None:
        return None

    def qualifier_query(self, eid: str) -> str | None:
        """CVT hop: the outgoing edges of nameless values (mediator nodes)."""
        e = f"<{NS}{eid}>"
        return (
            f"SELECT ?p ?st ?pp ?o ?l WHERE {{ {e} ?p ?st . FILTER(isIRI(?st)) "
            f"FILTER NOT EXISTS {{ ?st <{NAME}> ?n }} ?st ?pp ?o . FILTER(?o != {e} && ?pp != <{TYPE}>) "
            f'OPTIONAL {{ ?o <{NAME}> ?l FILTER(LANG(?l) = "en" || LANG(?l) = "") }} }}'
        )

    def value_types_query(self, eid: str) -> str:
        return f"SELECT DISTINCT ?v ?t WHERE {{ <{NS}{eid}> ?p ?v . ?v <{TYPE}> ?t }}"

    def types_query(self, ids: list[str]) -> str:
        values = " ".join(f"<{NS}{i}>" for i in ids)
        return f'SELECT ?e ?k ?t WHERE {{ VALUES ?e {{ {values} }} ?e <{TYPE}> ?t BIND("i" AS ?k) }}'

    def labels_query(self, ids: list[str]) -> str:
        return (
            f"SELECT ?e ?l ?d WHERE {{ {self.values_clause('e', ids)} "
            f'OPTIONAL {{ ?e <{NAME}> ?l FILTER(LANG(?l) = "en" || LANG(?l) = "") }} '
            f"OPTIONAL {{ ?e <{DESCRIPTION}> ?d }} }}"
        )

    def examples_query(self, pid: str, limit: int) -> str:  # Freebase has no usage examples
        return self.sample_triples_query(pid, limit)

    def sample_triples_query(self, pid: str, limit: int) -> str:
        return (
            f"SELECT ?s ?sl ?v ?vl WHERE {{ ?s <{NS}{pid}> ?v . "
            f"OPTIONAL {{ ?s <{NAME}> ?sl }} OPTIONAL {{ ?v <{NAME}> ?vl }} }} LIMIT {limit}"
        )

    def label_predicates(self) -> tuple[str, str]:
        return NAME, DESCRIPTION

    def edge_property(self, iri: str) -> str | None:
        if iri in SKIP:
            return None
        ref = self.prop_ref(iri)
        return ref.pid if ref else None

    def attach_qualifiers(self, result: SelectResult, by_key: dict[tuple[str, str], Value]) -> None:
        """Flatten CVT nodes one hop: their edges hang on the value as (property, value) pairs."""
        for row in result.rows:
            p, st, pp, o = row.get("p"), row.get("st"), row.get("pp"), row.get("o")
            if p is None or st is None or pp is None or o is None:
                continue
            pid = self.edge_property(p.value)
            qpid = self.edge_property(pp.value)
            value = by_key.get((pid, st.value)) if pid else None
            if value is None or qpid is None:
                continue
            if any(q == qpid and v.binding.value == o.value for q, v in value.qualifiers):
                continue
            vid = self.entity_id(o.value) if o.is_iri else None
            value.qualifiers.append((qpid, Value(o, vid, row["l"].value if "l" in row else "")))


FREEBASE = FreebaseFlavour()

__all__ = ["FreebaseFlavour", "FREEBASE", "NS"]
