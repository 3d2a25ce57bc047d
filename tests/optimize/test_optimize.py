"""`python -m saga_dspy.optimize` on a scripted LM: the sets (train demos, valset, report set, firewall), each
optimizer (bootstrap, random-search, mipro, gepa, none) scoring candidates on the valset and saving a program
that loads back with its pool, k and instructions; compiled vs default on the report set; Ctrl-C."""

from __future__ import annotations

import json

import dspy
import pytest
from conftest import TEST_CACHE, make_settings
from helpers.scripted_lm import PROPOSAL_FIELDS, ScriptedLM

from saga_dspy.eval.loading.firewall import normalise_text
from saga_dspy.eval.tracking.mlflow_values import shown_metric


@pytest.fixture(scope="module")
def opt_settings(store_path):
    return make_settings(dataset="qald10", split="train", demos=2, max_steps=6, mlflow=False, lm="scripted")


@pytest.fixture(scope="module")
def plans(opt_settings, store_path):
    """Every answerable train and dev question solved by executing its gold query, then stop; a question whose
    gold query runs into a 5 s timeout on the sample is given up at once (the tests need no slow query)."""
    from saga_dspy.eval.loading.evalset import load_eval_set
    from saga_dspy.kg.endpoint import EmbeddedEndpoint

    out = {}
    probe = EmbeddedEndpoint(make_settings(query_timeout=5.0), store_path)
    try:
        for split in ("train", "dev"):
            for item in load_eval_set(opt_settings.model_copy(update={"split": split}), progress=False).items:
                try:
                    probe.query(item.gold_sparql)
                except Exception:  # too slow here
                    out[item.question] = [("stop", {})]
                    continue
                out[item.question] = [("execute_sparql", {"sparql": item.gold_sparql}), ("stop", {})]
    finally:
        probe.close()
    return out


class DemoCountLM(ScriptedLM):
    """Follows the plan only when the controller's prompt shows exactly `solves_with` demos; else it stops at once
    (so only a candidate with that k answers anything)."""

    def __init__(self, plans, solves_with: int):
        super().__init__(plans)
        self.solves_with = solves_with

    def respond(self, outputs, fields):
        if "next_tool_name" in outputs and self.demos_shown != self.solves_with:
            return {"next_thought": "I stop.", "next_tool_name": "stop", "next_tool_args": "{}"}
        return super().respond(outputs, fields)


class InstructionLM(ScriptedLM):
    """Follows the plan only when the controller's instructions contain `cue` (so only a rewritten program answers)."""

    def __init__(self, plans, cue: str):
        super().__init__(plans)
        self.cue = cue

    def respond(self, outputs, fields):
        if "next_tool_name" in outputs and self.cue not in self.system_prompt:
            return {"next_thought": "I stop.", "next_tool_name": "stop", "next_tool_args": "{}"}
        return super().respond(outputs, fields)


def text_lm(text: str) -> dspy.utils.DummyLM:
    """MIPROv2's proposal model: the same text for every field its proposer asks for."""
    return dspy.utils.DummyLM({"": dict.fromkeys(PROPOSAL_FIELDS, text)})


def run(settings, options, tmp_path, lm, endpoint, search, **kwargs):
    from saga_dspy.optimize import optimize

    return optimize(
        settings, options, out=tmp_path / "o", lm=lm, endpoint=endpoint, search=search, progress=False, **kwargs
    )


def small(**kwargs):
    from saga_dspy.optimize import OptimizeOptions

    base = {"train_size": 3, "valset_size": 3, "report_size": 2, "max_traces": 2}
    return OptimizeOptions(**{**base, **kwargs})


def dev_questions(settings) -> set[str]:
    from saga_dspy.eval.loading.datasets import load_records

    return {normalise_text(r["question"]) for r in load_records("qald10", "dev", settings)}


def test_metric_is_f1_and_a_pass_when_tracing():
    from saga_dspy.kg.results import AskResult
    from saga_dspy.optimize import make_metric

    metric = make_metric("answers", threshold=0.5)
    example = dspy.Example(question="q", gold='{"head": {}, "boolean": true}').with_inputs("question")
    assert metric(example, dspy.Prediction(answers=AskResult(True))) == 1.0
    assert metric(example, dspy.Prediction(answers=AskResult(False))) == 0.0
    assert metric(example, dspy.Prediction(answers=None), trace=[]) is False
    assert metric(example, dspy.Prediction(answers=AskResult(True)), trace=[]) is True


