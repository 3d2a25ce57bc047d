"""A second thing the question names narrows the lookup's candidate, on the graph's evidence: a value whose label
or alias is a phrase of the question, held by some of the answers; never the looked-up entity's own mention."""

from __future__ import annotations

from saga_dspy.grounding.context import OPTIONAL_SECONDS, QuestionContext
from saga_dspy.proposer.named_values import narrow, phrases
from saga_dspy.proposer.superlative import order_by_superlative
from saga_dspy.tools.lookup import do_lookup


def test_phrases_leave_out_the_entity_s_mention_and_what_the_candidate_explains():
    found = phrases("Which movies star both Liz Taylor and Richard Burton?", ["Elizabeth Taylor", "Liz Taylor"])
    assert found.names_entity
    assert "Richard Burton" in found.texts and "richard burton" in found.texts
    assert not any("Taylor" in p or "Liz" in p for p in found.texts)  # her own mention
    assert not any(p.split()[0] in ("which", "and") or p.split()[-1] == "and" for p in found.texts)
    unnamed = phrases("Give me all Danish movies.", ["Denmark"])
    assert not unnamed.names_entity and "Danish" in unnamed.texts
    assert "voice" not in phrases("who plays the voice of meg?", ["Meg Griffin"], {"voice", "actor"}).texts


def test_a_second_named_entity_narrows_the_candidate(ask):
    ctx = ask(
        "Which movies star both Liz Taylor and Richard Burton?",
        ("film", "Q11424"),
    )
    found = do_lookup(ctx, "Q34851")
    assert found.candidate and "wdt:P161 wd:Q34851" in found.candidate and "wdt:P161 wd:Q151973" in found.candidate
    answers = {row["x"].value.rsplit("/", 1)[-1] for row in ctx.rows(found.candidate)}
    alone = {row["x"].value.rsplit("/", 1)[-1] for row in ctx.rows("SELECT ?x WHERE { ?x wdt:P161 wd:Q34851 }")}
    assert answers and answers < alone  # both of them, not every film of hers


def test_an_occupation_and_an_instrument_make_one_candidate(ask):
    ctx = ask(
        "Give me a list of all trumpet players that were bandleaders.",
        ("person", "Q5"),
    )
    query = "SELECT DISTINCT ?x WHERE { ?x wdt:P106 wd:Q158852 }"
    narrowed = "SELECT DISTINCT ?x WHERE { ?x wdt:P106 wd:Q158852 . ?x wdt:P1303 wd:Q8338 }"
    assert narrow(ctx, "Q158852", query) == narrowed


def test_the_entity_s_own_value_is_not_a_second_thing(ask):
    """The word "Danish" is how the question names Denmark (the question never says "Denmark"): the Danish language,
    one of Denmark's own values, does not narrow the Danish films."""
    ctx = ask("Give me all Danish movies.", ("film", "Q11424"))
    query = "SELECT DISTINCT ?x WHERE { ?x wdt:P495 wd:Q35 . ?x wdt:P31 wd:Q11424 }"
    assert narrow(ctx, "Q35", query, own_values={"Q9035"}) == query
    assert "Q9035" in narrow(ctx, "Q35", query)  # the graph alone would read "Danish" as the language


def test_a_word_the_candidate_explains_is_not_a_second_thing(ask):
    """In "what language", the answers' head noun, and official language's own word, name no further value."""
    ctx = ask(
        "what language do the people speak in australia?",
        ("language", "Q34770"),
    )
    query = "SELECT DISTINCT ?x WHERE { wd:Q408 wdt:P37 ?x }"
    assert narrow(ctx, "Q408", query) == query
    assert narrow(ctx, "Q408", "SELECT ?x WHERE { ?x ?p wd:Q408 }") == "SELECT ?x WHERE { ?x ?p wd:Q408 }"  # not ours


def test_the_answers_class_gives_its_instances_then_narrowed(ask):
    """Looked up from the class the question names its answers by, the candidate is the class's members (by type,
    or the people of an occupation), whatever the class's own properties match, and a named value narrows it."""
    ctx = ask(
        "Which programming languages were influenced by Perl?",
        ("programming language", "Q9143"),
    )
    assert (
        do_lookup(ctx, "Q9143").candidate == "SELECT DISTINCT ?x WHERE { ?x wdt:P31 wd:Q9143 . ?x wdt:P737 wd:Q42478 }"
    )
    ctx = ask(
        "Give me all writers that won the Nobel Prize in literature.",
        ("writer", "Q36180"),
    )
    assert do_lookup(ctx, "Q36180").candidate == (
        "SELECT DISTINCT ?x WHERE { ?x wdt:P106 wd:Q36180 . ?x wdt:P166 wd:Q37922 }"  # the prize's title case
    )


def test_a_superlative_orders_the_candidate_by_the_mined_property(ask):
    """ "highest": its train questions order by elevation, descending (the bundled lexicon); the answers hold
    elevation, so the candidate is the mountains by elevation, one. A word no train question decides changes
    nothing."""
    found = do_lookup(ask("What is the highest mountain?", ("mountain", "Q8502")), "Q8502")
    assert found.candidate == (
        "SELECT DISTINCT ?x WHERE { ?x wdt:P31 wd:Q8502 . ?x wdt:P2044 ?v } ORDER BY DESC(?v) LIMIT 1"
    )
    ctx = ask("What is the prettiest mountain?", ("mountain", "Q8502"))
    query = "SELECT DISTINCT ?x WHERE { ?x wdt:P31 wd:Q8502 }"
    assert order_by_superlative(ctx, query) == query


def test_the_narrowing_queries_have_a_short_deadline(settings, endpoint, search, schema, hierarchy):
    """A refinement the lookup can do without waits OPTIONAL_SECONDS at most, not the endpoint's deadline (a live
    endpoint may take that long over a class with millions of members)."""

    class Recording:
        def __init__(self, inner):
            self.inner, self.timeouts = inner, []

        def query(self, sparql, timeout=None):
            self.timeouts.append((sparql, timeout))
            return self.inner.query(sparql, timeout)

        def __getattr__(self, item):
            return getattr(self.inner, item)

    recording = Recording(endpoint)
    question = "Give me a list of all trumpet players that were bandleaders."
    ctx = QuestionContext(
        settings, recording, search, schema, hierarchy, question=question, variant="full", answer_type=("person", "Q5")
    )
    assert "P1303" in narrow(ctx, "Q158852", "SELECT DISTINCT ?x WHERE { ?x wdt:P106 wd:Q158852 }")
    optional = [t for sparql, t in recording.timeouts if "COUNT" in sparql or "VALUES ?l" in sparql]
    assert len(optional) == 2 and all(t is not None and t <= OPTIONAL_SECONDS for t in optional)
