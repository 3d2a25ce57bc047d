"""`python -m saga_dspy.eval rescore RUN_DIR`: a run's metrics again from its predictions, no LM."""

from __future__ import annotations

import json

import pytest
from conftest import scripted_settings
from test_eval import QUESTION_IDS, _run, build_script

from saga_dspy.eval import __main__ as eval_cli
from saga_dspy.eval.loading.evalset import load_eval_set
from saga_dspy.eval.reports.rescore import rescore


@pytest.fixture(scope="module")
def scripted_run(store_path, endpoint, tmp_path_factory):
    settings = scripted_settings("test")
    evalset = load_eval_set(settings, ids=list(QUESTION_IDS), progress=False)
    plans, types, _ = build_script(evalset)
    out = tmp_path_factory.mktemp("rescore") / "run"
    _run(settings, out, plans, types, endpoint)
    return out


def _without(metrics, *keys):
    return {k: v for k, v in metrics.items() if k not in keys}


def test_rescore_reproduces_the_runs_metrics(scripted_run, capsys):
    original = json.loads((scripted_run / "metrics.json").read_text())
    assert original["subset"]["answerable_only"] and original["subset"]["scored"] == 4
    assert eval_cli.main(["rescore", str(scripted_run)]) == 0
    rescored = json.loads((scripted_run / "metrics.rescored.json").read_text())
    assert _without(rescored, "rescored") == original
    assert rescored["rescored"] == {"metric_mode": "answers", "re_executed": 0, "from": "predictions.jsonl"}
    printed = capsys.readouterr().out
    assert "answerable subset" in printed
    # in percent, as every table of the CLI: F1 62.5 for the script's 0.625
    assert f"4 questions, F1 {100 * original['f1']:.1f}, EM {100 * original['em']:.1f}" in printed
    assert "(percent)" in printed and "0.625" not in printed


def test_rescore_re_executes_missing_answers_and_changes_mode(scripted_run, tmp_path, settings):
    import shutil

    run = tmp_path / "run"
    shutil.copytree(scripted_run, run)
    lines = [json.loads(x) for x in (run / "predictions.jsonl").read_text().splitlines()]
    for line in lines:
        if line["id"] == "0":
            line["answers"] = None  # as if the run had not stored them
        if line["id"] == "9":
            line["f1"], line["em"] = 1.0, True  # a tampered score is recomputed, not trusted
    (run / "predictions.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    original = json.loads((run / "metrics.json").read_text())
    metrics = rescore(run, settings=settings)
    assert metrics["rescored"]["re_executed"] == 1
    assert _without(metrics, "rescored") == original
    rows = rescore(run, "rows", settings=settings, out=tmp_path / "rows.json")
    assert rows["rescored"]["metric_mode"] == "rows" and (tmp_path / "rows.json").is_file()
    assert rows["n"] == original["n"]


def test_rescore_needs_a_run_dir(tmp_path, capsys):
    assert eval_cli.main(["rescore", str(tmp_path)]) == 2
    assert "no predictions.jsonl" in capsys.readouterr().err


def test_rescore_prints_the_counts_it_writes(tmp_path, capsys):
    """An empty predictions file is nothing to rescore (not `scored: 4 questions` beside n = 0); a partial one says
    how many of the run's questions its metrics are over, the n it writes."""
    from helpers.runs import write_run

    run = write_run(tmp_path / "run", {"1": 1.0, "2": 0.0, "3": 1.0, "4": 0.0})
    pred = run / "predictions.jsonl"
    lines = pred.read_text().splitlines(keepends=True)
    pred.write_text("")
    assert eval_cli.main(["rescore", str(run)]) == 2
    assert "no prediction of the run's questions" in capsys.readouterr().err
    assert not (run / "metrics.rescored.json").exists()

    pred.write_text("".join(lines[:2]))
    assert eval_cli.main(["rescore", str(run)]) == 0
    out = capsys.readouterr().out
    written = json.loads((run / "metrics.rescored.json").read_text())
    assert ": 2 questions," in out and written["n"] == 2 and written["n_total"] == 4
    assert "2 of them have predictions" in out
