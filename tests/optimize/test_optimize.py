"""`python -m saga_dspy.optimize` on a scripted LM: BootstrapFewShot writes a program whose
demos load back and reach the prompt; gold-teacher demos alone; test splits are refused."""

from __future__ import annotations

import importlib.util
import json

import dspy
import pytest
from conftest import make_settings, scripted_settings
from helpers.scripted_lm import ScriptedLM


@pytest.fixture(scope="module")
def opt_settings(store_path):
    return scripted_settings("train")


@pytest.fixture(scope="module")
def train_script(opt_settings):
    """Every answerable train question solved by executing its gold query, then stop."""
    from saga_dspy.eval.evalset import load_eval_set

    items = load_eval_set(opt_settings, progress=False).items
    plans, types = {}, {}
    for item in items:
        plans[item.question] = [("execute_sparql", {"sparql": item.gold_sparql}), ("stop", {})]
        if '"boolean"' in item.gold:
            types[item.question] = ("boolean", "")
    return plans, types


def test_metric_is_f1_and_a_pass_when_tracing():
    from saga_dspy.kg.results import AskResult
    from saga_dspy.optimize import make_metric

    metric = make_metric("answers", threshold=0.5)
    example = dspy.Example(question="q", gold='{"head": {}, "boolean": true}').with_inputs("question")
    assert metric(example, dspy.Prediction(answers=AskResult(True))) == 1.0
    assert metric(example, dspy.Prediction(answers=AskResult(False))) == 0.0
    assert metric(example, dspy.Prediction(answers=None), trace=[]) is False
    assert metric(example, dspy.Prediction(answers=AskResult(True)), trace=[]) is True


def test_test_splits_are_refused(opt_settings, capsys):
    from saga_dspy.cli import run_main
    from saga_dspy.optimize import OptimizeError, OptimizeOptions, optimize, refuse_test_split
    from saga_dspy.optimize.__main__ import main

    with pytest.raises(OptimizeError, match="test split"):
        refuse_test_split("qald10", "test")
    with pytest.raises(OptimizeError, match="only a test split"):
        refuse_test_split("lcquad2", "test")
    with pytest.raises(OptimizeError, match="test split"):
        refuse_test_split("anything", "my-test", data_file="x.jsonl")
    assert refuse_test_split("wwq", "dev") == "dev" and refuse_test_split("qald10", "train") == "train"
    with pytest.raises(OptimizeError):
        optimize(opt_settings.model_copy(update={"split": "test"}), OptimizeOptions(), progress=False)
    # the CLI refuses before building any LM, in one line (cli.run_main)
    assert run_main(main, ["--dataset", "qald10", "--split", "test", "--lm", "no/such-model", "--no-mlflow"]) == 2
    assert "refusing to optimize on qald10/test" in capsys.readouterr().err


@pytest.mark.skipif(importlib.util.find_spec("optuna") is not None, reason="optuna is installed")
def test_mipro_without_optuna_says_how_to_install(capsys):
    from saga_dspy.cli import run_main
    from saga_dspy.optimize.__main__ import main

    assert run_main(main, ["--optimizer", "mipro", "--dataset", "qald10", "--split", "train", "--no-mlflow"]) == 2
    assert "pip install -e '.[mipro]'" in capsys.readouterr().err


def test_bootstrap_writes_a_program_that_loads_and_changes_the_demos(
    opt_settings, train_script, endpoint, search, tmp_path
):
    from saga_dspy.agent.program import SagaProgram
    from saga_dspy.eval.runner import evaluate
    from saga_dspy.optimize import OptimizeOptions, optimize

    plans, types = train_script
    lm = ScriptedLM(plans, types)
    settings = opt_settings.model_copy(update={"limit": 4})
    result = optimize(
        settings,
        OptimizeOptions(optimizer="bootstrap", max_demos=2),
        out=tmp_path / "opt",
        lm=lm,
        endpoint=endpoint,
        search=search,
        progress=False,
    )
    path = tmp_path / "opt" / "program.json"
    assert result.program_path == path and path.exists()
    compiled = result.program.react.react.demos
    assert len(compiled) == 2 and all(d.get("augmented") for d in compiled)
    assert all(d["next_tool_name"] in ("execute_sparql", "stop") for d in compiled)
    # the answer-type predictor learns from the bootstrapped questions whose cues left the type to the LM
    from saga_dspy.agent.answer_cues import decides, rule_answer_type
    from saga_dspy.schema import load_schema_index

    schema = load_schema_index(settings)
    asked = [d["question"] for d in compiled if not decides(rule_answer_type(d["question"], schema))]
    assert [d["question"] for d in result.program.answer_type.demos] == asked and asked

    fresh = SagaProgram(settings, endpoint=endpoint, search=search)
    assert fresh.react.react.demos == []
    loaded = SagaProgram(settings.model_copy(update={"program": path}), endpoint=endpoint, search=search)
    assert [d["trajectory"] for d in loaded.react.react.demos] == [d["trajectory"] for d in compiled]
    assert [d["next_tool_args"] for d in loaded.react.react.demos] == [d["next_tool_args"] for d in compiled]
    config = json.loads((tmp_path / "opt" / "config.json").read_text())
    assert config["kind"] == "optimize" and len(config["train_ids"]) == 4 and config["split"] == "train"
    assert config["prompts"]["react.react"]["demos"] == 2

    # eval --program: the compiled demos are in the controller's prompt
    demo_question = compiled[0]["question"]
    test_q = "After whom is the Riemannian geometry named?"
    eval_lm = ScriptedLM({test_q: [("stop", {})]})
    evaluate(
        make_settings(
            dataset="qald10",
            split="test",
            demos=0,
            max_steps=3,
            mlflow=False,
            lm="scripted",
            lm_cache=False,
            program=path,
        ),
        ["full"],
        out=tmp_path / "eval",
        ids=["0"],
        lm=eval_lm,
        endpoint=endpoint,
        progress=False,
    )
    controller = [json.dumps(h["messages"]) for h in eval_lm.history if "next_tool_name" in json.dumps(h["messages"])]
    assert controller and demo_question in controller[0]
    prompts = json.loads((tmp_path / "eval" / "config.json").read_text())["prompts"]
    assert prompts["react.react"]["demos"] == 2


