"""The schema layer: the index (built from the real bundled sample through SPARQL, and the shipped
prebuilt file), coverage masks, the class hierarchy, the three-outcome domain check, and a
Freebase-shaped fixture served by a real embedded store."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from conftest import make_settings

from saga_dspy.schema import (
    FORMAT_VERSION,
    BuildOptions,
    ClassHierarchy,
    EntityTypes,
    Outcome,
    SchemaIndex,
    TypeEvidence,
    build_schema_index,
    check_domain,
    check_range,
    entity_types,
    entity_types_many,
    load_hierarchy,
    load_schema_index,
)
from saga_dspy.schema.index import PropertySchema, bundled_index_path
from saga_dspy.schema.parent_table import ParentTable

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
KNOWN = ("P19", "P138", "P607", "P50", "P136", "P31", "P1424", "P12081")


class CountingEndpoint:
    """A real endpoint, with its round trips counted."""

    def __init__(self, endpoint):
        self.inner, self.queries = endpoint, 0
        self.settings, self.name = endpoint.settings, endpoint.name

    def query(self, sparql, timeout=None):
        self.queries += 1
        return self.inner.query(sparql, timeout)


@pytest.fixture(scope="module")
def bundled(settings):
    return load_schema_index(settings)


@pytest.fixture(scope="module")
def hierarchy(settings, bundled):
    return load_hierarchy(settings, index=bundled)


@pytest.fixture(scope="module")
def partial(endpoint):
    """A fresh index of a few properties, built through SPARQL on the real sample."""
    return build_schema_index(endpoint, options=BuildOptions(properties=KNOWN))


# --- the index built from the real sample ---------------------------------------------------------------


def test_build_reads_p2302_constraints_from_the_sample(partial, hierarchy):
    p19 = partial.get("P19")
    assert p19.label == "place of birth" and p19.datatype == "WikibaseItem"
    assert p19.domain.source == "p2302" and p19.domain.relation == "instance_of"
    assert {"Q5", "Q215627", "Q729", "Q95074"} <= set(p19.domain.classes)  # human, person, animal, fict. char.
    assert p19.range.source == "p2302" and "Q2221906" in p19.range.classes  # geographic location
    # P19's domain accepts a human; a film is demonstrably not a P19 subject. A city is accepted:
    # Wikidata has city ⊂ urban area ⊂ human settlement ⊂ community ⊂ social group ⊂ group of humans
    assert check_domain(["Q5"], p19.domain, hierarchy).outcome is Outcome.COMPATIBLE
    assert check_domain(["Q11424"], p19.domain, hierarchy).outcome is Outcome.CONFLICT
    assert check_domain(["Q515"], p19.domain, hierarchy).matched == "Q16334295"
    # P136 (genre) states no status but an instance-or-subclass relation
    assert partial.get("P136").domain.relation == "instance_or_subclass_of"
    # a constrained property newer than the sample's property dump: constraints without a label
    assert partial.get("P12081").domain.source == "p2302"


def test_the_same_build_over_http_sparql(oxigraph_server, partial, hierarchy):
    """The build's queries are plain SPARQL 1.1: a real HTTP server (as for query.wikidata.org) gives the same index."""
    from saga_dspy.kg.endpoint import HttpEndpoint

    http = HttpEndpoint(make_settings(endpoint=oxigraph_server, http_retries=1), oxigraph_server)
    over_http = build_schema_index(http, options=BuildOptions(properties=KNOWN))
    assert [over_http.get(p) for p in KNOWN] == [partial.get(p) for p in KNOWN]
    assert over_http.p279_edges is None  # the hierarchy is fetched live for non-embedded endpoints
    live = ClassHierarchy.from_endpoint(http)
    assert live.ancestors("Q5") == hierarchy.ancestors("Q5") and live.is_known("Q5")
    assert entity_types(http, "Q42").types == ("Q5",)