def test_the_feedback_metric_names_the_gold_answers_what_came_back_and_the_step_that_went_wrong():
    from saga_dspy.optimize.metric import feedback_metric

    gold = {"head": {"vars": ["x"]}, "results": {"bindings": [{"x": {"type": "uri", "value": "http://e/Q1"}}]}}
    got = {"head": {"vars": ["x"]}, "results": {"bindings": [{"x": {"type": "uri", "value": "http://e/Q2"}}]}}
    example = dspy.Example(question="q", gold=json.dumps(gold)).with_inputs("question")
    steps = [{"tool_name": "search_wikidata", "note": ""}, {"tool_name": "execute_sparql", "note": ""}]
    pred = dspy.Prediction(
        answers=got, sparql="SELECT ?x {}", trajectory=steps, final_source="stop", final_status="ok", error=None
    )
    out = feedback_metric()(example, pred, None, "react.react", None)
    assert out.score == 0.0
    assert "Gold answers: http://e/Q1" in out.feedback and "returned: http://e/Q2" in out.feedback
    assert "differ from the gold answers" in out.feedback
    lost = dspy.Prediction(answers=None, sparql="", trajectory=steps[:1], final_source=None, final_status="none")
    assert "No query was executed" in feedback_metric()(example, lost, None, None, None).feedback


def test_test_splits_are_refused(opt_settings, capsys):
    from saga_dspy.cli import run_main
    from saga_dspy.optimize import OptimizeError, optimize, refuse_test_split
    from saga_dspy.optimize.__main__ import main

    with pytest.raises(OptimizeError, match="test split"):
        refuse_test_split("qald10", "test")
    with pytest.raises(OptimizeError, match="only a test split"):
        refuse_test_split("lcquad2", "test")
    with pytest.raises(OptimizeError, match="test split"):
        refuse_test_split("anything", "my-test", data_file="x.jsonl")
    assert refuse_test_split("wwq", "dev") == "dev" and refuse_test_split("qald10", "train") == "train"
    for bad in ({"valset": "test"}, {"train_split": "test"}, {"report_set": "qald7:test"}):
        with pytest.raises(OptimizeError, match="test split"):
            optimize(opt_settings, small(**bad), progress=False)
    # the CLI refuses before building any LM, in one line (cli.run_main)
    for flags in (["--split", "test"], ["--report-set", "qald9plus:test"], ["--train-split", "test"]):
        assert run_main(main, ["--dataset", "qald10", *flags, "--lm", "no/such-model", "--no-mlflow"]) == 2
        assert "refusing to optimize on" in capsys.readouterr().err


def test_the_sets_keep_dev_out_of_the_demos_and_the_report_set_out_of_selection(opt_settings):
    import io

    from saga_dspy.eval.loading.splits import held_out_firewall
    from saga_dspy.optimize.sets import build_sets

    out = io.StringIO()
    sets = build_sets(opt_settings, seed=3, stream=out)
    val, report = {i.id for i in sets.valset.items}, {i.id for i in sets.report.items}
    assert sets.valset.name == sets.report.name == "qald10/dev" and not val & report
    assert len(val) == (len(val) + len(report) + 1) // 2  # a seeded half of the answerable dev questions
    held = held_out_firewall(opt_settings)
    assert not any(held.collides(i.question, i.gold_sparql) for i in sets.train.items)
    dropped = sets.firewall["train_dropped"]
    assert dropped > 0 and f"dropped {dropped} of the {len(sets.train) + dropped} answerable" in out.getvalue()
    other = build_sets(opt_settings, valset="dev", report_set="qald9plus:dev", valset_size=5)
    assert other.report.name == "qald9plus/dev" and len(other.valset) == 5
    assert not any(
        normalise_text(i.question) in {normalise_text(v.question) for v in other.valset.items}
        for i in other.report.items
    )


