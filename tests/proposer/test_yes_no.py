"""A yes/no question's candidate is the ASK of the value it names: an answer the question names, else a thing so
named of the answers' kind (false), else whether the pattern has answers at all; on the real store."""

from __future__ import annotations

from saga_dspy.kg.results import AskResult
from saga_dspy.proposer.yes_no import ask as ask_of
from saga_dspy.tools.lookup import do_lookup


def _value(ctx, sparql: str) -> bool:
    result = ctx.query(sparql)
    assert isinstance(result, AskResult), sparql
    return result.value


def test_a_named_answer_fixes_the_value(ask):
    ctx = ask("Was Margaret Thatcher a chemist?", ("boolean", ""))
    found = do_lookup(ctx, "Q7416")
    assert found.candidate == "ASK WHERE { wd:Q7416 wdt:P106 wd:Q593644 }"
    assert _value(ctx, found.candidate)


def test_a_named_thing_of_the_answers_kind_makes_the_ask_false(ask):
    """Real Madrid is a football club like Neymar's teams, and not one of them: the pattern alone would be true."""
    ctx = ask("Does Neymar play for Real Madrid?", ("boolean", ""))
    query = "SELECT DISTINCT ?x WHERE { wd:Q142794 wdt:P54 ?x }"
    checked = ask_of(ctx, "Q142794", query)
    assert checked == "ASK WHERE { wd:Q142794 wdt:P54 wd:Q8682 }"
    assert not _value(ctx, checked)
    assert _value(ctx, "ASK WHERE { wd:Q142794 wdt:P54 ?x }")


def test_without_a_named_value_the_pattern_is_asked(ask):
    ctx = ask("Did Elvis Presley have children?", ("boolean", ""))
    assert ask_of(ctx, "Q303", "SELECT DISTINCT ?x WHERE { wd:Q303 wdt:P40 ?x }") == "ASK WHERE { wd:Q303 wdt:P40 ?x }"
    other = "SELECT ?x WHERE { wd:Q303 wdt:P40 ?x } LIMIT 1"
    assert ask_of(ctx, "Q303", other) == other  # not a lookup's query: the program rewrites its head


def test_a_wh_question_keeps_its_select(ask):
    ctx = ask("Which team does Neymar play for?", ("sports team", "Q12973014"))
    assert do_lookup(ctx, "Q142794").candidate.startswith("SELECT")