def test_build_induces_empirical_evidence_only_without_a_formal_constraint(partial):
    p138 = partial.get("P138")  # named after: no type constraint in the sample
    assert p138.domain is None
    assert p138.range.source == "empirical" and p138.range.classes[0] == "Q5" and p138.range.sample >= 3
    assert not p138.range.is_formal and p138.range.is_soft
    assert partial.get("P31").domain is None  # applies to anything: never induced
    assert partial.get("P1424").range.source == "p2302"  # formal range kept, no empirical overwrite


def test_bundled_index_matches_a_fresh_build(partial, bundled):
    for pid in KNOWN:
        assert bundled.get(pid) == partial.get(pid), pid
    assert bundled.class_label("Q5") == "human"
    assert bundled.class_label("Q4130") == "orbit"  # a range class of P19
    assert bundled.class_label("Q99999999999") == "Q99999999999"


def test_bundled_index_is_current_versioned_small_and_fast(settings, store_path):
    path = bundled_index_path(settings)
    assert path.stat().st_size < 3_000_000
    obj = json.loads(gzip.decompress(path.read_bytes()))
    assert obj["format"] == "saga-schema-index" and obj["format_version"] == FORMAT_VERSION
    assert obj["kg"] == "wikidata" and obj["endpoint"] == "embedded" and obj["created"]
    # built from this very sample: a changed sample must be followed by a rebuilt index
    assert obj["endpoint_id"] == f"embedded:{store_path.name}", (
        "the sample changed: python -m saga_dspy.schema build --endpoint embedded "
        "--out data/schema/wikidata-sample.json.gz"
    )
    counts = obj["counts"]
    assert counts["formal"] + counts["empirical"] + counts["unknown"] == counts["properties"] == len(obj["properties"])
    assert counts["domain"]["formal"] == 1906 and counts["range"]["formal"] == 1197  # = the sample's constraints
    assert counts["empirical"] > 0
    index = SchemaIndex.load(path)  # its load time is measured by benchmarks/bench_schema.py, not here
    assert index.counts == counts
    assert index.p279_edges.edge_count == 248343  # the whole P279 hierarchy of the sample


def test_save_load_round_trip(partial, tmp_path):
    for name in ("idx.json.gz", "idx.json"):
        path = partial.save(tmp_path / name)
        again = SchemaIndex.load(path)
        assert [again.get(p) for p in again.pids()] == [partial.get(p) for p in partial.pids()]
        assert again.counts == partial.counts and again.meta["format_version"] == FORMAT_VERSION
        assert again.class_label("Q5") == "human"


def test_load_refuses_other_versions(tmp_path, partial):
    obj = partial.to_json()
    obj["format_version"] = FORMAT_VERSION + 1
    path = tmp_path / "future.json"
    path.write_text(json.dumps(obj))
    with pytest.raises(ValueError, match="version"):
        SchemaIndex.load(path)


def test_parent_table_round_trip():
    edges = {"Q5": ["Q215627", "Q154954"], "Q215627": ["Q35120"], "Q3": ["Q2", "Q1"], "Q2": ["Q1"]}
    table = ParentTable.from_json(json.loads(json.dumps(ParentTable.from_dict(edges).to_json())))
    assert table["Q5"] == ("Q154954", "Q215627") and table.get("Q3") == ("Q1", "Q2")
    assert table.get("Q1") is None and "Q1" not in table and "Q2" in table and len(table) == 4
    assert table.edge_count == 6 and set(table) == set(edges)


# --- coverage masks ------------------------------------------------------------------------------------------


def _formal(index: SchemaIndex) -> set[tuple[str, str]]:
    return {
        (s.pid, role)
        for s in index
        for role in ("domain", "range")
        if getattr(s, role) is not None and getattr(s, role).is_formal
    }


