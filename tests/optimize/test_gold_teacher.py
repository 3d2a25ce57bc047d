"""The gold teacher: demos from gold SPARQL run through the real tools on the embedded sample."""

from __future__ import annotations

import json
import re

import pytest
from conftest import REPO, scripted_settings
from helpers.scripted_lm import ScriptedLM


@pytest.fixture(scope="module")
def teach_settings(store_path):
    return scripted_settings("train")


@pytest.fixture(scope="module")
def train_items(teach_settings):
    """QALD-10 train's answerable questions as the split holds them: the teacher is tested on questions an eval run
    of train leaves out as twins of test questions too (the demo pools' own firewall drops those)."""
    from saga_dspy.eval.loading.datasets import load_benchmark
    from saga_dspy.eval.loading.evalset import EvalItem

    rows = load_benchmark("qald10", "train", teach_settings, answerable_only=True)
    return {i.id: i for i in map(EvalItem.from_row, rows)}


def _trace(item, settings, endpoint, search, **kwargs):
    from saga_dspy.optimize.gold_teacher import gold_trace

    kwargs.setdefault("gold", json.loads(item.gold))
    return gold_trace(
        item.question, item.gold_sparql, settings=settings, endpoint=endpoint, search=search, id=item.id, **kwargs
    )


def _find(items, pattern):
    for item in items.values():
        if re.search(pattern, item.question, re.I):
            return item
    pytest.skip(f"no train question matching {pattern!r} on this sample")


def test_constants_and_compact_query():
    from saga_dspy.optimize.gold_teacher import compact_query, entity_constants, property_constants

    raw = (
        "PREFIX wd: <http://www.wikidata.org/entity/> PREFIX wdt: <http://www.wikidata.org/prop/direct/> "
        "PREFIX ex: <http://example.org/> SELECT ?x WHERE { wd:Q42 wdt:P19 ?x . ?x p:P31/ps:P31 wd:Q515 ; "
        "ex:foo ?y . <http://www.wikidata.org/entity/Q42> wdt:P19 ?z }"
    )
    q = compact_query(raw)
    assert q.startswith("PREFIX ex: <http://example.org/>\nSELECT ?x")  # only the prefix not predeclared stays
    assert "PREFIX wd:" not in q
    assert entity_constants(q) == ["Q42", "Q515"]
    assert property_constants(q) == ["P19", "P31"]
    assert compact_query("SELECT ?x WHERE { ?x ?p ?o } # a comment") == "SELECT ?x WHERE { ?x ?p ?o }"


def test_gold_trace_has_real_observations(teach_settings, train_items, endpoint, search):
    item = _find(train_items, r"time zone of Salt Lake City")
    rec = _trace(item, teach_settings, endpoint, search)
    steps = rec["steps"]
    assert [s["tool_name"] for s in steps] == ["search_wikidata", "get_wikidata_entry", "execute_sparql", "stop"]
    assert steps[0]["tool_args"] == {"query": "Salt Lake City"}
    assert "Q23337" in steps[0]["observation"]  # the real search lists the entity
    assert steps[1]["tool_args"] == {"qid": "Q23337"}
    assert "Types:" in steps[1]["observation"] and "P421" in steps[1]["observation"]  # the real entry
    assert steps[2]["tool_args"] == {"sparql": rec["sparql"]} and "PREFIX" not in rec["sparql"]
    assert steps[2]["observation"].startswith("[OK]") and "Mountain Time Zone" in steps[2]["observation"]
    assert steps[3]["observation"].startswith("Stopped.")
    assert rec["query_form"] == "SELECT" and rec["answer_type"] == "time zone (Q12143)"
    # the type context the controller would have seen grows with the lookups
    assert "Q23337" not in steps[0]["type_context"] and "Q23337" in steps[2]["type_context"]
    assert "[ok]" in rec["knowledge_log"]
    assert "located in time zone (P421)" in steps[2]["thought"]