def test_random_search_scores_candidates_on_the_valset_and_the_metric_picks_k(
    opt_settings, plans, endpoint, search, tmp_path
):
    """Only k=3 answers: the search scores each candidate on the valset (the default's k=2 and the k=1 ones
    score 0), keeps a k=3 one, saves it; it loads with its pool and k; no dev question is in the pool; the
    report set runs both programs, re-scorable."""
    from mlflow.tracking import MlflowClient

    from saga_dspy.agent.program import SagaProgram
    from saga_dspy.eval.reports.rescore import rescore

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    settings = opt_settings.model_copy(update={"mlflow": True, "mlflow_uri": uri, "trace": "none"})
    lm = DemoCountLM(plans, solves_with=3)
    result = run(
        settings,
        small(optimizer="random-search", k=3, num_candidates=5, k_choices=(1, 3), report_size=3, valset_size=5),
        tmp_path,
        lm,
        endpoint,
        search,
        experiment="opt-test",
    )
    scored = result.candidates
    assert [c.name for c in scored][0] == "default" and len(scored) >= 3
    assert all(
        c.f1 is not None and (tmp_path / "o" / "candidates" / f"{n:02d}" / "predictions.jsonl").exists()
        for n, c in enumerate(scored)
    )
    assert {c.pool.k: c.f1 for c in scored if c.pool.k != 3} == {2: 0.0, 1: 0.0}
    assert all(c.f1 > 0.5 for c in scored if c.pool.k == 3)
    assert result.metrics["chosen"] == scored[1].name == "gold k=3" and result.metrics["k"] == 3
    assert any(c.pool.sources().get("bootstrap") for c in scored)
    loaded = SagaProgram(
        opt_settings.model_copy(update={"program": result.program_path, "demos": 0}), endpoint=endpoint, search=search
    )
    assert loaded.settings.demos == 3 and loaded.compiled_pool is not None
    records = loaded.compiled_pool.records
    assert records and {r["source"] for r in records} <= {"gold", "bootstrap"}
    assert not {normalise_text(r["question"]) for r in records} & dev_questions(opt_settings)
    assert len(loaded.demo_pool()) == len(records)
    # compiled vs default on the report set: both runs, interleaved, with the paired interval
    report = result.metrics["report"]
    assert report["metrics"]["compiled"]["f1"] > 0.5 and report["metrics"]["default"]["f1"] == 0.0
    assert report["paired"]["wins"] >= 2 and report["paired"]["losses"] == 0
    assert not set(report["ids"]) & {i for c in scored for i in c.per_question}  # never used for selection
    assert rescore(tmp_path / "o" / "report" / "compiled")["f1"] == report["metrics"]["compiled"]["f1"]
    delta = f"compiled - default F1: {100 * report['paired']['delta']:+.1f}"
    assert delta in (tmp_path / "o" / "report" / "report.md").read_text()
    # MLflow: the compile run, a child run per candidate with its F1, one candidate_f1 step each, the comparison
    client = MlflowClient(tracking_uri=uri)
    runs = client.search_runs([client.get_experiment_by_name("opt-test").experiment_id])
    (parent,) = [r for r in runs if r.data.tags.get("kind") == "optimize"]
    children = [r for r in runs if r.data.tags.get("kind") == "optimize-candidate"]
    assert len(children) == len(scored)
    assert all(c.data.tags["mlflow.parentRunId"] == parent.info.run_id for c in children)
    assert sorted(c.data.metrics["f1"] for c in children) == sorted(shown_metric("f1", c.f1) for c in scored)
    history = client.get_metric_history(parent.info.run_id, "candidate_f1")
    assert [m.step for m in history] == list(range(len(scored)))
    note = client.get_experiment_by_name("opt-test").tags["mlflow.note.content"]
    assert note.startswith("Compiles of saga-dspy") and "versus_default" in note  # where to click, for a compile
    by_name = {c.data.params["candidate"]: c for c in children}  # each beside the default: why kept or not
    assert "versus_default_low" not in by_name[scored[0].name].data.metrics
    for c in scored[1:]:
        assert by_name[c.name].data.metrics["versus_default_low"] == pytest.approx(100 * c.versus_default.low, abs=0.01)
    assert parent.data.metrics["report_compiled_f1"] == shown_metric("f1", report["metrics"]["compiled"]["f1"])
    assert "report_ci_low" in parent.data.metrics and parent.data.tags["chosen"] == "gold k=3"
    assert "program.json" in {a.path for a in client.list_artifacts(parent.info.run_id)}


