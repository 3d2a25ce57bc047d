"""Demo pools: each variant's own pool (demos recorded with that variant's tools), the shared fallback."""

from __future__ import annotations

import json

from conftest import REPO, make_settings

from saga_dspy.agent.demos import DemoPool
from saga_dspy.agent.pools import choose_pool, pool_file_name


def test_pool_file_names():
    assert pool_file_name("qald10") == "qald10.jsonl"
    assert pool_file_name("qald10", "full") == "qald10.jsonl"
    assert pool_file_name("wwq", "spinach") == "wwq.spinach.jsonl"


def test_a_variant_loads_the_pool_its_own_tools_recorded():
    settings = make_settings(dataset="qald10", data_dir=REPO / "data")
    assert choose_pool(settings).path.name == "qald10.jsonl"
    assert choose_pool(settings.model_copy(update={"variant": "spinach"})).path.name == "qald10.spinach.jsonl"
    # a variant without its own pool falls back to the full variant's
    assert choose_pool(settings.model_copy(update={"variant": "no-type-state"})).path.name == "qald10.jsonl"
    full = [json.loads(x) for x in (REPO / "data" / "demos" / "qald10.jsonl").read_text().splitlines()]
    spinach = [json.loads(x) for x in (REPO / "data" / "demos" / "qald10.spinach.jsonl").read_text().splitlines()]
    assert {r["variant"] for r in spinach} == {"spinach"} and {r["variant"] for r in full} == {"full"}
    # the full variant's lookups annotate types; SPINACH's tools never do
    assert any("[no types]" in s["observation"] for r in full for s in r["steps"])
    assert not any("[no types]" in s["observation"] for r in spinach for s in r["steps"])


def test_select_guarded_without_a_guard_is_select():
    steps = [{"thought": "t", "tool_name": "search_wikidata", "tool_args": {"query": "x"}, "observation": "o"}]
    pool = DemoPool(
        [
            {"question": q, "sparql": "ASK {}", "steps": steps}
            for q in ("who wrote hamlet?", "who wrote macbeth?", "who painted guernica?")
        ]
    )
    plain = [d.question for d in pool.select("who wrote othello", 2)]
    guarded, refused = pool.select_guarded("who wrote othello", 2)
    assert [d.question for d in guarded] == plain and refused == 0
    # a guard refusing the best match: the next best takes its place, and the refusal is counted
    guarded, refused = pool.select_guarded("who wrote othello", 2, allow=lambda q, s: q != plain[0])
    assert plain[0] not in [d.question for d in guarded] and len(guarded) == 2 and refused == 1


def test_demo_observations_are_clipped_to_the_setting():
    from saga_dspy.agent.pools import load_demo_pool

    long = "Q1 entity: " + "property (P1): value; " * 60  # ~1,300 characters
    steps = [
        {"thought": "look", "tool_name": "get_wikidata_entry", "tool_args": {"entity": "Q1"}, "observation": long},
        {"thought": "done", "tool_name": "stop", "tool_args": {}, "observation": ""},
    ]
    records = [{"question": "who is q1?", "sparql": "SELECT ?x WHERE { wd:Q1 wdt:P1 ?x }", "steps": steps}]
    settings = make_settings(dataset="qald10", data_dir=REPO / "data")
    sizes = {}
    for chars in (500, 150):
        pool = load_demo_pool(settings.model_copy(update={"demo_observation_chars": chars}), records)
        trajectory = pool.select("who is q1 really?", 1)[0].trajectory
        assert "property (P1): value" in trajectory
        sizes[chars] = len(trajectory)
    assert sizes[500] - sizes[150] >= 300  # the same demo, its observation clipped 350 characters sooner


def test_prompts_formatted_with_the_string_shortcut_are_dspys_to_the_byte():
    import dspy.adapters.chat_adapter as chat_adapter
    from dspy.adapters.chat_adapter import ChatAdapter
    from dspy.adapters.utils import format_field_value as dspys

    from saga_dspy.agent.formatting import StringFieldsAdapter
    from saga_dspy.agent.pools import load_demo_pool
    from saga_dspy.signatures import SagaController

    settings = make_settings(dataset="qald10", data_dir=REPO / "data")
    demos = load_demo_pool(settings).select("Who is the mayor of Berlin?", 3)
    inputs = {
        "question": "Who is the mayor of Berlin?",
        "answer_type": "human (Q5)",
        "query_form": "SELECT",
        "trajectory": 'Step 1\nThought: t\nAction: search_wikidata({"query": "Berlin"})\nObservation: o',
        "type_context": "(none yet)",
        "knowledge_log": ["[ok] a", "[fail] b"],
    }  # a list: DSPy's own path
    plain = ChatAdapter().format(SagaController, demos, inputs)
    assert StringFieldsAdapter().format(SagaController, demos, inputs) == plain
    assert chat_adapter.format_field_value is dspys  # DSPy's own function is left alone
    assert len(demos) == 3 and "Berlin" in plain[-1]["content"]


