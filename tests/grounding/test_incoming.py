"""The lookup's incoming section (`?x wdt:P wd:E`) on the bundled sample: ranked by the question, starred
where the subjects fit the expected answer type, proposed when no outgoing property is, SAGA only."""

from __future__ import annotations

from saga_dspy.grounding.context import QuestionContext
from saga_dspy.grounding.incoming import describe_incoming, fetch_incoming, incoming_order
from saga_dspy.kg.flavours import flavour_for
from saga_dspy.kg.results import SelectResult
from saga_dspy.tools.lookup import do_lookup

EISENBERG = "Q219512"
WD = "http://www.wikidata.org/entity/"


def _ctx(settings, endpoint, search, schema, hierarchy, question, answer_type, variant="full"):
    return QuestionContext(
        settings, endpoint, search, schema, hierarchy, question=question, variant=variant, answer_type=answer_type
    )


def test_an_object_side_question_gets_the_incoming_property_proposed(settings, endpoint, search, schema, hierarchy):
    ctx = _ctx(
        settings, endpoint, search, schema, hierarchy, "What movies does Jesse Eisenberg play in?", ("film", "Q11424")
    )
    found = do_lookup(ctx, EISENBERG)
    obs = found.text
    assert incoming_order(obs)[0] == "P161"
    assert "← cast member (P161) ★" in obs
    assert found.proposal == f"SELECT DISTINCT ?x WHERE {{ ?x wdt:P161 wd:{EISENBERG} }}"
    result = endpoint.query(found.proposal)
    assert isinstance(result, SelectResult) and WD + "Q29658" in {b.value for b in result.values()}


def test_subject_types_not_counts_decide_the_star(settings, endpoint, search, schema, hierarchy):
    ctx = _ctx(settings, endpoint, search, schema, hierarchy, "Give me all Danish movies.", ("film", "Q11424"))
    found = do_lookup(ctx, "Q35")
    obs = found.text
    order = incoming_order(obs)
    assert order[0] == "P495" and "P27" in order  # country of origin first, though citizenship has 4x the items
    assert "P27) ★" not in obs
    assert found.proposal == "SELECT DISTINCT ?x WHERE { ?x wdt:P495 wd:Q35 }"


def test_no_section_when_the_outgoing_side_answers_and_nothing_incoming_is_asked(
    settings, endpoint, search, schema, hierarchy
):
    ctx = _ctx(settings, endpoint, search, schema, hierarchy, "Who is the mayor of Berlin?", ("human", "Q5"))
    sent = []
    query = ctx.query
    ctx.query = lambda sparql, *a, **k: sent.append(sparql) or query(sparql, *a, **k)
    found = do_lookup(ctx, "Q64")
    obs = found.text
    assert "Incoming" not in obs and found.proposal == "SELECT DISTINCT ?x WHERE { wd:Q64 wdt:P6 ?x }"
    # a hidden section costs its one grouped count query, not its examples' labels and subjects' types
    assert ctx.flavour.incoming_query("Q64", 30) in sent
    assert ctx.flavour.incoming_types_query("Q64", 400) not in sent


def test_spinach_lookups_have_no_incoming_section(settings, endpoint, search, schema, hierarchy):
    ctx = _ctx(
        settings,
        endpoint,
        search,
        schema,
        hierarchy,
        "What movies does Jesse Eisenberg play in?",
        None,
        variant="spinach",
    )
    ctx.prune = lambda question, text: ["P106", "P69"]  # the SPINACH prune keeps two
    found = do_lookup(ctx, EISENBERG)
    obs = found.text
    assert "pruned for relevance" in obs and "Incoming" not in obs and "P161" not in obs


def test_fetch_incoming_counts_and_labels_examples(settings, endpoint, search, schema, hierarchy):
    ctx = _ctx(settings, endpoint, search, schema, hierarchy, "", None)
    edges = describe_incoming(ctx, "Q183", fetch_incoming(ctx, "Q183"), subject_types=True)
    assert list(edges)[0] == "P27" and edges["P27"].count > 1000  # most used first
    assert "Q5" in edges["P27"].subject_types and edges["P47"].example_label
    assert flavour_for("freebase").incoming_query("m.0abc", 10) is None