def test_gold_teacher_alone_needs_no_lm(opt_settings, endpoint, search, tmp_path):
    from saga_dspy.agent.program import SagaProgram
    from saga_dspy.optimize import OptimizeError, OptimizeOptions, optimize

    with pytest.raises(OptimizeError, match="--teacher gold"):
        optimize(opt_settings, OptimizeOptions(optimizer="none"), progress=False)
    settings = opt_settings.model_copy(update={"limit": 12})
    result = optimize(
        settings,
        OptimizeOptions(optimizer="none", teacher="gold", gold_demos=2),
        out=tmp_path / "g",
        endpoint=endpoint,
        search=search,
        progress=False,
    )
    demos = result.program.react.react.demos
    assert len(demos) == 2
    for demo in demos:
        assert demo.next_tool_name == "execute_sparql"
        assert "Observation:" in demo.trajectory and "Action: search_wikidata" in demo.trajectory
        assert json.loads(demo.next_tool_args)["sparql"]
    records = [json.loads(line) for line in (tmp_path / "g" / "gold_demos.jsonl").read_text().splitlines()]
    assert len(records) >= 2 and all(r["teacher"] == "gold" for r in records)
    assert set(json.loads((tmp_path / "g" / "config.json").read_text())["gold_demo_ids"]) <= {r["id"] for r in records}
    loaded = SagaProgram(settings.model_copy(update={"program": result.program_path}), endpoint=endpoint, search=search)
    assert [d["next_tool_args"] for d in loaded.react.react.demos] == [d["next_tool_args"] for d in demos]


def test_bootstrap_seeded_by_the_gold_teacher_with_a_holdout(
    opt_settings, train_script, endpoint, search, tmp_path, monkeypatch
):
    """Gold demos seed the teacher; the student gets bootstrapped demos topped up with gold ones;
    the held-back questions are evaluated before and after (progress bars labelled by role)."""
    from saga_dspy.eval import runner
    from saga_dspy.optimize import OptimizeOptions, optimize

    labels: list[str] = []
    real_bar = runner._progress_bar
    monkeypatch.setattr(
        runner,
        "_progress_bar",
        lambda total, initial, desc, enabled: labels.append(desc) or real_bar(total, initial, desc, False),
    )

    plans, types = train_script
    lm = ScriptedLM(plans, types)
    settings = opt_settings.model_copy(update={"limit": 2})
    # seed 2: both train questions (behind the firewall) are ones the gold teacher can solve on the sample
    result = optimize(
        settings,
        OptimizeOptions(optimizer="bootstrap", teacher="gold", max_demos=3, gold_demos=2, holdout=2, shuffle_seed=2),
        out=tmp_path / "o",
        lm=lm,
        endpoint=endpoint,
        search=search,
        progress=False,
    )
    demos = result.program.react.react.demos
    assert len(demos) == 3
    assert sum(1 for d in demos if d.get("augmented")) == 2  # bootstrapped from the 2 train questions
    config = json.loads((tmp_path / "o" / "config.json").read_text())
    assert not set(config["holdout_ids"]) & set(config["train_ids"])
    for name in ("zero-shot", "compiled"):
        held = tmp_path / "o" / "holdout" / name / "predictions.jsonl"
        assert len(held.read_text().splitlines()) == 2
    metrics = json.loads((tmp_path / "o" / "metrics.json").read_text())
    assert metrics["holdout_zero_shot_f1"] == pytest.approx(1.0)  # the script solves every question
    assert metrics["holdout_compiled_f1"] == pytest.approx(1.0)
    assert (tmp_path / "o" / "holdout.png").exists()
    assert labels == ["hold-out zero-shot", "hold-out compiled"]


def test_a_run_dir_in_use_is_refused(opt_settings, endpoint, tmp_path):
    """Two optimize runs on one --out would overwrite each other's program: the second one fails at once."""
    import filelock

    from saga_dspy.eval.errors import EvalError
    from saga_dspy.optimize import OptimizeOptions, optimize

    held = filelock.FileLock(str(tmp_path / ".lock"), timeout=0)
    held.acquire()
    try:
        with pytest.raises(EvalError, match="in use by another run"):
            optimize(
                opt_settings,
                OptimizeOptions(optimizer="none", teacher="gold"),
                out=tmp_path,
                lm=ScriptedLM({}),
                endpoint=endpoint,
                progress=False,
            )
    finally:
        held.release()
    assert not (tmp_path / "program.json").exists()
