"""The `paper` variant end to end with a scripted LM over the real tools on the bundled sample: SAGA as the
paper describes it runs no program-written query (no proposal shown, no candidate run, no remedy at stop)."""

from __future__ import annotations

import dspy
from dspy.utils.dummies import DummyLM

from saga_dspy.agent.program import SagaProgram

MUNICH_Q = "Give me all companies in Munich."
EMPTY = "SELECT DISTINCT ?x WHERE { ?x wdt:P112 wd:Q1726 }"


def step(tool: str, **args) -> dict:
    return {"next_thought": f"call {tool}", "next_tool_name": tool, "next_tool_args": args}


def answer_type(label: str, qid: str = "") -> dict:
    return {"answer_type_label": label, "answer_type_qid": qid}


def run(settings, endpoint, search, script, question, variant="paper"):
    s = settings.model_copy(update={"demos": 0, "variant": variant, "max_steps": 6})
    lm = DummyLM(script)
    with dspy.context(lm=lm):
        pred = SagaProgram(s, endpoint, search)(question=question)
    return pred, lm


def test_a_stop_with_nothing_executed_ends_with_no_query(settings, endpoint, search):
    script = [answer_type("organization", "Q43229"), step("get_wikidata_entry", qid="Q1726"), step("stop")]
    pred, lm = run(settings, endpoint, search, script, MUNICH_Q)
    assert [(s["tool_name"], s.get("note") or "") for s in pred.trajectory] == [
        ("get_wikidata_entry", ""),
        ("stop", ""),
    ]
    assert not pred.sparql and pred.final_source is None
    assert pred.counters["auto_runs"] == 0
    assert pred.counters["lm_calls"] == len(lm.history) == 3  # answer type, two steps: no extract call
    lookup = pred.trajectory[0]["observation"]
    assert "SELECT" not in lookup and "Next: execute e.g." not in lookup and "Incoming" not in lookup
    assert "Type filter" in lookup  # Munich is typed: Eq. 3 ran
    # `full` runs its candidate instead (its answer type comes from the question's cue: no answer-type call)
    full, _ = run(settings, endpoint, search, script[1:], MUNICH_Q, variant="full")
    assert full.counters["auto_runs"] == 1 and full.sparql


def test_an_empty_final_query_is_accepted_as_it_is(settings, endpoint, search):
    """No remedy at stop: the empty query is not sent back, not repaired, its form not rewritten."""
    script = [answer_type("organization", "Q43229"), step("execute_sparql", sparql=EMPTY), step("stop")]
    pred, lm = run(settings, endpoint, search, script, MUNICH_Q)
    assert [s["tool_name"] for s in pred.trajectory] == ["execute_sparql", "stop"]
    assert pred.sparql == EMPTY and pred.final_source == "stop" and pred.final_status == "empty"
    assert pred.counters["lm_calls"] == len(lm.history) == 3


def test_the_answer_type_comes_from_the_model_not_the_questions_cues(settings, endpoint, search):
    """`full` decides a yes/no question's type from its wording without an LM call; `paper` asks the model."""
    question = "Does Neymar play for Real Madrid?"
    script = [answer_type("boolean"), step("stop")]
    pred, lm = run(settings, endpoint, search, script, question)
    assert pred.answer_type == "boolean" and len(lm.history) == 2
    full, full_lm = run(settings, endpoint, search, [step("stop"), step("stop")], question, variant="full")
    assert "answer_type_label" not in str(full_lm.history[0]["messages"])


def test_an_entity_without_p31_types_is_pruned_by_the_model(settings, endpoint, search):
    """Algorithm 1, line 14: τ(e) = ∅ (film, a class: P279 only) skips Eq. 3 and asks the LM to prune instead."""
    script = [
        answer_type("film", "Q11424"),
        step("get_wikidata_entry", qid="Q11424"),
        {"relevant_pids": ["P279", "P5869"]},  # the prune call inside the lookup
        step("stop"),
    ]
    pred, lm = run(settings, endpoint, search, script, "Which films did Kubrick direct?")
    lookup = pred.trajectory[0]["observation"]
    assert pred.counters["prunes"] == 1 and len(lm.history) == 4
    assert "Type filter skipped: the entity has no types." in lookup
    assert "pruned for relevance to the question: 2 of 11 properties kept" in lookup


def test_the_controller_reads_the_papers_window_of_steps(settings, endpoint, search):
    """The last five steps whole, older ones in a line (F.2's action history), whatever `--stable-history` says."""
    cities = ["Munich", "Berlin", "Paris", "Rome", "Vienna", "Madrid"]
    script = [answer_type("organization", "Q43229"), *[step("search_wikidata", query=c) for c in cities], step("stop")]
    whole = 'Observation: Search results for "Munich":\nEntities:'
    _, lm = run(settings, endpoint, search, script, MUNICH_Q)
    last = str(lm.history[-1]["messages"][-1]["content"])
    assert 'Search results for "Munich"' in last and whole not in last  # step 1 of 6: summarised
    assert 'Observation: Search results for "Berlin":\nEntities:' in last  # steps 2-6 whole
    _, lm = run(settings, endpoint, search, script[1:], MUNICH_Q, variant="full")  # stable history: all whole
    assert whole in str(lm.history[-1]["messages"][-1]["content"])
