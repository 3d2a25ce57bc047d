"""The answer type from the question's own words: grammar, then the mined lexicon; and the guard it puts on the
LM's answer type."""

from __future__ import annotations

import copy

import pytest

from saga_dspy.agent.answer_cues import guard, items_class, rule_answer_type
from saga_dspy.grounding.lexicon import Lexicon, load_lexicon


@pytest.fixture(scope="module")
def lexicon(settings):
    """The committed lexicon (data/lexicon), as the program loads it."""
    return load_lexicon(settings)


@pytest.mark.parametrize(
    "question,label",
    [
        ("When was Barack Obama born?", "date"),
        ("How many children does Madonna have?", "quantity"),
        ("How tall is Michael Jordan?", "quantity"),  # "how" before a content word asks a degree
        ("Is Berlin the capital of Germany?", "boolean"),
        ("Who killed Caesar?", "person"),
        ("Where is the Eiffel Tower?", "location"),
        ("How did Michael Jackson die?", "entity"),  # "how" before an auxiliary asks a manner
    ],
)
def test_grammar_alone_decides_question_words(question, label):
    assert rule_answer_type(question).label == label


def test_the_lexicon_decides_beyond_grammar():
    """Head nouns and wh-phrase openings mean what the train questions' gold answers were; below MIN_SUPPORT
    questions, or without a majority, an entry decides nothing."""
    lexicon = Lexicon(
        answers={"birthday": {"date": 3}, "population": {"quantity": 2}, "anecdote": {"date": 1}},
        classes={"flick": {"Q11424": 4}},
        patterns={"which year": {"kind": {"date": 5}}, "what city": {"kind": {"entity": 5}}},
        people={"Q33999": 5000},
    )
    assert rule_answer_type("What are the birthdays of the Friends cast?", None, lexicon).label == "date"
    assert rule_answer_type("What is the population of Berlin?", None, lexicon).label == "quantity"
    assert rule_answer_type("In which year did the war end?", None, lexicon).label == "date"
    assert rule_answer_type("What anecdote did he tell?", None, lexicon).label == "entity"  # one question only
    assert not rule_answer_type("What anecdote did he tell?", None, lexicon).confident
    flick = rule_answer_type("Which flicks did Kubrick direct?", None, lexicon)
    assert (flick.qid, flick.confident) == ("Q11424", True)
    assert rule_answer_type("What are the birthdays of the Friends cast?").label == "entity"  # grammar only


def test_the_head_noun_class_by_label_or_the_committed_lexicon(schema, lexicon):
    # "movies" is no class label: the lexicon learnt it from the train questions' gold class constants
    danish = rule_answer_type("Give me all Danish movies.", schema, lexicon)
    assert (danish.label, danish.qid, danish.confident) == ("film", "Q11424", True)
    assert rule_answer_type("What movies does Jesse Eisenberg play in?", schema, lexicon).qid == "Q11424"
    assert rule_answer_type("Give me all Danish movies.", schema).qid == ""  # no lexicon: no class
    assert lexicon.meta["counts"]["classes"] > 0 and lexicon.classes["movy"]["Q11424"] >= 5
    assert rule_answer_type("Give me a list of all lakes in Denmark.", schema, lexicon).qid == "Q23397"
    # "U.S." is one word of the head noun, not the end of the question
    states = rule_answer_type("Which U.S. states are in the same timezone as Utah?", schema, lexicon)
    assert (states.qid, states.confident) == ("Q35657", True)


def test_of_classes_sharing_a_label_the_graph_uses_more_is_the_one(schema):
    """Two classes are labelled "language": the faculty (Q315, no instances) and a language (Q34770, the type of
    the graph's languages); the label names the one the graph's own instances say, the lower id only on a tie."""
    assert schema.usage.instances("Q34770") and not schema.usage.instances("Q315")
    assert rule_answer_type("What language do they speak in Brazil?", schema).qid == "Q34770"
    assert rule_answer_type("Which city is the capital?", schema).qid == "Q515"


