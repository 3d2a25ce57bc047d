"""A live setup in one flag (`--kg-preset`), `--search auto` refusing to answer a foreign graph from the bundled
index, and the preflight that stops a run against a dead LM or endpoint before its first question. The servers
are the loopback stubs of tests/helpers and a real Oxigraph server over the sample."""

from __future__ import annotations

import json

import pytest
from conftest import TEST_CACHE, make_settings
from helpers.fault_server import start_fault_server
from helpers.openai_stub import OpenAIStub
from helpers.scripted_lm import ScriptedLM

from saga_dspy.cli import run_main
from saga_dspy.config import KG_PRESETS, QLEVER_WIKIDATA, WDQS, Settings, default_data_dir, settings_from_args
from saga_dspy.eval.__main__ import build_parser, main
from saga_dspy.eval.loading.datasets import bundled_gold_path
from saga_dspy.eval.preflight import PROBE
from saga_dspy.kg.search import LocalSearch, WikidataApiSearch, open_search

BUNDLED_INDEX = default_data_dir() / "schema" / "wikidata-sample.json.gz"


def test_a_kg_preset_is_a_live_setup_in_one_flag(monkeypatch):
    s = Settings(kg_preset="wikidata-live")
    assert (s.endpoint, s.search, s.kg, s.freeze_on_first_use) == (WDQS, "wikidata-api", "wikidata", True)
    assert s.schema_index == BUNDLED_INDEX and s.schema_index.exists()
    assert "saga-dspy" in s.user_agent and "http" in s.user_agent  # WDQS asks for a contact in the agent
    assert Settings(kg_preset="qlever-wikidata").endpoint == QLEVER_WIKIDATA
    # what is given explicitly wins, as a flag and as an environment variable
    assert Settings(kg_preset="wikidata-live", endpoint="http://127.0.0.1:1/sparql").endpoint.endswith(":1/sparql")
    assert Settings(kg_preset="wikidata-live", search="local").search == "local"
    monkeypatch.setenv("SAGA_KG_PRESET", "qlever-wikidata")
    assert Settings().endpoint == QLEVER_WIKIDATA
    monkeypatch.delenv("SAGA_KG_PRESET")
    args = build_parser().parse_args(["--kg-preset", "wikidata-live", "--split", "dev"])
    settings = settings_from_args(args)
    assert (settings.endpoint, settings.search, settings.split) == (WDQS, "wikidata-api", "dev")
    with pytest.raises(SystemExit):
        build_parser().parse_args(["--kg-preset", "nope"])
    assert set(KG_PRESETS) == {"wikidata-live", "qlever-wikidata"}


def test_search_auto_refuses_the_bundled_index_for_a_foreign_endpoint(store_path):
    with pytest.raises(ValueError, match="--search auto: http://127.0.0.1:1/sparql is not Wikidata's own") as err:
        open_search(make_settings(endpoint="http://127.0.0.1:1/sparql"))
    assert "--search wikidata-api" in str(err.value) and "--search local" in str(err.value)
    assert isinstance(open_search(make_settings(endpoint=WDQS)), WikidataApiSearch)
    assert isinstance(open_search(make_settings(endpoint="http://127.0.0.1:1/sparql", search="local")), LocalSearch)
    assert isinstance(open_search(make_settings()), LocalSearch)  # the embedded sample


def _eval(argv: list[str], capsys) -> tuple[int, str, str]:
    base = ["--cache-dir", str(TEST_CACHE), "--no-mlflow", "--no-progress", "--no-lm-cache", "--demos", "0"]
    rc = run_main(main, [*base, *argv])
    out, err = capsys.readouterr()
    return rc, out, err


def test_preflight_stops_a_run_whose_lm_does_not_answer(store_path, tmp_path, capsys):
    out = tmp_path / "run"
    with OpenAIStub(reply="model not loaded", status=503) as stub:
        lm = ["--lm", "openai/x", "--api-base", stub.api_base, "--lm-retries", "0", "--api-key", "sk-secret-1"]
        rc, _, err = _eval([*lm, "--limit", "2", "--out", str(out)], capsys)
    assert rc == 2, err
    (line,) = err.strip().splitlines()
    assert line.startswith(f"error: preflight: the LM openai/x at {stub.api_base} did not answer a one-line request")
    assert "sk-secret-1" not in err
    assert len(stub.requests) == 1 and stub.requests[0]["body"]["messages"][-1] == PROBE[-1]
    assert not (out / "predictions.jsonl").exists()


def test_preflight_stops_a_run_whose_endpoint_does_not_answer(store_path, tmp_path, capsys):
    server = start_fault_server()  # answers every query with an HTML page
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/html"
        gold = bundled_gold_path("qald10", "test", make_settings())
        with OpenAIStub() as stub:
            lm = ["--lm", "openai/x", "--api-base", stub.api_base, "--lm-retries", "0"]
            argv = ["--endpoint", url, "--search", "local", "--gold-file", str(gold), "--limit", "2"]
            rc, _, err = _eval([*lm, *argv, "--out", str(tmp_path / "run")], capsys)
        assert rc == 2, err
        (line,) = err.strip().splitlines()
        assert line.startswith(f"error: preflight: the endpoint {url} does not answer ASK {{}}")
        assert server.requests and set(server.requests) == {"/html"}
        assert not stub.requests  # the endpoint is asked first; nothing reached the LM
        assert not (tmp_path / "run" / "predictions.jsonl").exists()
    finally:
        server.shutdown()


