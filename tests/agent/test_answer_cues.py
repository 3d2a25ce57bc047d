"""Issue 12: the answer type from the question's own cues, and the guard it puts on the LM's answer type."""

from __future__ import annotations

import pytest

from saga_dspy.agent.answer_cues import guard, rule_answer_type


@pytest.mark.parametrize("question,label", [
    ("When was Barack Obama born?", "date"), ("What are the birthdays of the Friends cast?", "date"),
    ("How many children does Madonna have?", "quantity"), ("Is Berlin the capital of Germany?", "boolean"),
    ("Who killed Caesar?", "person"), ("Where is the Eiffel Tower?", "location"),
])
def test_rule_answer_type(question, label):
    assert rule_answer_type(question).label == label


def test_the_head_noun_may_be_the_last_word_or_an_everyday_name(schema):
    danish = rule_answer_type("Give me all Danish movies.", schema)
    assert (danish.label, danish.qid, danish.confident) == ("film", "Q11424", True)
    assert rule_answer_type("What movies does Jesse Eisenberg play in?", schema).qid == "Q11424"


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
