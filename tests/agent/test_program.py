"""The SAGA program end to end with scripted LMs (DummyLM) over the REAL grounding tools on the
bundled Wikidata sample.

A script is one dict per LM call: the answer-type call, then each ReAct step
(next_thought / next_tool_name / next_tool_args), then (only when the loop ends without a
usable final query) the extract call's `sparql`. ChatAdapter falls back to JSONAdapter when it
cannot read a reply, so an unreadable turn costs two scripted entries.
"""

from __future__ import annotations

import os
import threading

import dspy
import pytest
from dspy.utils.dummies import DummyLM
from dspy.utils.exceptions import ContextWindowExceededError
from helpers.scripted_lm import ScriptedLM

from saga_dspy.agent.program import SagaProgram
from saga_dspy.agent.react import FINAL_REPLY, FINAL_STEP
from saga_dspy.kg.results import AskResult, SelectResult
from saga_dspy.signatures import QUERY_FORM_GUIDE

WD = "http://www.wikidata.org/entity/"
RIEMANN_Q = "After whom is the Riemannian geometry named?"
RIEMANN_SPARQL = "SELECT ?x WHERE { wd:Q761383 wdt:P138 ?x }"


def step(tool: str, thought: str = "", **args) -> dict:
    return {"next_thought": thought or f"call {tool}", "next_tool_name": tool, "next_tool_args": args}


def answer_type(label: str, qid: str = "") -> dict:
    return {"answer_type_label": label, "answer_type_qid": qid}


def run(settings, endpoint, search, script, question, lm=None, **overrides):
    s = settings.model_copy(update={"demos": 0, **overrides})
    lm = lm or DummyLM(script)
    program = SagaProgram(s, endpoint, search)
    with dspy.context(lm=lm):
        pred = program(question=question)
    return pred, lm


def prompts(lm) -> list[str]:
    """The rendered prompt of each LM call (system + user messages)."""
    return ["\n".join(str(m.get("content")) for m in entry["messages"]) for entry in lm.history]


def user_part(lm, i: int) -> str:
    return str(lm.history[i]["messages"][-1]["content"])


def field(text: str, name: str) -> str:
    """The value of one `[[ ## name ## ]]` field in a rendered prompt."""
    value = text.split(f"[[ ## {name} ## ]]")[1].split("[[ ##")[0]
    return value.split("\n\nRespond with the corresponding output fields")[0].strip()


def answer_ids(pred) -> set[str]:
    assert isinstance(pred.answers, SelectResult)
    return {b.value.removeprefix(WD) for b in pred.answers.values()}


# --- the happy path -----------------------------------------------------------------------------


def test_one_hop_question_answered_correctly(settings, endpoint, search):
    script = [
        answer_type("person", "Q5"),
        step("search_wikidata", query="Riemannian geometry"),
        step("get_wikidata_entry", qid="Q761383"),
        step("execute_sparql", sparql=RIEMANN_SPARQL),
        step("stop", "The query returns the namesake."),
    ]
    pred, lm = run(settings, endpoint, search, script, RIEMANN_Q)
    assert pred.error is None
    assert pred.sparql == RIEMANN_SPARQL
    assert answer_ids(pred) == {"Q42299"}
    assert pred.final_status == "ok" and pred.final_source == "stop"
    assert pred.answer_type == "person (Q5)" and pred.query_form == "SELECT"
    c = pred.counters
    assert (c["steps"], c["searches"], c["lookups"], c["executions"], c["blocked"], c["empty"]) == (4, 1, 1, 1, 0, 0)
    assert c["lm_calls"] == 5 == len(lm.history)  # 1 answer type + 4 steps, no extract call
    assert c["seconds"] > 0
    assert [s["tool_name"] for s in pred.trajectory] == [
        "search_wikidata",
        "get_wikidata_entry",
        "execute_sparql",
        "stop",
    ]


def test_the_final_query_is_not_run_again_for_the_prediction(settings, endpoint, search, monkeypatch):
    sent = []
    real = type(endpoint).query
    monkeypatch.setattr(type(endpoint), "query", lambda self, q, timeout=None: sent.append(q) or real(self, q, timeout))
    script = [answer_type("person", "Q5"), step("execute_sparql", sparql=RIEMANN_SPARQL), step("stop", "done")]
    pred, _ = run(settings, endpoint, search, script, RIEMANN_Q)
    assert answer_ids(pred) == {"Q42299"} and pred.final_status == "ok"
    assert sent.count(RIEMANN_SPARQL) == 1  # the execute tool's answers are the prediction's


def test_type_context_and_log_reach_every_step(settings, endpoint, search):
    script = [
        answer_type("person", "Q5"),
        step("get_wikidata_entry", qid="Q761383"),
        step("execute_sparql", sparql=RIEMANN_SPARQL),
        step("stop"),
    ]
    pred, lm = run(settings, endpoint, search, script, RIEMANN_Q)
    first, second, third = user_part(lm, 1), user_part(lm, 2), user_part(lm, 3)
    # step 1: nothing explored yet
    assert "Q761383" not in field(first, "type_context") and "Q761383" not in field(first, "knowledge_log")
    # step 2: the lookup's types are in the type context; the log does not repeat the discovery there
    assert "Q761383" in field(second, "type_context") and "area of mathematics" in field(second, "type_context")
    assert "Q761383" not in field(second, "knowledge_log")
    assert "Expected answer type" not in field(second, "type_context") and "person (Q5)" in field(second, "answer_type")
    # step 3: the executed query's outcome is logged and the result's variable typed
    assert "[ok]" in field(third, "knowledge_log")
    assert "?x" in field(third, "type_context")
    # the fresh state comes right before the reply, after the (append-only) trajectory
    assert third.index("[[ ## trajectory ## ]]") < third.index("[[ ## type_context ## ]]")
    assert all(QUERY_FORM_GUIDE["SELECT"] in user_part(lm, i) for i in (1, 2, 3))  # the form, every step


# --- SAGA's signals ---------------------------------------------------------------------------------


def test_wrong_entity_recovery(settings, endpoint, search):
    """Q462 (the Star Wars franchise) loses `director` to the type filter; the agent switches to the film."""
    question = "Who directed the film Star Wars: Episode IV – A New Hope?"
    script = [
        answer_type("person", "Q5"),
        step("search_wikidata", query="Star Wars"),
        step("get_wikidata_entry", qid="Q462"),
        step(
            "search_wikidata", "director was removed: Q462 is a franchise, not the film", query="Star Wars Episode IV"
        ),
        step("execute_sparql", sparql="SELECT ?x WHERE { wd:Q17738 wdt:P57 ?x }"),
        step("stop"),
    ]
    pred, lm = run(settings, endpoint, search, script, question)
    lookup = pred.trajectory[1]["observation"]
    assert "media franchise" in lookup
    assert "removed" in lookup and "director (P57)" in lookup and "wrong entity" in lookup
    assert "director (P57)" not in lookup.split("Outgoing properties")[1]  # not offered as a candidate
    assert "Q17738" in pred.trajectory[2]["observation"]  # the film is found next
    assert "director (P57)" in user_part(lm, 3)  # the controller saw the removal before choosing
    assert answer_ids(pred) == {"Q38222"}  # George Lucas


def test_blocked_execution_is_an_observation(settings, endpoint, search):
    question = "Where was Star Wars: Episode IV – A New Hope born?"
    script = [  # "where": the question settles its answer type (location), no answer-type call
        step("execute_sparql", sparql="SELECT ?x WHERE { wd:Q17738 wdt:P19 ?x }"),
        step("execute_sparql", sparql="SELECT ?x WHERE { wd:Q17738 wdt:P57 ?x }"),
        step("stop"),
    ]
    pred, lm = run(settings, endpoint, search, script, question)
    assert pred.trajectory[0]["observation"].startswith("[BLOCKED]")
    assert pred.counters["blocked"] == 1
    assert "blocked" in field(user_part(lm, 1), "knowledge_log")
    assert pred.sparql.endswith("wdt:P57 ?x }") and pred.final_status == "ok"


