"""Size and cost of MLflow tracing per question (issues 14, 15).

Runs a fresh eval of QALD-10 test questions with the tests' scripted LM (real program, real
tools on the bundled sample, pool demos on as by default) into a new sqlite MLflow store,
then reads every trace back and reports KB per question, the spans per question (tool spans
among them), seconds per question and the seconds from the end of the run to the store
holding every trace.

    .venv/bin/python benchmarks/bench_traces.py                      # 8 questions, --trace all
    .venv/bin/python benchmarks/bench_traces.py --questions 16 --threads 4 --trace sample
    .venv/bin/python benchmarks/bench_traces.py --trace none         # the same run without traces
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from saga_dspy.eval.tracking.tracker import apply_mlflow_env  # noqa: E402

apply_mlflow_env()  # the offline MLflow environment before mlflow is imported

from conftest import make_settings  # noqa: E402
from helpers.scripted_lm import ScriptedLM, scripted_plans  # noqa: E402
from mlflow import MlflowClient  # noqa: E402

from saga_dspy.eval.loading.evalset import load_eval_set  # noqa: E402
from saga_dspy.eval.running.runner import evaluate  # noqa: E402


def trace_sizes(uri: str, experiment: str) -> list[dict]:
    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name(experiment)
    out = []
    for info in client.search_traces(locations=[exp.experiment_id], include_spans=False, max_results=1000):
        trace = client.get_trace(info.info.trace_id)
        spans = trace.data.spans
        out.append(
            {
                "bytes": len(trace.to_json()),
                "spans": len(spans),
                "tool_spans": sum(1 for s in spans if s.name.startswith("tool ")),
            }
        )
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=8)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--trace", default=None, help="all|sample|none (default: the Settings default)")
    parser.add_argument("--demos", type=int, default=3)
    parser.add_argument("--delay", type=float, default=0.0, help="seconds each scripted LM call waits (a served LM)")
    args = parser.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="bench-traces-"))
    uri = f"sqlite:///{tmp / 'mlflow.db'}"
    update = {"trace": args.trace} if args.trace else {}
    settings = make_settings(
        dataset="qald10",
        split="test",
        limit=args.questions,
        demos=args.demos,
        lm="scripted",
        lm_cache=False,
        mlflow=True,
        mlflow_uri=uri,
        num_threads=args.threads,
        **update,
    )
    evalset = load_eval_set(settings, progress=False)
    lm = ScriptedLM(scripted_plans(evalset.items), delay=args.delay)
    started = time.monotonic()
    results = evaluate(
        settings,
        ["full"],
        out=tmp / "run",
        lm=lm,
        progress=False,
        experiment="bench-traces",
        stream=open("/dev/null", "w"),
    )
    ended = time.monotonic()
    sizes = trace_sizes(uri, "bench-traces")
    n = len(evalset)
    report = {
        "questions": n,
        "threads": args.threads,
        "trace": getattr(settings, "trace", "all"),
        "traces": len(sizes),
        "kb_per_trace_mean": round(statistics.mean(s["bytes"] for s in sizes) / 1024, 1) if sizes else None,
        "kb_per_trace_max": round(max(s["bytes"] for s in sizes) / 1024, 1) if sizes else None,
        "spans_per_trace": round(statistics.mean(s["spans"] for s in sizes), 1) if sizes else None,
        "tool_spans_per_trace": round(statistics.mean(s["tool_spans"] for s in sizes), 1) if sizes else None,
        "seconds_per_question": round((ended - started) / n, 3),
        "questions_per_second": round(n / (ended - started), 2),
        "async_export": os.environ.get("MLFLOW_ENABLE_ASYNC_TRACE_LOGGING"),
        "f1": results["full"].metrics["f1"],
        "store": str(tmp),
    }
    print(json.dumps(report, indent=2), flush=True)
    print(f"report printed at {time.time():.3f}", flush=True)  # the process's exit time follows from this
    return 0


if __name__ == "__main__":
    sys.exit(main())
