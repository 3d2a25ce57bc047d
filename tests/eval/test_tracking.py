"""MLflow tracking: store resolution, offline settings, the chart, and an optimize run queried back."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from conftest import REPO, make_settings


def test_tracking_uri_precedence(tmp_path, monkeypatch):
    from saga_dspy.eval.tracking import artifact_root, default_tracking_uri, sqlite_path

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    settings = make_settings(cache_dir=tmp_path)
    uri = default_tracking_uri(settings)
    assert uri == f"sqlite:///{tmp_path.resolve()}/mlflow/mlflow.db"
    assert sqlite_path(uri) == tmp_path.resolve() / "mlflow" / "mlflow.db"
    assert artifact_root(uri) == (tmp_path.resolve() / "mlflow" / "artifacts").as_uri()
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "sqlite:////elsewhere/x.db")
    assert default_tracking_uri(settings) == "sqlite:////elsewhere/x.db"
    assert default_tracking_uri(make_settings(cache_dir=tmp_path, mlflow_uri="file:///tmp/mlruns")) == "file:///tmp/mlruns"
    assert artifact_root("http://localhost:5000") is None


def test_params_and_metrics_are_cleaned():
    from saga_dspy.eval.tracking import clean_params, numeric_metrics

    assert clean_params({"a": None, "b": 1, "c": "x" * 7000})["a"] == "None"
    assert len(clean_params({"c": "x" * 7000})["c"]) == 6000
    assert numeric_metrics({"f1": 0.5, "n": 3, "none": None, "ok": True, "nan": float("nan"), "s": "x"}) == {
        "f1": 0.5, "n": 3.0, "ok": 1.0}


def test_disabled_tracker_does_nothing(tmp_path):
    from saga_dspy.eval.tracking import Tracker

    tracker = Tracker(make_settings(cache_dir=tmp_path, mlflow=False), "x")
    with tracker.run("r", params={"a": 1}) as run_id:
        tracker.log_metrics({"f1": 1.0})
        tracker.log_artifact(tmp_path)
    assert run_id is None and not (tmp_path / "mlflow").exists()
    tracker.close()


def test_comparison_chart_is_a_png(tmp_path):
    from saga_dspy.eval.tracking import comparison_chart

    path = comparison_chart({"full": {"f1": 0.5, "em": 0.25, "empty_rate": 0.1},
                             "spinach": {"f1": None, "em": 0.0, "empty_rate": 0.5}}, tmp_path / "c.png", title="t")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_mlflow_stays_offline_and_exits_fast(tmp_path):
    """A tracked run in a fresh process: telemetry off, nothing left running at exit."""
    code = (
        "import os, time\n"
        "from saga_dspy.eval.tracking import Tracker\n"
        "from saga_dspy.config import Settings\n"
        f"s = Settings(cache_dir={str(tmp_path)!r})\n"
        "t = Tracker(s, 'offline')\n"
        "with t.run('r', params={'a': 1}):\n"
        "    t.log_metrics({'f1': 1.0})\n"
        "t.close()\n"
        "import mlflow\n"
        "exp = mlflow.get_experiment_by_name('offline')\n"
        f"assert exp.artifact_location == {(tmp_path.resolve() / 'mlflow' / 'artifacts').as_uri()!r}, exp.artifact_location\n"
        "assert os.environ['MLFLOW_DISABLE_TELEMETRY'] == 'true' and os.environ['DO_NOT_TRACK'] == 'true'\n"
        "assert os.environ['MLFLOW_ENABLE_ASYNC_TRACE_LOGGING'] == 'false'\n"
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
    from mlflow import MlflowClient

    from saga_dspy.optimize import OptimizeOptions, optimize

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    settings = make_settings(dataset="qald10", split="train", limit=6, demos=0, lm="scripted", lm_cache=False,
                             mlflow=True, mlflow_uri=uri)
    optimize(settings, OptimizeOptions(optimizer="none", teacher="gold", gold_demos=2), out=tmp_path / "o",
             endpoint=endpoint, search=search, progress=False, experiment="opt-test")
    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("opt-test")
    (run,) = client.search_runs([exp.experiment_id])
    assert run.data.params["optimizer"] == "none" and run.data.params["teacher"] == "gold"
    assert run.data.params["dataset"] == "qald10" and run.data.params["split"] == "train"
    assert run.data.metrics["demos_react.react"] == 2.0
    artifacts = {a.path for a in client.list_artifacts(run.info.run_id)}
    assert {"program.json", "config.json", "metrics.json", "gold_demos.jsonl"} <= artifacts
    program = client.download_artifacts(run.info.run_id, "program.json", str(tmp_path / "dl"))
    assert len(json.loads(open(program).read())["react.react"]["demos"]) == 2
