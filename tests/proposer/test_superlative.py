"""An amount names the property it ranks by: a quantity's value, or how many values an item-valued property has;
on the real store."""

from __future__ import annotations

from saga_dspy.grounding.words import amount_phrase
from saga_dspy.proposer.superlative import order_by_superlative


def test_the_amount_phrase_is_the_words_after_the_degree_word():
    assert amount_phrase("Which country has the most official languages?") == ("official languages", "DESC")
    assert amount_phrase("Which city has the least inhabitants?") == ("inhabitants", "ASC")
    assert amount_phrase("Who has the fewest of them?") is None  # nothing but function words after it
    assert amount_phrase("What is the most frequent cause of death?") is None  # an adjective's superlative
    assert amount_phrase("Give me all cities in Germany.") is None


def test_the_most_values_of_an_item_valued_property(ask):
    ctx = ask("Which country has the most official languages?", ("country", "Q6256"))
    ranked = order_by_superlative(ctx, "SELECT DISTINCT ?x WHERE { ?x wdt:P31 wd:Q6256 }")
    assert ranked == (
        "SELECT ?x WHERE { ?x wdt:P31 wd:Q6256 . ?x wdt:P37 ?v } GROUP BY ?x ORDER BY DESC(COUNT(DISTINCT ?v)) LIMIT 1"
    )
    (top,) = ctx.rows(ranked)
    counts = ctx.rows("SELECT ?x (COUNT(DISTINCT ?v) AS ?n) WHERE { ?x wdt:P31 wd:Q6256 . ?x wdt:P37 ?v } GROUP BY ?x")
    most = max(int(row["n"].value) for row in counts)
    assert {row["x"].value for row in counts if int(row["n"].value) == most} == {top["x"].value}


def test_the_least_of_a_quantity(ask):
    ctx = ask("Which city has the least inhabitants?", ("city", "Q515"))
    assert order_by_superlative(ctx, "SELECT DISTINCT ?x WHERE { ?x wdt:P31 wd:Q515 }") == (
        "SELECT DISTINCT ?x WHERE { ?x wdt:P31 wd:Q515 . ?x wdt:P1082 ?v } ORDER BY ASC(?v) LIMIT 1"
    )


def test_an_amount_no_property_of_the_answers_meets_leaves_the_candidate(ask):
    ctx = ask("Which country has the most lighthouses?", ("country", "Q6256"))
    query = "SELECT DISTINCT ?x WHERE { ?x wdt:P31 wd:Q6256 }"
    assert order_by_superlative(ctx, query) == query


def test_the_most_members_of_a_named_class_pointing_to_an_answer(ask):
    # the lookup was of "film" itself: the answers are what its members point to through the verb's property
    ctx = ask("Who directed the most films?", ("person", "Q5"))
    ranked = order_by_superlative(ctx, "SELECT DISTINCT ?x WHERE { ?x wdt:P1056 wd:Q11424 }")
    body = "?v wdt:P31 wd:Q11424 . ?v wdt:P57 ?x"
    assert ranked == f"SELECT ?x WHERE {{ {body} }} GROUP BY ?x ORDER BY DESC(COUNT(DISTINCT ?v)) LIMIT 1"
    (top,) = ctx.rows(ranked)
    counts = ctx.rows(f"SELECT ?x (COUNT(DISTINCT ?v) AS ?n) WHERE {{ {body} }} GROUP BY ?x")
    most = max(int(row["n"].value) for row in counts)
    assert top["x"].value in {row["x"].value for row in counts if int(row["n"].value) == most}


def test_the_most_members_counted_among_the_answers_the_body_names(ask):
    ctx = ask("Which actor was casted in the most movies?", ("person", "Q5", "Q33999"))
    assert order_by_superlative(ctx, "SELECT DISTINCT ?x WHERE { ?x wdt:P106 wd:Q33999 }") == (
        "SELECT ?x WHERE { ?x wdt:P106 wd:Q33999 . ?v wdt:P31 wd:Q11424 . ?v wdt:P161 ?x } GROUP BY ?x "
        "ORDER BY DESC(COUNT(DISTINCT ?v)) LIMIT 1"
    )


def test_members_no_word_of_the_question_links_leave_the_candidate(ask):
    # "have" names no property of films' pointing to a person
    ctx = ask("Who has the most films?", ("person", "Q5"))
    query = "SELECT DISTINCT ?x WHERE { ?x wdt:P1056 wd:Q11424 }"
    assert order_by_superlative(ctx, query) == query
