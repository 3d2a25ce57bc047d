"""The lookup's candidate where the question's head noun names the looked-up entity: its members are the answers
(by type, occupation or office), whatever the answer type says; on the real store."""

from __future__ import annotations

from saga_dspy.tools.lookup import do_lookup


def test_the_people_of_an_occupation_named_by_an_alias(ask):
    """ "cosmonaut" is an alias of astronaut; no answer type is known."""
    ctx = ask("Give me all cosmonauts.", None)
    assert do_lookup(ctx, "Q11631").candidate == "SELECT DISTINCT ?x WHERE { ?x wdt:P106 wd:Q11631 }"


def test_the_holders_of_an_office(ask):
    ctx = ask("Give me all federal chancellors of Germany.", None)
    assert do_lookup(ctx, "Q4970706").candidate == "SELECT DISTINCT ?x WHERE { ?x wdt:P39 wd:Q4970706 }"


def test_the_members_narrowed_by_another_thing_named(ask):
    ctx = ask("Give me a list of all bandleaders that play trumpet.", None)
    assert do_lookup(ctx, "Q806349").candidate == (
        "SELECT DISTINCT ?x WHERE { ?x wdt:P106 wd:Q806349 . ?x wdt:P1303 wd:Q8338 }"
    )


def test_an_entity_the_head_noun_does_not_name_keeps_its_properties(ask):
    """ "Which river does the Brooklyn Bridge cross?": the head noun is river, not the bridge."""
    ctx = ask("Which river does the Brooklyn Bridge cross?", None)
    assert do_lookup(ctx, "Q125006").candidate == "SELECT DISTINCT ?x WHERE { wd:Q125006 wdt:P177 ?x }"