def test_gold_trace_for_a_yes_no_question(teach_settings, endpoint, search):
    from saga_dspy.eval.loading.evalset import load_eval_set

    settings = teach_settings.model_copy(update={"dataset": "qald9plus"})
    items = {i.id: i for i in load_eval_set(settings, progress=False).items}
    item = _find(items, r"^Was Margaret Thatcher a chemist")
    rec = _trace(item, settings, endpoint, search)
    assert rec["query_form"] == "ASK" and rec["answer_type"] == "boolean"
    assert rec["steps"][-2]["tool_name"] == "execute_sparql"
    assert rec["steps"][-2]["observation"].startswith("[OK] ASK result")
    assert "yes/no" in rec["steps"][-2]["thought"]


class _NoSearch:
    def search(self, text, limit=10, kind=None):
        return []


def test_gold_trace_skips_what_would_teach_bad_habits(teach_settings, train_items, endpoint, search):
    from saga_dspy.optimize.gold_teacher import TeacherConfig, TeacherSkip

    item = _find(train_items, r"time zone of Salt Lake City")
    with pytest.raises(TeacherSkip) as err:  # an id the search does not show must not appear from nowhere
        _trace(item, teach_settings, endpoint, _NoSearch())
    assert err.value.reason == "not_found_by_search"
    with pytest.raises(TeacherSkip) as err:
        _trace(item, teach_settings, endpoint, search, config=TeacherConfig(max_entities=0))
    assert err.value.reason == "too_many_entities"
    from saga_dspy.optimize.gold_teacher import gold_trace

    nothing = {"head": {"vars": ["x"]}, "results": {"bindings": []}}
    unknown = "SELECT ?x WHERE { wd:Q23337 wdt:P999999 ?x }"
    with pytest.raises(TeacherSkip) as err:  # a property the agent could not find
        gold_trace("What is nothing?", unknown, settings=teach_settings, endpoint=endpoint, search=search, gold=nothing)
    assert err.value.reason == "property_unlabelled"
    empty = "SELECT ?x WHERE { wd:Q23337 wdt:P421 ?x . ?x wdt:P31 wd:Q5 }"  # time zones are no humans
    with pytest.raises(TeacherSkip) as err:
        gold_trace(
            "Which human is the time zone of Salt Lake City?",
            empty,
            settings=teach_settings,
            endpoint=endpoint,
            search=search,
            gold=nothing,
        )
    assert err.value.reason == "gold_empty"


def test_gold_property_not_shown_is_searched_for(teach_settings, train_items, endpoint, search):
    item = _find(train_items, r"^Which country was Bill Gates born in")
    rec = _trace(item, teach_settings, endpoint, search)
    names = [s["tool_name"] for s in rec["steps"]]
    assert names == ["search_wikidata", "get_wikidata_entry", "search_wikidata", "execute_sparql", "stop"]
    prop_search = rec["steps"][2]
    assert prop_search["tool_args"] == {"query": "country"} and "P17" in prop_search["observation"]
    assert "P17" not in rec["steps"][1]["observation"]  # that is why it was searched


