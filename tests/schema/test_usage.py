"""Usage evidence in the calibrated domain check (issue 12): "no entity of a well-populated class
carries the property in the KG" is a conflict. A scripted store built by the real index build, and the
real bundled sample."""

from __future__ import annotations

import pytest
from conftest import make_settings

from saga_dspy.schema import (
    BuildOptions,
    ClassHierarchy,
    EntityTypes,
    Outcome,
    SchemaIndex,
    TypeEvidence,
    build_schema_index,
    check_domain,
    entity_types_many,
)
from saga_dspy.schema.compat import USAGE_MIN_INSTANCES, USAGE_MIN_INSTANCES_OVER_COMPATIBLE, USAGE_MIN_SUBJECTS
from saga_dspy.schema.index import ClassUsage

WD = "http://www.wikidata.org/entity/"
WDT = "http://www.wikidata.org/prop/direct/"
ROOT = "Q35120"
SHIPS, PORTS, FEW, GENERAL, OTHER = "Q100", "Q200", "Q300", "Q1", "Q400"


def _triples() -> str:
    """Ships (Q100 ⊂ Q1 ⊂ root, 120 instances) never carry P1 ("home port of"); ports (Q200, 30) always
    do; Q300 has 5 instances, none with P1; P2 is carried by 5 ports only (a rare property)."""
    lines = [
        f"<{WD}{SHIPS}> <{WDT}P279> <{WD}{GENERAL}> .",
        f"<{WD}{GENERAL}> <{WDT}P279> <{WD}{ROOT}> .",
        f"<{WD}{PORTS}> <{WDT}P279> <{WD}{ROOT}> .",
        f"<{WD}{FEW}> <{WDT}P279> <{WD}{ROOT}> .",
        f"<{WD}{OTHER}> <{WDT}P279> <{WD}{ROOT}> .",
    ]
    for i in range(120):
        lines.append(f"<{WD}Q1{i:04d}> <{WDT}P31> <{WD}{SHIPS}> .")
        lines.append(f'<{WD}Q1{i:04d}> <{WDT}P3> "{i}" .')
    for i in range(30):
        lines.append(f"<{WD}Q2{i:04d}> <{WDT}P31> <{WD}{PORTS}> .")
        lines.append(f"<{WD}Q2{i:04d}> <{WDT}P1> <{WD}Q1{i:04d}> .")
        if i < 5:
            lines.append(f'<{WD}Q2{i:04d}> <{WDT}P2> "x" .')
    for i in range(5):
        lines.append(f"<{WD}Q3{i:04d}> <{WDT}P31> <{WD}{FEW}> .")
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def scripted(tmp_path_factory):
    """(index, hierarchy) built by the real build over a scripted embedded store."""
    import io

    import pyoxigraph

    from saga_dspy.kg.endpoint import EmbeddedEndpoint

    root = tmp_path_factory.mktemp("usage")
    store = pyoxigraph.Store(str(root / "store"))
    store.load(io.BytesIO(_triples().encode()), format=pyoxigraph.RdfFormat.N_TRIPLES)
    store.flush()
    del store
    settings = make_settings(cache_dir=root / "cache", embedded_workers=1)
    with EmbeddedEndpoint(settings, root / "store") as ep:
        index = build_schema_index(ep, options=BuildOptions(empirical=False, hierarchy=True, usage=True))
    return index, ClassHierarchy.from_index(index)


def soft(*classes):
    return TypeEvidence(tuple(classes), "empirical", sample=10)


def formal(*classes, relation=None):
    return TypeEvidence(tuple(classes), "p2302", relation)


def test_the_build_counts_instances_and_carriers(scripted, tmp_path):
    index, hierarchy = scripted
    usage = index.usage
    assert hierarchy.usage is usage
    assert usage.instances(SHIPS) == 120 and usage.instances(PORTS) == 30
    assert usage.instances(FEW) is None  # fewer than min_instances: not recorded
    assert usage.carriers(SHIPS, "P1") == 0 and usage.carriers(PORTS, "P1") == 30 and usage.carriers(PORTS, "P2") == 5
    assert usage.property_subjects("P1") == 30 and usage.property_subjects("P2") == 5
    again = SchemaIndex.load(index.save(tmp_path / "u.json.gz"))
    assert again.usage.to_json() == usage.to_json()
    assert again.with_coverage(0).usage is again.usage  # a coverage mask leaves the KG's usage alone