def test_bootstrap_adds_the_models_own_successful_train_runs_to_the_pool(
    opt_settings, plans, endpoint, search, tmp_path
):
    lm = ScriptedLM(plans)
    result = run(
        opt_settings, small(optimizer="bootstrap", train_size=8, report_size=0), tmp_path, lm, endpoint, search
    )
    pool = result.program.compiled_pool
    traces = [r for r in pool.records if r["source"] == "bootstrap"]
    assert len(traces) == 2 and result.metrics["pool"] == {"bootstrap": 2, "gold": len(pool.records) - 2}
    for trace in traces:
        assert [s["tool_name"] for s in trace["steps"]] == ["execute_sparql", "stop"]
        first, stop = trace["steps"]  # each with the state the controller read before it (from the dspy trace)
        assert "Known entity types" in first["type_context"] and first["knowledge_log"] != stop["knowledge_log"]
        assert trace["f1"] == 1.0
    gold_questions = {normalise_text(r["question"]) for r in pool.records if r["source"] == "gold"}
    assert not {normalise_text(t["question"]) for t in traces} & gold_questions
    assert result.metrics["k"] == 2 and result.candidates == []  # no choice made, so nothing scored
    lines = (tmp_path / "o" / "pool.jsonl").read_text().splitlines()
    assert len(lines) == len(pool.records)


def test_bootstrap_draws_the_questions_the_gold_teacher_solved_first():
    """A train question outside the pool is mostly one whose entities have no label in the graph: no run can link
    them, so drawing those first gave no trace at all (0 of 34 local-model runs)."""
    from types import SimpleNamespace

    from saga_dspy.optimize import train_questions

    items = [SimpleNamespace(question=f"question {i}?") for i in range(10)]
    pooled = [{"question": f"question {i}?"} for i in (2, 5, 7)]
    sets = SimpleNamespace(train=SimpleNamespace(items=list(items)))
    drawn = train_questions(sets, pooled, SimpleNamespace(seed=0, train_size=4))
    assert len(drawn) == 4 and {d.question for d in drawn[:3]} == {"question 2?", "question 5?", "question 7?"}
    assert train_questions(sets, pooled, SimpleNamespace(seed=0, train_size=None))[3:] != []


def test_mipro_searches_the_controllers_instructions_over_the_pool(opt_settings, plans, endpoint, search, tmp_path):
    from saga_dspy.agent.program import SagaProgram

    lm = ScriptedLM(plans)
    result = run(
        opt_settings,
        small(optimizer="mipro", auto="none", num_trials=2, num_candidates=2, report_size=0),
        tmp_path,
        lm,
        endpoint,
        search,
        prompt_lm=text_lm("TUNED: execute the query, then stop."),
    )
    assert result.candidates and all(c.f1 is not None for c in result.candidates)
    # every trial scored on the valset is listed (the minibatch is the valset), each with what it changed
    first, *trials = result.candidates
    assert first.name == "mipro trial 1" and first.instructions == {}  # the default program
    assert len(trials) >= 2 and any("execute the query" in t.instructions.get("react.react", "") for t in trials)
    loaded = SagaProgram(
        opt_settings.model_copy(update={"program": result.program_path}), endpoint=endpoint, search=search
    )
    assert loaded.compiled_pool is not None and loaded.settings.demos == 2
    assert not {normalise_text(r["question"]) for r in loaded.compiled_pool.records} & dev_questions(opt_settings)
    saved = json.loads(result.program_path.read_text())
    assert saved["react.react"]["signature"]["instructions"] == loaded.react.react.signature.instructions


