"""Who wrote the final query (agent.authorship), end to end with a scripted LM over the real tools: the lookup
shows its ranked candidates, the model executes one as it is, edits one, or writes its own; the program's fallback
is recorded as the program's, and a query the model never saw is never recorded as its answer."""

from __future__ import annotations

import re

import dspy
from dspy.utils.dummies import DummyLM

from saga_dspy.agent.authorship import PROGRAM_NOTES, Author, author_of, candidate_match
from saga_dspy.agent.program import SagaProgram

MUNICH_Q = "Give me all companies in Munich."
MUNICH_CANDIDATE = "SELECT DISTINCT ?x WHERE { ?x wdt:P159 wd:Q1726 }"


def step(tool: str, **args) -> dict:
    return {"next_thought": f"call {tool}", "next_tool_name": tool, "next_tool_args": args}


def run(settings, endpoint, search, script, question=MUNICH_Q, **overrides):
    s = settings.model_copy(update={"demos": 0, **overrides})
    with dspy.context(lm=DummyLM(script)):
        return SagaProgram(s, endpoint, search)(question=question)


def author(pred) -> Author:
    return Author.from_dict(pred.final_author)


def model_steps(pred) -> list[str]:
    """The queries the model itself executed (not the program's steps)."""
    return [
        s["tool_args"]["sparql"]
        for s in pred.trajectory
        if s["tool_name"] == "execute_sparql" and s.get("note") not in PROGRAM_NOTES
    ]


def test_the_lookup_shows_its_ranked_candidates_with_a_next_line(settings, endpoint, search):
    pred = run(settings, endpoint, search, [step("get_wikidata_entry", qid="Q1726"), step("stop")])
    lookup = pred.trajectory[0]["observation"]
    section = lookup.split("Candidate queries")[1]
    assert f"1. [one-hop; headquarters location (P159)] {MUNICH_CANDIDATE}" in section
    ranks = [int(line.split(".")[0]) for line in section.splitlines() if re.match(r"\d+\. ", line)]
    picks = [f'{{"candidate": {rank}}}' for rank in ranks]
    assert ranks[:2] == [1, 2] and all(pick in section.strip().splitlines()[-1] for pick in picks)
    assert "answers:" in section and section.strip().splitlines()[-1].startswith(f"Next: stop with {picks[0]}, ")
    off = run(settings, endpoint, search, [step("get_wikidata_entry", qid="Q1726"), step("stop")], shown_candidates=0)
    assert "Candidate queries" not in off.trajectory[0]["observation"]


def test_executing_the_first_candidate_is_recorded_as_the_models_choice_of_rank_1(settings, endpoint, search):
    script = [step("get_wikidata_entry", qid="Q1726"), step("execute_sparql", sparql=MUNICH_CANDIDATE), step("stop")]
    pred = run(settings, endpoint, search, script)
    assert pred.sparql == MUNICH_CANDIDATE and pred.final_status == "ok"
    assert author(pred) == Author("model-candidate", rank=1, edited=False)
    assert author(pred).by_model


def test_a_stop_naming_a_candidate_by_number_answers_with_it_as_the_models_choice(settings, endpoint, search):
    script = [step("get_wikidata_entry", qid="Q1726"), step("stop", candidate=2)]
    pred = run(settings, endpoint, search, script)
    second = [line for line in pred.trajectory[0]["observation"].splitlines() if line.startswith("2. [")][0]
    assert pred.sparql == second.split("] ", 1)[1] and pred.final_status == "ok"
    assert [(s["tool_name"], s.get("note")) for s in pred.trajectory[1:]] == [
        ("execute_sparql", "from-stop"),
        ("stop", ""),
    ]
    assert pred.trajectory[-1]["tool_args"] == {"candidate": 2}  # the stop step records what the model gave it
    assert author(pred) == Author("model-candidate", rank=2, edited=False) and author(pred).by_model
    # a number no lookup showed is no choice: the program's fallback, recorded as the program's
    pred = run(settings, endpoint, search, [step("get_wikidata_entry", qid="Q1726"), step("stop", candidate=9)])
    assert author(pred) == Author("program")


def test_an_edited_candidate_is_recorded_as_edited(settings, endpoint, search):
    edited = MUNICH_CANDIDATE + " LIMIT 5"
    script = [step("get_wikidata_entry", qid="Q1726"), step("execute_sparql", sparql=edited), step("stop")]
    pred = run(settings, endpoint, search, script)
    assert pred.sparql == edited and pred.final_status == "ok"
    assert author(pred) == Author("model-candidate", rank=1, edited=True)


def test_a_query_of_its_own_is_the_models(settings, endpoint, search):
    own = "SELECT ?company WHERE { ?company wdt:P159 wd:Q1726 . ?company wdt:P31 ?type }"
    script = [step("get_wikidata_entry", qid="Q1726"), step("execute_sparql", sparql=own), step("stop")]
    pred = run(settings, endpoint, search, script)
    assert pred.final_status == "ok" and author(pred) == Author("model")


def test_a_stop_with_nothing_executed_ends_with_the_programs_fallback(settings, endpoint, search):
    pred = run(settings, endpoint, search, [step("get_wikidata_entry", qid="Q1726"), step("stop")])
    assert [(s["tool_name"], s.get("note")) for s in pred.trajectory[1:]] == [
        ("execute_sparql", "from-candidate"),
        ("stop", ""),
    ]
    assert pred.sparql == MUNICH_CANDIDATE and pred.final_status == "ok" and pred.trajectory[-1]["tool_args"] == {}
    assert author(pred) == Author("program") and not author(pred).by_model
    assert model_steps(pred) == []


def test_a_query_the_model_never_saw_is_never_its_answer(settings, endpoint, search):
    """Nothing shown (K = 0): the program's fallback is a query no observation showed; it is the program's."""
    pred = run(settings, endpoint, search, [step("get_wikidata_entry", qid="Q1726"), step("stop")], shown_candidates=0)
    assert MUNICH_CANDIDATE not in pred.trajectory[0]["observation"]  # never shown
    assert pred.sparql == MUNICH_CANDIDATE and pred.final_source == "stop"  # the stop's source hides the author
    assert author(pred).kind == "program"
    # and in every run above: a final query authored by the model is one the model executed
    for script in (
        [step("get_wikidata_entry", qid="Q1726"), step("execute_sparql", sparql=MUNICH_CANDIDATE), step("stop")],
        [step("get_wikidata_entry", qid="Q1726"), step("stop")],
    ):
        for k in (0, 3):
            pred = run(settings, endpoint, search, script, shown_candidates=k)
            assert not author(pred).by_model or pred.sparql in model_steps(pred)


def test_authors_of_lines_without_a_recorded_author():
    q = "SELECT ?x WHERE { wd:Q1 wdt:P31 ?x }"
    steps = [{"tool_name": "execute_sparql", "tool_args": {"sparql": q}, "note": "from-candidate"}]
    assert author_of("stop", q, steps).kind == "program"
    assert author_of("stop+rewritten", q, steps) == Author("program", rewritten=True)
    assert author_of("repaired", q, []) == Author("program", repaired=True)
    assert author_of("extract", q, []).kind == "extract" and author_of(None, "", []).kind == "none"
    assert author_of("stop", q, [{**steps[0], "note": "from-stop"}]).kind == "model"  # written into stop's argument
    assert candidate_match(q, [(2, q)]) == (2, False) and candidate_match("ASK { ?s ?p ?o }", [(1, q)]) is None