def test_ask_question(settings, endpoint, search):
    question = "Did Joe Cocker play at the Woodstock festival?"
    ask = "ASK { wd:Q164815 wdt:P710 wd:Q190076 }"
    script = [
        answer_type("boolean"),
        step("search_wikidata", query="Woodstock Festival"),
        step("execute_sparql", sparql=ask),
        step("stop"),
    ]
    pred, lm = run(settings, endpoint, search, script, question)
    assert pred.query_form == "ASK" and pred.answer_type == "boolean"
    assert field(user_part(lm, 1), "query_form") == QUERY_FORM_GUIDE["ASK"]
    assert pred.sparql == ask
    assert isinstance(pred.answers, AskResult) and pred.answers.value is True
    assert pred.final_status == "ok"


def test_the_questions_cues_guard_the_lms_answer_type(settings, endpoint, search):
    """Issue 12: the LM says `string` for a 'when' question; the rule-based cue (date) wins, the form stays SELECT."""
    question = "When was the Riemannian geometry named?"
    pred, _ = run(settings, endpoint, search, [answer_type("string"), step("stop")], question)
    assert pred.answer_type == "date" and pred.query_form == "SELECT"
    pred, _ = run(settings, endpoint, search, [answer_type("person", "Q5"), step("stop")], RIEMANN_Q)
    assert pred.answer_type == "person (Q5)"  # an agreeing LM keeps its own type


# --- the query form is imposed -------------------------------------------------------------------------


def test_wrong_query_form_is_sent_back(settings, endpoint, search):
    question = "Did Joe Cocker play at the Woodstock festival?"
    select = "SELECT ?x WHERE { wd:Q164815 wdt:P710 ?x }"
    ask = "ASK { wd:Q164815 wdt:P710 wd:Q190076 }"
    script = [  # a yes/no question settles its answer type: no answer-type call
        step("execute_sparql", sparql=select),
        step("stop"),
        step("execute_sparql", "it must be an ASK query", sparql=ask),
        step("stop"),
    ]
    pred, lm = run(settings, endpoint, search, script, question)
    rejected = pred.trajectory[1]
    assert rejected["tool_name"] == "stop" and rejected["note"] == "rejected"
    assert "must be an ASK query" in rejected["observation"]
    assert "must be an ASK query" in user_part(lm, 2)  # the controller read the reason
    assert pred.sparql == ask and pred.answers.value is True
    assert pred.counters["rejected"] == 1


def test_wrong_query_form_is_rewritten_when_the_agent_insists(settings, endpoint, search):
    question = "Did Joe Cocker play at the Woodstock festival?"
    select = "SELECT ?x WHERE { wd:Q164815 wdt:P710 ?x }"
    script = [step("execute_sparql", sparql=select), step("stop"), step("stop")]
    pred, _ = run(settings, endpoint, search, script, question)
    assert pred.sparql == "ASK WHERE { wd:Q164815 wdt:P710 ?x }"
    assert pred.rewritten_from == select and pred.final_source == "stop+rewritten"
    assert isinstance(pred.answers, AskResult) and pred.answers.value is True


def test_count_question_head_rewritten_from_entities(settings, endpoint, search):
    question = "How many children did Queen Victoria have?"
    select = "SELECT ?c WHERE { wd:Q9439 wdt:P40 ?c }"
    script = [step("execute_sparql", sparql=select), step("stop")]  # "how many": no answer-type call
    pred, _ = run(settings, endpoint, search, script, question)
    assert pred.query_form == "COUNT"
    # a SELECT of one variable the program can count is not sent back: the first stop ends the question
    assert [s["note"] for s in pred.trajectory] == ["", ""] and pred.counters["rejected"] == 0
    assert pred.final_source == "stop+rewritten" and pred.rewritten_from == select
    assert pred.sparql.startswith("SELECT (COUNT(DISTINCT ?c) AS ?count)")
    assert pred.answers.rows and pred.answers.rows[0]["count"].value != "0"


# --- robustness ------------------------------------------------------------------------------------------


def test_tool_error_and_garbage_turn_do_not_crash(settings, endpoint, search, monkeypatch):
    from saga_dspy.agent import program as program_module

    real = program_module.make_tools

    def with_broken_examples(ctx):
        tools = real(ctx)

        def get_property_examples(pid: str) -> str:
            raise RuntimeError("examples service exploded")

        return [get_property_examples if t.__name__ == "get_property_examples" else t for t in tools]

    monkeypatch.setattr(program_module, "make_tools", with_broken_examples)
    script = [
        answer_type("person", "Q5"),
        step("get_property_examples", pid="P138"),  # raises inside the tool
        {"nonsense": "I am not following the format"},  # unreadable ...
        {"still": "nonsense"},  # ... and so is the JSONAdapter retry
        step("execute_sparql", sparql="SELEC broken"),  # a syntax error
        step("fly_to_the_moon", x=1),  # no such tool
        step("execute_sparql", sparql=RIEMANN_SPARQL),
        step("stop"),
    ]
    pred, lm = run(settings, endpoint, search, script, RIEMANN_Q)
    notes = [s["note"] for s in pred.trajectory]
    obs = [s["observation"] for s in pred.trajectory]
    assert "Error in get_property_examples" in obs[0] and "exploded" in obs[0]
    assert notes[1] == "unparsable" and "could not be read" in obs[1]
    assert obs[2].startswith("[ERROR]")
    assert notes[3] == "unknown-tool"
    assert answer_ids(pred) == {"Q42299"} and pred.error is None
    assert pred.counters["unparsable"] == 1 and pred.counters["lm_calls"] == len(script)


def test_step_limit_then_extract(settings, endpoint, search):
    steps = [
        step("search_wikidata", query="Riemannian geometry"),
        step("search_wikidata", query="Riemann"),
        step("get_wikidata_entry", qid="Q761383"),
    ]
    # the default: the lookup's query is run by the program before any extract call (a query, not an LM call)
    script = [answer_type("person", "Q5"), *steps]  # nothing was executed
    pred, lm = run(settings, endpoint, search, script, RIEMANN_Q, max_steps=3)
    c = pred.counters
    assert (c["steps"], c["lm_calls"], c["extracts"], c["program_executions"]) == (4, 4, 0, 1)
    assert pred.final_source == "candidate" and answer_ids(pred) == {"Q42299"}
    assert pred.trajectory[-1]["note"] == "from-suggestion" and len(lm.history) == 4
    # without it (no-auto-run): DSPy ReAct's extract predictor (its own prompt, the trajectory read again)
    script = [answer_type("person", "Q5"), *steps, {"sparql": RIEMANN_SPARQL}]
    pred, lm = run(settings, endpoint, search, script, RIEMANN_Q, max_steps=3, variant="no-auto-run")
    c = pred.counters
    assert (c["steps"], c["lm_calls"], c["lm_steps"], c["extracts"]) == (3, 5, 3, 1)
    assert pred.final_source == "extract" and answer_ids(pred) == {"Q42299"}
    assert "The steps are over" in lm.history[4]["messages"][0]["content"]
    # step: one more controller turn, the last turn's prompt with a line after the trajectory
    script = [answer_type("person", "Q5"), *steps, step("execute_sparql", sparql=RIEMANN_SPARQL)]
    pred, lm = run(
        settings, endpoint, search, script, RIEMANN_Q, max_steps=3, final_extract="step", variant="no-auto-run"
    )
    c = pred.counters
    assert (c["steps"], c["lm_calls"], c["lm_steps"], c["extracts"]) == (3, 5, 3, 1)
    assert pred.final_source == "extract" and answer_ids(pred) == {"Q42299"}
    last_turn, final = lm.history[3]["messages"], lm.history[4]["messages"]
    assert final[:-1] == last_turn[:-1]  # same system message (and demos): a local model reuses them
    trajectory = field(user_part(lm, 4), "trajectory")
    assert trajectory.endswith(FINAL_STEP) and trajectory.startswith(field(user_part(lm, 3), "trajectory"))
    assert "Step 3" in trajectory and "get_wikidata_entry" in trajectory  # the last turn's step is shown before it
    # a final step that chooses another tool gives no query: the last execution (none here) stays
    script = [answer_type("person", "Q5"), *steps, step("search_wikidata", query="Riemann")]
    pred, _ = run(
        settings, endpoint, search, script, RIEMANN_Q, max_steps=3, final_extract="step", variant="no-auto-run"
    )
    assert pred.final_source is None and pred.counters["extracts"] == 1
    assert any("final step chose search_wikidata" in n for n in pred.notes)
    # none: no LM call after the steps
    pred, lm = run(
        settings,
        endpoint,
        search,
        [answer_type("person", "Q5"), *steps],
        RIEMANN_Q,
        max_steps=3,
        final_extract="none",
        variant="no-auto-run",
    )
    assert len(lm.history) == 4 and pred.counters["extracts"] == 0 and pred.final_source is None