def test_gepa_reflects_on_f1_and_feedback_and_saves_its_best(opt_settings, plans, endpoint, search, tmp_path):
    from saga_dspy.agent.program import SagaProgram

    lm = InstructionLM(plans, cue="GEPA TUNED")  # only the reflected instructions answer anything
    # GEPA's proposer reads the reflection model's reply as JSON
    reflection = dspy.utils.DummyLM(
        {"": {"new_instruction": "GEPA TUNED: search, look up, execute, stop."}}, adapter=dspy.JSONAdapter()
    )
    result = run(
        opt_settings,
        small(optimizer="gepa", max_metric_calls=12, report_size=0),
        tmp_path,
        lm,
        endpoint,
        search,
        reflection_lm=reflection,
    )
    first, *rest = result.candidates
    assert first.f1 == 0.0 and rest and rest[-1].f1 > 0.5  # the metric accepted the rewrite
    assert first.instructions == {}  # the seed: nothing changed
    assert "GEPA TUNED" in rest[-1].instructions["react.react"]
    # the reflection read our feedback: the gold answers, what came back, what went wrong
    reflected = json.dumps(reflection.history[0]["messages"])
    assert "Gold answers:" in reflected and "The final query returned:" in reflected
    assert "GEPA TUNED" in result.program.react.react.signature.instructions
    loaded = SagaProgram(
        opt_settings.model_copy(update={"program": result.program_path}), endpoint=endpoint, search=search
    )
    assert loaded.compiled_pool is not None and "GEPA TUNED" in loaded.react.react.signature.instructions
    assert not {normalise_text(r["question"]) for r in loaded.compiled_pool.records} & dev_questions(opt_settings)


def test_ctrl_c_leaves_the_best_program_so_far(opt_settings, plans, endpoint, search, tmp_path, monkeypatch):
    from saga_dspy.agent.program import SagaProgram
    from saga_dspy.errors import Interrupted
    from saga_dspy.optimize import candidates

    real = candidates.Scorer.score

    def score(self, candidate, program=None):
        if len(self.scored) == 2:
            raise KeyboardInterrupt
        return real(self, candidate, program)

    monkeypatch.setattr(candidates.Scorer, "score", score)
    with pytest.raises(Interrupted, match="best program so far is saved"):
        run(
            opt_settings,
            small(optimizer="random-search", k=3, num_candidates=4, k_choices=(1, 3), valset_size=2),
            tmp_path,
            DemoCountLM(plans, solves_with=3),
            endpoint,
            search,
        )
    metrics = json.loads((tmp_path / "o" / "metrics.json").read_text())
    assert metrics["interrupted"] and len(metrics["candidates"]) == 2 and metrics["report"] is None
    loaded = SagaProgram(
        opt_settings.model_copy(update={"program": tmp_path / "o" / "program.json"}), endpoint=endpoint, search=search
    )
    assert loaded.compiled_pool is not None and loaded.settings.demos == metrics["k"]


def test_gold_teacher_pool_alone_needs_no_lm(opt_settings, endpoint, search, tmp_path):
    result = run(
        opt_settings,
        small(optimizer="none", teacher="gold", gold_pool=12, report_size=0),
        tmp_path,
        None,
        endpoint,
        search,
    )
    pool = result.program.compiled_pool
    assert pool is not None and len(pool.records) >= 2 and {r["source"] for r in pool.records} == {"gold"}
    assert all(r["teacher"] == "gold" for r in pool.records)


def test_eval_and_ask_run_a_compiled_program_as_compiled(opt_settings, plans, endpoint, search, tmp_path, monkeypatch):
    """The compiled pool and k reach the controller's prompt under `eval --program`, whatever --demos says."""
    from saga_dspy.eval.running.runner import evaluate

    result = run(
        opt_settings,
        small(optimizer="none", k=3, report_size=0),
        tmp_path,
        None,
        endpoint,
        search,
    )
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
            program=result.program_path,
        ),
        ["full"],
        out=tmp_path / "eval",
        ids=["0"],
        lm=eval_lm,
        endpoint=endpoint,
        progress=False,
    )
    controller = [h["messages"] for h in eval_lm.history if "next_tool_name" in json.dumps(h["messages"])]
    assert controller and sum(m["role"] == "assistant" for m in controller[0]) == 3
    # ask --program: the same program, the same three demos
    import saga_dspy.lm as lm_module
    from saga_dspy.ask import main as ask_main

    ask_lm = ScriptedLM({test_q: [("stop", {})]})
    monkeypatch.setattr(lm_module, "build_lm", lambda settings: ask_lm)
    monkeypatch.setattr(lm_module, "configure_lm_cache", lambda settings: None)
    flags = ["--cache-dir", str(TEST_CACHE), "--no-result-cache", "--demos", "0", "--program", str(result.program_path)]
    assert ask_main([test_q, "--json", *flags]) == 0
    controller = [h["messages"] for h in ask_lm.history if "next_tool_name" in json.dumps(h["messages"])]
    assert controller and sum(m["role"] == "assistant" for m in controller[0]) == 3


