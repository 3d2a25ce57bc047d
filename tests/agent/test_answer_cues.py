"""Issue 12: the answer type from the question's own cues, and the guard it puts on the LM's answer type."""

from __future__ import annotations

import pytest

from saga_dspy.agent.answer_cues import guard, items_class, rule_answer_type


@pytest.mark.parametrize(
    "question,label",
    [
        ("When was Barack Obama born?", "date"),
        ("What are the birthdays of the Friends cast?", "date"),
        ("How many children does Madonna have?", "quantity"),
        ("Is Berlin the capital of Germany?", "boolean"),
        ("Who killed Caesar?", "person"),
        ("Where is the Eiffel Tower?", "location"),
    ],
)
def test_rule_answer_type(question, label):
    assert rule_answer_type(question).label == label


def test_the_head_noun_may_be_the_last_word_or_an_everyday_name(schema):
    danish = rule_answer_type("Give me all Danish movies.", schema)
    assert (danish.label, danish.qid, danish.confident) == ("film", "Q11424", True)
    assert rule_answer_type("What movies does Jesse Eisenberg play in?", schema).qid == "Q11424"


def test_a_list_of_and_dotted_abbreviations_reach_the_head_noun(schema):
    # "a list of all trumpet players": the list is the form, the players the answer
    players = rule_answer_type("Give me a list of all trumpet players that were bandleaders.", schema)
    assert (players.label, players.qid) == ("person", "Q5")
    assert rule_answer_type("Give me a list of all lakes in Denmark.", schema).qid == "Q23397"
    # "U.S." is one word of the head noun, not the end of the question
    states = rule_answer_type("Which U.S. states are in the same timezone as Utah?", schema)
    assert (states.qid, states.confident) == ("Q35657", True)
    assert rule_answer_type("List all boardgames by GMT.", schema).qid == "Q131436"


def test_head_noun_class_and_the_guard(schema):
    cue = rule_answer_type("Which river does the Brooklyn Bridge cross?", schema)
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


def test_the_items_class_is_the_head_or_the_counted_noun_however_broad_the_answer_type(schema):
    # the answer type is a quantity, or human: the items are politicians, airlines, films
    assert items_class("How many politicians graduated from Columbia University?", schema) == "Q82955"
    assert items_class("How many airlines are members of the Star Alliance?", schema) == "Q46970"
    assert items_class("Give me all films produced by Hal Roach.", schema) == "Q11424"
    assert items_class("What movies does Jesse Eisenberg play in?", schema) == "Q11424"
    # no noun names the items: nothing to restrict by
    for question in (
        "Who killed Caesar?",
        "Is Berlin the capital of Germany?",
        "How much is the population of Iraq?",
        "How often did Jane Fonda marry?",
    ):
        assert items_class(question, schema) == "", question