def test_coverage_masks_sizes_nesting_determinism(bundled):
    total = len(_formal(bundled))
    assert total == 1906 + 1197
    kept = {pct: _formal(bundled.with_coverage(pct, seed=7)) for pct in (0, 25, 50, 75, 100)}
    for pct, units in kept.items():
        assert len(units) == round(total * pct / 100)
    assert kept[0] == set() and kept[100] == _formal(bundled)
    assert kept[25] < kept[50] < kept[75] < kept[100]
    assert _formal(bundled.with_coverage(25, seed=7)) == kept[25]  # deterministic per seed
    assert _formal(bundled.with_coverage(25, seed=8)) != kept[25]
    # empirical evidence is untouched; a masked constraint becomes unknown
    masked = bundled.with_coverage(0, seed=7)
    assert masked.get("P138") == bundled.get("P138")
    assert masked.get("P19").domain is None and masked.get("P19").label == "place of birth"
    assert masked.counts["formal"] == 0
    for role in ("domain", "range"):
        assert masked.counts[role]["empirical"] == bundled.counts[role]["empirical"]
        assert masked.counts[role]["unknown"] == bundled.counts[role]["unknown"] + bundled.counts[role]["formal"]
    with pytest.raises(ValueError):
        bundled.with_coverage(101)


def test_load_schema_index_applies_the_configured_coverage(settings):
    full = load_schema_index(settings)
    assert load_schema_index(settings) is full  # cached per process
    half = load_schema_index(make_settings(schema_coverage=50, coverage_seed=3))
    assert half.coverage == (50, 3)
    assert half is load_schema_index(make_settings(schema_coverage=50, coverage_seed=3))
    assert _formal(half) == _formal(full.with_coverage(50, 3))


def test_masked_index_saves_as_masked(bundled, tmp_path):
    masked = bundled.with_coverage(25, seed=1)
    again = SchemaIndex.load(masked.save(tmp_path / "m.json.gz"))
    assert again.coverage == (25, 1) and _formal(again) == _formal(masked)


# --- compatibility on hand-made hierarchies ------------------------------------------------------------------

ROOT = "Q35120"
EDGES = [
    ("Q1", ROOT),  # agent
    ("Q2", "Q1"),  # person ⊂ agent
    ("Q3", "Q2"),  # human ⊂ person
    ("Q10", ROOT),  # place
    ("Q11", "Q10"),  # city ⊂ place
    ("Q21", "Q20"),  # orphan branch: Q21 ⊂ Q20, no path to the root
    ("Q30", "Q31"),
    ("Q31", "Q30"),  # a cycle without the root
]


@pytest.fixture()
def toy():
    return ClassHierarchy.from_edges(EDGES)


def dom(*classes, relation=None, source="p2302", status=None):
    return TypeEvidence(tuple(classes), source, relation, status)


def test_hierarchy_closure_known_and_cycles(toy):
    assert toy.ancestors("Q3") == {"Q3", "Q2", "Q1", ROOT}
    assert toy.is_known("Q3") and toy.is_known(ROOT)
    assert not toy.is_known("Q21") and toy.ancestors("Q21") == {"Q21", "Q20"}
    assert toy.ancestors("Q30") == {"Q30", "Q31"} and not toy.is_known("Q30")
    assert toy.ancestors("Q3") is toy.ancestors("Q3")  # cached per class


def test_depth_bound_makes_far_roots_unknown():
    chain = [(f"Q{i}", f"Q{i + 1}") for i in range(100, 130)] + [("Q130", ROOT)]
    deep = ClassHierarchy.from_edges(chain, max_depth=20)
    assert not deep.is_known("Q100") and deep.is_known("Q115")
    assert len(deep.ancestors("Q100")) == 21
    assert check_domain(["Q100"], dom("Q3"), deep).outcome is Outcome.UNKNOWN


def test_subclass_path_is_compatible_but_bare_conflicts(toy):
    d = check_domain(["Q3"], dom("Q2"), toy)
    assert d.outcome is Outcome.COMPATIBLE and d.matched == "Q2" and d.keep
    assert check_domain(["Q3"], dom("Q2"), toy, mode="bare").outcome is Outcome.CONFLICT
    assert check_domain(["Q2"], dom("Q2"), toy, mode="bare").outcome is Outcome.COMPATIBLE


