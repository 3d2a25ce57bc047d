"""`python -m saga_dspy.eval` with a scripted LM over a few sample questions: the files written,
the metrics the script implies, resume after a real kill, and MLflow tracking.

The scripted LM (`ScriptedLM`) answers every predictor of the real `SagaProgram`, which runs
its real tools on the real embedded store: the controller's actions per question are a
script (search, execute a given query, stop), so the expected F1 of each question is known.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from conftest import REPO, TEST_CACHE, make_settings, scripted_settings
from helpers.scripted_lm import ScriptedLM

# --------------------------------------------------------------------------- the sample questions

QUESTION_IDS = ("0", "5", "17", "9")  # exact SELECT, partial SELECT (3 answers), exact ASK, wrong


def _gold_rows(gold: str) -> list[str]:
    obj = json.loads(gold)
    return [cell["value"] for row in obj["results"]["bindings"] for cell in row.values() if cell["type"] == "uri"]


def build_script(evalset) -> tuple[dict, dict, dict[str, float]]:
    """Plans, answer types and the F1 each question must get."""
    plans: dict[str, list] = {}
    types: dict[str, tuple[str, str]] = {}
    expected: dict[str, float] = {}
    by_id = {item.id: item for item in evalset.items}
    q0, q5, q17, q9 = (by_id[i] for i in QUESTION_IDS)
    # exact: the gold query itself
    plans[q0.question] = [
        ("search_wikidata", {"query": "Riemannian geometry"}),
        ("execute_sparql", {"sparql": q0.gold_sparql}),
        ("stop", {}),
    ]
    expected["0"] = 1.0
    # partial: one of the gold answers (precision 1, recall 1/n)
    answers = _gold_rows(q5.gold)
    assert len(answers) == 3
    plans[q5.question] = [
        ("execute_sparql", {"sparql": f"SELECT ?x WHERE {{ VALUES ?x {{ <{answers[0]}> }} }}"}),
        ("stop", {}),
    ]
    expected["5"] = 2 * 1 * (1 / 3) / (1 + 1 / 3)
    # boolean: the gold ASK query
    plans[q17.question] = [("execute_sparql", {"sparql": q17.gold_sparql}), ("stop", {})]
    types[q17.question] = ("boolean", "")
    expected["17"] = 1.0
    # wrong: an answer that is not gold
    plans[q9.question] = [("execute_sparql", {"sparql": "SELECT ?x WHERE { VALUES ?x { wd:Q42 } }"}), ("stop", {})]
    expected["9"] = 0.0
    return plans, types, expected


@pytest.fixture(scope="module")
def eval_settings(store_path):
    return scripted_settings("test")


@pytest.fixture(scope="module")
def sample(eval_settings):
    from saga_dspy.eval.loading.evalset import load_eval_set

    evalset = load_eval_set(eval_settings, ids=list(QUESTION_IDS), progress=False)
    plans, types, expected = build_script(evalset)
    return evalset, plans, types, expected


def _run(settings, out, plans, types, endpoint, **kwargs):
    from saga_dspy.eval.running.runner import evaluate

    lm = ScriptedLM(plans, types)
    results = evaluate(
        settings,
        kwargs.pop("variants", ["full"]),
        out=out,
        ids=list(QUESTION_IDS),
        lm=lm,
        endpoint=endpoint,
        progress=False,
        **kwargs,
    )
    return results, lm


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


# --------------------------------------------------------------------------- tests


def test_eval_writes_files_and_the_scripted_metrics(eval_settings, sample, endpoint, tmp_path):
    evalset, plans, types, expected = sample
    settings = eval_settings.model_copy(update={"num_threads": 2})
    results, lm = _run(settings, tmp_path / "run", plans, types, endpoint)
    out = tmp_path / "run"
    for name in ("predictions.jsonl", "config.json", "metrics.json", "comparison.png", "comparison.json"):
        assert (out / name).exists(), name
    lines = {line["id"]: line for line in _lines(out / "predictions.jsonl")}
    assert sorted(lines) == sorted(QUESTION_IDS)
    for qid, f1 in expected.items():
        assert lines[qid]["f1"] == pytest.approx(f1), (qid, lines[qid]["sparql"], lines[qid]["trajectory"])
        assert lines[qid]["em"] == (f1 == 1.0)
        assert lines[qid]["final_status"] == "ok"
        assert lines[qid]["error"] is None
    line = lines["0"]
    assert line["question"] == "After whom is the Riemannian geometry named?"
    assert line["gold"]["results"]["bindings"] and line["gold_sparql"]
    assert line["answers"]["results"]["bindings"] == line["gold"]["results"]["bindings"]
    assert [s["tool_name"] for s in line["trajectory"]] == ["search_wikidata", "execute_sparql", "stop"]
    assert "Riemann" in line["trajectory"][0]["observation"]  # a real search observation
    assert line["counters"]["steps"] == 3 and line["counters"]["lm_calls"] == 4  # answer type + 3 steps
    assert (
        lines["17"]["is_boolean"]
        and lines["17"]["answers"] == {"head": {}, "boolean": True}
        or lines["17"]["answers"]["boolean"] == lines["17"]["gold"]["boolean"]
    )

    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["n"] == 4 and metrics["complete"] is True and metrics["interrupted"] is False
    assert metrics["f1"] == pytest.approx(sum(expected.values()) / 4)
    assert metrics["em"] == pytest.approx(0.5)
    assert metrics["boolean_n"] == 1 and metrics["boolean_f1"] == pytest.approx(1.0)
    assert metrics["factoid_f1"] == pytest.approx((1.0 + expected["5"] + 0.0) / 3)
    assert metrics["empty_rate"] == 0.0 and metrics["n_failed"] == 0
    assert metrics["mean_steps"] == pytest.approx((3 + 2 + 2 + 2) / 4)
    assert results["full"].metrics["f1"] == metrics["f1"]

    config = json.loads((out / "config.json").read_text())
    assert config["dataset"] == "qald10" and config["split"] == "test" and config["variant"] == "full"
    assert config["ids"] == list(QUESTION_IDS)
    assert config["versions"]["dspy"] and config["versions"]["python"]
    assert config["metric_rules"]["answers"].startswith("mode 'answers'")
    assert "react.react" in config["prompts"] and "next_tool_name" in config["prompts"]["react.react"]["outputs"]
    assert "schema" in config["prompts"]["react.react"]["instructions"].lower()
    assert config["lm"]["model"] == "scripted" and config["seeds"] == {"lm": 0, "coverage": 0}
    assert config["endpoint"]["endpoint"] == "embedded"
    assert config["filter_report"]["kept"] < config["filter_report"]["total"]
    assert "api_key" not in json.dumps(config["settings"]) or config["settings"]["api_key"] in (None, "***")


def test_existing_run_is_not_overwritten_and_ids_are_checked(eval_settings, sample, endpoint, tmp_path):
    from saga_dspy.eval.errors import EvalError
    from saga_dspy.eval.loading.evalset import load_eval_set
    from saga_dspy.eval.running.runner import evaluate

    evalset, plans, types, _ = sample
    out = tmp_path / "run"
    _run(eval_settings.model_copy(update={"limit": 1}), out, plans, types, endpoint)
    with pytest.raises(EvalError, match="--resume"):
        _run(eval_settings, out, plans, types, endpoint)
    with pytest.raises(EvalError, match="not in qald10/test"):
        load_eval_set(eval_settings, ids=["no-such-id"], progress=False)
    with pytest.raises(EvalError, match="unknown variant"):
        evaluate(eval_settings, ["nope"], out=tmp_path / "x", progress=False)
    # resuming with other settings is refused
    with pytest.raises(EvalError, match="other settings"):
        _run(eval_settings.model_copy(update={"max_steps": 3}), out, plans, types, endpoint, resume=True)


def test_several_variants_side_by_side(eval_settings, sample, endpoint, tmp_path, capsys):
    evalset, plans, types, expected = sample
    out = tmp_path / "cmp"
    results, _ = _run(eval_settings, out, plans, types, endpoint, variants=["full", "spinach"])
    assert set(results) == {"full", "spinach"}
    for v in ("full", "spinach"):
        assert (out / v / "predictions.jsonl").exists() and (out / v / "metrics.json").exists()
        assert json.loads((out / v / "config.json").read_text())["variant"] == v
    table = capsys.readouterr().out
    assert re.search(r"^full\s+4\s", table, re.M) and re.search(r"^spinach\s+4\s", table, re.M)
    assert (out / "comparison.png").read_bytes()[:4] == b"\x89PNG"
    assert set(json.loads((out / "comparison.json").read_text())) == {"full", "spinach"}
    # the spinach controller sees no answer type / type context
    spinach_prompts = json.loads((out / "spinach" / "config.json").read_text())["prompts"]["react.react"]
    assert "type_context" not in spinach_prompts["inputs"]


def test_retry_failed_reruns_only_errors(eval_settings, sample, endpoint, tmp_path):
    evalset, plans, types, expected = sample
    out = tmp_path / "run"
    _run(eval_settings, out, plans, types, endpoint)
    path = out / "predictions.jsonl"
    lines = _lines(path)
    lines[1]["error"] = "LMError: server went away"
    lines[1]["f1"] = 0.0
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    results, lm = _run(eval_settings, out, plans, types, endpoint, resume=True)
    assert lm.calls == 0  # nothing left to do
    assert json.loads((out / "metrics.json").read_text())["n_failed"] == 1
    results, lm = _run(eval_settings, out, plans, types, endpoint, resume=True, retry_failed=True)
    assert lm.calls > 0
    after = _lines(path)
    assert sorted(line["id"] for line in after) == sorted(QUESTION_IDS)
    assert all(line["error"] is None for line in after)
    assert {line["id"]: line["f1"] for line in after}[lines[1]["id"]] == pytest.approx(expected[lines[1]["id"]])


_CHILD = textwrap.dedent(
    """
    import json, sys
    sys.path.insert(0, {tests!r})
    from conftest import scripted_settings
    from helpers.scripted_lm import ScriptedLM
    from saga_dspy.eval.running.runner import evaluate
    plans, types = json.load(open({script!r}))
    settings = scripted_settings("test").model_copy(update={{"num_threads": 2}})
    lm = ScriptedLM({{q: [tuple(a) for a in p] for q, p in plans.items()}}, {{q: tuple(t) for q, t in types.items()}},
                    delay={delay})
    evaluate(settings, ["full"], out={out!r}, ids={ids!r}, lm=lm, progress=False, resume={resume})
    """
)


def _child(tmp_path, plans, types, out, delay, resume) -> subprocess.Popen:
    script = tmp_path / "script.json"
    script.write_text(json.dumps([plans, types]))
    code = _CHILD.format(
        tests=str(REPO / "tests"), script=str(script), delay=delay, out=str(out), ids=list(QUESTION_IDS), resume=resume
    )
    env = {**os.environ, "SAGA_TEST_CACHE_DIR": str(TEST_CACHE)}
    return subprocess.Popen(
        [sys.executable, "-c", code], cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def test_resume_after_a_kill_loses_and_duplicates_nothing(eval_settings, sample, tmp_path):
    evalset, plans, types, expected = sample
    out = tmp_path / "killed"
    path = out / "predictions.jsonl"
    proc = _child(tmp_path, plans, types, out, delay=0.4, resume=False)
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline:  # kill as soon as some (not all) questions are written
            if path.exists() and len(_lines(path)) >= 1:
                break
            if proc.poll() is not None:
                pytest.fail(f"child ended early: {proc.stderr.read()[-3000:]}")
            time.sleep(0.05)
        else:
            pytest.fail("no line written in time")
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
    before = _lines(path)
    assert 1 <= len(before) < len(QUESTION_IDS), "the kill came too late to test anything"
    # a half-written line (as a kill during write() could leave) is dropped on resume
    with open(path, "a") as fh:
        fh.write('{"id": "9", "question": "cut off')
    proc = _child(tmp_path, plans, types, out, delay=0.0, resume=True)
    stdout, stderr = proc.communicate(timeout=180)
    assert proc.returncode == 0, stderr[-3000:]
    after = _lines(path)
    ids = [line["id"] for line in after]
    assert sorted(ids) == sorted(QUESTION_IDS) and len(ids) == len(set(ids))
    assert after[: len(before)] == before  # finished lines kept as they were
    for line in after:
        assert line["f1"] == pytest.approx(expected[line["id"]])
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["n"] == 4 and metrics["complete"]
    assert len(json.loads((out / "config.json").read_text())["resumed"]) == 1


def test_mlflow_run_with_params_metrics_and_artifacts(eval_settings, sample, endpoint, tmp_path):
    from mlflow import MlflowClient

    evalset, plans, types, expected = sample
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    settings = eval_settings.model_copy(update={"mlflow": True, "mlflow_uri": uri})
    results, _ = _run(settings, tmp_path / "run", plans, types, endpoint, experiment="test-eval")
    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("test-eval")
    assert exp is not None and exp.artifact_location.startswith("file://" + str(tmp_path))
    runs = client.search_runs([exp.experiment_id])
    assert len(runs) == 1
    run = runs[0]
    assert run.info.status == "FINISHED"
    params = run.data.params
    assert params["dataset"] == "qald10" and params["split"] == "test" and params["variant"] == "full"
    assert params["lm"] == "scripted" and params["endpoint"] == "embedded"
    assert params["schema_coverage"] == "100" and params["program"] == "None"
    assert run.data.metrics["f1"] == pytest.approx(100 * sum(expected.values()) / 4, abs=0.01)  # percent
    assert run.data.metrics["em"] == pytest.approx(50.0)
    assert "mean_steps" in run.data.metrics and "empty_rate" in run.data.metrics
    artifacts = {a.path for a in client.list_artifacts(run.info.run_id)}
    assert {"predictions.jsonl", "config.json", "metrics.json", "comparison.png"} <= artifacts
    local = client.download_artifacts(run.info.run_id, "metrics.json", str(tmp_path / "dl"))
    assert json.loads(Path(local).read_text())["n"] == 4
    # DSPy traces (mlflow.dspy.autolog): one per question, in the same experiment
    traces = client.search_traces(locations=[exp.experiment_id])
    assert len(traces) >= 4
    # tracking is switched off again afterwards
    import dspy
    from mlflow.dspy.callback import MlflowCallback

    assert not any(isinstance(c, MlflowCallback) for c in dspy.settings.callbacks)


def test_cli_main_with_flags(eval_settings, sample, endpoint, tmp_path, monkeypatch, capsys):
    """The CLI end to end (flags -> settings -> files), with the LM builder swapped for the script."""
    import saga_dspy.lm
    from saga_dspy.eval import __main__ as eval_cli

    evalset, plans, types, expected = sample
    monkeypatch.setattr(saga_dspy.lm, "build_lm", lambda settings: ScriptedLM(plans, types))
    out = tmp_path / "cli"
    code = eval_cli.main(
        [
            "--dataset",
            "qald10",
            "--split",
            "test",
            "--ids",
            "0,17",
            "--lm",
            "scripted",
            "--no-mlflow",
            "--cache-dir",
            str(TEST_CACHE),
            "--no-result-cache",
            "--demos",
            "0",
            "--max-steps",
            "6",
            "--schema-coverage",
            "50",
            "--num-threads",
            "2",
            "--out",
            str(out),
            "--no-progress",
            "--no-lm-cache",
        ]
    )
    assert code == 0, capsys.readouterr().err
    printed = capsys.readouterr().out
    assert "answerable" in printed and "left out" in printed  # the filter report
    assert re.search(r"^full\s+2\s+100\.0\s+100\.0", printed, re.M)
    config = json.loads((out / "config.json").read_text())
    assert config["schema_coverage"] == 50 and config["ids"] == ["0", "17"]
    with pytest.raises(SystemExit):
        eval_cli.main(["--schema-coverage", "30"])


def test_live_endpoint_needs_frozen_gold(tmp_path):
    from saga_dspy.eval.errors import EvalError
    from saga_dspy.eval.loading.gold import find_gold

    settings = make_settings(endpoint="http://127.0.0.1:9/sparql", cache_dir=tmp_path)
    with pytest.raises(
        EvalError, match="freeze-gold --dataset qald10 --split test --endpoint http://127.0.0.1:9/sparql"
    ):
        find_gold(settings, "qald10", "test")


def test_freeze_gold_subcommand_on_a_live_server(oxigraph_server, tmp_path, capsys):
    """freeze-gold on a real SPARQL server (oxigraph over the sample), then eval finds that gold."""
    from saga_dspy.eval import __main__ as eval_cli
    from saga_dspy.eval.loading.evalset import load_eval_set
    from saga_dspy.eval.loading.gold import find_gold

    data = tmp_path / "tiny.jsonl"
    data.write_text(
        "\n".join(
            json.dumps(r)
            for r in [
                {"id": "a", "question": "Is Q42 a human?", "sparql": "ASK { wd:Q42 wdt:P31 wd:Q5 }"},
                {"id": "b", "question": "Nothing?", "sparql": "SELECT ?x WHERE { wd:Q42 wdt:P999999 ?x }"},
            ]
        )
        + "\n"
    )
    code = eval_cli.main(
        [
            "freeze-gold",
            "--dataset",
            "tiny",
            "--split",
            "test",
            "--endpoint",
            oxigraph_server,
            "--cache-dir",
            str(tmp_path),
            "--data-file",
            str(data),
            "--no-progress",
        ]
    )
    assert code == 0
    settings = make_settings(endpoint=oxigraph_server, cache_dir=tmp_path, dataset="tiny", split="test")
    path = find_gold(settings, "tiny", "test", data_file=data)
    assert path.exists() and str(tmp_path) in str(path)
    evalset = load_eval_set(settings, data_file=data, progress=False)
    assert [i.id for i in evalset.items] == ["a"]
    assert evalset.filter_report["left_out"] == 1 and evalset.filter_report["reasons"] == {"empty": 1}


def test_predictions_file_repair(tmp_path):
    from saga_dspy.eval.errors import EvalError
    from saga_dspy.eval.running.predictions import PredictionsFile

    path = tmp_path / "predictions.jsonl"
    path.write_text('{"id": "a", "f1": 1.0}\n{"id": "b", "f1": 0.5}\n{"id": "c", "f1"')
    assert [line["id"] for line in PredictionsFile.read(path)] == ["a", "b"]
    assert path.read_text().endswith('"f1"')  # reading alone changes nothing
    PredictionsFile.read(path, repair=True)
    assert path.read_text() == '{"id": "a", "f1": 1.0}\n{"id": "b", "f1": 0.5}\n'
    out = PredictionsFile(path)
    out.append({"id": "c", "f1": 0.0})
    out.close()
    assert not out.append({"id": "d", "f1": 0.0})  # nothing is written after close (an interrupt)
    assert [line["id"] for line in PredictionsFile.read(path)] == ["a", "b", "c"]
    path.write_text('{"id": "a"}\nnot json\n{"id": "b"}\n')
    with pytest.raises(EvalError, match="middle of the file"):
        PredictionsFile.read(path)


def test_score_prediction_maps_statuses():
    from saga_dspy.eval.loading.evalset import EvalItem
    from saga_dspy.eval.running.predictions import score_prediction
    from saga_dspy.eval.scoring.metrics import compute_metrics
    from saga_dspy.kg.results import SelectResult

    gold = '{"head": {"vars": ["x"]}, "results": {"bindings": [{"x": {"type": "uri", "value": "http://a"}}]}}'
    item = EvalItem("1", "q?", gold)
    import dspy

    none = score_prediction(
        item, dspy.Prediction(answers=None, final_status="none", sparql="", counters={"steps": 3}), "answers"
    )
    empty = score_prediction(item, dspy.Prediction(answers=SelectResult(["x"], []), final_status="empty"), "answers")
    crashed = score_prediction(item, None, "answers", error="RuntimeError: boom", seconds=1.5)
    assert none["f1"] == 0.0 and none["empty"] and none["final_status"] == "none"
    assert empty["empty"] and crashed["error"] == "RuntimeError: boom" and crashed["counters"]["seconds"] == 1.5
    m = compute_metrics([none, empty, crashed], total=4)
    assert m["n"] == 3 and m["empty_rate"] == 1.0 and m["n_no_query"] == 1 and m["n_failed"] == 1
    assert m["n_empty"] == 2 and m["n_error"] == 1 and m["complete"] is False  # 'none' counts as empty


def test_eval_set_is_a_dataset_selected_by_ids_in_order_then_limited(eval_settings):
    import datasets

    from saga_dspy.eval.loading.datasets import load_benchmark
    from saga_dspy.eval.loading.evalset import load_eval_set

    ids = list(reversed(QUESTION_IDS))
    evalset = load_eval_set(eval_settings, ids=ids, progress=False)
    assert isinstance(evalset.data, datasets.Dataset) and len(evalset) == len(ids)
    assert [i.id for i in evalset.items] == ids  # the order asked for, not the file's
    full = load_benchmark("qald10", "test", eval_settings, answerable_only=True)
    row = full[list(full["id"]).index(ids[0])]
    assert evalset.items[0].gold == row["gold"] and evalset.items[0].gold_sparql == row["sparql"]
    limited = load_eval_set(eval_settings.model_copy(update={"limit": 3}), progress=False)
    assert list(limited.data["id"]) == list(full["id"])[:3] and limited.selection["limit"] == 3


def test_gold_of_a_data_file_is_frozen_for_that_file_s_content(tmp_path):
    """Two data files with the same ids are two golds: the first file's gold never scores the second's answers."""
    from conftest import TEST_CACHE

    from saga_dspy.eval.loading.evalset import load_eval_set
    from saga_dspy.eval.loading.gold import freeze_missing_gold

    (tmp_path / "stores").symlink_to(TEST_CACHE / "stores")  # the built sample store, gold under tmp_path
    settings = make_settings(cache_dir=tmp_path, dataset="mine", split="test")
    files = {
        "named after": "SELECT ?x WHERE { wd:Q761383 wdt:P138 ?x }",
        "instance of": "SELECT ?x WHERE { wd:Q761383 wdt:P31 ?x }",
    }
    golds = []
    for n, sparql in enumerate(files.values()):
        data = tmp_path / f"{n}.jsonl"
        data.write_text(json.dumps({"id": "q1", "question": "What about Riemannian geometry?", "sparql": sparql}))
        assert freeze_missing_gold(settings, "mine", "test", data_file=data, progress=False) is not None
        assert freeze_missing_gold(settings, "mine", "test", data_file=data, progress=False) is None  # frozen once
        golds.append(load_eval_set(settings, data_file=data, progress=False).items[0].gold)
    assert "Q42299" in golds[0] and "Q42299" not in golds[1]
    assert len(list((tmp_path / "gold" / "mine").glob("data-*/gold-embedded-test.jsonl.gz"))) == 2
