"""MLflow tracking: store resolution, offline settings, the chart, and an optimize run queried back."""

from __future__ import annotations

import io
import json
import os
import re
import signal
import subprocess
import sys
import time

import mlflow
import pytest
from conftest import REPO, TEST_CACHE, make_settings
from helpers.scripted_lm import ScriptedLM, scripted_plans
from mlflow import MlflowClient

from saga_dspy.eval.loading.evalset import load_eval_set
from saga_dspy.eval.running.runner import evaluate
from saga_dspy.eval.tracking import trace_writer
from saga_dspy.eval.tracking.trace_policy import bounded_inputs
from saga_dspy.eval.tracking.tracker import (
    INVOCATION_TAG,
    TABLE_FILE,
    Tracker,
    artifact_root,
    clean_params,
    comparison_chart,
    default_tracking_uri,
    display_value,
    numeric_metrics,
    sqlite_path,
    ui_hint,
)
from saga_dspy.optimize import OptimizeOptions, optimize


def test_tracking_uri_precedence(tmp_path, monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    settings = make_settings(cache_dir=tmp_path)
    uri = default_tracking_uri(settings)
    assert uri == f"sqlite:///{tmp_path.resolve()}/mlflow/mlflow.db"
    assert sqlite_path(uri) == tmp_path.resolve() / "mlflow" / "mlflow.db"
    assert artifact_root(uri) == (tmp_path.resolve() / "mlflow" / "artifacts").as_uri()
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "sqlite:////elsewhere/x.db")
    assert default_tracking_uri(settings) == "sqlite:////elsewhere/x.db"
    assert (
        default_tracking_uri(make_settings(cache_dir=tmp_path, mlflow_uri="file:///tmp/mlruns")) == "file:///tmp/mlruns"
    )
    assert artifact_root("http://localhost:5000") is None


def test_params_and_metrics_are_cleaned():
    assert clean_params({"a": None, "b": 1, "c": "x" * 7000})["a"] == "None"
    assert len(clean_params({"c": "x" * 7000})["c"]) == 6000
    assert numeric_metrics({"f1": 0.5, "n": 3, "none": None, "ok": True, "nan": float("nan"), "s": "x"}) == {
        "f1": 50.0,
        "n": 3.0,
        "ok": 1.0,
    }
    # scores and shares in percent as the CLI prints them, rounded for the runs table (metrics.json keeps 0-1)
    assert numeric_metrics({"f1": 1 / 6, "calls": 16 / 3, "tokens": 14398 / 3}) == {
        "f1": 16.67,
        "calls": 5.33,
        "tokens": 4799.3,
    }
    shares = {"em": 0.25, "empty_rate": 0.1, "boolean_f1": 1.0, "f1_delta": -0.05, "f1_delta_low": -0.125}
    assert numeric_metrics({**shares, "f1_wins": 3, "mean_steps": 4.5, "k": 2}) == {
        "em": 25.0,
        "empty_rate": 10.0,
        "boolean_f1": 100.0,
        "f1_delta": -5.0,
        "f1_delta_low": -12.5,
        "f1_wins": 3.0,
        "mean_steps": 4.5,
        "k": 2.0,
    }


def test_disabled_tracker_does_nothing(tmp_path):
    tracker = Tracker(make_settings(cache_dir=tmp_path, mlflow=False), "x")
    with tracker.run("r", params={"a": 1}) as run_id:
        tracker.log_metrics({"f1": 1.0})
        tracker.log_artifact(tmp_path)
    assert run_id is None and not (tmp_path / "mlflow").exists()
    tracker.close()


def test_comparison_chart_is_a_png(tmp_path):
    path = comparison_chart(
        {"full": {"f1": 0.5, "em": 0.25, "empty_rate": 0.1}, "spinach": {"f1": None, "em": 0.0, "empty_rate": 0.5}},
        tmp_path / "c.png",
        title="t",
    )
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_drawing_a_chart_leaves_the_sparql_parser_unmemoised(tmp_path):
    """matplotlib's mathtext switches on pyparsing's packrat cache process-wide, which makes rdflib's SPARQL
    grammar ~3x slower for every later query check."""
    import pyparsing

    comparison_chart({"full": {"f1": 0.5, "em": 0.25, "empty_rate": 0.1}}, tmp_path / "c.png")
    assert pyparsing.ParserElement._packratEnabled is False
    assert pyparsing.ParserElement._parse == pyparsing.ParserElement._parseNoCache