def test_an_extracted_select_for_a_count_question_is_counted(settings, endpoint, search):
    """The extract call's query was run by no step: the program runs it to see whether its values are to be
    counted, as for a query the model executed."""
    question = "How many children did Queen Victoria have?"
    select = "SELECT ?c WHERE { wd:Q9439 wdt:P40 ?c }"
    steps = [
        step("search_wikidata", query="Queen Victoria"),
        step("get_wikidata_entry", qid="Q9439"),
        step("search_wikidata", query="Victoria"),
    ]  # "how many": no answer-type call
    pred, _ = run(
        settings, endpoint, search, [*steps, {"sparql": select}], question, max_steps=3, variant="no-auto-run"
    )
    assert pred.query_form == "COUNT" and pred.counters["extracts"] == 1
    assert pred.final_source == "extract+rewritten" and pred.rewritten_from == select
    assert pred.sparql.startswith("SELECT (COUNT(DISTINCT ?c) AS ?count)")
    assert pred.answers.rows and int(pred.answers.rows[0]["count"].value) > 1
    # a stored number is the answer: an extracted query of numbers is left as it is
    numbers = "SELECT ?n WHERE { wd:Q16695 wdt:P1082 ?n }"  # a population: one stored number
    pred, _ = run(
        settings, endpoint, search, [*steps, {"sparql": numbers}], question, max_steps=3, variant="no-auto-run"
    )
    assert pred.final_source == "extract" and pred.sparql == numbers and pred.rewritten_from is None
    assert pred.answers.rows[0]["n"].value == "1558"
    # the program ran it once, to decide the form; the prediction's answers are that result, not a second run
    recording = _Recording(endpoint)
    run(settings, recording, search, [*steps, {"sparql": numbers}], question, max_steps=3, variant="no-auto-run")
    assert recording.sent.count(numbers) == 1


class _Recording:
    """An endpoint that records the queries sent through `query`."""

    def __init__(self, inner):
        self._inner, self.sent = inner, []

    def query(self, sparql, *args, **kwargs):
        self.sent.append(sparql)
        return self._inner.query(sparql, *args, **kwargs)

    def __getattr__(self, name):
        return getattr(self._inner, name)


def test_prefill_extract_begins_the_reply_in_the_controller_prompt(settings, endpoint, search):
    plan = [
        ("search_wikidata", {"query": "Riemannian geometry"}),
        ("search_wikidata", {"query": "Riemann"}),
        ("get_wikidata_entry", {"qid": "Q761383"}),
        ("execute_sparql", {"sparql": RIEMANN_SPARQL}),
    ]
    types = {RIEMANN_Q: ("person", "Q5")}
    # an LM that continues a begun reply (the local backend) gets `auto` = prefill
    lm = ScriptedLM({RIEMANN_Q: plan}, types, continues_replies=True)
    pred, lm = run(settings, endpoint, search, None, RIEMANN_Q, lm=lm, max_steps=3, variant="no-auto-run")
    c = pred.counters
    assert (c["steps"], c["lm_calls"], c["lm_steps"], c["extracts"]) == (3, 5, 3, 1)
    assert pred.final_source == "extract" and answer_ids(pred) == {"Q42299"}
    last_turn, final = lm.history[3]["messages"], lm.history[4]["messages"]
    assert final[-1] == {"role": "assistant", "content": FINAL_REPLY}  # the reply is begun up to the query
    assert final[:-2] == last_turn[:-1]  # the controller's own system message and demos: a local model reuses them
    assert field(final[-2]["content"], "trajectory").endswith(FINAL_STEP)
    assert not str(lm.history[4]["outputs"][0]).lstrip().startswith("[[")  # the model only continued it
    # an LM that answers a begun reply anew is read as that reply; one that picks another tool gives no query
    plan[3] = ("search_wikidata", {"query": "Riemann"})
    pred, lm = run(
        settings,
        endpoint,
        search,
        None,
        RIEMANN_Q,
        lm=ScriptedLM({RIEMANN_Q: plan}, types),
        max_steps=3,
        final_extract="prefill",
        variant="no-auto-run",
    )
    assert lm.history[4]["messages"][-1]["role"] == "assistant" and pred.final_source is None
    assert any("final step chose search_wikidata" in n for n in pred.notes)
    # a served LM (no `continues_replies`) gets `auto` = the extract predictor
    pred, lm = run(
        settings,
        endpoint,
        search,
        None,
        RIEMANN_Q,
        lm=ScriptedLM({RIEMANN_Q: plan}, types),
        max_steps=3,
        variant="no-auto-run",
    )
    assert "The steps are over" in lm.history[4]["messages"][0]["content"]
    assert lm.history[4]["messages"][-1]["role"] == "user"


def test_invented_tools_end_the_loop_after_three_in_a_row(settings, endpoint, search):
    invented = step("lookup_everything", query="Riemann")
    script = [
        answer_type("person", "Q5"),
        invented,
        step("get_wikidata_entry"),
        invented,
        step("execute_sparql", sparql=RIEMANN_SPARQL),
    ]  # never asked for: nothing was learnt to extract from
    pred, lm = run(settings, endpoint, search, script, RIEMANN_Q, max_steps=10)
    assert [s["note"] for s in pred.trajectory] == ["unknown-tool", "bad-args", "unknown-tool"]
    assert any("3 invalid actions in a row" in n for n in pred.notes)
    assert pred.final_source is None and len(lm.history) == 4 and pred.counters["extracts"] == 0
    # a valid action in between starts the count again
    script = [
        answer_type("person", "Q5"),
        invented,
        invented,
        step("search_wikidata", query="Riemann"),
        invented,
        step("execute_sparql", sparql=RIEMANN_SPARQL),
        step("stop"),
    ]
    pred, _ = run(settings, endpoint, search, script, RIEMANN_Q, max_steps=10)
    assert [s["tool_name"] for s in pred.trajectory][-2:] == ["execute_sparql", "stop"]
    assert pred.final_source == "stop" and answer_ids(pred) == {"Q42299"}
    # so does a stop, even one the loop turns down (nothing executed yet)
    script = [
        answer_type("person", "Q5"),
        invented,
        invented,
        step("stop"),
        invented,
        step("execute_sparql", sparql=RIEMANN_SPARQL),
        step("stop"),
    ]
    pred, _ = run(settings, endpoint, search, script, RIEMANN_Q, max_steps=10)
    assert pred.final_source == "stop" and answer_ids(pred) == {"Q42299"}


def test_step_limit_uses_last_nonempty_execution(settings, endpoint, search):
    script = [
        answer_type("person", "Q5"),
        step("execute_sparql", sparql=RIEMANN_SPARQL),
        step("execute_sparql", sparql="SELECT ?x WHERE { wd:Q761383 wdt:P19 ?x }"),  # empty / blocked
    ]
    pred, lm = run(settings, endpoint, search, script, RIEMANN_Q, max_steps=2)
    assert pred.final_source == "last-nonempty" and pred.sparql == RIEMANN_SPARQL
    assert pred.counters["lm_calls"] == 3  # no extract call needed


def test_lm_running_dry_never_raises(settings, endpoint, search):
    pred, _ = run(settings, endpoint, search, [answer_type("person", "Q5")], RIEMANN_Q)
    assert pred.sparql == "" and pred.final_status == "none" and pred.answers is None
    assert pred.counters["unparsable"] == 3  # three unreadable turns in a row end the loop
    assert any("repeated unreadable replies" in n for n in pred.notes)
    # the answer type and the first turn's JSONAdapter retry take the two spare calls; the later turns are not
    # retried (the bound: LM calls <= controller turns + 2); no extract call
    assert pred.counters["lm_calls"] == 1 + 2 + 1 + 1 == pred.counters["lm_steps"] + 2