def test_a_well_populated_class_that_never_carries_p_is_a_conflict(scripted):
    _, hierarchy = scripted
    ship = EntityTypes((SHIPS,), qid="Q9")
    # soft evidence alone keeps it; usage evidence (the property named) demonstrates the conflict
    assert check_domain(ship, soft(PORTS), hierarchy, "calibrated").outcome is Outcome.UNKNOWN
    decision = check_domain(ship, soft(PORTS), hierarchy, "calibrated", pid="P1")
    assert decision.outcome is Outcome.CONFLICT and "0 of 120" in decision.reason
    assert check_domain(ship, soft(PORTS), hierarchy, "closure", pid="wdt:P1").outcome is Outcome.UNKNOWN
    # compatible only through a superclass (Q1): overruled by a class of ≥ 100 instances none of which carries P1
    assert check_domain(ship, formal(GENERAL), hierarchy, "closure", pid="P1").outcome is Outcome.COMPATIBLE
    assert check_domain(ship, formal(GENERAL), hierarchy, "calibrated", pid="P1").outcome is Outcome.CONFLICT
    # named by the domain itself: compatible, whatever the usage
    assert check_domain(ship, formal(SHIPS), hierarchy, "calibrated", pid="P1").outcome is Outcome.COMPATIBLE


def test_a_class_that_carries_p_or_says_too_little_is_not_judged_by_usage(scripted):
    _, hierarchy = scripted
    port = EntityTypes((PORTS,), qid="Q8")
    assert check_domain(port, soft(OTHER), hierarchy, "calibrated", pid="P1").outcome is Outcome.UNKNOWN
    # one well-populated type carries it: no conflict, even beside one that does not
    both = EntityTypes((SHIPS, PORTS), qid="Q7")
    assert check_domain(both, soft(OTHER), hierarchy, "calibrated", pid="P1").outcome is Outcome.UNKNOWN
    # too few instances (5 < USAGE_MIN_INSTANCES)
    assert check_domain(EntityTypes((FEW,)), soft(PORTS), hierarchy, "calibrated", pid="P1").outcome is Outcome.UNKNOWN
    # a rare property (5 typed subjects < USAGE_MIN_SUBJECTS): its absence is no evidence
    assert (
        check_domain(EntityTypes((SHIPS,)), soft(PORTS), hierarchy, "calibrated", pid="P2").outcome is Outcome.UNKNOWN
    )
    # no types, no domain evidence, a domain asking for subclasses: never judged by usage
    assert check_domain(EntityTypes(()), soft(PORTS), hierarchy, "calibrated", pid="P1").outcome is Outcome.UNKNOWN
    assert check_domain(EntityTypes((SHIPS,)), None, hierarchy, "calibrated", pid="P1").outcome is Outcome.UNKNOWN
    sub = formal(GENERAL, relation="subclass_of")
    assert check_domain(EntityTypes((SHIPS,)), sub, hierarchy, "calibrated", pid="P1").outcome is not Outcome.CONFLICT
    # a hierarchy without usage evidence (the pure signature): the type check alone
    bare_hierarchy = ClassHierarchy.from_edges([(SHIPS, GENERAL), (GENERAL, ROOT), (PORTS, ROOT)])
    assert (
        check_domain(EntityTypes((SHIPS,)), soft(PORTS), bare_hierarchy, "calibrated", pid="P1").outcome
        is Outcome.UNKNOWN
    )