def test_demonstrated_conflict(toy):
    d = check_domain(["Q11"], dom("Q2"), toy)
    assert d.outcome is Outcome.CONFLICT and not d.keep and "Q11" in d.reason


def test_no_path_to_root_is_unknown_not_conflict(toy):
    assert check_domain(["Q21"], dom("Q2"), toy).outcome is Outcome.UNKNOWN
    assert check_domain(["Q30"], dom("Q2"), toy).outcome is Outcome.UNKNOWN
    # one undecidable type is enough to withhold a conflict; one compatible type is enough to pass
    assert check_domain(["Q11", "Q21"], dom("Q2"), toy).outcome is Outcome.UNKNOWN
    assert check_domain(["Q21", "Q3"], dom("Q2"), toy).outcome is Outcome.COMPATIBLE
    assert check_domain(["Q21"], dom("Q2"), toy, mode="bare").outcome is Outcome.CONFLICT


def test_no_types_or_no_domain_is_unknown(toy):
    for mode in ("closure", "bare"):
        assert check_domain([], dom("Q2"), toy, mode).outcome is Outcome.UNKNOWN
        assert check_domain(None, dom("Q2"), toy, mode).outcome is Outcome.UNKNOWN
        assert check_domain(["Q11"], None, toy, mode).outcome is Outcome.UNKNOWN
        assert check_domain(["Q11"], dom(), toy, mode).outcome is Outcome.UNKNOWN


def test_class_level_entity_types_come_from_p279(toy):
    # a class without P31 (like Q3624078 "sovereign state"): its superclasses are its type evidence
    human_class = EntityTypes(("Q2",), True, "p279", "Q3", ("Q2",))
    assert check_domain(human_class, dom("Q1", relation="instance_of"), toy).outcome is Outcome.COMPATIBLE
    assert check_domain(human_class, dom("Q10"), toy).outcome is Outcome.CONFLICT
    # the paper's filter sees no P31 and skips
    assert check_domain(human_class, dom("Q1"), toy, mode="bare").outcome is Outcome.UNKNOWN


def test_p2309_relation_is_respected(toy):
    instance = EntityTypes(("Q3",), False, "p31", "Q99")
    city_class = EntityTypes(("Q10",), True, "p279", "Q11", ("Q10",))
    # subclass_of constraints apply to classes, through the entity itself (P279*)
    assert check_domain(city_class, dom("Q10", relation="subclass_of"), toy).outcome is Outcome.COMPATIBLE
    assert check_domain(city_class, dom("Q11", relation="subclass_of"), toy).outcome is Outcome.COMPATIBLE
    assert check_domain(city_class, dom("Q2", relation="subclass_of"), toy).outcome is Outcome.CONFLICT
    assert check_domain(instance, dom("Q2", relation="subclass_of"), toy).outcome is Outcome.UNKNOWN
    # a class that also has P31: instance_of checks only the P31 types, the permissive reading both
    typed_class = EntityTypes(("Q11",), True, "p31", "Q3", ("Q2",))
    assert check_domain(typed_class, dom("Q1", relation="instance_of"), toy).outcome is Outcome.CONFLICT
    assert check_domain(typed_class, dom("Q1"), toy).outcome is Outcome.COMPATIBLE
    assert check_domain(typed_class, dom("Q1", relation="instance_or_subclass_of"), toy).outcome is Outcome.COMPATIBLE


def test_soft_evidence_never_demonstrates_a_conflict(toy):
    for ev in (dom("Q2", source="empirical"), dom("Q2", status="suggestion")):
        assert check_domain(["Q11"], ev, toy).outcome is Outcome.UNKNOWN
        assert check_domain(["Q3"], ev, toy).outcome is Outcome.COMPATIBLE
    # the paper's filter uses empirical evidence like any δ(p)
    assert check_domain(["Q11"], dom("Q2", source="empirical"), toy, mode="bare").outcome is Outcome.CONFLICT
    assert check_range(["Q11"], dom("Q10"), toy).outcome is Outcome.COMPATIBLE


# --- types and hierarchy on the real sample ----------------------------------------------------------------------


