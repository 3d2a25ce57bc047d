"""The `paper` filter mode: Eq. 3 as read to reproduce the paper's Table 9 (docs/DESIGN.md). On a fixture, the
properties it removes and keeps are those the documented reading says: τ(e) = the P31 types and their direct
superclasses, δ(p) = formal or soft domain evidence, an entity without P31 types is not filtered."""

from __future__ import annotations

from collections import OrderedDict

from saga_dspy.grounding.neighbourhood import Neighbourhood, type_filter
from saga_dspy.kg.flavours import WIKIDATA
from saga_dspy.schema import ClassHierarchy, SchemaIndex
from saga_dspy.schema.compat import PAPER_READING, EntityTypes, PaperReading, check_domain, paper_types, typed

# novel -> literary work -> work -> entity; human -> entity
EDGES = [("Q8261", "Q7725634"), ("Q7725634", "Q386724"), ("Q386724", "Q35120"), ("Q5", "Q35120")]
DOMAINS = {
    "P50": {"classes": ["Q7725634"], "source": "p2302"},  # author: literary work, one step up -> kept
    "P136": {"classes": ["Q386724"], "source": "p2302"},  # genre: work, two steps up -> removed
    "P19": {"classes": ["Q5"], "source": "p2302"},  # place of birth: human -> removed
    "P921": {"classes": ["Q5"], "source": "empirical", "sample": 40},  # soft evidence counts as δ(p) -> removed
    "P1476": {"classes": ["Q5"], "source": "p2302", "status": "suggestion"},  # so does a suggestion -> removed
    "P407": {"classes": ["Q8261"], "source": "p2302", "relation": "subclass_of"},  # relation not read -> kept
}
PROPERTIES = {pid: {"label": pid, "domain": d} for pid, d in DOMAINS.items()} | {"P577": {"label": "date"}}


def neighbourhood(eid: str, types: EntityTypes) -> Neighbourhood:
    edges = OrderedDict((pid, [object()]) for pid in [*DOMAINS, "P577"])  # one value each; P577: no domain -> kept
    return Neighbourhood(eid, "x", edges=edges, types=types)  # type: ignore[arg-type]


def test_the_reading_removes_and_keeps_what_it_documents():
    assert PAPER_READING == PaperReading(steps=1, soft=True, classes=False)
    hierarchy = ClassHierarchy.from_edges(EDGES)
    schema = SchemaIndex(PROPERTIES)
    novel = typed("Q1", ["Q8261"], [], WIKIDATA)  # a novel
    assert paper_types(novel, hierarchy) == {"Q8261", "Q7725634"}
    fr = type_filter(neighbourhood("Q1", novel), schema, hierarchy, "paper")
    assert fr.skipped is None
    assert fr.kept == ["P50", "P407", "P577"]
    assert [pid for pid, _ in fr.removed] == ["P136", "P19", "P921", "P1476"]
    # the other modes read the same fixture otherwise: closure keeps `work` (P279*), bare removes `literary work`
    closure = type_filter(neighbourhood("Q1", novel), schema, hierarchy, "closure")
    assert "P136" in closure.kept and "P50" in closure.kept
    bare = type_filter(neighbourhood("Q1", novel), schema, hierarchy, "bare")
    assert "P50" not in bare.kept


def test_an_entity_without_p31_types_is_not_filtered():
    hierarchy = ClassHierarchy.from_edges(EDGES)
    schema = SchemaIndex(PROPERTIES)
    a_class = typed("Q8261", [], ["Q7725634"], WIKIDATA)  # `novel` itself: P279 only
    fr = type_filter(neighbourhood("Q8261", a_class), schema, hierarchy, "paper")
    assert fr.skipped and not fr.removed and len(fr.kept) == len(DOMAINS) + 1
    none = EntityTypes((), source="none")
    assert check_domain(none, schema.get("P19").domain, hierarchy, "paper").outcome.value == "unknown"


def test_other_readings_are_one_argument_away():
    """What `stats` and the DESIGN section compare: P31 only, formal domains only."""
    hierarchy = ClassHierarchy.from_edges(EDGES)
    schema = SchemaIndex(PROPERTIES)
    novel = typed("Q1", ["Q8261"], [], WIKIDATA)
    p31_only = PaperReading(steps=0)
    assert check_domain(novel, schema.get("P50").domain, hierarchy, "paper", reading=p31_only).outcome.value == (
        "conflict"
    )
    formal = PaperReading(soft=False)
    assert check_domain(novel, schema.get("P921").domain, hierarchy, "paper", reading=formal).keep
    assert not check_domain(novel, schema.get("P921").domain, hierarchy, "paper").keep