def test_a_run_dir_in_use_is_refused(opt_settings, endpoint, tmp_path):
    """Two optimize runs on one --out would overwrite each other's program: the second one fails at once."""
    import filelock

    from saga_dspy.eval.errors import EvalError
    from saga_dspy.optimize import optimize

    held = filelock.FileLock(str(tmp_path / ".lock"), timeout=0)
    held.acquire()
    try:
        with pytest.raises(EvalError, match="in use by another run"):
            optimize(opt_settings, small(optimizer="none"), out=tmp_path, endpoint=endpoint, progress=False)
    finally:
        held.release()
    assert not (tmp_path / "program.json").exists()


def test_split_dev_is_the_valset_on_the_command_line(store_path, tmp_path, capsys):
    """`--split dev` compiles against dev (the valset) with demos from train: no LM needed for the gold pool."""
    from saga_dspy.cli import run_main
    from saga_dspy.optimize.__main__ import main

    flags = ["--cache-dir", str(TEST_CACHE), "--no-result-cache", "--no-mlflow", "--no-progress"]
    out = tmp_path / "o"
    argv = ["--optimizer", "none", "--dataset", "qald10", "--split", "dev", "--report-size", "0", "--out", str(out)]
    assert run_main(main, [*argv, *flags]) == 0
    config = json.loads((out / "config.json").read_text())
    assert config["sets"]["valset"]["name"] == "qald10/dev" and config["sets"]["train"]["name"] == "qald10/train"
    assert (out / "program.json").exists() and "estimate: at most" in capsys.readouterr().out


def test_the_budget_stops_bootstrapping_and_scoring(opt_settings, plans, endpoint, search, tmp_path, capsys):
    result = run(
        opt_settings,
        small(optimizer="random-search", budget_minutes=1e-6),
        tmp_path,
        ScriptedLM(plans),
        endpoint,
        search,
    )
    out = capsys.readouterr().out
    assert "--budget-minutes 1e-06 bounds it" in out and "budget spent" in out
    assert result.metrics["bootstrap"].get("not_run_budget") and result.candidates == []
    assert result.program_path.exists() and result.metrics["chosen"] == "gold+bootstrap"


def test_a_candidate_replaces_the_default_only_when_clearly_better_on_the_valset(opt_settings, tmp_path):
    """One question better of fifteen (a valset's noise: the random searches that chose so lost on the report
    set) keeps the default; better on many with no loss replaces it; the comparison is kept with the candidate (the
    scorer's `score` sets it before it asks `better`)."""
    from saga_dspy.optimize.candidates import Candidate, Scorer

    scorer = Scorer(opt_settings, None, None, tmp_path, None)
    ids = [f"q{i}" for i in range(15)]
    default = Candidate("default", f1=0.6, per_question={i: 0.6 for i in ids})
    scorer.scored.append(default)
    assert scorer.better(default)
    scorer.best = default
    noise = Candidate("k=3", f1=0.62, per_question={**default.per_question, "q0": 0.9})
    scorer.scored.append(noise)
    assert not scorer.better(noise)  # not compared with the default: no evidence it is clearly better
    noise.versus_default = scorer.versus_first(noise)
    assert not scorer.better(noise) and noise.versus_default is not None and noise.versus_default.low <= 0
    assert noise.summary()["versus_default"]["wins"] == 1
    clear = Candidate("k=4", f1=0.8, per_question={i: (1.0 if n < 8 else 0.6) for n, i in enumerate(ids)})
    scorer.scored.append(clear)
    clear.versus_default = scorer.versus_first(clear)
    assert scorer.better(clear) and clear.versus_default.low > 0


def test_the_valset_score_reported_is_the_kept_programs():
    """A kept default is reported with its own valset F1, not the higher one of a candidate it kept out."""
    from saga_dspy.optimize.candidates import Candidate, chosen_of

    default, noise = Candidate("default", f1=0.65), Candidate("k=3", f1=0.67)
    assert chosen_of([default, noise], "default") is default
    assert chosen_of([default, noise], "k=3") is noise
    assert chosen_of([default, noise], "mipro best") is noise and chosen_of([], None) is None
