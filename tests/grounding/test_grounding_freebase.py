"""The Freebase flavour of the tools on a small Freebase-shaped store served by a real embedded
endpoint: MIDs, dotted properties, `type.object.type` types, the schema's domains, and CVT
(mediator) nodes flattened one hop."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import make_settings

from saga_dspy.grounding.context import QuestionContext
from saga_dspy.grounding.patterns import parse_query
from saga_dspy.kg.flavours.freebase import FREEBASE
from saga_dspy.tools import make_tools
from tests.helpers.tools import observing

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
NS = "http://rdf.freebase.com/ns/"

# On top of the schema layer's fixture: a marriage CVT node, a property used on the wrong type
# (a film with a place of birth), and a topic with no types.
EXTRA = f"""
<{NS}people.person.spouse_s> <{NS}type.object.type> <{NS}type.property> .
<{NS}people.person.spouse_s> <{NS}type.object.name> "Spouse (or domestic partner)"@en .
<{NS}people.person.spouse_s> <{NS}type.property.schema> <{NS}people.person> .
<{NS}people.person.spouse_s> <{NS}type.property.expected_type> <{NS}people.marriage> .
<{NS}people.marriage.spouse> <{NS}type.object.type> <{NS}type.property> .
<{NS}people.marriage.spouse> <{NS}type.object.name> "Spouse"@en .
<{NS}people.marriage.spouse> <{NS}type.property.schema> <{NS}people.marriage> .
<{NS}people.marriage.spouse> <{NS}type.property.expected_type> <{NS}people.person> .
<{NS}people.marriage.from> <{NS}type.object.type> <{NS}type.property> .
<{NS}people.marriage.from> <{NS}type.object.name> "From"@en .
<{NS}people.marriage.from> <{NS}type.property.schema> <{NS}people.marriage> .
<{NS}people.marriage.from> <{NS}type.property.expected_type> <{NS}type.datetime> .
<{NS}m.06pj8> <{NS}people.person.spouse_s> <{NS}m.0cvt01> .
<{NS}m.0cvt01> <{NS}type.object.type> <{NS}people.marriage> .
<{NS}m.0cvt01> <{NS}people.marriage.spouse> <{NS}m.0amy1> .
<{NS}m.0cvt01> <{NS}people.marriage.spouse> <{NS}m.06pj8> .
<{NS}m.0cvt01> <{NS}people.marriage.from> "1985"^^<http://www.w3.org/2001/XMLSchema#gYear> .
<{NS}m.0amy1> <{NS}type.object.name> "Amy Irving"@en .
<{NS}m.0amy1> <{NS}type.object.type> <{NS}people.person> .
<{NS}m.07j6w> <{NS}people.person.place_of_birth> <{NS}m.01sn3> .
<{NS}m.0notype> <{NS}type.object.name> "Untyped topic"@en .
<{NS}m.0notype> <{NS}location.location.containedby> <{NS}m.01sn3> .
"""


@pytest.fixture(scope="module")
def freebase(tmp_path_factory):
    import pyoxigraph

    from saga_dspy.kg.endpoint import EmbeddedEndpoint
    from saga_dspy.schema import ClassHierarchy, build_schema_index

    root = tmp_path_factory.mktemp("freebase-grounding")
    store = pyoxigraph.Store(str(root / "store"))
    with open(FIXTURES / "freebase_sample.nt", "rb") as handle:
        store.load(handle, format=pyoxigraph.RdfFormat.N_TRIPLES)
    store.load(EXTRA.encode(), format=pyoxigraph.RdfFormat.N_TRIPLES)
    store.flush()
    del store
    settings = make_settings(kg="freebase", cache_dir=root / "cache", embedded_workers=1)
    ep = EmbeddedEndpoint(settings, root / "store")
    index = build_schema_index(ep, kg="freebase")
    yield settings, ep, index, ClassHierarchy.from_index(index)
    ep.close()


@pytest.fixture
def fb(freebase):
    settings, ep, index, hierarchy = freebase
    ctx = QuestionContext(settings, ep, None, index, hierarchy, question="Who is Steven Spielberg's spouse?")
    return ctx, observing(make_tools(ctx))


def test_identifiers():
    assert FREEBASE.normalise_entity("ns:m.06pj8") == "m.06pj8"
    assert FREEBASE.normalise_entity("/m/06pj8") == "m.06pj8"
    assert FREEBASE.normalise_entity(NS + "m.06pj8") == "m.06pj8"
    assert FREEBASE.normalise_entity("Q42") is None
    assert FREEBASE.normalise_property("ns:people.person.place_of_birth") == "people.person.place_of_birth"
    assert FREEBASE.normalise_property("people.person") is None  # a type, not a property


def test_lookup_types_and_cvt_flattened(fb):
    ctx, tools = fb
    out = tools["get_wikidata_entry"]("m.06pj8")
    assert out.startswith("Steven Spielberg (m.06pj8)")
    assert "Person (people.person)" in out and "Film director (film.director)" in out
    # the question asks for the spouse: the spouse property is shown in full, place of birth named on the rest line
    rest = next(line for line in out.splitlines() if line.startswith("Other properties: "))
    assert "Place of birth (people.person.place_of_birth)" in rest
    # the marriage CVT node is shown with its own edges, one hop
    assert "Spouse (people.marriage.spouse): Amy Irving (m.0amy1)" in out
    assert "From (people.marriage.from): 1985" in out
    assert "Type filter: no property conflicts" in out
    assert ctx.state.entities["m.06pj8"].types


def test_filter_removes_a_property_used_on_the_wrong_type(fb):
    ctx, tools = fb
    out = tools["get_wikidata_entry"]("m.07j6w")  # Jaws, a film, with a place of birth
    assert "Place of birth (people.person.place_of_birth) [domain: Person]" in out
    assert "\n- Place of birth" not in out and "- Directed by (film.film.directed_by)" in out


def test_untyped_topic_skips_the_filter(fb):
    ctx, tools = fb
    out = tools["get_wikidata_entry"]("m.0notype")
    assert "Type filter skipped" in out and "Contained by (location.location.containedby)" in out


def test_execute_blocks_and_types_variables(fb):
    ctx, tools = fb
    # full IRIs: Oxigraph's parser rejects prefixed names with two dots (ns:people.person.x)
    out = tools["execute_sparql"](f"SELECT ?d WHERE {{ ns:m.07j6w <{NS}people.person.date_of_birth> ?d }}")
    assert out.startswith("[BLOCKED]") and "Jaws" in out and "Date of birth (people.person.date_of_birth)" in out
    out = tools["execute_sparql"](
        f"SELECT ?f WHERE {{ ?f <{NS}type.object.type> ns:film.film ; <{NS}film.film.directed_by> ns:m.06pj8 }}"
    )
    assert out.startswith("[OK] 1 row") and "Jaws (m.07j6w)" in out
    assert ctx.state.variables["f"][0].cls == "film.film" and ctx.state.variables["f"][0].source == "pattern"
    out = tools["execute_sparql"](f"SELECT ?p WHERE {{ ns:m.06pj8 <{NS}people.person.place_of_birth> ?p }}")
    assert "Cincinnati (m.01sn3)" in out
    facts = ctx.state.variables["p"]  # the range (location.location), confirmed by the result's types
    assert facts[0].source == "observed" and "location.location" in {f.cls for f in facts}


def test_freebase_patterns_parse():
    parsed = parse_query(
        "SELECT ?x WHERE { ns:m.06pj8 ns:people.person.spouse_s ?c . ?c ns:people.marriage.spouse ?x }", FREEBASE
    )
    assert parsed is not None
    assert sorted(p.path_text for p in parsed.patterns) == ["ns:people.marriage.spouse", "ns:people.person.spouse_s"]