def test_context_budget_truncates_old_observations(settings, endpoint, search):
    script = [answer_type("person", "Q5")]
    script += [step("get_wikidata_entry", qid=q) for q in ("Q17738", "Q462", "Q761383", "Q9439", "Q190076", "Q17738")]
    script += [step("execute_sparql", sparql=RIEMANN_SPARQL), step("stop")]
    pred, lm = run(settings, endpoint, search, script, RIEMANN_Q, context_window=3200, max_tokens=256)
    assert answer_ids(pred) == {"Q42299"}
    budget_chars = (3200 - 256) * 3  # the prompt budget: context window minus the reply, ~3 characters a token
    for entry in lm.history:
        assert sum(len(str(m["content"])) for m in entry["messages"]) <= budget_chars
    trajectory = field(user_part(lm, len(lm.history) - 1), "trajectory")
    first_obs = pred.trajectory[0]["observation"]
    assert len(first_obs) > 1000 and first_obs not in trajectory  # the oldest observation was summarised ...
    assert "Step 1\nThought" in trajectory and "Types: film (Q11424)" in trajectory  # ... to its first line
    assert "Bernhard Riemann (Q42299)" in trajectory  # the latest observation stays whole


class OverflowingLM(DummyLM):
    """Raises the context-window error whenever the prompt is longer than `limit` characters."""

    def __init__(self, answers, limit):
        super().__init__(answers)
        self.limit = limit
        self.overflows = 0

    def forward(self, prompt=None, messages=None, **kwargs):
        size = sum(len(str(m.get("content"))) for m in messages or [])
        if size > self.limit:
            self.overflows += 1
            raise ContextWindowExceededError(message=f"prompt of {size} characters")
        return super().forward(prompt=prompt, messages=messages, **kwargs)


@pytest.mark.filterwarnings("ignore:Implementing custom LMs through BaseLM.forward")
def test_context_overflow_never_kills_the_question(settings, endpoint, search):
    script = [answer_type("person", "Q5")]
    script += [step("get_wikidata_entry", qid=q) for q in ("Q17738", "Q462", "Q9439")]
    script += [step("execute_sparql", sparql=RIEMANN_SPARQL), step("stop")]
    lm = OverflowingLM(script, limit=9800)
    pred, _ = run(settings, endpoint, search, None, RIEMANN_Q, lm=lm, context_window=32000)
    assert lm.overflows >= 1
    assert pred.counters["overflows"] >= 1
    assert pred.error is None and answer_ids(pred) == {"Q42299"}


# --- ablations: what the controller sees ------------------------------------------------------------------------


def _two_step(settings, endpoint, search, variant):
    script = [] if variant in ("no-answer-type", "spinach") else [answer_type("person", "Q5")]
    script += [step("get_wikidata_entry", qid="Q462")]
    if variant == "spinach":
        script += [{"relevant_pids": ["P57", "P170"]}]  # SPINACH prunes every neighbourhood with the LM
    script += [step("execute_sparql", sparql="SELECT ?x WHERE { wd:Q17738 wdt:P19 ?x }"), step("stop")]
    pred, lm = run(settings, endpoint, search, script, "Who directed Star Wars?", variant=variant)
    return pred, lm, prompts(lm)


def test_each_ablation_changes_what_the_controller_sees(settings, endpoint, search):
    seen = {
        v: _two_step(settings, endpoint, search, v)
        for v in ("full", "no-type-filter", "no-type-state", "no-answer-type", "spinach")
    }
    full_pred, full_lm, full_prompts = seen["full"]
    full_step2 = user_part(full_lm, 2)
    assert "Schema-aware property selection" in full_prompts[1]
    assert "removed" in full_pred.trajectory[0]["observation"]  # type filter on
    assert full_pred.trajectory[1]["observation"].startswith("[BLOCKED]")  # conflict check on
    assert "media franchise" in field(full_step2, "type_context")

    # no-type-filter: nothing removed, no [BLOCKED]
    pred, lm, ps = seen["no-type-filter"]
    assert "removed" not in pred.trajectory[0]["observation"]
    assert "director (P57)" in pred.trajectory[0]["observation"]
    assert not pred.trajectory[1]["observation"].startswith("[BLOCKED]")
    assert user_part(lm, 2) != full_step2

    # no-type-state: no entity types and no knowledge log in the controller's inputs
    pred, lm, ps = seen["no-type-state"]
    assert "media franchise" not in field(user_part(lm, 2), "type_context")
    assert field(user_part(lm, 2), "knowledge_log") == "(not kept in this configuration)"

    # no-answer-type: no answer-type call, the type is left open; the form comes from the question's wording
    pred, lm, ps = seen["no-answer-type"]
    assert "answer_type_label" not in ps[0]
    assert pred.answer_type == "" and pred.query_form == "SELECT"
    assert field(user_part(lm, 0), "answer_type") == "unknown"
    assert field(user_part(lm, 0), "query_form") == QUERY_FORM_GUIDE["SELECT"]
    assert "★" not in pred.trajectory[0]["observation"]  # lookups are not ranked by an answer type

    # spinach: the SPINACH controller (no schema guidance, no type context), LM pruning per lookup
    pred, lm, ps = seen["spinach"]
    assert "Schema-aware property selection" not in ps[0]
    assert "type_context" not in ps[0] and "knowledge_log" not in ps[0]
    assert "relevant_pids" in ps[1]  # the pruning call
    assert pred.counters["prunes"] == 1 and pred.counters["lm_calls"] == 4
    assert "domain:" not in pred.trajectory[0]["observation"]  # no schema annotations


# --- demos, threads, save/load -------------------------------------------------------------------------------------

POOL = [
    {
        "question": "After whom is the Poincaré conjecture named?",
        "answer_type": "person (Q5)",
        "steps": [
            {
                "thought": "look it up",
                "tool_name": "search_wikidata",
                "tool_args": {"query": "Poincaré conjecture"},
                "observation": "- Q208416 Poincaré conjecture",
            },
            {
                "thought": "namesake",
                "tool_name": "execute_sparql",
                "tool_args": {"sparql": "SELECT ?x WHERE { wd:Q208416 wdt:P138 ?x }"},
                "observation": "Q81082",
            },
        ],
    },
    {
        "question": "Which river flows through Vienna?",
        "steps": [
            {
                "thought": "t",
                "tool_name": "execute_sparql",
                "tool_args": {"sparql": "SELECT ?r WHERE { ?r wdt:P31 wd:Q4022 }"},
                "observation": "...",
            }
        ],
    },
]


def test_demos_are_chosen_per_question_and_not_stored(settings, endpoint, search):
    s = settings.model_copy(update={"demos": 1, "demo_anchors": 0})
    program = SagaProgram(s, endpoint, search, demo_pool=POOL)
    lm = DummyLM([answer_type("person", "Q5"), step("execute_sparql", sparql=RIEMANN_SPARQL), step("stop")])
    with dspy.context(lm=lm):
        pred = program(question=RIEMANN_Q)
    step_prompt = prompts(lm)[1]
    assert "Poincaré conjecture" in step_prompt and "Vienna" not in step_prompt
    assert program.react.react.demos == []  # per call only
    assert answer_ids(pred) == {"Q42299"}


def test_a_controller_shown_no_demonstration_reads_an_example_of_the_tool_sequence(settings, endpoint, search):
    example = 'For example, for "Where was Douglas Adams born?": search_wikidata({"query": "Douglas Adams"})'
    script = [answer_type("person", "Q5"), step("execute_sparql", sparql=RIEMANN_SPARQL), step("stop")]
    pred, lm = run(settings, endpoint, search, script, RIEMANN_Q)
    system = str(lm.history[1]["messages"][0]["content"])
    assert example in system and system.index(example) > system.index("{} for stop.")
    assert answer_ids(pred) == {"Q42299"}
    # a controller shown demonstrations reads the instructions without it
    program = SagaProgram(settings.model_copy(update={"demos": 1, "demo_anchors": 0}), endpoint, search, demo_pool=POOL)
    lm = DummyLM(script)
    with dspy.context(lm=lm):
        program(question=RIEMANN_Q)
    assert "Poincaré conjecture" in prompts(lm)[1] and "Douglas Adams" not in prompts(lm)[1]