def test_a_run_past_its_preflight_asks_the_lm_once_more_than_its_questions(store_path, tmp_path, capsys):
    out = tmp_path / "run"
    with OpenAIStub(reply="[[ ## next_thought ## ]]\nnothing\n\n[[ ## completed ## ]]") as stub:
        lm = ["--lm", "openai/x", "--api-base", stub.api_base, "--lm-retries", "0", "--max-steps", "1"]
        rc, _, err = _eval([*lm, "--ids", "0", "--out", str(out)], capsys)
        probe = stub.requests[0]["body"]
    assert rc == 0, err
    assert probe["messages"] == PROBE and probe["max_tokens"] <= 8
    (line,) = [json.loads(x) for x in (out / "predictions.jsonl").read_text().splitlines()]
    assert line["id"] == "0" and len(stub.requests) > 1


def test_no_preflight_leaves_a_dead_lm_to_the_questions(store_path, tmp_path, capsys):
    rc, _, err = _eval(
        ["--lm", "openai/x", "--api-base", "http://127.0.0.1:9/v1", "--lm-retries", "0", "--no-preflight"]
        + ["--ids", "0", "--out", str(tmp_path / "run")],
        capsys,
    )
    assert "preflight" not in err
    (line,) = [json.loads(x) for x in (tmp_path / "run" / "predictions.jsonl").read_text().splitlines()]
    assert line["error_kind"] == "infrastructure"


def test_the_live_preset_freezes_gold_on_first_use(oxigraph_server, search, tmp_path, capsys):
    """The preset on a live server (Oxigraph over the sample stands in for WDQS): the split's gold is frozen when
    the run first needs it, then the run goes on."""
    from saga_dspy.eval.running.runner import evaluate

    data = tmp_path / "tiny.jsonl"
    records = [
        {"id": "a", "question": "Is Douglas Adams a human?", "sparql": "ASK { wd:Q42 wdt:P31 wd:Q5 }"},
        {"id": "b", "question": "Nothing?", "sparql": "SELECT ?x WHERE { wd:Q42 wdt:P999999 ?x }"},
    ]
    data.write_text("".join(json.dumps(r) + "\n" for r in records))
    settings = make_settings(
        kg_preset="wikidata-live",
        endpoint=oxigraph_server,
        search="local",
        cache_dir=tmp_path / "cache",
        dataset="tiny",
        split="test",
        demos=0,
        max_steps=3,
        mlflow=False,
        lm="scripted",
        lm_cache=False,
    )
    assert settings.freeze_on_first_use and settings.schema_index == BUNDLED_INDEX
    plans = {records[0]["question"]: [("execute_sparql", {"sparql": records[0]["sparql"]}), ("stop", {})]}
    lm = ScriptedLM(plans)  # the bundled index searches the sample the server holds (its store is the test cache's)
    results = evaluate(settings, ["full"], out=tmp_path / "run", data_file=data, lm=lm, search=search, progress=False)
    err = capsys.readouterr().err
    assert f"No frozen gold for tiny/test on {oxigraph_server}; freezing it now" in err
    assert list((tmp_path / "cache" / "gold" / "tiny").glob("data-*/gold-*-test.jsonl.gz"))  # under the file's hash
    assert results["full"].metrics["n"] == 1 and results["full"].metrics["f1"] == 1.0  # b's empty gold left out


def test_the_live_preset_checks_its_lm_before_freezing_gold(oxigraph_server, search, tmp_path, capsys):
    """A dead LM on a live preset whose split has no frozen gold: the preflight stops the run before the freeze
    (no "freezing it now" line, no gold file), one line, exit 2; alive, the same run freezes and goes on."""
    from saga_dspy.cli import run_main
    from saga_dspy.eval.running.runner import evaluate
    from saga_dspy.lm import build_lm

    data = tmp_path / "tiny.jsonl"
    data.write_text(
        json.dumps({"id": "a", "question": "Is Douglas Adams a human?", "sparql": "ASK { wd:Q42 wdt:P31 wd:Q5 }"})
        + "\n"
    )
    settings = make_settings(
        kg_preset="wikidata-live",
        endpoint=oxigraph_server,
        search="local",
        cache_dir=tmp_path / "cache",
        dataset="tiny",
        split="test",
        demos=0,
        max_steps=3,
        mlflow=False,
        lm="openai/x",
        api_base="http://127.0.0.1:9/v1",
        lm_retries=0,
        lm_cache=False,
    )

    def run(lm):
        return evaluate(settings, ["full"], out=tmp_path / "run", data_file=data, lm=lm, search=search, progress=False)

    rc = run_main(lambda argv: run(build_lm(settings)) and 0, [])
    err = capsys.readouterr().err
    assert rc == 2 and err.strip().splitlines() == [line for line in err.strip().splitlines() if "error:" in line]
    assert "preflight: the LM openai/x" in err and "freezing" not in err, err
    assert not list((tmp_path / "cache").glob("gold/**/*.jsonl.gz"))
    plans = {
        "Is Douglas Adams a human?": [("execute_sparql", {"sparql": "ASK { wd:Q42 wdt:P31 wd:Q5 }"}), ("stop", {})]
    }
    results = run(ScriptedLM(plans))
    assert "freezing it now" in capsys.readouterr().err and results["full"].metrics["f1"] == 1.0