def test_mlflow_stays_offline_and_exits_fast(tmp_path):
    """A tracked run in a fresh process: telemetry off, nothing left running at exit."""
    code = (
        "import os, time\n"
        "from saga_dspy.eval.tracking.tracker import Tracker\n"
        "from saga_dspy.config import Settings\n"
        f"s = Settings(cache_dir={str(tmp_path)!r})\n"
        "t = Tracker(s, 'offline')\n"
        "with t.run('r', params={'a': 1}):\n"
        "    t.log_metrics({'f1': 1.0})\n"
        "t.close()\n"
        "import mlflow\n"
        "exp = mlflow.get_experiment_by_name('offline')\n"
        f"assert exp.artifact_location == {(tmp_path.resolve() / 'mlflow' / 'artifacts').as_uri()!r}, "
        "exp.artifact_location\n"
        "assert os.environ['MLFLOW_DISABLE_TELEMETRY'] == 'true' and os.environ['DO_NOT_TRACK'] == 'true'\n"
        "assert os.environ['MLFLOW_ENABLE_ASYNC_TRACE_LOGGING'] == 'true'\n"
        "print('closed', time.monotonic(), flush=True)\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")}
    # no route anywhere: any attempt to reach the network fails fast instead of hanging
    env.update(HTTP_PROXY="http://127.0.0.1:9", HTTPS_PROXY="http://127.0.0.1:9", NO_PROXY="")
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    ended = time.monotonic()
    assert proc.returncode == 0, proc.stderr[-2000:]
    closed = float(proc.stdout.split("closed")[1].split()[0])
    assert ended - closed < 10, f"the process took {ended - closed:.1f} s to exit after closing the tracker"
    assert (tmp_path / "mlflow" / "mlflow.db").exists()


