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
    return ["--cache-dir", str(TEST_CACHE), "--no-result-cache", "--demos", "0", "--no-preflight"]


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


def test_ask_shares_the_preflight_of_eval(scripted, oxigraph_server, capsys):
    """An HTTP endpoint with no schema index: eval's one line and rc 2 (cli.run_main), before the LM is asked,
    not a traceback ending in an AttributeError about the prediction."""
    from saga_dspy.ask import main
    from saga_dspy.cli import run_main

    rc = run_main(main, [QUESTION, *scripted, "--preflight", "--endpoint", oxigraph_server, "--search", "local"])
    err = capsys.readouterr().err
    assert rc == 2, err
    assert err.startswith("error: preflight: ") and "schema index" in err and len(err.strip().splitlines()) == 1, err
    assert "Traceback" not in err and "unexpected" not in err


def test_ask_takes_a_kg_preset():
    from saga_dspy.ask import build_parser
    from saga_dspy.config import QLEVER_WIKIDATA, settings_from_args

    s = settings_from_args(build_parser().parse_args([QUESTION, "--kg-preset", "qlever-wikidata", "--no-preflight"]))
    assert s.kg_preset == "qlever-wikidata" and s.endpoint == QLEVER_WIKIDATA and s.preflight is False


HOSTILE = "\x1b]0;pwned\x07\x1b[2J\x9b31m\u202e"  # window title, clear screen, C1 CSI, right-to-left override


@pytest.fixture
def hostile_graph(tmp_path):
    """A real Oxigraph server over a graph whose answer's label carries terminal control sequences."""
    import subprocess
    import time
    import urllib.request

    import pyoxigraph
    from conftest import free_port, oxigraph_binary

    store = pyoxigraph.Store(str(tmp_path / "store"))
    wd, wdt = "http://www.wikidata.org/entity/", "http://www.wikidata.org/prop/direct/"
    label = pyoxigraph.NamedNode("http://www.w3.org/2000/01/rdf-schema#label")
    store.add(
        pyoxigraph.Quad(
            pyoxigraph.NamedNode(wd + "Q761383"),
            pyoxigraph.NamedNode(wdt + "P138"),
            pyoxigraph.NamedNode(wd + "Q42299"),
        )
    )
    store.add(
        pyoxigraph.Quad(
            pyoxigraph.NamedNode(wd + "Q42299"), label, pyoxigraph.Literal("Riemann" + HOSTILE, language="en")
        )
    )
    store.flush()
    del store
    port = free_port()
    cmd = [oxigraph_binary(), "serve-read-only", "--location", str(tmp_path / "store"), "--bind", f"127.0.0.1:{port}"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=1)
            break
        except OSError as exc:
            if getattr(exc, "code", None):
                break
            time.sleep(0.2)
    yield f"http://127.0.0.1:{port}/query"
    proc.terminate()
    proc.wait(10)


def test_ask_escapes_control_characters_from_the_graph(monkeypatch, hostile_graph, capsys):
    """An entity label with control sequences (and a thought echoing it) printed escaped: no raw ESC / BEL / C1 /
    bidi character reaches the terminal, in the trace, the summary or --json (which keeps the label's text)."""
    import saga_dspy.lm as lm_module
    from saga_dspy.ask import main
    from saga_dspy.config import default_data_dir

    script = [
        SCRIPT[0],
        {
            "next_thought": f"Label {HOSTILE}",
            "next_tool_name": "execute_sparql",
            "next_tool_args": {"sparql": "SELECT ?x ?l WHERE { wd:Q761383 wdt:P138 ?x . ?x rdfs:label ?l }"},
        },
        {"next_thought": "Done.", "next_tool_name": "stop", "next_tool_args": {}},
    ]
    monkeypatch.setattr(lm_module, "configure_lm_cache", lambda settings: None)
    index = default_data_dir() / "schema" / "wikidata-sample.json.gz"
    args = [QUESTION, "--cache-dir", str(TEST_CACHE), "--no-result-cache", "--demos", "0", "--no-preflight"]
    args += ["--endpoint", hostile_graph, "--search", "local", "--schema-index", str(index)]
    for extra in ([], ["--json"]):
        monkeypatch.setattr(lm_module, "build_lm", lambda settings: DummyLM(list(script)))
        main([*args, *extra])
        out = capsys.readouterr().out
        assert not any(ch in out for ch in "\x1b\x07\x9b\u202e"), repr(out[-600:])
        if extra:
            assert json.loads(out)["labels"]["http://www.wikidata.org/entity/Q42299"] == "Riemann" + HOSTILE
        else:
            assert "Q42299 (Riemann\\x1b]0;pwned\\x07\\x1b[2J\\x9b31m\\u202e)" in out, out
            assert "Label \\x1b]0;pwned" in out
