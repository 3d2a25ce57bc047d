"""A comparative bounds the candidate's answers by an amount the question names: how many values of a property they
have, or a quantity's value; on the real store."""

from __future__ import annotations

from saga_dspy.grounding.words import compared_amount
from saga_dspy.proposer.comparison import compare

COUNTRIES = "SELECT DISTINCT ?x WHERE { ?x wdt:P31 wd:Q6256 }"


def test_the_comparative_the_number_and_what_is_compared():
    assert compared_amount("Which countries have more than two official languages?") == (
        "official languages",
        ">",
        2,
    )
    assert compared_amount("Give me all cities with more than 100,000 inhabitants.") == ("inhabitants", ">", 100000)
    assert compared_amount("Who has at least 2 million followers?") == ("followers", ">=", 2_000_000)
    # no number, or no plural noun after it
    assert compared_amount("Is Lake Baikal bigger than the Great Bear Lake?") is None
    assert compared_amount("Did he win more than one time?") is None


def test_a_count_of_values_bounded(ask):
    ctx = ask("Which countries have more than two official languages?", ("country", "Q6256"))
    compared = compare(ctx, COUNTRIES)
    assert compared == (
        "SELECT ?x WHERE { ?x wdt:P31 wd:Q6256 . ?x wdt:P37 ?v } GROUP BY ?x HAVING(COUNT(DISTINCT ?v) > 2)"
    )
    for row in ctx.rows(compared):
        languages = ctx.rows(f"SELECT DISTINCT ?l WHERE {{ <{row['x'].value}> wdt:P37 ?l }}")
        assert len(languages) > 2


def test_a_quantity_bounded_by_its_value(ask):
    ctx = ask("Which countries have more than 100000000 inhabitants?", ("country", "Q6256"))
    compared = compare(ctx, COUNTRIES)
    assert compared == "SELECT DISTINCT ?x WHERE { ?x wdt:P31 wd:Q6256 . ?x wdt:P1082 ?v FILTER(?v > 100000000) }"
    assert ctx.rows(compared)


def test_words_that_name_no_held_property_leave_it(ask):
    ctx = ask("Which countries have more than ten caves?", ("country", "Q6256"))
    assert compare(ctx, COUNTRIES) == COUNTRIES
