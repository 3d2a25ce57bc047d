"""Demo pools: each variant's own pool (demos recorded with that variant's tools), the shared fallback."""

from __future__ import annotations

import json

from conftest import REPO, make_settings

from saga_dspy.agent.demos import DemoPool, default_pool_path, pool_file_name


def test_pool_file_names():
    assert pool_file_name("qald10") == "qald10.jsonl"
    assert pool_file_name("qald10", "full") == "qald10.jsonl"
    assert pool_file_name("wwq", "spinach") == "wwq.spinach.jsonl"


def test_a_variant_loads_the_pool_its_own_tools_recorded():
    settings = make_settings(dataset="qald10", data_dir=REPO / "data")
    assert default_pool_path(settings).name == "qald10.jsonl"
    assert default_pool_path(settings.model_copy(update={"variant": "spinach"})).name == "qald10.spinach.jsonl"
    # a variant without its own pool falls back to the full variant's
    assert default_pool_path(settings.model_copy(update={"variant": "no-type-state"})).name == "qald10.jsonl"
    full = [json.loads(x) for x in (REPO / "data" / "demos" / "qald10.jsonl").read_text().splitlines()]
    spinach = [json.loads(x) for x in (REPO / "data" / "demos" / "qald10.spinach.jsonl").read_text().splitlines()]
    assert {r["variant"] for r in spinach} == {"spinach"} and {r["variant"] for r in full} == {"full"}
    # the full variant's lookups annotate types; SPINACH's tools never do
    assert any("[no types]" in s["observation"] for r in full for s in r["steps"])
    assert not any("[no types]" in s["observation"] for r in spinach for s in r["steps"])


def test_select_guarded_without_a_guard_is_select():
    steps = [{"thought": "t", "tool_name": "search_wikidata", "tool_args": {"query": "x"}, "observation": "o"}]
    pool = DemoPool([{"question": q, "sparql": "ASK {}", "steps": steps}
                     for q in ("who wrote hamlet?", "who wrote macbeth?", "who painted guernica?")])
    plain = [d.question for d in pool.select("who wrote othello", 2)]
    guarded, refused = pool.select_guarded("who wrote othello", 2)
    assert [d.question for d in guarded] == plain and refused == 0
    # a guard refusing the best match: the next best takes its place, and the refusal is counted
    guarded, refused = pool.select_guarded("who wrote othello", 2, allow=lambda q, s: q != plain[0])
    assert plain[0] not in [d.question for d in guarded] and len(guarded) == 2 and refused == 1


def test_demo_observations_are_clipped_to_the_setting():
    from saga_dspy.agent.demos import load_demo_pool

    long = "Q1 entity: " + "property (P1): value; " * 60  # ~1,300 characters
    steps = [{"thought": "look", "tool_name": "get_wikidata_entry", "tool_args": {"entity": "Q1"}, "observation": long},
             {"thought": "done", "tool_name": "stop", "tool_args": {}, "observation": ""}]
    records = [{"question": "who is q1?", "sparql": "SELECT ?x WHERE { wd:Q1 wdt:P1 ?x }", "steps": steps}]
    settings = make_settings(dataset="qald10", data_dir=REPO / "data")
    sizes = {}
    for chars in (500, 150):
        pool = load_demo_pool(settings.model_copy(update={"demo_observation_chars": chars}), records)
        trajectory = pool.select("who is q1 really?", 1)[0].trajectory
        assert "property (P1): value" in trajectory
        sizes[chars] = len(trajectory)
    assert sizes[500] - sizes[150] >= 300  # the same demo, its observation clipped 350 characters sooner


def test_prompts_formatted_with_the_string_shortcut_are_dspys_to_the_byte(monkeypatch):
    import dspy.adapters.chat_adapter as chat_adapter
    from dspy.adapters.chat_adapter import ChatAdapter
    from dspy.adapters.utils import format_field_value as dspys

    from saga_dspy.agent import formatting
    from saga_dspy.agent.demos import load_demo_pool
    from saga_dspy.signatures import SagaController

    settings = make_settings(dataset="qald10", data_dir=REPO / "data")
    demos = load_demo_pool(settings).select("Who is the mayor of Berlin?", 3)
    inputs = {"question": "Who is the mayor of Berlin?", "answer_type": "human (Q5)", "query_form": "SELECT",
              "trajectory": "Step 1\nThought: t\nAction: search_wikidata({\"query\": \"Berlin\"})\nObservation: o",
              "type_context": "(none yet)", "knowledge_log": ["[ok] a", "[fail] b"]}  # a list: DSPy's own path
    monkeypatch.setattr(chat_adapter, "format_field_value", dspys)
    plain = ChatAdapter().format(SagaController, demos, inputs)
    formatting.install()
    assert chat_adapter.format_field_value is formatting.format_field_value
    assert ChatAdapter().format(SagaController, demos, inputs) == plain
    assert len(demos) == 3 and "Berlin" in plain[-1]["content"]
