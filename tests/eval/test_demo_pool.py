"""The demo pool a run uses: the dataset's own, the shared pool of every bundled train pool, none or a file;
named in config.json, the printed summary, MLflow params and `ask`."""

from __future__ import annotations

import io
import json

import pytest
from conftest import REPO, TEST_CACHE, make_settings
from helpers.scripted_lm import ScriptedLM, scripted_plans

from saga_dspy.agent.demos import DemoPool, record_sources
from saga_dspy.agent.pools import SHARED_POOL, check_pool_choice, choose_pool, load_demo_pool
from saga_dspy.variants import variant_of

DEMOS = REPO / "data" / "demos"


def _records(name: str) -> list[dict]:
    return [json.loads(line) for line in (DEMOS / name).read_text(encoding="utf-8").splitlines()]


def test_auto_is_the_datasets_own_pool_else_the_shared_one():
    settings = make_settings(data_dir=REPO / "data", dataset="qald10")
    assert choose_pool(settings).path == DEMOS / "qald10.jsonl"
    assert choose_pool(settings, "spinach").path == DEMOS / "qald10.spinach.jsonl"
    for dataset in ("spinach", "lcquad2", "a-file-of-mine"):  # no pool of their own
        choice = choose_pool(settings.model_copy(update={"dataset": dataset}))
        assert (choice.name, choice.path) == (SHARED_POOL, DEMOS / "shared.jsonl")
    assert choose_pool(settings.model_copy(update={"dataset": "spinach"}), "spinach").path == (
        DEMOS / "shared.spinach.jsonl"
    )
    # a variant without its own recording renders the full variant's records with its tools
    assert choose_pool(settings.model_copy(update={"dataset": "spinach"}), "no-type-filter").path == (
        DEMOS / "shared.jsonl"
    )
    assert choose_pool(settings.model_copy(update={"demo_pool": "shared"})).path == DEMOS / "shared.jsonl"
    assert choose_pool(settings.model_copy(update={"demo_pool": "wwq"})).path == DEMOS / "wwq.jsonl"
    assert choose_pool(settings.model_copy(update={"demo_pool": "none"})).path is None
    assert len(load_demo_pool(settings.model_copy(update={"demo_pool": "none"}))) == 0
    mine = choose_pool(settings.model_copy(update={"demo_pool": "/tmp/my-pool.jsonl"}))
    assert (mine.name, str(mine.path)) == ("file", "/tmp/my-pool.jsonl")


def test_demo_picks_choose_the_pools_recorded_with_candidates_shown(tmp_path):
    settings = make_settings(data_dir=tmp_path, dataset="qald10", demo_picks=True, shown_candidates=1)
    demos = tmp_path / "demos"
    demos.mkdir()
    for name in ("qald10.jsonl", "qald10.picks.jsonl", "qald10.spinach.jsonl", "shared.jsonl"):
        (demos / name).write_text("")
    assert choose_pool(settings).path == demos / "qald10.picks.jsonl"
    assert choose_pool(settings, "no-type-filter").path == demos / "qald10.picks.jsonl"  # full's, rendered
    assert choose_pool(settings, "paper").path == demos / "qald10.jsonl"  # it shows no candidates
    assert choose_pool(settings, "spinach").path == demos / "qald10.spinach.jsonl"  # its own recording
    assert choose_pool(settings.model_copy(update={"shown_candidates": 0})).path == demos / "qald10.jsonl"
    with pytest.raises(ValueError, match=r"--demo-pool shared: no such bundled pool .*shared\.picks\.jsonl"):
        check_pool_choice(settings.model_copy(update={"demo_pool": "shared"}))


def test_a_pool_that_does_not_exist_is_one_clear_error(tmp_path):
    settings = make_settings(data_dir=REPO / "data")
    check_pool_choice(settings)
    with pytest.raises(ValueError, match=r"--demo-pool qald11: no such bundled pool \(one of: .*qald10.*shared"):
        check_pool_choice(settings.model_copy(update={"demo_pool": "qald11"}))
    # the shared pool is Wikidata's: a Freebase benchmark without a pool of its own runs without demos
    freebase = settings.model_copy(update={"kg": "freebase", "dataset": "webqsp"})
    assert choose_pool(freebase).name == "none" and len(load_demo_pool(freebase)) == 0
    with pytest.raises(ValueError, match="no shared demo pool is bundled for freebase"):
        check_pool_choice(freebase.model_copy(update={"demo_pool": "shared"}))
    with pytest.raises(ValueError, match="no such file"):
        check_pool_choice(settings.model_copy(update={"demo_pool": str(tmp_path / "none.jsonl")}))


