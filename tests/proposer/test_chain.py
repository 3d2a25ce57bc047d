"""The candidate follows one more hop where its answers are not of the type asked and a property of theirs, named
by the question, leads to answers that are; on the real store."""

from __future__ import annotations

from saga_dspy.grounding.answer_fit import answers_fit
from saga_dspy.proposer.chain import follow
from saga_dspy.tools.lookup import do_lookup


def test_the_capitals_of_the_countries_a_range_runs_through(ask):
    ctx = ask("Give me the capitals of all countries that the Himalayas run through.", ("big city", "Q1549591"))
    countries = "SELECT DISTINCT ?x WHERE { wd:Q5451 wdt:P17 ?x }"
    assert answers_fit(ctx, "wd:Q5451 wdt:P17 ?x") is False
    capitals = "SELECT DISTINCT ?x WHERE { wd:Q5451 wdt:P17 ?y . ?y wdt:P36 ?x }"
    assert follow(ctx, countries, "Himalayas") == capitals
    assert do_lookup(ctx, "Q5451").candidate == capitals
    assert {row["x"].value.rsplit("/", 1)[-1] for row in ctx.rows(capitals)} == {"Q37995", "Q1362", "Q3037"}


def test_answers_of_the_type_asked_are_left_alone(ask):
    ctx = ask("Which countries does the Himalayas run through?", ("country", "Q6256"))
    countries = "SELECT DISTINCT ?x WHERE { wd:Q5451 wdt:P17 ?x }"
    assert answers_fit(ctx, "wd:Q5451 wdt:P17 ?x") is True
    assert follow(ctx, countries, "Himalayas") == countries


def test_a_property_met_only_weakly_is_no_hop(ask):
    """ "owns" meets "founded by" only through a description or a mined share, not as its label or an alias: a
    company that owns Chrysler is not turned into its founders because "who" asked for a person."""
    ctx = ask("who owns the chrysler corporation?", ("person", "Q5"))
    owners = "SELECT DISTINCT ?x WHERE { ?x wdt:P1830 wd:Q29610 }"
    assert follow(ctx, owners, "Chrysler") == owners


def test_a_scalar_answer_wants_literals(ask):
    ctx = ask("When were the actors of the television show Charmed born?", ("date", ""))
    assert answers_fit(ctx, "wd:Q162371 wdt:P161 ?x") is False
    assert answers_fit(ctx, "wd:Q162371 wdt:P161 ?y . ?y wdt:P569 ?x") is True
    cast = "SELECT DISTINCT ?x WHERE { wd:Q162371 wdt:P161 ?x }"
    assert follow(ctx, cast, "Charmed") == ("SELECT DISTINCT ?x WHERE { wd:Q162371 wdt:P161 ?y . ?y wdt:P569 ?x }")


def test_words_the_candidate_accounts_for_name_no_hop(ask):
    """ "capital" is what the candidate's property (capital) says already; with a wrong answer type (a country, as
    a model may give it) the capital is not followed back to what it is the capital of."""
    ctx = ask("what is d capital city of south africa?", ("country", "Q6256"))
    capital = "SELECT DISTINCT ?x WHERE { wd:Q258 wdt:P36 ?x }"
    assert answers_fit(ctx, "wd:Q258 wdt:P36 ?x") is False
    assert follow(ctx, capital, "South Africa") == capital


def test_an_unknown_value_is_no_literal(ask):
    """Blank nodes (Wikidata's "unknown value") among the answers do not make items fit a date."""
    ctx = ask("what present day countries use english as their national language?", ("date", ""))
    assert answers_fit(ctx, "?y wdt:P2936 wd:Q1860 . ?y wdt:P832 ?x") is False