def test_entity_types_in_one_query(endpoint):
    counting = CountingEndpoint(endpoint)
    human = entity_types(counting, "Q42")  # Douglas Adams
    assert counting.queries == 1
    assert human.types == ("Q5",) and human.source == "p31" and not human.is_class
    state = entity_types(counting, "wd:Q3624078")  # sovereign state: a class without P31
    assert state.is_class and state.source == "p279" and {"Q7275", "Q6256"} <= set(state.types)
    many = entity_types_many(counting, ["Q42", "Q3624078", "Q64", "Q999999999999"])
    assert counting.queries == 3  # one per batch, not one per entity
    assert many["Q64"].types and many["Q999999999999"].source == "none"


def test_sample_decisions(endpoint, bundled, hierarchy):
    types = entity_types_many(endpoint, ["Q42", "Q3624078", "Q212"])
    p607, p19 = bundled.get("P607").domain, bundled.get("P19").domain
    assert check_domain(types["Q42"], p19, hierarchy).outcome is Outcome.COMPATIBLE
    assert check_domain(types["Q42"], bundled.get("P610").domain, hierarchy).outcome is Outcome.CONFLICT
    # the paper's Figure 6 class (no P31) now gets a decision; bare skips it
    assert check_domain(types["Q3624078"], bundled.get("P1082").domain, hierarchy).outcome is Outcome.COMPATIBLE
    assert check_domain(types["Q3624078"], p607, hierarchy, "bare").outcome is Outcome.UNKNOWN
    # Ukraine is no human (bare), but Wikidata's hierarchy puts states under "group of humans",
    # which P607's domain lists: through the closure it is compatible
    assert check_domain(types["Q212"], p607, hierarchy, "bare").outcome is Outcome.CONFLICT
    assert check_domain(types["Q212"], p607, hierarchy).outcome is Outcome.COMPATIBLE


def test_live_hierarchy_by_sparql_agrees_with_the_index(endpoint, hierarchy):
    counting = CountingEndpoint(endpoint)
    live = ClassHierarchy.from_endpoint(counting)
    classes = ["Q5", "Q3624078", "Q515", "Q7725634", "Q1935136", "Q20"]
    live.prefetch(classes)
    assert counting.queries == 1  # batched with VALUES
    for qid in classes:
        assert live.ancestors(qid) == hierarchy.ancestors(qid), qid
        assert live.is_known(qid) == hierarchy.is_known(qid), qid
    live.ancestors("Q215627")  # inside a fetched closure: no new query
    assert counting.queries == 1
    assert not live.is_known("Q20")  # fetched, no path to the root


def test_live_hierarchy_splits_capped_batches_and_never_trusts_a_cut_closure(settings, store_path, hierarchy):
    from saga_dspy.kg.endpoint import EmbeddedEndpoint

    with EmbeddedEndpoint(make_settings(row_cap=10, embedded_workers=1), store_path) as small:
        live = ClassHierarchy.from_endpoint(small)
        live.prefetch(["Q215627", "Q5", "Q3624078"])  # 8, 11 and ~60 closure edges; 10 rows per answer
        assert live.ancestors("Q215627") == hierarchy.ancestors("Q215627") and live.is_known("Q215627")
        assert not live.is_known("Q5") and not live.is_known("Q3624078")  # cut off: undecidable
        assert check_domain(["Q3624078"], dom("Q5"), live).outcome is Outcome.UNKNOWN
        assert check_domain(["Q215627"], dom("Q10"), live).outcome is Outcome.CONFLICT


# --- Freebase ----------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def freebase(tmp_path_factory):
    import pyoxigraph

    from saga_dspy.kg.endpoint import EmbeddedEndpoint

    root = tmp_path_factory.mktemp("freebase")
    store_dir = root / "store"
    store = pyoxigraph.Store(str(store_dir))
    with open(FIXTURES / "freebase_sample.nt", "rb") as handle:
        store.load(handle, format=pyoxigraph.RdfFormat.N_TRIPLES)
    store.flush()
    del store
    settings = make_settings(kg="freebase", cache_dir=root / "cache", embedded_workers=1)
    ep = EmbeddedEndpoint(settings, store_dir)
    yield ep
    ep.close()