def test_optimize_run_is_tracked(store_path, endpoint, search, tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    settings = make_settings(
        dataset="qald10", split="train", demos=2, lm="scripted", lm_cache=False, mlflow=True, mlflow_uri=uri
    )
    optimize(
        settings,
        OptimizeOptions(optimizer="none", teacher="gold", gold_pool=6, report_size=0),
        out=tmp_path / "o",
        endpoint=endpoint,
        search=search,
        progress=False,
        experiment="opt-test",
    )
    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("opt-test")
    (run,) = client.search_runs([exp.experiment_id])
    assert run.data.params["optimizer"] == "none" and run.data.params["teacher"] == "gold"
    assert run.data.params["dataset"] == "qald10" and run.data.params["split"] == "train"
    assert run.data.params["valset"] == "qald10/dev" and run.data.metrics["k"] == 2.0
    artifacts = {a.path for a in client.list_artifacts(run.info.run_id)}
    assert {"program.json", "config.json", "metrics.json", "pool.jsonl"} <= artifacts
    program = client.download_artifacts(run.info.run_id, "program.json", str(tmp_path / "dl"))
    pool = json.loads(open(program).read())["saga_demo_pool"]
    assert pool["k"] == 2 and pool["records"] and {r["source"] for r in pool["records"]} == {"gold"}


def test_eval_runs_carry_the_comparison_and_bounded_traces(store_path, endpoint, search, tmp_path, monkeypatch):
    """Two variants into a real sqlite store (async span export): one flat run per variant (a row each in the runs
    table) sharing the invocation's tag, with params, rounded metrics, the dataset input (a Hugging Face dataset),
    the per-question table and the comparison's files; tool spans; traces under the bound, each with its final
    SPARQL whole and its scores and gold as assessments."""
    monkeypatch.setenv("MLFLOW_ENABLE_ASYNC_TRACE_LOGGING", "true")
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    settings = make_settings(
        dataset="qald10", split="test", lm="scripted", lm_cache=False, mlflow=True, mlflow_uri=uri, max_steps=15
    )
    ids = ["0", "5", "17", "9"]  # 17 is an ASK question: boolean F1 is defined
    evalset = load_eval_set(settings, ids=ids, progress=False)
    plans = scripted_plans(evalset.items)
    long_question = evalset.items[0].question  # a long episode: many searches before the answer
    plans[long_question] = [
        ("search_wikidata", {"query": f"{w} {i}"}) for i, w in enumerate(long_question.split() * 3)
    ][:12] + plans[long_question][-2:]
    printed = io.StringIO()
    evaluate(
        settings,
        ["full", "spinach"],
        out=tmp_path / "run",
        lm=ScriptedLM(plans),
        endpoint=endpoint,
        search=search,
        progress=False,
        experiment="cmp",
        ids=ids,
        stream=printed,
    )
    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("cmp")
    # the CLI ends with the UI's runs table (the shared view: metrics as columns) and traces (tags as columns)
    page = f"http://127.0.0.1:5000/#/experiments/{exp.experiment_id}"
    assert printed.getvalue().rstrip().splitlines()[-4:] == [
        "MLflow UI (scores in percent):",
        f"  serve: mlflow ui --backend-store-uri {uri} --port 5000",
        f"  runs:   {page}/runs?viewStateShareKey=saga",
        f"  traces: {page}/traces?traceViewShareKey=saga",
    ]
    view = json.loads(exp.tags["mlflow.sharedViewState.saga"])
    assert "metrics.`f1`" in view["selectedColumns"]
    traces_view = json.loads(exp.tags["mlflow.tracesV4ViewState.saga"])
    assert traces_view["name"] == "saga" and isinstance(traces_view["createdAt"], int)
    columns = json.loads(traces_view["state"])["customColumns"]
    assert [c for c, shown in columns.items() if shown] == [
        "tag:variant",
        "tag:f1",
        "tag:em",
    ]
    assert exp.tags["mlflow.experimentKind"] == "custom_model_development"
    runs = client.search_runs([exp.experiment_id])
    assert not any("mlflow.parentRunId" in r.data.tags for r in runs)  # no parent to unfold
    children = {r.data.params["variant"]: r for r in runs}
    assert set(children) == {"full", "spinach"} and len(runs) == 2
    (invocation,) = {r.data.tags[INVOCATION_TAG] for r in runs}
    assert invocation.startswith("full vs spinach · qald10/test · scripted · ")
    for variant, run in children.items():
        assert run.info.run_name == f"{variant} · qald10/test · scripted"
        assert {"dataset", "split", "variant", "filter_mode", "lm", "endpoint", "schema_coverage", "program"} <= set(
            run.data.params
        )
        for key in (
            "f1",
            "em",
            "empty_rate",
            "boolean_f1",
            "factoid_f1",
            "mean_steps",
            "mean_lm_calls",
            "mean_tokens",
            "mean_seconds",
            "author_model_rate",
            "author_model_candidate_rate",
            "author_program_rate",
        ):
            assert key in run.data.metrics, key
            assert run.data.metrics[key] == display_value(run.data.metrics[key])  # rounded for the table
        (dataset_input,) = run.inputs.dataset_inputs
        assert dataset_input.dataset.name == "qald10/test" and dataset_input.dataset.source_type == "hugging_face"
        assert [t.value for t in dataset_input.tags if t.key == "mlflow.data.context"] == ["evaluation"]
        table = mlflow.load_table(TABLE_FILE, run_ids=[run.info.run_id])
        assert len(table) == 4 and set(table["variant"]) == {variant}
        assert {"question", "gold", "prediction", "f1", "status", "steps"} <= set(table.columns)
        artifacts = {a.path for a in client.list_artifacts(run.info.run_id)}
        assert {"comparison.png", "comparison.json", "comparison.md"} <= artifacts
    # spinach's paired comparison with full sits beside its own f1 (the same script: no difference)
    assert children["spinach"].data.metrics["f1_delta"] == 0.0 and children["spinach"].data.metrics["f1_ties"] == 4
    assert "f1_delta" not in children["full"].data.metrics
    # every question's trace is in the store once evaluate() returned, with a span per tool call, bounded
    traces = client.search_traces(locations=[exp.experiment_id], max_results=100)
    assert len(traces) == 8
    lines = {
        (v, line["question"]): line
        for v in ("full", "spinach")
        for line in map(json.loads, (tmp_path / "run" / v / "predictions.jsonl").read_text().splitlines())
    }
    variant_of = {r.info.run_id: v for v, r in children.items()}
    sizes = []
    labelled: list[bool] = []
    for info in traces:
        trace = client.get_trace(info.info.trace_id)
        variant = variant_of[trace.info.trace_metadata["mlflow.sourceRun"]]
        line = lines[variant, trace.data.spans[0].inputs["question"]]
        # tagged for the Traces tab's columns: which variant, its scores (percent, as the CLI), which question
        assert {k: trace.info.tags.get(k) for k in ("variant", "f1", "em", "question_id", "dataset")} == {
            "variant": variant,
            "f1": f"{100 * line['f1']:.1f}",
            "em": str(bool(line["em"])).lower(),
            "question_id": line["id"],
            "dataset": "qald10/test",
        }
        # inputs without the program's machinery (no `<QuestionGuard>`, no object's type name anywhere)
        assert trace.data.spans[0].inputs == {"question": line["question"]}
        assert not re.search(r'"<[A-Z]\w*>"', json.dumps([s.inputs for s in trace.data.spans]))
        assert not re.search(r'"<[A-Z]\w*>"', trace.info.request_preview or "")
        # outputs led by the answers and the final SPARQL (the trace list's Output preview shows them)
        assert list(trace.data.spans[0].outputs)[:2] == ["answers", "sparql"]
        assert (trace.info.response_preview or "").startswith('{"answers": ')
        scores = {a.name: a for a in trace.info.assessments}
        assert {"f1", "em", "expected_answers", "expected_sparql"} <= set(scores)
        assert scores["f1"].feedback.value == pytest.approx(100 * line["f1"], abs=1e-2)  # percent, as the CLI
        assert scores["em"].feedback.value is bool(line["em"])
        assert scores["expected_sparql"].expectation.value == line["gold_sparql"]
        assert trace.info.tags["final_author"] == line["final_author"]["kind"]  # who wrote the final query
        root = trace.data.spans[0]
        assert root.parent_id is None and root.outputs["sparql"] == line["sparql"]  # whole, not clipped
        assert isinstance(root.outputs["answers"], str) and "<list>" not in root.outputs["answers"]
        if "/entity/Q" in json.dumps(line["answers"]):
            labelled.append(bool(re.search(r"\bQ\d+ [^;\s]", root.outputs["answers"])))  # an id and its label
        names = [s.name for s in trace.data.spans]
        assert "tool search_wikidata" in names and "tool execute_sparql" in names
        assert not any(n.startswith("ChatAdapter.") for n in names)
        # no Predict span inside the question: its LM span is a child of the module that called it
        by_id = {s.span_id: s for s in trace.data.spans}
        lm_spans = [s for s in trace.data.spans if s.name.endswith(".__call__")]
        assert "Predict.forward" not in names and lm_spans
        parents = {by_id[s.parent_id].name for s in lm_spans}  # the program, the loop, a tool (a lookup's prune)
        assert parents <= {"SagaProgram.forward", "SagaReAct.forward"} | {n for n in names if n.startswith("tool ")}
        sizes.append(len(trace.to_json()))
        tool = next(s for s in trace.data.spans if s.name == "tool execute_sparql")
        assert "sparql" in tool.inputs and isinstance(tool.outputs, str)
        react = next(s for s in trace.data.spans if s.name == "SagaReAct.forward")
        assert list(react.inputs) == ["args"] and set(react.inputs["args"][0]) == {
            "question",
            "variant",
            "form",
            "steps",
        }
    assert max(sizes) <= 100 * 1024, sizes
    assert labelled and all(labelled), labelled  # entity answers carry their labels in the trace outputs


def test_trace_sample_and_none(store_path, endpoint, search, tmp_path):
    """--trace sample traces every 10th question (the 1st of 3 here); --trace none records no trace."""
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    for mode, expected in (("sample", 1), ("none", 0)):
        settings = make_settings(
            dataset="qald10",
            split="test",
            limit=3,
            lm="scripted",
            lm_cache=False,
            demos=0,
            mlflow=True,
            mlflow_uri=uri,
            trace=mode,
        )
        plans = scripted_plans(load_eval_set(settings, progress=False).items)
        evaluate(
            settings,
            ["full"],
            out=tmp_path / mode,
            lm=ScriptedLM(plans),
            endpoint=endpoint,
            search=search,
            progress=False,
            experiment=f"trace-{mode}",
        )
        client = MlflowClient(tracking_uri=uri)
        exp = client.get_experiment_by_name(f"trace-{mode}")
        assert len(client.search_traces(locations=[exp.experiment_id])) == expected, mode
        (run,) = client.search_runs([exp.experiment_id])
        assert run.data.metrics["f1"] == 100.0  # percent, as the CLI prints it


def test_bounded_inputs_keep_plain_values():
    messages = [
        {"role": "system", "content": "s" * 5000},
        {"role": "user", "content": "demo"},
        {"role": "assistant", "content": "reply"},
        {"role": "user", "content": "q" * 9000},
    ]
    out = bounded_inputs({"messages": messages, "demos": [1, 2, 3], "settings": object(), "n": 3})
    assert out["demos"] == "3 demos" and out["n"] == 3 and "settings" not in out  # no object's type name
    assert [m["role"] for m in out["messages"]] == ["system", "demonstrations", "user"]
    assert len(out["messages"][0]["content"]) <= 1200 and len(out["messages"][2]["content"]) <= 5000
    assert "chars left out" in out["messages"][2]["content"]


# a fresh process's imports for an evaluation driven by the scripted LM
SCRIPTED_EVAL_PRELUDE = (
    "import sys\n"
    f"sys.path.insert(0, {str(REPO / 'tests')!r})\n"
    "from conftest import scripted_settings\n"
    "from helpers.scripted_lm import ScriptedLM, scripted_plans\n"
    "from saga_dspy.eval.loading.evalset import load_eval_set\n"
    "from saga_dspy.eval.running.runner import evaluate\n"
)


def test_untracked_eval_never_imports_mlflow(store_path, tmp_path):
    """`--no-mlflow`: a whole eval (tool calls included) in a fresh process leaves mlflow unimported."""
    code = (
        SCRIPTED_EVAL_PRELUDE + "settings = scripted_settings('test').model_copy(update={'limit': 2})\n"
        "lm = ScriptedLM(scripted_plans(load_eval_set(settings, progress=False).items))\n"
        f"results = evaluate(settings, ['full'], out={str(tmp_path / 'run')!r}, lm=lm, progress=False)\n"
        "assert results['full'].metrics['f1'] == 1.0, results['full'].metrics\n"
        "assert lm.calls > 0\n"
        "print('mlflow imported:', 'mlflow' in sys.modules)\n"
    )
    env = {**os.environ, "SAGA_TEST_CACHE_DIR": str(TEST_CACHE)}
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "mlflow imported: False" in proc.stdout, proc.stdout


def test_flush_writes_every_trace_and_keeps_the_export_threads(tmp_path, monkeypatch):
    """A flush between variants waits for the queue to empty; it does not stop and restart mlflow's
    export threads (their consumer polls once a second, so a restart cost up to a second per variant)."""
    monkeypatch.setenv("MLFLOW_ENABLE_ASYNC_TRACE_LOGGING", "true")
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    tracker = Tracker(make_settings(mlflow=True, mlflow_uri=uri, trace_writer="inline"), "flush", autolog=False)
    try:
        from mlflow.tracing.provider import _get_trace_exporter

        @mlflow.trace
        def traced(i: int) -> int:
            return i

        client = MlflowClient(tracking_uri=uri)
        with tracker.run("r"):
            for i in range(12):
                traced(i)
            tracker.flush()  # every trace written, though mlflow batches spans for up to 5 s
            assert len(client.search_traces(locations=[tracker.experiment_id], max_results=50)) == 12
            queue = _get_trace_exporter()._async_queue
            consumer = queue._consumer_thread
            for i in range(12):
                traced(i)
            tracker.flush()
            assert queue._queue.unfinished_tasks == 0
            assert queue.is_active() and queue._consumer_thread is consumer, "the flush restarted the threads"
            assert len(client.search_traces(locations=[tracker.experiment_id], max_results=50)) == 24
    finally:
        tracker.close()


def test_close_writes_every_trace_and_stops_the_export_threads_without_their_poll(tmp_path, monkeypatch):
    """Closing ends mlflow's export threads with every trace written; it does not sit out the consumer's
    one-second wait on its empty queue (mlflow's terminating flush did, once per evaluate call)."""
    monkeypatch.setenv("MLFLOW_ENABLE_ASYNC_TRACE_LOGGING", "true")
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    tracker = Tracker(make_settings(mlflow=True, mlflow_uri=uri, trace_writer="inline"), "close", autolog=False)
    from mlflow.tracing.provider import _get_trace_exporter

    @mlflow.trace
    def traced(i: int) -> int:
        return i

    with tracker.run("r"):
        for i in range(12):
            traced(i)
        tracker.flush()  # as at the end of a variant; tables and chart follow before the close
        export_queue = _get_trace_exporter()._async_queue
        consumer = export_queue._consumer_thread
        time.sleep(0.05)  # the consumer is now in its one-second wait on the empty queue
    started = time.perf_counter()
    tracker.close()
    seconds = time.perf_counter() - started
    assert not consumer.is_alive() and not export_queue.is_active()
    assert export_queue._queue.unfinished_tasks == 0
    client = MlflowClient(tracking_uri=uri)
    assert len(client.search_traces(locations=[tracker.experiment_id], max_results=50)) == 12
    assert seconds < 0.25, f"close waited {seconds:.2f} s"


def _traced_calls(n: int, offset: int = 0) -> None:
    @mlflow.trace
    def traced(i: int) -> int:
        with mlflow.start_span("inner") as span:
            span.set_inputs({"i": i})
        return i

    for i in range(offset, offset + n):
        traced(i)


def test_process_writer_puts_every_trace_in_the_store(tmp_path):
    """The default writer: spans and traces go to a child process in its own session (Ctrl-C in the terminal
    reaches only the evaluation, which flushes), which writes them all, spans included, by the time flush returns."""
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    tracker = Tracker(make_settings(mlflow=True, mlflow_uri=uri), "process", autolog=False)
    writer = tracker._writer
    child = writer._child
    try:
        assert child.poll() is None and os.getsid(child.pid) != os.getsid(0)
        assert str(tmp_path) not in " ".join(child.args)  # the URI (it may hold a password) goes on stdin
        with tracker.run("r"):
            _traced_calls(12)
            tracker.flush()
            client = MlflowClient(tracking_uri=uri)
            traces = client.search_traces(locations=[tracker.experiment_id], max_results=50)
            assert len(traces) == 12
            assert all(len(client.get_trace(t.info.trace_id).data.spans) == 2 for t in traces)
            # the URI, 12 traces, 1 flush
            assert writer.sent == 1 + 12 + 1 and writer.written_locally == 0 and not writer.local
    finally:
        tracker.close()
    assert child.poll() is None  # kept for the process's later runs
    second = Tracker(make_settings(mlflow=True, mlflow_uri=uri), "process-again", autolog=False)
    try:
        assert second._writer is writer
    finally:
        second.close()
    trace_writer.shutdown()  # as at exit
    assert child.wait(5) == 0


def test_process_writer_loses_nothing_when_its_process_dies(tmp_path):
    """A killed writer process: what it had not confirmed, and all later traces, are written in this process."""
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    tracker = Tracker(make_settings(mlflow=True, mlflow_uri=uri), "killed", autolog=False)
    writer = tracker._writer
    try:
        with tracker.run("r"):
            _traced_calls(5)
            tracker.flush()
            _traced_calls(5, offset=5)  # sent, perhaps not yet written when the process dies
            writer._child.kill()
            writer._child.wait(5)
            _traced_calls(5, offset=10)
            tracker.flush()
            assert writer.local and writer.written_locally > 0
            client = MlflowClient(tracking_uri=uri)
            traces = client.search_traces(locations=[tracker.experiment_id], max_results=50)
            assert sorted(
                int(t.data.spans[0].inputs["i"]) for t in (client.get_trace(x.info.trace_id) for x in traces)
            ) == list(range(15))
    finally:
        tracker.close()


def test_ctrl_c_keeps_the_traces_of_finished_questions(store_path, tmp_path):
    """Ctrl-C in the middle of a tracked evaluation: every question that finished has its trace in the store
    (the writer process, in its own session, is not interrupted; the evaluation flushes before it exits)."""
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    code = (
        # as in a terminal: a process started in the background by a shell without job control (nohup … &)
        # inherits SIGINT ignored, and Ctrl-C would then never reach it
        "import signal\nsignal.signal(signal.SIGINT, signal.default_int_handler)\n"
        + SCRIPTED_EVAL_PRELUDE
        + "settings = scripted_settings('test')"
        f".model_copy(update={{'limit': 12, 'mlflow': True, 'mlflow_uri': {uri!r}}})\n"
        "lm = ScriptedLM(scripted_plans(load_eval_set(settings, progress=False).items), delay=0.4)\n"
        f"evaluate(settings, ['full'], out={str(tmp_path / 'run')!r}, lm=lm, progress=False, experiment='ctrl-c')\n"
    )
    env = {**os.environ, "SAGA_TEST_CACHE_DIR": str(TEST_CACHE)}
    proc = subprocess.Popen(
        [sys.executable, "-c", code],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    predictions = tmp_path / "run" / "predictions.jsonl"  # one variant: its files are the run's
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and proc.poll() is None:
        if predictions.exists() and len(predictions.read_text().splitlines()) >= 2:
            break
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGINT)  # as Ctrl-C in a terminal: the whole foreground process group
    _, stderr = proc.communicate(timeout=120)
    done = len(predictions.read_text().splitlines())
    assert 2 <= done < 12, stderr[-2000:]
    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("ctrl-c")
    traces = client.search_traces(locations=[exp.experiment_id], max_results=50)
    assert len(traces) >= done, (len(traces), done)


class _FakeTrace:
    def __init__(self, i: int):
        self.i = i

    def to_dict(self) -> dict:
        return {"i": self.i}


@pytest.mark.parametrize(
    "command", [["/nonexistent/python"], [sys.executable, "-c", "pass"]], ids=["cannot-start", "exits-at-once"]
)
def test_trace_writer_without_its_process_writes_everything_here(tmp_path, command):
    """No child, or one that is gone before reading: every trace is written in this process, and flush returns."""
    written = []
    writer = trace_writer.TraceWriter(
        f"sqlite:///{tmp_path / 'x.db'}", lambda m: written.append(m[1].i), command=command
    )
    try:
        for i in range(5):
            writer.put(("trace", _FakeTrace(i)))
        assert writer.flush(timeout=30)
        assert sorted(written) == list(range(5)) and writer.local
    finally:
        writer.close()


def test_an_unreachable_tracking_server_is_one_error_within_seconds(tmp_path):
    """mlflow retries an unreachable server for minutes before it fails: the tracker asks once, briefly."""
    from conftest import free_port

    from saga_dspy.eval.errors import EvalError

    started = time.monotonic()
    uri = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(EvalError, match="tracking server does not answer"):
        Tracker(make_settings(cache_dir=tmp_path, mlflow=True, mlflow_uri=uri), "x")
    assert time.monotonic() - started < 10
    from saga_dspy.eval.tracking.store import check_tracking_server

    server = subprocess.Popen(
        [sys.executable, "-m", "http.server", "--bind", "127.0.0.1", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        port = int(server.stdout.readline().split("port ")[1].split()[0])
        check_tracking_server(f"http://127.0.0.1:{port}")  # a 404 on /health is an answer
    finally:
        server.kill()


def test_no_import_circle_between_the_tracking_modules():
    """A module imports only modules below it inside eval too: tracking reads the trace policy (lazily: it imports
    mlflow), never the other way; what both need (FINAL_CHARS, answer_text) lives below both."""
    from tests.helpers import codebase

    graph = codebase.import_graph()
    assert "saga_dspy.eval.tracking.tracker" not in graph["saga_dspy.eval.tracking.trace_policy"]
    assert "saga_dspy.eval.tracking.trace_policy" in graph["saga_dspy.eval.tracking.tracker"]


def test_ui_hint_for_a_tracking_server_and_another_store():
    page = "http://mlflow.lab:8080/#/experiments/7"
    assert ui_hint("http://mlflow.lab:8080/", "7").splitlines()[1:] == [
        f"  runs:   {page}/runs?viewStateShareKey=saga",
        f"  traces: {page}/traces?traceViewShareKey=saga",
    ]
    hint = ui_hint("postgresql://user:secret@db/mlflow", "7")  # the store's password is not printed
    assert "secret" not in hint and "--backend-store-uri <your tracking store>" in hint