def test_records_become_controller_demos_with_the_exact_fields(teach_settings, train_items, endpoint, search):
    from saga_dspy.agent.demos import DemoPool, record_to_example
    from saga_dspy.agent.program import SagaProgram
    from saga_dspy.grounding.state import controller_state
    from saga_dspy.optimize.gold_demos import answer_type_example, trace_examples

    item = _find(train_items, r"time zone of Salt Lake City")
    rec = _trace(item, teach_settings, endpoint, search)
    program = SagaProgram(teach_settings, endpoint=endpoint, search=search)
    fields = program.react.react.signature
    every = trace_examples(rec, "all")
    for ex in every:
        assert set(ex.inputs().keys()) == set(fields.input_fields)
        assert set(ex.labels().keys()) == set(fields.output_fields)
    # contexts are stored where they change and carried on to the steps in between
    assert "type_context" not in rec["steps"][1]
    # (shown as the controller reads its state: grounding.state.controller_state)
    stored = controller_state(rec["steps"][0]["type_context"], rec["steps"][0]["knowledge_log"])
    assert every[1].type_context == stored[0] and "Q23337" in every[2].type_context
    execute = trace_examples(rec, "execute")[0]
    assert execute.next_tool_name == "execute_sparql"
    assert json.loads(execute.next_tool_args) == {"sparql": rec["sparql"]}
    assert "Action: search_wikidata" in execute.trajectory and "Observation: Search results" in execute.trajectory
    assert "Action: execute_sparql" not in execute.trajectory  # only the steps before it
    last = record_to_example(rec)  # the agent's own pool reader takes the record as it is
    assert last.next_tool_name == "stop" and "Action: execute_sparql" in last.trajectory
    assert len(DemoPool([rec])) == 1
    at = answer_type_example(rec)
    assert at.answer_type_label == "time zone" and at.answer_type_qid == "Q12143"


def test_gold_demos_reach_the_controller_prompt(teach_settings, train_items, endpoint, search):
    """Demos with the trajectory fields are not dropped: the scripted LM sees them in its prompt."""
    from saga_dspy.agent.program import SagaProgram
    from saga_dspy.optimize.gold_demos import apply_gold_demos

    item = _find(train_items, r"time zone of Salt Lake City")
    rec = _trace(item, teach_settings, endpoint, search)
    program = apply_gold_demos(SagaProgram(teach_settings, endpoint=endpoint, search=search), [rec])
    assert len(program.react.react.demos) == 1 and len(program.answer_type.demos) == 1
    question = "Which time zone is Q42 in?"
    lm = ScriptedLM({question: [("stop", {})]})
    import dspy

    with dspy.context(lm=lm):
        program(question=question)
    prompts = [json.dumps(h["messages"]) for h in lm.history]
    controller = [p for p in prompts if "next_tool_name" in p]
    assert controller, "no controller call"
    assert "time zone of Salt Lake City" in controller[0]
    assert "Observation: Search results for" in controller[0]  # real observations inside the demo
    assert "located in time zone (P421)" in controller[0]
    assert "wdt:P421" in controller[0]  # the demo's next_tool_args


def test_bundled_pools_are_train_only():
    from saga_dspy.agent.demos import DemoPool
    from saga_dspy.eval.loading.datasets import load_records

    pools = REPO / "data" / "demos"
    files = sorted(pools.glob("*.jsonl"))
    if not files:
        pytest.skip("no demo pools built yet (scripts/build_demos.py)")
    norm = lambda t: " ".join(re.findall(r"\w+", t.lower()))  # noqa: E731
    tests: dict[str, set[str]] = {}
    for path in files:
        records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        assert records, path
        assert all(r["split"] == "train" and r["teacher"] == "gold" for r in records)
        for r in records:  # the shared pool holds several benchmarks' records: each against its own test split
            dataset = r["dataset"]
            if dataset not in tests:
                tests[dataset] = {norm(t["question"]) for t in load_records(dataset, "test")}
            assert norm(r["question"]) not in tests[dataset], (path.name, r["id"])
        assert len(DemoPool(records[:50])) == min(50, len(records))


def test_a_shortened_observation_keeps_the_next_move_whole():
    from saga_dspy.optimize.gold_teacher import focus_observation

    text = "\n".join(
        ["Berlin (Q64): city", "Types: city (Q515)"]
        + [f"- prop {i} (P{i}) = value" * 3 for i in range(30)]
        + ['Next: get_wikidata_entry({"qid": "Q64"}) if Q64 (Berlin) is what the question means.']
    )
    short = focus_observation(text, ["P6"], 300)
    assert len(short) <= 300 + 10 and short.splitlines()[0] == "Berlin (Q64): city"
    assert short.splitlines()[-1] == text.splitlines()[-1] and "more lines not shown" in short


