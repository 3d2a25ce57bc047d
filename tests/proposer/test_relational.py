"""The candidate moves to the entity's values where the question puts a relation on the entity ("Obama's wife",
"the daughter of Ingrid Bergman") that names one of its properties; on the real store."""

from __future__ import annotations

import pytest

from saga_dspy.grounding.neighbourhood import fetch_neighbourhood
from saga_dspy.proposer.relational import relation_phrases, through
from saga_dspy.tools.lookup import do_lookup


def _through(ctx, eid: str, sparql: str) -> str | None:
    return through(ctx, fetch_neighbourhood(ctx.endpoint, ctx.flavour, eid), sparql)


def test_the_phrases_a_mention_possesses():
    assert relation_phrases("In which school did Obama's wife study?", ["Barack Obama", "Obama"]) == [
        "wife",
        "wife study",
    ]
    assert relation_phrases("Who is the daughter of Ingrid Bergman married to?", ["Ingrid Bergman"]) == ["daughter"]
    assert relation_phrases("who is the political leader of japan?", ["Japan"]) == ["leader", "political leader"]
    # the entity's own name, no relation on it, or a name the question does not say
    assert relation_phrases("Who composed the soundtrack for Cameron's Titanic?", ["Titanic"]) == []
    assert relation_phrases("Who is the wife of Obama?", ["Michelle Obama", "Michelle"]) == []


def test_a_possessed_relation_moves_the_candidate(ask):
    ctx = ask("In which school did Obama's wife study?", ("school", "Q3914"))
    own = "SELECT DISTINCT ?x WHERE { wd:Q76 wdt:P69 ?x }"
    hers = "SELECT DISTINCT ?x WHERE { wd:Q76 wdt:P26 ?y . ?y wdt:P69 ?x }"
    assert _through(ctx, "Q76", own) == hers
    assert do_lookup(ctx, "Q76").candidate == hers


def test_what_is_asked_of_the_relation_is_named_by_the_rest(ask):
    """The candidate's own property (spouse, from "married to") is asked of the daughter; the relation is child."""
    ctx = ask("Who is the daughter of Ingrid Bergman married to?", ("person", "Q5"))
    assert do_lookup(ctx, "Q43247").candidate == ("SELECT DISTINCT ?x WHERE { wd:Q43247 wdt:P40 ?y . ?y wdt:P26 ?x }")


@pytest.mark.parametrize(
    ("question", "answer_type", "eid", "pid"),
    [
        # "mayor" is an alias of head of government, the candidate's own property
        ("Who is the mayor of Paris?", ("person", "Q5"), "Q90", "P6"),
        # "president" names head of state, but a president holds no head of government
        ("who is mexico's president right now?", ("person", "Q5"), "Q96", "P6"),
        # "current wife" names spouse, which the candidate asks already: not the spouse's spouse
        ("who is paul mccartney's current wife?", ("person", "Q5"), "Q2599", "P26"),
        # "the country of Panama": Panama is a country; "country" is apposition, no relation, though it names one
        ("what timezone is the country of panama in?", ("time zone", "Q12143"), "Q804", "P421"),
    ],
)
def test_no_relation_leaves_the_candidate(ask, question, answer_type, eid, pid):
    ctx = ask(question, answer_type)
    own = f"SELECT DISTINCT ?x WHERE {{ wd:{eid} wdt:{pid} ?x }}"
    assert _through(ctx, eid, own) == own
