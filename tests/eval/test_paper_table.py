"""benchmarks/paper_table.py (the Table 5 protocol): the variants of the dev slice evaluated for real with a scripted
LM, pooled per variant over two datasets, compared with `paper`, and logged to a real MLflow store as one comparison."""

from __future__ import annotations

import json

import pytest
from conftest import scripted_settings
from helpers.scripted_lm import ScriptedLM, scripted_plans
from helpers.scripts import REPO, load_script

from saga_dspy.eval.loading.evalset import load_eval_set
from saga_dspy.eval.running.runner import evaluate

VARIANTS = ["paper", "paper-no-type-filter", "paper-no-type-state", "paper-no-answer-type", "spinach", "full"]


def test_the_protocol_on_two_datasets_is_one_mlflow_comparison(store_path, endpoint, search, tmp_path, capsys):
    import mlflow

    specs = {v: [] for v in VARIANTS}
    for dataset in ("qald10", "qald9plus"):  # two questions of each of the slice's files
        ids = (REPO / "data" / "slices" / "dev60" / f"{dataset}.ids").read_text().split()[:2]
        settings = scripted_settings("dev").model_copy(update={"dataset": dataset, "max_steps": 5})
        evalset = load_eval_set(settings, ids=ids, progress=False)
        lm = ScriptedLM(scripted_plans(evalset.items))
        for variant in VARIANTS:  # one run after another, as the shell script does
            out = tmp_path / dataset / variant
            evaluate(
                settings,
                [variant],
                out=out,
                ids=[item.id for item in evalset.items],
                lm=lm,
                endpoint=endpoint,
                search=search,
                progress=False,
            )
            specs[variant].append(str(out))
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    table = load_script("benchmarks/paper_table.py")
    args = [f"{v}={','.join(dirs)}" for v, dirs in specs.items()]
    assert table.main([*args, "--json", str(tmp_path / "t5.json"), "--mlflow-uri", uri, "--invocation", "t5"]) == 0
    printed = capsys.readouterr().out
    rows = json.loads((tmp_path / "t5.json").read_text())
    assert [r["run"] for r in rows] == VARIANTS and all(r["n"] == 4 for r in rows)
    assert rows[0]["against_first"] is None and all(r["against_first"]["n"] == 4 for r in rows[1:])
    assert rows[0]["final_program"] == 0  # paper never answers with a query the program wrote
    assert "| paper | 4 |" in printed and "95% CI, n=4" in printed
    mlflow.set_tracking_uri(uri)
    runs = mlflow.search_runs(experiment_names=["saga-table5-dev60"], filter_string="tags.`saga.invocation` = 't5'")
    assert sorted(runs["params.variant"]) == sorted(VARIANTS)  # a row per variant
    spinach = runs[runs["params.variant"] == "spinach"].iloc[0]
    # MLflow shows scores in percent, as the CLI prints them
    assert spinach["metrics.f1_delta"] == pytest.approx(100 * rows[4]["against_first"]["delta"])
    assert spinach["metrics.f1"] == pytest.approx(100 * rows[4]["f1"])