def test_a_label_class_the_graph_holds_none_of_gives_way_to_the_lexicons(schema, lexicon):
    """ "party" labels a festivity (Q200538) the graph holds no instance of, nor of a kind of it; the train answers to
    "party" were political parties (Q7278), which the graph holds: that is the answer type. A label class the graph
    holds kinds of ("company": record labels, …) stays. Without usage evidence (a live endpoint) the label decides."""
    assert not schema.usage.instances("Q200538") and schema.usage.instances("Q7278")
    assert rule_answer_type("Which party did Lincoln belong to?", schema, lexicon).qid == "Q7278"
    assert rule_answer_type("Give me all companies in Hamburg.", schema, lexicon).qid == "Q783794"
    bare = copy.copy(schema)
    bare.usage = None
    assert rule_answer_type("Which party did Lincoln belong to?", bare, lexicon).qid == "Q200538"


def test_a_class_of_people_asks_for_a_person(schema, lexicon):
    """A class under human or person ("players"), or one the graph gives humans as occupation ("actors": its own
    instances are none, its holders thousands), asks for a person; the items are still of that class."""
    players = rule_answer_type("Give me a list of all trumpet players that were bandleaders.", schema, lexicon)
    assert (players.label, players.qid) == ("person", "Q5")
    actors = rule_answer_type("Which actors played in Inception?", schema, lexicon)
    assert (actors.label, actors.qid) == ("person", "Q5")
    assert lexicon.names_people("Q33999") and not lexicon.names_people("Q11424")
    assert items_class("Which actors played in Inception?", schema, lexicon) == "Q33999"


def test_head_noun_class_and_the_guard(schema):
    cue = rule_answer_type("Which river does the Brooklyn Bridge cross?", schema)  # "river" is a class label
    assert cue.label == "river" and cue.qid == "Q4022" and cue.confident
    assert guard(cue, "string", "") == ("river", "Q4022")  # the LM's string gives way
    assert guard(rule_answer_type("When was X born?"), "person", "Q5") == ("date", "")
    assert guard(rule_answer_type("Who founded Apple?"), "organization", "Q43229") == ("organization", "Q43229")
    # "where" and a head noun name the class even when the LM guessed another entity type
    assert guard(rule_answer_type("Where did Hillel Slovak die?"), "person", "Q5")[0] == "location"
    assert guard(rule_answer_type("Which rivers flow through Berlin?", schema), "person", "Q5") == ("river", "Q4022")
    assert guard(rule_answer_type("Tell me about Apple."), "company", "Q783794") == ("company", "Q783794")


def test_a_cue_decides_when_the_lm_could_not_change_the_answer_type():
    from saga_dspy.agent.answer_cues import AnswerCue, decides, guard

    deciding = [
        AnswerCue("boolean"),
        AnswerCue("quantity"),
        AnswerCue("date"),
        AnswerCue("location", "Q2221906", cue="where"),
        AnswerCue("river", "Q4022", cue="head noun 'river'"),
    ]
    for cue in deciding:
        assert decides(cue)
        for lm in (("", ""), ("string", ""), ("date", ""), ("person", "Q5"), (cue.label, cue.qid)):
            assert guard(cue, *lm) == (cue.label, cue.qid), (cue, lm)  # what skipping the LM call gives
    who = AnswerCue("person", "Q5", cue="who")
    assert not decides(who) and guard(who, "musician", "Q639669") == ("musician", "Q639669")
    assert guard(who, "string", "") == ("person", "Q5") and guard(who, "date", "") == ("person", "Q5")
    vague = AnswerCue("entity", confident=False, cue="no cue")
    assert not decides(vague) and guard(vague, "film", "Q11424") == ("film", "Q11424")


def test_the_items_class_is_the_head_or_the_counted_noun_however_broad_the_answer_type(schema, lexicon):
    # the answer type is a quantity, or human: the items are politicians, airlines, films
    assert items_class("How many politicians graduated from Columbia University?", schema) == "Q82955"
    assert items_class("How many airlines are members of the Star Alliance?", schema) == "Q46970"
    assert items_class("Give me all films produced by Hal Roach.", schema) == "Q11424"
    assert items_class("What movies does Jesse Eisenberg play in?", schema, lexicon) == "Q11424"
    # no noun names the items: nothing to restrict by
    for question in (
        "Who killed Caesar?",
        "Is Berlin the capital of Germany?",
        "How much is the population of Iraq?",
        "How often did Jane Fonda marry?",
    ):
        assert items_class(question, schema, lexicon) == "", question