def test_the_entitys_own_statement_outweighs_an_inferred_conflict(scripted):
    _, hierarchy = scripted
    ship = EntityTypes((SHIPS,), qid="Q9")
    usage = check_domain(ship, soft(PORTS), hierarchy, "calibrated", pid="P1")
    assert usage.outcome is Outcome.CONFLICT and usage.inferred
    carried = check_domain(ship, soft(PORTS), hierarchy, "calibrated", pid="P1", carried=True)
    assert carried.outcome is Outcome.UNKNOWN and "carries the property" in carried.reason
    # a domain no type reaches while some closures are incomplete: inferred too
    patchy = EntityTypes((SHIPS, "Q77"), qid="Q9")  # Q77: a type whose closure is unknown
    assert check_domain(patchy, formal(PORTS), hierarchy, "closure").outcome is Outcome.UNKNOWN
    gap = check_domain(patchy, formal(PORTS), hierarchy, "calibrated")
    assert gap.outcome is Outcome.CONFLICT and gap.inferred
    assert check_domain(patchy, formal(PORTS), hierarchy, "calibrated", carried=True).outcome is Outcome.UNKNOWN
    # a demonstrated conflict (every closure complete) stands, carried or not; other modes ignore `carried`
    demonstrated = check_domain(ship, formal(PORTS), hierarchy, "calibrated", pid="P1", carried=True)
    assert demonstrated.outcome is Outcome.CONFLICT and not demonstrated.inferred
    assert check_domain(ship, formal(PORTS), hierarchy, "closure", carried=True).outcome is Outcome.CONFLICT
    assert check_domain(ship, formal(PORTS), hierarchy, "bare", carried=True).outcome is Outcome.CONFLICT


def test_thresholds_are_what_the_docs_say():
    assert USAGE_MIN_INSTANCES == 20 and USAGE_MIN_INSTANCES_OVER_COMPATIBLE == 100 and USAGE_MIN_SUBJECTS == 20
    usage = ClassUsage({"Q5": (1000, {"P1": 10, "P2": 11})}, {"P1": 50, "P2": 50}, 20)
    h = ClassHierarchy.from_edges([("Q5", ROOT)], usage=usage)
    # at most 1 % of the instances: negligible; above: the class does carry it
    assert check_domain(("Q5",), soft("Q6"), h, "calibrated", pid="P1").outcome is Outcome.CONFLICT
    assert check_domain(("Q5",), soft("Q6"), h, "calibrated", pid="P2").outcome is Outcome.UNKNOWN


# --- the real bundled sample ----------------------------------------------------------------------------------------


def test_bundled_sample_usage_evidence(settings, endpoint):
    from saga_dspy.schema import load_hierarchy, load_schema_index

    index = load_schema_index(settings)
    hierarchy = load_hierarchy(settings, index=index)
    assert index.usage is not None and hierarchy.usage is index.usage
    assert index.usage.instances("Q11424") >= 1000 and index.usage.carriers("Q11424", "P131") == 0  # films
    types = entity_types_many(endpoint, ["Q184843", "Q1408"])  # Blade Runner (film), New Jersey (US state)
    p131 = index.get("P131").domain  # located in: soft (empirical) domain evidence
    assert p131.is_soft
    assert check_domain(types["Q184843"], p131, hierarchy, "closure", pid="P131").outcome is Outcome.UNKNOWN
    assert check_domain(types["Q184843"], p131, hierarchy, "calibrated", pid="P131").outcome is Outcome.CONFLICT
    # US states do carry P131 in the sample: no usage conflict
    assert check_domain(types["Q1408"], p131, hierarchy, "calibrated", pid="P131").outcome is not Outcome.CONFLICT


def test_schema_check_cli_knows_what_the_entity_carries(settings, capsys):
    """`schema check` decides as the tools do: Google carries *short name*, so the calibrated mode's usage
    evidence yields; Apple does not carry it, and the inferred conflict stands."""
    from saga_dspy.schema.__main__ import main

    assert main(["check", "--cache-dir", str(settings.cache_dir), "Q95", "P1813"]) == 0
    google = [line for line in capsys.readouterr().out.splitlines() if "calibrated" in line]
    assert google and "unknown" in google[0] and "carries the property" in google[0]
    assert main(["check", "--cache-dir", str(settings.cache_dir), "Q312", "P1813"]) == 0
    apple = [line for line in capsys.readouterr().out.splitlines() if "calibrated" in line]
    assert apple and "conflict" in apple[0]