def test_freebase_schema_index(freebase, tmp_path):
    index = build_schema_index(freebase, kg="freebase")
    pob = index.get("people.person.place_of_birth")
    assert pob.label == "Place of birth" and pob.datatype == "entity"
    assert pob.domain == TypeEvidence(("people.person",), "freebase-schema")
    assert pob.range == TypeEvidence(("location.location",), "freebase-schema")
    dob = index.get("ns:people.person.date_of_birth")
    assert dob.datatype == "type.datetime" and dob.range is None and dob.domain.classes == ("people.person",)
    assert index.get("http://rdf.freebase.com/ns/film.film.directed_by").range.classes == ("film.director",)
    legacy = index.get("base.schemastaging.legacy_note")
    assert legacy.domain is None and legacy.range is None
    assert index.class_label("film.director") == "Film director"
    assert index.counts["formal"] == 5 and index.counts["unknown"] == 1
    again = SchemaIndex.load(index.save(tmp_path / "fb.json.gz"))
    assert again.get("film.director.film") == index.get("film.director.film") and again.kg == "freebase"

    hierarchy = ClassHierarchy.from_index(again)
    assert hierarchy.ancestors("film.director") == {"film.director", "people.person", "common.topic"}
    types = entity_types_many(freebase, ["m.06pj8", "m.07j6w", "m.0bx9kd"])
    spielberg, jaws, badham = types["m.06pj8"], types["m.07j6w"], types["m.0bx9kd"]
    assert set(spielberg.types) == {"common.topic", "people.person", "film.director"}
    assert spielberg.source == "freebase"
    directed_by = again.get("film.film.directed_by").domain
    assert check_domain(jaws, directed_by, hierarchy).outcome is Outcome.COMPATIBLE
    assert check_domain(spielberg, directed_by, hierarchy).outcome is Outcome.CONFLICT  # a closed schema
    # a director is a person through the included types
    assert check_domain(badham, pob.domain, hierarchy).outcome is Outcome.COMPATIBLE
    assert check_domain(badham, pob.domain, hierarchy, "bare").outcome is Outcome.CONFLICT
    live = ClassHierarchy.from_endpoint(freebase)
    assert live.ancestors("film.director") == hierarchy.ancestors("film.director")


def test_aliases_travel_in_the_schema_index_and_old_files_still_load(bundled):
    assert "birthdate" in bundled.get("P569").aliases and "actor" in bundled.get("P161").aliases
    old = SchemaIndex.from_json(
        {"format": "saga-schema-index", "format_version": 1, "properties": {"P1": {"label": "x", "datatype": "Time"}}}
    )
    assert old.get("P1").aliases == ()
    round_trip = PropertySchema.from_json("P9", PropertySchema("P9", "y", "", None, None, None, ("b", "a")).to_json())
    assert round_trip.aliases == ("b", "a")


def test_calibrated_mode_ignores_hub_classes(hierarchy):
    hub_only = TypeEvidence(("Q35120",), "p2302", "instance_of")
    assert check_domain(("Q5",), hub_only, hierarchy, "closure").outcome is Outcome.COMPATIBLE
    assert check_domain(("Q5",), hub_only, hierarchy, "calibrated").outcome is Outcome.UNKNOWN
    films = TypeEvidence(("Q11424", "Q35120"), "p2302", "instance_of")
    assert check_domain(("Q5",), films, hierarchy, "closure").outcome is Outcome.COMPATIBLE  # via "entity"
    assert check_domain(("Q5",), films, hierarchy, "calibrated").outcome is Outcome.CONFLICT
    assert check_domain(("Q11424",), films, hierarchy, "calibrated").outcome is Outcome.COMPATIBLE
    with pytest.raises(ValueError):
        check_domain(("Q5",), films, hierarchy, "nonsense")