def test_the_shared_pool_holds_every_train_pool_once_with_its_sources():
    from saga_dspy.eval.loading.firewall import Firewall

    manifest = json.loads((DEMOS / "MANIFEST.json").read_text())["pools"]
    for name, variant in (("shared.jsonl", "full"), ("shared.spinach.jsonl", "spinach")):
        records = _records(name)
        assert len(records) == manifest[name]["records"] > 400
        by_source = {}
        for r in records:
            assert r["sources"][0] == r["dataset"] and r["variant"] == variant
            by_source[r["dataset"]] = by_source.get(r["dataset"], 0) + 1
        assert by_source == manifest[name]["sources"] and set(by_source) == {"qald10", "qald7", "qald9plus", "wwq"}
        seen = Firewall()  # each question once: no record collides with an earlier one
        for r in records:
            assert not seen.collides(r["question"], r["sparql"]), r["question"]
            seen.extend(Firewall.of_records([r]))
        # QALD-10 train is QALD-9-plus train with fixes: its records say so
        assert any(r["sources"][:2] == ["qald10", "qald9plus"] for r in records)


def test_excluded_benchmarks_leave_no_record_in_the_pool():
    settings = make_settings(data_dir=REPO / "data", dataset="qald10", demo_pool="shared")
    everything = load_demo_pool(settings)
    records = _records("shared.jsonl")
    assert len(everything) == len(records) and everything.sources()["qald10"] > 30
    pool = load_demo_pool(settings.model_copy(update={"demo_pool_exclude": "qald10,qald9plus"}))
    kept = [r for r in records if not {"qald10", "qald9plus"} & set(record_sources(r))]
    assert len(pool) == len(kept) and pool.excluded == len(records) - len(kept) > 30
    assert "qald10" not in pool.sources() and "qald9plus" not in pool.sources()
    assert pool.describe() == {
        "pool": "shared",
        "file": "demos/shared.jsonl",
        "records": len(kept),
        "sources": pool.sources(),
        "exclude": ["qald10", "qald9plus"],
        "excluded_records": len(records) - len(kept),
        "dropped_for_variant": 0,
    }
    assert pool.summary().startswith(f"demo pool: shared (demos/shared.jsonl), {len(kept)} records (qald7 ")
    # the spinach variant's own recording of the shared pool, and a variant's rendering of the full one
    spinach = load_demo_pool(settings, variant=variant_of("spinach"))
    assert spinach.describe()["file"] == "demos/shared.spinach.jsonl" and len(spinach) > 400
    assert "question" in spinach.select("Who is the mayor of Berlin?", 1)[0].inputs().keys()
    assert len(load_demo_pool(settings, variant=variant_of("no-type-filter"))) > 400


def test_selection_prefers_the_questions_form_among_the_best_matches():
    steps = [{"thought": "t", "tool_name": "search_wikidata", "tool_args": {"query": "x"}, "observation": "o"}]

    def rec(q, sparql):
        return {"question": q, "sparql": sparql, "steps": steps}

    pool = DemoPool(
        [
            rec("who are the children of madonna", "SELECT ?c { wd:Q1744 wdt:P40 ?c }"),
            rec("which children did madonna adopt", "SELECT ?c { wd:Q1744 wdt:P40 ?c }"),
            rec("how many goals did messi score", "SELECT (COUNT(?g) AS ?n) { wd:Q615 wdt:P1351 ?g }"),
            rec("is madonna a singer", "ASK { wd:Q1744 wdt:P106 wd:Q177220 }"),
        ]
    )
    question = "How many children does Madonna have?"
    best = [d.question for d in pool.select(question, 1)]
    assert best == ["who are the children of madonna"]  # BM25 alone
    assert [d.question for d in pool.select(question, 1, "COUNT")] == ["how many goals did messi score"]
    assert [d.question for d in pool.select(question, 1, "ANY")] == best  # the form is not known
    assert [d.question for d in pool.select(question, 1, "ASK")] == ["is madonna a singer"]