def _pool(questions, steps=None):
    steps = steps or [
        {"thought": "t", "tool_name": "search_wikidata", "tool_args": {"query": "x"}, "observation": "o"},
        {"thought": "t", "tool_name": "get_wikidata_entry", "tool_args": {"entity": "Q1"}, "observation": "o"},
        {"thought": "t", "tool_name": "execute_sparql", "tool_args": {"sparql": "SELECT ?x {}"}, "observation": "o"},
    ]
    return DemoPool(
        [
            {"question": q, "sparql": "SELECT ?x WHERE { wd:Q1 wdt:P1 ?x }", "steps": steps[: 1 + i % len(steps)]}
            for i, q in enumerate(questions)
        ]
    )


QUESTIONS = (
    "who wrote hamlet?",
    "who wrote macbeth?",
    "who painted guernica?",
    "where is berlin?",
    "what is the capital of peru?",
    "who composed the magic flute?",
)


def test_anchor_demos_are_the_shortest_of_the_questions_form_the_same_for_every_question_of_it():
    steps = [{"thought": "t", "tool_name": "search_wikidata", "tool_args": {"query": "x"}, "observation": "o"}]
    count = "SELECT (COUNT(DISTINCT ?x) AS ?c) WHERE { ?x wdt:P1 wd:Q1 }"
    records = [
        {"question": f"list item {i}", "sparql": "SELECT ?x WHERE { wd:Q1 wdt:P1 ?x }", "steps": steps * (1 + i)}
        for i in range(4)
    ] + [{"question": f"how many things {i}", "sparql": count, "steps": steps * (2 + i)} for i in range(3)]
    pool = DemoPool(records)
    anchors = {
        form: {tuple(d.question for d in pool.select(q, 3, form, anchors=2)[:2]) for q in ("how many a", "list b")}
        for form in ("COUNT", "SELECT")
    }
    assert anchors == {
        "COUNT": {("how many things 0", "how many things 1")},  # a count question is shown counts
        "SELECT": {("list item 0", "list item 1")},
    }
    # no form known: the shortest of the pool, whatever their form
    assert {d.question for d in pool.select("how many a", 3, anchors=2)[:2]} == {"list item 0", "list item 1"}


def test_anchor_demos_are_the_same_for_every_question_and_come_first():
    pool = _pool(QUESTIONS)
    asked = ("who wrote othello", "who painted the night watch", "what is the capital of chile")
    shown = {q: [d.question for d in pool.select(q, 3, anchors=2)] for q in asked}
    heads = {tuple(s[:2]) for s in shown.values()}
    assert len(heads) == 1  # one prefix for all questions: the local model's cache evaluates it once
    (anchors,) = heads
    for question, demos in shown.items():
        assert len(demos) == 3 and len(set(demos)) == 3 and demos[2] not in anchors
        # the per-question one is the best BM25 match that is not an anchor
        best = next(d for d in (x.question for x in pool.select(question, 6)) if d not in anchors)
        assert demos[2] == best
    # each demo still shows another kind of step: the per-question one its whole trajectory (stop)
    demos = pool.select("who wrote othello", 3, anchors=2)
    assert demos[2].next_tool_name == "stop" and {d.next_tool_name for d in demos[:2]} != {"stop"}
    # without anchors nothing changes: the k most similar, most similar first
    assert [d.question for d in pool.select("who wrote othello", 2)][0] in ("who wrote hamlet?", "who wrote macbeth?")


def test_an_anchor_is_never_the_question_itself_nor_a_refused_record():
    pool = _pool(QUESTIONS)
    anchors = [d.question for d in pool.select("who wrote othello", 3, anchors=2)][:2]
    own = [d.question for d in pool.select(anchors[0], 3, anchors=2)]
    assert anchors[0] not in own and len(own) == 3
    guarded, refused = pool.select_guarded("who wrote othello", 3, allow=lambda q, s: q != anchors[1], anchors=2)
    assert anchors[1] not in [d.question for d in guarded] and len(guarded) == 3 and refused == 1
    # all of k as anchors: the same demos for every question
    assert [d.question for d in pool.select("who wrote othello", 2, anchors=5)] == [
        d.question for d in pool.select("where is peru", 2, anchors=5)
    ]


