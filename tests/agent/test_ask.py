"""`python -m saga_dspy.ask`: the trace, the summary and --json, with a scripted LM on the real sample."""

from __future__ import annotations

import json

import pytest
from conftest import TEST_CACHE
from dspy.utils.dummies import DummyLM

QUESTION = "After whom is the Riemannian geometry named?"
SCRIPT = [
    {"answer_type_label": "person", "answer_type_qid": "Q5"},
    {
        "next_thought": "Find the entity.",
        "next_tool_name": "search_wikidata",
        "next_tool_args": {"query": "Riemannian geometry"},
    },
    {
        "next_thought": "Ask for its namesake.",
        "next_tool_name": "execute_sparql",
        "next_tool_args": {"sparql": "SELECT ?x WHERE { wd:Q761383 wdt:P138 ?x }"},
    },
    {"next_thought": "That is the answer.", "next_tool_name": "stop", "next_tool_args": {}},
]


@pytest.fixture
def scripted(monkeypatch, store_path):
    import saga_dspy.lm as lm_module

    monkeypatch.setattr(lm_module, "build_lm", lambda settings: DummyLM(list(SCRIPT)))
    monkeypatch.setattr(lm_module, "configure_lm_cache", lambda settings: None)
    return ["--cache-dir", str(TEST_CACHE), "--no-result-cache", "--demos", "0"]


def test_ask_prints_the_trace_as_it_goes(scripted, capsys):
    from saga_dspy.ask import main

    assert main([QUESTION, *scripted]) == 0
    out = capsys.readouterr().out
    assert "Expected answer type: person (Q5)" in out and "query form: SELECT" in out
    assert "[1] Thought: Find the entity." in out
    assert 'Action: search_wikidata {"query": "Riemannian geometry"}' in out
    assert "Q761383 Riemannian geometry" in out  # a short observation
    assert "[3] Thought: That is the answer." in out
    assert "Final SPARQL (from stop):" in out and "wd:Q761383 wdt:P138 ?x" in out
    assert "Written by: model\n" in out  # its own query: no candidate was shown (no lookup)
    assert "?x = Q42299 (Bernhard Riemann)" in out  # answers with labels
    assert "lm_calls=4" in out and "steps=3" in out
    assert out.index("[1] Thought") < out.index("Final SPARQL")


def test_ask_json(scripted, capsys):
    from saga_dspy.ask import main

    assert main([QUESTION, "--json", *scripted]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["sparql"] == "SELECT ?x WHERE { wd:Q761383 wdt:P138 ?x }"
    assert data["answers"]["results"]["bindings"][0]["x"]["value"].endswith("/Q42299")
    assert data["labels"]["http://www.wikidata.org/entity/Q42299"] == "Bernhard Riemann"
    assert data["final_status"] == "ok" and data["variant"] == "full"
    assert [s["tool_name"] for s in data["trajectory"]] == ["search_wikidata", "execute_sparql", "stop"]
    assert data["counters"]["lm_calls"] == 4 and data["error"] is None


def test_ask_flags_reach_the_settings():
    from saga_dspy.ask import build_parser
    from saga_dspy.config import settings_from_args

    args = build_parser().parse_args(
        [
            QUESTION,
            "--variant",
            "spinach",
            "--max-steps",
            "7",
            "--lm",
            "openai/x",
            "--api-base",
            "http://127.0.0.1:9/v1",
            "--program",
            "p.json",
            "--check-answer",
        ]
    )
    s = settings_from_args(args)
    assert (s.variant, s.max_steps, s.lm, s.api_base, str(s.program), s.check_answer) == (
        "spinach",
        7,
        "openai/x",
        "http://127.0.0.1:9/v1",
        "p.json",
        True,
    )