def test_a_shortened_observation_keeps_the_blocks_asked_for_whole():
    from saga_dspy.optimize.gold_teacher import focus_observation
    from saga_dspy.tools.lookup import CANDIDATES_HEAD

    candidates = [
        CANDIDATES_HEAD,
        "1. [one-hop; capital (P36)] SELECT ?x WHERE { wd:Q183 wdt:P36 ?x }",
        "   → 1 answer",
    ]
    text = "\n".join(
        ["Germany (Q183): country", "Types: country (Q6256)"]
        + [f"- prop {i} (P{i}) = value" * 3 for i in range(30)]
        + [*candidates, 'Next: if candidate N answers the question, stop with {"candidate": N}.']
    )
    short = focus_observation(text, ["P6"], 400, whole=(CANDIDATES_HEAD, "1. [")).splitlines()
    assert short[-4:] == text.splitlines()[-4:]  # the section and its Next: line, as the tool wrote them
    assert "more lines not shown" in short[-5]
    assert CANDIDATES_HEAD not in focus_observation(text, ["P6"], 400)  # else only its Next: line is sure to stay


def test_a_picks_trace_ends_by_picking_the_candidate_that_answers(teach_settings, train_items, endpoint, search):
    from saga_dspy.optimize.gold_teacher import TeacherConfig
    from saga_dspy.tools.lookup import CANDIDATES_HEAD

    item = _find(train_items, r"time zone of Salt Lake City")
    rec = _trace(item, teach_settings, endpoint, search, config=TeacherConfig(picks=True))
    steps = rec["steps"]
    assert [s["tool_name"] for s in steps] == ["search_wikidata", "get_wikidata_entry", "stop"]
    rank = steps[-1]["tool_args"]["candidate"]
    assert steps[-1]["thought"] == f"Candidate {rank} answers the question, so I stop with it."
    lookup = steps[1]["observation"]
    assert CANDIDATES_HEAD in lookup and f"\n{rank}. [" in lookup
    assert f"] {rec['sparql']}" in lookup  # the record's query is the picked candidate, as it was shown
    assert set(endpoint.query(rec["sparql"]).values()) == set(endpoint.query(item.gold_sparql).values())
    # where no shown candidate gives the gold answers, the query is written as before
    other = json.loads(item.gold)
    other["results"]["bindings"] = [{"x": {"type": "uri", "value": "http://www.wikidata.org/entity/Q1"}}]
    written = _trace(item, teach_settings, endpoint, search, config=TeacherConfig(picks=True), gold=other)
    assert [s["tool_name"] for s in written["steps"]][-2:] == ["execute_sparql", "stop"]
    assert written["steps"][-1]["tool_args"] == {}


def test_a_count_question_picks_the_candidate_that_lists_what_it_counts(teach_settings, train_items, endpoint, search):
    """A COUNT question's pick is judged by the final query the agent ends with: the candidate's count, where the
    variant rewrites the form; without that rewrite the teacher writes the gold query."""
    from saga_dspy.agent.query_form import rewrite_head
    from saga_dspy.optimize.gold_teacher import TeacherConfig

    item = _find(train_items, r"^How many awards has Bertrand Russell")
    rec = _trace(item, teach_settings, endpoint, search, config=TeacherConfig(picks=True))
    stop = rec["steps"][-1]
    assert rec["query_form"] == "COUNT" and stop["tool_name"] == "stop"
    assert (
        stop["thought"]
        == f"Candidate {stop['tool_args']['candidate']} lists what the question counts, so I stop with it."
    )
    assert rec["sparql"].startswith("SELECT DISTINCT ?x")  # the candidate as it was shown; its count is the answer
    counted = endpoint.query(rewrite_head(rec["sparql"], "COUNT"))
    assert counted.values() == endpoint.query(item.gold_sparql).values()
    plain = _trace(item, teach_settings, endpoint, search, config=TeacherConfig(picks=True), variant="no-form-rewrite")
    assert [s["tool_name"] for s in plain["steps"]][-2:] == ["execute_sparql", "stop"]