def test_the_program_shows_the_settings_anchors():
    from saga_dspy.agent.program import SagaProgram

    pool = _pool(QUESTIONS)
    settings = make_settings(dataset="qald10", data_dir=REPO / "data", demos=3, demo_anchors=2)
    program = SagaProgram(settings, endpoint=object(), search=object(), demo_pool=pool)
    first, _ = program._guarded_demos(program.demo_pool(), "who wrote othello", "SELECT", None)
    second, _ = program._guarded_demos(program.demo_pool(), "what is the capital of chile", "SELECT", None)
    assert [d.question for d in first[:2]] == [d.question for d in second[:2]]
    assert first[2].question != second[2].question


def test_two_demos_are_the_whole_question_and_the_lookup_after_a_search():
    steps = [
        {"thought": "t", "tool_name": "search_wikidata", "tool_args": {"query": "x"}, "observation": "o"},
        {"thought": "t", "tool_name": "get_wikidata_entry", "tool_args": {"qid": "Q1"}, "observation": "o"},
        {"thought": "t", "tool_name": "execute_sparql", "tool_args": {"sparql": "SELECT ?x {}"}, "observation": "o"},
    ]
    pool = DemoPool(
        [{"question": q, "sparql": "SELECT ?x WHERE { wd:Q1 wdt:P1 ?x }", "steps": steps} for q in QUESTIONS]
    )
    # the step each demo's reply shows: without the lookup a small model skipped it (session 17)
    assert [d.next_tool_name for d in pool.select("who wrote othello", 2)] == ["stop", "get_wikidata_entry"]
    assert [d.next_tool_name for d in pool.select("who wrote othello", 3)] == [
        "stop",
        "execute_sparql",
        "get_wikidata_entry",
    ]


def test_a_demo_shows_the_state_of_its_own_step_never_what_later_steps_found():
    from saga_dspy.agent.demos import record_to_example

    before = {
        "type_context": "Expected answer type: country (Q6256)\nKnown entity types: (none yet)",
        "knowledge_log": "(nothing yet)",
    }
    after_lookup = {
        "type_context": "Expected answer type: country (Q6256)\nKnown entity types:\n- Q794 Iran: country",
        "knowledge_log": "[info] type discovered: Q794 Iran is country",
    }
    final = {
        "type_context": after_lookup["type_context"] + "\nVariable types: ?x: country (observed)",
        "knowledge_log": after_lookup["knowledge_log"] + "\n[ok] 6 rows (Iraq): wd:Q794 wdt:P47 ?x .",
    }
    steps = [  # as the gold teacher stores them: a step keeps its state only where it changed
        {"thought": "s", "tool_name": "search_wikidata", "tool_args": {"query": "Iran"}, "observation": "o", **before},
        {"thought": "l", "tool_name": "get_wikidata_entry", "tool_args": {"qid": "Q794"}, "observation": "o"},
        {
            "thought": "e",
            "tool_name": "execute_sparql",
            "tool_args": {"sparql": "SELECT ?x WHERE { wd:Q794 wdt:P47 ?x }"},
            "observation": "[OK] 6 rows",
            **after_lookup,
        },
        {"thought": "done", "tool_name": "stop", "tool_args": {}, "observation": "", **final},
    ]
    record = {
        "question": "Which countries border Iran?",
        "sparql": "SELECT ?x WHERE { wd:Q794 wdt:P47 ?x }",
        "steps": steps,
        **final,
    }
    lookup = record_to_example(record, output="lookup")
    assert lookup.next_tool_name == "get_wikidata_entry"
    # shown as the controller reads its live state: no answer-type line (its own field), no discovery the
    # type context lists (grounding.state.controller_state)
    assert (lookup.type_context, lookup.knowledge_log) == ("Known entity types: (none yet)", "(nothing yet)")
    execute = record_to_example(record, output="execute")
    assert (execute.type_context, execute.knowledge_log) == (
        "Known entity types:\n- Q794 Iran: country",
        "(nothing yet)",
    )
    stop = record_to_example(record)  # the closing stop: the final state
    assert stop.knowledge_log == "[ok] 6 rows (Iraq): wd:Q794 wdt:P47 ?x ."
    assert stop.type_context == final["type_context"].split("\n", 1)[1]