def test_threads_count_their_own_lm_calls(settings, endpoint, search):
    program = SagaProgram(settings.model_copy(update={"demos": 0}), endpoint, search)
    scripts = {
        "a": [answer_type("person", "Q5"), step("execute_sparql", sparql=RIEMANN_SPARQL), step("stop")],
        "b": [
            answer_type("person", "Q5"),
            step("search_wikidata", query="Riemann"),
            step("search_wikidata", query="geometry"),
            step("execute_sparql", sparql=RIEMANN_SPARQL),
            step("stop"),
        ],
    }
    results = {}

    def worker(name):
        lm = DummyLM(scripts[name])
        with dspy.context(lm=lm):
            results[name] = program(question=RIEMANN_Q)

    threads = [threading.Thread(target=worker, args=(n,)) for n in scripts for _ in range(1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results["a"].counters["lm_calls"] == 3 and results["a"].counters["searches"] == 0
    assert results["b"].counters["lm_calls"] == 5 and results["b"].counters["searches"] == 2
    assert answer_ids(results["a"]) == answer_ids(results["b"]) == {"Q42299"}


def test_save_and_load(settings, endpoint, search, tmp_path):
    s = settings.model_copy(update={"demos": 0})
    program = SagaProgram(s, endpoint, search)
    demo = dspy.Example(
        question="Q?",
        answer_type="x",
        query_form="SELECT",
        type_context="",
        knowledge_log="",
        trajectory="(no steps yet)",
        next_thought="t",
        next_tool_name="stop",
        next_tool_args="{}",
    ).with_inputs("question")
    program.react.react.demos = [demo]
    program.react.react.signature = program.react.react.signature.with_instructions("CUSTOM INSTRUCTIONS")
    path = tmp_path / "program.json"
    program.save(str(path))
    loaded = SagaProgram.load(path, settings=s, endpoint=endpoint, search=search)
    assert isinstance(loaded, SagaProgram)
    assert loaded.react.react.signature.instructions == "CUSTOM INSTRUCTIONS"
    assert loaded.react.react.demos[0]["next_tool_name"] == "stop"
    again = SagaProgram(s, endpoint, search).load(str(path))  # the instance form works too
    assert again.react.react.signature.instructions == "CUSTOM INSTRUCTIONS"
    via_settings = SagaProgram(s.model_copy(update={"program": path}), endpoint, search)
    assert via_settings.react.react.signature.instructions == "CUSTOM INSTRUCTIONS"


def test_forward_never_raises(settings, endpoint, search, monkeypatch):
    from saga_dspy.agent import program as program_module

    def broken(*args, **kwargs):
        raise RuntimeError("grounding is down")

    monkeypatch.setattr(program_module, "QuestionContext", broken)
    pred, _ = run(settings, endpoint, search, [answer_type("person", "Q5")], RIEMANN_Q)
    assert pred.error and "grounding is down" in pred.error
    assert pred.sparql == "" and pred.answers is None and pred.counters["lm_calls"] == 1


# --- opt-in: the real local model -------------------------------------------------------------------------------------


@pytest.mark.llm
@pytest.mark.skipif(os.environ.get("SAGA_LLM_TESTS") != "1", reason="set SAGA_LLM_TESTS=1 to run the local model")
def test_real_local_model_end_to_end(settings, endpoint, search):
    from saga_dspy.lm import build_lm

    s = settings.model_copy(update={"max_steps": 6, "lm": "local"})
    program = SagaProgram(s, endpoint, search, lm=build_lm(s))
    pred = program(question=RIEMANN_Q)
    assert pred.error is None
    assert pred.counters["steps"] >= 1 and pred.counters["lm_calls"] >= 2
    assert pred.counters["prompt_tokens"] > 0 and pred.counters["completion_tokens"] > 0
    assert pred.answer_type_label  # some answer type came back


def test_check_answer_gives_one_bounded_second_chance(settings, endpoint, search):
    wrong = "SELECT ?x WHERE { wd:Q761383 wdt:P31 ?x }"
    script = [
        answer_type("person", "Q5"),
        step("execute_sparql", sparql=wrong),
        step("stop"),
        {"complete": False, "problem": "it returns the class of the subject, not its namesake"},  # CheckAnswer
        step("execute_sparql", "use named after", sparql=RIEMANN_SPARQL),
        step("stop"),  # checked once only: accepted
    ]
    pred, lm = run(settings, endpoint, search, script, RIEMANN_Q, check_answer=True, max_steps=2)
    assert "namesake" in pred.trajectory[1]["observation"] and pred.trajectory[1]["note"] == "rejected"
    assert "namesake" in user_part(lm, 4)  # the controller read the verdict
    assert pred.sparql == RIEMANN_SPARQL and pred.counters["lm_calls"] == len(script)
    assert pred.counters["steps"] == 4  # beyond max_steps=2: the check's bounded extra steps
    off, _ = run(settings, endpoint, search, script[:3], RIEMANN_Q, max_steps=2)
    assert off.sparql == wrong and off.counters["lm_calls"] == 3  # off by default: no check call


def test_stop_on_an_empty_final_query_is_sent_back_once(settings, endpoint, search):
    empty = "SELECT ?x WHERE { wd:Q761383 wdt:P170 ?x }"
    script = [
        answer_type("person", "Q5"),
        step("execute_sparql", sparql=empty),
        step("stop"),
        step("execute_sparql", "try named after", sparql=RIEMANN_SPARQL),
        step("stop"),
    ]
    pred, lm = run(settings, endpoint, search, script, RIEMANN_Q)
    assert pred.trajectory[0]["observation"].startswith(("[WARNING]", "[BLOCKED]"))
    assert pred.trajectory[1]["note"] == "rejected" and "returns no result" in pred.trajectory[1]["observation"]
    assert pred.sparql == RIEMANN_SPARQL and answer_ids(pred) == {"Q42299"}
    # once only: a second stop on an empty query is accepted (and reported as empty)
    script = [answer_type("person", "Q5"), step("execute_sparql", sparql=empty), step("stop"), step("stop")]
    pred, _ = run(settings, endpoint, search, script, RIEMANN_Q)
    assert pred.sparql == empty and pred.final_status == "empty" and pred.answers is not None


def test_a_repeated_action_is_not_run_again(settings, endpoint, search):
    unknown = step("search_wikidata", query="xqzv wrrk")  # no hits: nothing to suggest
    script = [answer_type("person", "Q5"), unknown, unknown, step("execute_sparql", sparql=RIEMANN_SPARQL)]
    pred, lm = run(settings, endpoint, search, script + [step("stop")], RIEMANN_Q)
    assert pred.trajectory[1]["note"] == "repeated" and "[REPEATED]" in pred.trajectory[1]["observation"]
    assert pred.counters["searches"] == 1 and pred.counters["repeated"] == 1 and pred.counters["assisted"] == 0
    assert answer_ids(pred) == {"Q42299"}
    # a controller stuck on one action with nothing left to suggest is stopped after two repeats in a row;
    # the extract call writes the query
    script = [answer_type("person", "Q5")] + [unknown] * 3 + [{"sparql": RIEMANN_SPARQL}]
    pred, lm = run(settings, endpoint, search, script, RIEMANN_Q)
    assert pred.counters["steps"] == 3 and pred.counters["repeated"] == 2
    assert any("repeated actions" in n for n in pred.notes)
    assert pred.final_source == "extract" and answer_ids(pred) == {"Q42299"}


def test_a_repeated_search_looks_up_the_hit_its_next_line_names(settings, endpoint, search):
    found = step("search_wikidata", query="Riemannian geometry")
    script = [answer_type("person", "Q5"), found, found, step("execute_sparql", sparql=RIEMANN_SPARQL), step("stop")]
    pred, _ = run(settings, endpoint, search, script, RIEMANN_Q)
    assert 'Next: get_wikidata_entry({"qid": "Q761383"})' in pred.trajectory[0]["observation"]
    lookup = pred.trajectory[1]
    assert (lookup["tool_name"], lookup["tool_args"], lookup["note"]) == (
        "get_wikidata_entry",
        {"qid": "Q761383"},
        "from-repeat",
    )
    assert lookup["observation"].startswith("Riemannian geometry (Q761383)")
    assert pred.counters["assisted"] == 1 and pred.counters["lookups"] == 1 and pred.counters["repeated"] == 0
    assert answer_ids(pred) == {"Q42299"}
    # repeated again: the named hit is looked up already, so the lookup's proposed query runs; a third time
    # nothing is left to suggest and the episode ends on repeats
    pred, _ = run(settings, endpoint, search, [answer_type("person", "Q5")] + [found] * 6, RIEMANN_Q)
    assert [(s["tool_name"], s["note"]) for s in pred.trajectory[:5]] == [
        ("search_wikidata", ""),
        ("get_wikidata_entry", "from-repeat"),
        ("execute_sparql", "from-repeat"),
        ("search_wikidata", "repeated"),
        ("search_wikidata", "repeated"),
    ]
    assert pred.counters["assisted"] == 2 and any("repeated actions" in n for n in pred.notes)
    assert pred.final_source == "last-nonempty" and answer_ids(pred) == {"Q42299"}
    # switched off with the other repeat assists
    pred, _ = run(settings, endpoint, search, script, RIEMANN_Q, variant="no-repeat-assist")
    assert pred.trajectory[1]["note"] == "repeated" and pred.counters["lookups"] == 0


def test_an_extracted_query_with_an_unseen_unknown_id_is_repaired_or_dropped(settings, endpoint, search):
    invented = "SELECT ?x WHERE { wd:Q761383 wdt:P930933 ?x }"  # P930933: no such property
    script = [
        answer_type("person", "Q5"),
        step("search_wikidata", query="Riemannian geometry"),
        step("get_wikidata_entry", qid="Q761383"),
        {"sparql": invented},
    ]
    # the lookup's candidate query (not run at the end without the auto-run) replaces it
    pred, _ = run(settings, endpoint, search, script, RIEMANN_Q, max_steps=2, variant="no-auto-run")
    assert pred.final_source == "repaired" and "P930933" not in pred.sparql and "wdt:P138" in pred.sparql
    assert answer_ids(pred) == {"Q42299"}
    assert any("P930933" in n and "candidate" in n for n in pred.notes)
    # with no lookup there is no candidate: the answer is left empty, and a note says why
    script = [answer_type("person", "Q5"), step("search_wikidata", query="Riemannian geometry"), {"sparql": invented}]
    pred, _ = run(settings, endpoint, search, script, RIEMANN_Q, max_steps=1)
    assert pred.sparql == "" and pred.final_source is None and pred.answers is None
    assert any("P930933" in n and "no final query" in n for n in pred.notes)
    # an id the observations never showed but the graph knows is kept (P138 is in the schema)
    script = [answer_type("person", "Q5"), step("search_wikidata", query="Riemannian geometry")]
    pred, _ = run(settings, endpoint, search, script + [{"sparql": RIEMANN_SPARQL}], RIEMANN_Q, max_steps=1)
    assert pred.final_source == "extract" and answer_ids(pred) == {"Q42299"}
    # the SPINACH baseline keeps what its extract wrote
    base = [step("search_wikidata", query="Riemannian geometry"), {"sparql": invented}]
    pred, _ = run(settings, endpoint, search, base, RIEMANN_Q, max_steps=1, variant="spinach")
    assert pred.sparql == invented and pred.final_source == "extract"


def test_a_repeated_lookup_runs_its_proposed_query(settings, endpoint, search):
    lookup = step("get_wikidata_entry", qid="Q761383")
    script = [answer_type("person", "Q5"), lookup, lookup, step("stop")]
    pred, _ = run(settings, endpoint, search, script, RIEMANN_Q)
    proposal = pred.trajectory[1]
    assert proposal["tool_name"] == "execute_sparql" and proposal["note"] == "from-repeat"
    assert "wdt:P138" in proposal["tool_args"]["sparql"] and proposal["observation"].startswith("[OK]")
    assert pred.counters["assisted"] == 1 and pred.counters["program_executions"] == 1
    assert pred.counters["repeated"] == 0 and pred.counters["lookups"] == 1
    assert pred.final_source == "stop" and answer_ids(pred) == {"Q42299"}
    # once executed, the proposal is not run again: a further repeat is a repeat
    script = [answer_type("person", "Q5"), lookup, lookup, lookup, step("stop")]
    pred, _ = run(settings, endpoint, search, script, RIEMANN_Q)
    assert [s["note"] for s in pred.trajectory[1:3]] == ["from-repeat", "repeated"]
    # the program's execution is done like the model's: the model running it again stops with it, no stop call
    script = [
        answer_type("person", "Q5"),
        lookup,
        lookup,
        step("execute_sparql", sparql=proposal["tool_args"]["sparql"]),
    ]
    pred, _ = run(settings, endpoint, search, script, RIEMANN_Q)
    assert [(s["tool_name"], s["note"]) for s in pred.trajectory] == [
        ("get_wikidata_entry", ""),
        ("execute_sparql", "from-repeat"),
        ("stop", ""),
    ]
    assert pred.counters["assisted"] == 2 and pred.counters["lm_calls"] == 4 and pred.final_source == "stop"
    # the ablation and the SPINACH baseline get no help
    pred, _ = run(
        settings,
        endpoint,
        search,
        script[:3] + [step("execute_sparql", sparql=RIEMANN_SPARQL), step("stop")],
        RIEMANN_Q,
        variant="no-repeat-assist",
    )
    assert pred.trajectory[1]["note"] == "repeated" and pred.counters["assisted"] == 0
    base = [lookup, {"relevant_pids": ["P138"]}, lookup, step("execute_sparql", sparql=RIEMANN_SPARQL), step("stop")]
    pred, _ = run(settings, endpoint, search, base, RIEMANN_Q, variant="spinach")
    assert pred.trajectory[1]["note"] == "repeated" and pred.counters["assisted"] == 0


def test_a_successful_query_executed_again_is_taken_as_stop(settings, endpoint, search):
    run_it = step("execute_sparql", sparql=RIEMANN_SPARQL)
    pred, lm = run(settings, endpoint, search, [answer_type("person", "Q5"), run_it, run_it], RIEMANN_Q)
    assert [s["tool_name"] for s in pred.trajectory] == ["execute_sparql", "stop"]
    assert pred.final_source == "stop" and pred.counters["assisted"] == 1 and pred.counters["lm_calls"] == 3
    assert answer_ids(pred) == {"Q42299"}
    # an empty query executed again is no answer: a repeat as before
    empty = step("execute_sparql", sparql="SELECT ?x WHERE { wd:Q761383 wdt:P170 ?x }")
    script = [answer_type("person", "Q5"), empty, empty, run_it, step("stop")]
    pred, _ = run(settings, endpoint, search, script, RIEMANN_Q)
    assert pred.trajectory[1]["note"] == "repeated" and pred.counters["assisted"] == 0


def test_a_query_given_to_stop_is_executed_first(settings, endpoint, search):
    script = [answer_type("person", "Q5"), step("stop", "done", sparql=RIEMANN_SPARQL)]
    pred, _ = run(settings, endpoint, search, script, RIEMANN_Q)
    assert [s["tool_name"] for s in pred.trajectory] == ["execute_sparql", "stop"]
    assert pred.trajectory[0]["note"] == "from-stop" and answer_ids(pred) == {"Q42299"}
    # an argument that is no query is ignored
    script = [
        answer_type("person", "Q5"),
        step("execute_sparql", sparql=RIEMANN_SPARQL),
        step("stop", "done", answer="Bernhard Riemann"),
    ]
    pred, _ = run(settings, endpoint, search, script, RIEMANN_Q)
    assert [s["tool_name"] for s in pred.trajectory] == ["execute_sparql", "stop"]
    assert pred.final_source == "stop"


def test_an_invalid_final_query_is_the_agents_failure_not_the_programs(settings, endpoint, search):
    script = [
        answer_type("person", "Q5"),
        step("search_wikidata", query="Riemannian geometry"),
        {"sparql": "SELECT ?x WHERE { wd:Q761383 wdt:P138 ?x } UNION"},
    ]  # extract writes garbage
    pred, _ = run(settings, endpoint, search, script, RIEMANN_Q, max_steps=1)
    assert pred.final_source == "extract" and pred.final_status == "error"
    assert pred.final_error.startswith("syntax") and pred.error is None and pred.answers is None


def test_an_adapter_marker_inside_the_extracted_query_is_dropped(settings, endpoint, search):
    script = [
        answer_type("person", "Q5"),
        step("search_wikidata", query="Riemannian geometry"),
        {"sparql": "SELECT ?x WHERE { wd:Q761383 wdt:P138 ?x } [[ ## completed ## ]]"},
    ]
    pred, _ = run(settings, endpoint, search, script, RIEMANN_Q, max_steps=1)
    assert pred.final_source == "extract" and pred.final_status == "ok"
    assert pred.sparql.endswith("?x }") and pred.final_error is None


def test_a_stop_right_after_a_lookup_runs_the_lookups_suggestion(settings, endpoint, search):
    script = [
        answer_type("person", "Q5"),
        step("search_wikidata", query="Riemannian geometry"),
        step("get_wikidata_entry", qid="Q761383"),
        step("stop"),
    ]
    pred, _ = run(settings, endpoint, search, script, RIEMANN_Q)
    names = [(s["tool_name"], s.get("note")) for s in pred.trajectory]
    assert names[2:] == [("execute_sparql", "from-suggestion"), ("stop", "")]
    assert pred.sparql == "SELECT DISTINCT ?x WHERE { wd:Q761383 wdt:P138 ?x }"
    assert pred.final_status == "ok" and pred.final_source == "stop" and pred.counters["lm_calls"] == 4


MUNICH_Q = "Give me all companies in Munich."
MUNICH_CANDIDATE = "SELECT DISTINCT ?x WHERE { ?x wdt:P159 wd:Q1726 }"  # the lookup proposes nothing (no word matches)


def test_a_stop_with_nothing_executed_runs_the_lookups_best_candidate(settings, endpoint, search):
    script = [step("get_wikidata_entry", qid="Q1726"), step("stop")]  # the answer type comes from the question's cue
    pred, lm = run(settings, endpoint, search, script, MUNICH_Q)
    assert "1. [one-hop" in pred.trajectory[0]["observation"]  # shown to the model, which did not run it
    assert [(s["tool_name"], s.get("note")) for s in pred.trajectory[1:]] == [
        ("execute_sparql", "from-candidate"),
        ("stop", ""),
    ]
    assert pred.sparql == MUNICH_CANDIDATE and pred.final_source == "stop" and pred.final_status == "ok"
    assert pred.final_author["kind"] == "program"  # the program's fallback, whatever the stop's source says
    assert pred.counters["auto_runs"] == 1 and pred.counters["lm_calls"] == len(lm.history) == 2
    off, _ = run(settings, endpoint, search, script + [step("stop")], MUNICH_Q, variant="no-auto-run")
    assert off.trajectory[1]["note"] == "rejected" and not off.sparql


def test_a_yes_no_stop_runs_the_ask_of_the_value_the_question_names(settings, endpoint, search):
    """The pattern alone (Neymar has teams) would answer yes; the candidate asks about the club the question names."""
    script = [step("get_wikidata_entry", qid="Q142794"), step("stop")]  # a yes/no cue: no answer-type call
    pred, _ = run(settings, endpoint, search, script, "Does Neymar play for Real Madrid?")
    assert [(s["tool_name"], s.get("note")) for s in pred.trajectory[1:]] == [
        ("execute_sparql", "from-candidate"),
        ("stop", ""),
    ]
    assert pred.sparql == "ASK WHERE { wd:Q142794 wdt:P54 wd:Q8682 }" and pred.final_status == "ok"
    assert pred.trajectory[1]["observation"].endswith("ASK result: false")


def test_an_episode_that_ends_without_a_result_runs_the_candidate_before_extract(settings, endpoint, search):
    empty = "SELECT DISTINCT ?x WHERE { ?x wdt:P112 wd:Q1726 }"
    script = [
        step("get_wikidata_entry", qid="Q1726"),
        step("execute_sparql", sparql=empty),
        step("search_wikidata", query="company"),
    ]
    pred, lm = run(settings, endpoint, search, script, MUNICH_Q, max_steps=3)
    assert pred.final_source == "candidate" and pred.sparql == MUNICH_CANDIDATE and pred.final_status == "ok"
    assert pred.counters["extracts"] == 0 and len(lm.history) == 3  # no extract call
    assert pred.trajectory[-1]["note"] == "from-candidate"
    # without auto_run: the extract call, as before
    off, lm = run(
        settings, endpoint, search, script + [{"sparql": empty}], MUNICH_Q, max_steps=3, variant="no-auto-run"
    )
    assert off.counters["extracts"] == 1 and off.final_source == "extract" and len(lm.history) == 4


def test_a_stop_before_any_query_without_a_suggestion_is_sent_back(settings, endpoint, search):
    script = [
        answer_type("person", "Q5"),
        step("search_wikidata", query="Riemannian geometry"),
        step("stop"),
        step("execute_sparql", sparql="SELECT DISTINCT ?x WHERE { wd:Q761383 wdt:P138 ?x }"),
        step("stop"),
    ]
    pred, _ = run(settings, endpoint, search, script, RIEMANN_Q)
    assert (
        pred.trajectory[1]["note"] == "rejected"
        and "No query has been executed yet" in pred.trajectory[1]["observation"]
    )
    assert pred.final_status == "ok" and pred.final_source == "stop"


# --- ablation switches: each mechanism on and off (issue 11 §4) ------------------------------------------------------

JOE_Q = "Did Joe Cocker play at the Woodstock festival?"
JOE_SELECT = "SELECT ?x WHERE { wd:Q164815 wdt:P710 ?x }"


def test_query_form_imposition_switch(settings, endpoint, search):
    script = [step("execute_sparql", sparql=JOE_SELECT), step("stop"), step("stop")]
    on, on_lm = run(settings, endpoint, search, script, JOE_Q)
    assert on.trajectory[1]["note"] == "rejected" and "must be an ASK query" in on.trajectory[1]["observation"]
    assert field(user_part(on_lm, 0), "query_form").startswith("ASK")
    off, off_lm = run(settings, endpoint, search, script, JOE_Q, variant="no-query-form")
    assert [s["note"] for s in off.trajectory] == ["", ""]  # the first stop is accepted: no form is held
    assert "not fixed" in field(user_part(off_lm, 0), "query_form")
    # the form is still decided, and the final query's head still rewritten (a switch of its own)
    assert off.query_form == "ASK" and off.final_source == "stop+rewritten" and off.rewritten_from == JOE_SELECT


def test_form_rewrite_switch(settings, endpoint, search):
    script = [step("execute_sparql", sparql=JOE_SELECT), step("stop"), step("stop")]
    on, _ = run(settings, endpoint, search, script, JOE_Q)
    assert on.sparql == "ASK WHERE { wd:Q164815 wdt:P710 ?x }" and on.rewritten_from == JOE_SELECT
    off, _ = run(settings, endpoint, search, script, JOE_Q, variant="no-form-rewrite")
    assert off.trajectory[1]["note"] == "rejected"  # the form is still imposed at stop ...
    assert off.sparql == JOE_SELECT and off.rewritten_from is None and off.final_source == "stop"  # ... not rewritten
    assert isinstance(off.answers, SelectResult)
    assert any("not rewritten" in n for n in off.notes)


def test_auto_run_switch(settings, endpoint, search):
    script = [
        answer_type("person", "Q5"),
        step("get_wikidata_entry", qid="Q761383"),
        step("stop"),
        step("execute_sparql", sparql=RIEMANN_SPARQL),
        step("stop"),
    ]
    on, _ = run(settings, endpoint, search, script, RIEMANN_Q)
    assert [s.get("note") for s in on.trajectory[1:]] == ["from-suggestion", ""]
    assert on.counters["auto_runs"] == 1 == on.counters["program_executions"]
    off, _ = run(settings, endpoint, search, script, RIEMANN_Q, variant="no-auto-run")
    assert (
        off.trajectory[1]["note"] == "rejected" and "No query has been executed yet" in off.trajectory[1]["observation"]
    )
    assert "wdt:P138" in off.trajectory[1]["observation"]  # the proposal is still shown, not run
    assert off.counters["auto_runs"] == 0 and off.counters["executions"] == 1  # the controller's own
    assert off.sparql == RIEMANN_SPARQL and answer_ids(off) == {"Q42299"}


def test_no_answer_type_removes_the_prior_only(settings, endpoint, search):
    script = [step("execute_sparql", sparql=JOE_SELECT), step("stop"), step("stop")]
    pred, lm = run(settings, endpoint, search, script, JOE_Q, variant="no-answer-type")
    assert pred.counters["answer_type_calls"] == 0 and pred.answer_type == ""
    assert "answer_type_label" not in prompts(lm)[0]
    # the query form is still imposed (from the question's wording), and the final query rewritten
    assert pred.query_form == "ASK" and pred.trajectory[1]["note"] == "rejected"
    assert pred.final_source == "stop+rewritten" and isinstance(pred.answers, AskResult)
    full, full_lm = run(settings, endpoint, search, script, JOE_Q)
    # a yes/no question settles its answer type without the LM: no call, the same type
    assert full.counters["answer_type_calls"] == 0 and full.answer_type == "boolean"
    assert "answer_type_label" not in prompts(full_lm)[0] and "boolean" in field(user_part(full_lm, 0), "answer_type")


def test_the_answer_type_call_is_made_only_when_the_question_does_not_settle_it(settings, endpoint, search):
    # "who": the LM may name a more specific class than the cue's person; it is asked, and its answer kept
    pred, lm = run(
        settings,
        endpoint,
        search,
        [answer_type("musician", "Q639669"), step("stop")],
        "Who played at the Woodstock festival?",
    )
    assert pred.counters["answer_type_calls"] == 1 and "answer_type_label" in prompts(lm)[0]
    assert pred.answer_type == "musician (Q639669)"
    # a head noun the schema knows settles it: no call, whatever the LM would have said
    for question, expected in (
        ("Which river flows through Berlin?", "(Q4022)"),
        ("When was Bach born?", "date"),
        ("How tall is the Eiffel Tower?", "quantity"),
    ):
        pred, lm = run(settings, endpoint, search, [step("stop")], question)
        assert pred.counters["answer_type_calls"] == 0 and expected in pred.answer_type, (question, pred.answer_type)
        assert all("answer_type_label" not in p for p in prompts(lm))


def test_spinach_has_none_of_the_stop_remedies(settings, endpoint, search):
    script = [step("execute_sparql", sparql=JOE_SELECT), step("stop")]
    pred, _ = run(settings, endpoint, search, script, JOE_Q, variant="spinach")
    assert pred.query_form == "ANY" and pred.sparql == JOE_SELECT and pred.rewritten_from is None
    assert [s["note"] for s in pred.trajectory] == ["", ""]


# --- counted, not assumed: LM calls <= controller turns + 2 (issue 15) ---------------------------------------------


UNTYPED = ("Q23558", "Q117396")  # entities of the sample with properties but no P31 / P279: the prune fallback


def test_lm_calls_stay_within_steps_plus_two(settings, endpoint, search):
    script = [
        answer_type("thing"),
        step("get_wikidata_entry", qid=UNTYPED[0]),
        {"relevant_pids": ["P57"]},
        step("get_wikidata_entry", qid=UNTYPED[1]),
    ]  # a second prune and an extract would make steps + 4
    pred, lm = run(settings, endpoint, search, script, "What is it?", max_steps=2)
    c = pred.counters
    assert (
        "Type filter skipped" in pred.trajectory[0]["observation"]
        and "pruned for relevance" in pred.trajectory[0]["observation"]
    )
    assert "PruneSkipped" in pred.trajectory[1]["observation"]  # the whole neighbourhood, no LM call
    assert (c["answer_type_calls"], c["prunes"], c["extracts"], c["lm_steps"]) == (1, 1, 0, 2)
    assert c["lm_calls"] == len(lm.history) == 4 <= c["lm_steps"] + 2 <= c["steps"] + 2
    assert any("extract skipped" in n for n in pred.notes)
    # with a spare call left the extract is made
    pred, lm = run(
        settings,
        endpoint,
        search,
        [answer_type("thing"), step("search_wikidata", query="Riemann"), {"sparql": RIEMANN_SPARQL}],
        RIEMANN_Q,
        max_steps=1,
    )
    assert pred.counters["extracts"] == 1 and pred.counters["lm_calls"] == 3 == pred.counters["lm_steps"] + 2


def test_spinach_prunes_every_lookup_outside_the_bound(settings, endpoint, search):
    script = [
        step("get_wikidata_entry", qid="Q462"),
        {"relevant_pids": ["P57"]},
        step("get_wikidata_entry", qid="Q17738"),
        {"relevant_pids": ["P57"]},
        step("get_wikidata_entry", qid="Q761383"),
        {"relevant_pids": ["P138"]},
        step("execute_sparql", sparql=RIEMANN_SPARQL),
        step("stop"),
    ]
    pred, lm = run(settings, endpoint, search, script, RIEMANN_Q, variant="spinach")
    assert pred.counters["prunes"] == 3 and pred.counters["lm_calls"] == len(lm.history) == 8
    assert answer_ids(pred) == {"Q42299"}


def test_prompt_tokens_evaluated_and_reused_are_counted(settings, endpoint, search):
    from tests.helpers.scripted_lm import ScriptedLM

    plans = {RIEMANN_Q: [("execute_sparql", {"sparql": RIEMANN_SPARQL}), ("stop", {})]}
    pred, _ = run(settings, endpoint, search, None, RIEMANN_Q, lm=ScriptedLM(plans))
    c = pred.counters
    assert c["prompt_tokens"] > 0 and c["prompt_tokens_reused"] == 0  # the usage says nothing of a cache
    assert c["prompt_tokens_evaluated"] == c["prompt_tokens"]
    pred, _ = run(settings, endpoint, search, None, RIEMANN_Q, lm=ScriptedLM(plans, cached_tokens=100))
    c = pred.counters
    assert c["lm_calls"] == 3 and c["prompt_tokens_reused"] == 300
    assert c["prompt_tokens_evaluated"] == c["prompt_tokens"] - 300


def test_measuring_the_prompt_fires_no_callback(settings, endpoint, search):
    """_budget formats each prompt only to measure it: no format span of its own (issue 15)."""
    from dspy.utils.callback import BaseCallback

    class Formats(BaseCallback):
        def __init__(self):
            self.formats = 0

        def on_adapter_format_start(self, call_id, instance, inputs):
            self.formats += 1

    seen = Formats()
    script = [
        answer_type("person", "Q5"),
        step("search_wikidata", query="Riemannian geometry"),
        step("execute_sparql", sparql=RIEMANN_SPARQL),
        step("stop"),
    ]
    s = settings.model_copy(update={"demos": 0})
    with dspy.context(lm=DummyLM(script), callbacks=[seen]):
        pred = SagaProgram(s, endpoint, search)(question=RIEMANN_Q)
    assert pred.counters["lm_calls"] == 4 and answer_ids(pred) == {"Q42299"}
    assert seen.formats == pred.counters["lm_calls"]  # one format per LM call, none for measuring


def test_the_prompt_is_measured_once_a_question_and_its_growth_counted(settings, endpoint, search, monkeypatch):
    from saga_dspy.agent import react

    measured = []
    real = react._plain_format

    def counting(adapter):
        fmt = real(adapter)

        def wrapped(*args, **kwargs):
            messages = fmt(*args, **kwargs)
            measured.append(sum(len(str(m.get("content") or "")) for m in messages))
            return messages

        return wrapped

    budgets = []
    real_budget = react.SagaReAct._budget

    def recording(self, episode, inputs, predictor, *prompt):
        budgets.append(
            (real_budget(self, episode, inputs, predictor, *prompt), sum(len(str(v)) for v in inputs.values()))
        )
        return budgets[-1][0]

    monkeypatch.setattr(react, "_plain_format", counting)
    monkeypatch.setattr(react.SagaReAct, "_budget", recording)
    script = [
        answer_type("person", "Q5"),
        step("get_wikidata_entry", qid="Q761383"),
        step("execute_sparql", sparql=RIEMANN_SPARQL),
        step("stop"),
    ]
    pred, _ = run(settings, endpoint, search, script, RIEMANN_Q)
    assert answer_ids(pred) == {"Q42299"} and len(budgets) == 3
    assert len(measured) == 1  # formatted once, for the first step only
    # later steps: the inputs grew (the type context, the log), and the room left for the trajectory shrank as much
    (first, size0), (_, size1), (third, size2) = budgets
    assert size2 > size0 and first - third == size2 - size0