def test_a_dataset_without_a_pool_gets_the_shared_pool_and_says_so(store_path, endpoint, search, tmp_path):
    """SPINACH has no train split: its run uses the shared pool, and config.json, the printed summary and
    the MLflow params say which."""
    from mlflow.tracking import MlflowClient

    from saga_dspy.eval.loading.evalset import load_eval_set
    from saga_dspy.eval.running.runner import evaluate

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    settings = make_settings(
        dataset="spinach",
        split="dev",
        limit=1,
        demos=2,
        max_steps=6,
        lm="scripted",
        lm_cache=False,
        mlflow=True,
        mlflow_uri=uri,
        trace="none",
    )
    lm = ScriptedLM(scripted_plans(load_eval_set(settings, progress=False).items))
    out = io.StringIO()
    evaluate(
        settings,
        ["full"],
        out=tmp_path / "run",
        lm=lm,
        endpoint=endpoint,
        search=search,
        progress=False,
        experiment="pool",
        stream=out,
    )
    cfg = json.loads((tmp_path / "run" / "config.json").read_text())
    size = len(_records("shared.jsonl"))
    assert cfg["demo_pool"]["pool"] == "shared" and cfg["demo_pool"]["file"] == "demos/shared.jsonl"
    assert cfg["demo_pool"]["records"] == size and cfg["settings"]["demo_pool"] == "auto"
    assert f"demo pool: shared (demos/shared.jsonl), {size} records (qald10 " in out.getvalue()
    client = MlflowClient(tracking_uri=uri)
    (run,) = client.search_runs([client.get_experiment_by_name("pool").experiment_id])
    assert run.data.params["demo_pool"] == "shared" and run.data.params["demo_pool_records"] == str(size)
    assert run.data.params["demo_pool_sources"].startswith("qald10=")
    prompts = json.dumps([h.get("messages") for h in lm.history], default=str, ensure_ascii=False)
    assert any(json.dumps(r["question"], ensure_ascii=False)[1:-1] in prompts for r in _records("shared.jsonl"))


def test_a_data_file_run_uses_the_shared_pool_and_a_bad_choice_stops_before_any_work(store_path, endpoint, tmp_path):
    from saga_dspy.eval.errors import EvalError
    from saga_dspy.eval.loading.datasets import load_records
    from saga_dspy.eval.running.runner import evaluate

    record = load_records("qald10", "test")[0]
    data = tmp_path / "mine.jsonl"
    data.write_text(json.dumps({**record, "split": "test"}) + "\n")
    settings = make_settings(
        dataset="qald10", split="test", demos=2, max_steps=4, lm="scripted", lm_cache=False, mlflow=False
    )
    out = io.StringIO()
    evaluate(
        settings,
        ["full"],
        out=tmp_path / "run",
        data_file=data,
        answerable_only=False,
        lm=ScriptedLM({}),
        endpoint=endpoint,
        progress=False,
        stream=out,
    )
    assert json.loads((tmp_path / "run" / "config.json").read_text())["demo_pool"]["pool"] == "shared"
    assert "demo pool: shared" in out.getvalue()
    with pytest.raises(EvalError, match="--demo-pool qald11: no such bundled pool"):
        evaluate(settings.model_copy(update={"demo_pool": "qald11"}), ["full"], out=tmp_path / "bad", progress=False)
    assert not (tmp_path / "bad").exists()


def test_ask_says_which_pool_it_uses(monkeypatch, store_path, capsys):
    from dspy.utils.dummies import DummyLM

    import saga_dspy.lm as lm_module
    from saga_dspy.ask import main

    script = [
        {"answer_type_label": "person", "answer_type_qid": "Q5"},
        {"next_thought": "Done.", "next_tool_name": "stop", "next_tool_args": {}},
    ]
    monkeypatch.setattr(lm_module, "build_lm", lambda settings: DummyLM(list(script) * 3))
    monkeypatch.setattr(lm_module, "configure_lm_cache", lambda settings: None)
    common = ["--cache-dir", str(TEST_CACHE), "--no-result-cache", "--max-steps", "2"]
    assert main(["Who painted the Mona Lisa?", *common]) == 0
    assert "demo pool: shared (demos/shared.picks.jsonl)" in capsys.readouterr().out  # a typed question: no benchmark
    assert main(["Who painted the Mona Lisa?", "--json", "--dataset", "qald7", *common]) == 0
    assert json.loads(capsys.readouterr().out)["demo_pool"]["pool"] == "qald7"
    assert main(["Who painted the Mona Lisa?", "--demo-pool", "none", *common]) == 0
    assert "demo pool: none" in capsys.readouterr().out
