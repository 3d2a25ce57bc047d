"""Eval throughput against a served LM: 1 / 4 / 8 / 16 threads with the default settings.

A loopback OpenAI-compatible stub (`/v1/chat/completions`, fixed latency, TCP_NODELAY), served from
its own process as a real LM server would be (so its HTTP handling does not share the evaluation's
interpreter lock), plays the controller with a fixed policy that exercises the real tools on the real embedded store: it
executes the question's gold query, then stops (the answer-type call gets a plain answer). Every
thread count runs the same questions through `saga_dspy.eval.running.runner.evaluate` in this process, with the
default tracking (MLflow to a fresh sqlite store) unless `--no-mlflow`.

Reported per thread count: the question phase (the threads answering, `metrics.json`'s `phase`)
and the whole `evaluate` call after one warm-up question (the phase plus the run's fixed costs:
tracking set-up, tables, chart, trace flush, close), each in seconds, questions per second and
speed-up over one thread; the share of a question's time that is
not waiting for the LM (non-LM time), this process's CPU time per question (evaluation, tracking
and the LM client together: under one interpreter lock, 1 / CPU-per-question bounds the
throughput any thread count can reach), and the traces' size per question.

    python benchmarks/bench_throughput.py [--questions 32] [--latency 0.3] [--threads 1 4 8 16] [--no-mlflow]
                                          [--trace all|sample|none]

Loopback only; bounded (one evaluate per thread count); stops by itself.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import re
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from helpers.openai_stub import OpenAIStub  # noqa: E402
from helpers.scripted_lm import output_fields, prompt_fields  # noqa: E402


def _reply(fields: dict[str, str]) -> str:
    return "".join(f"[[ ## {k} ## ]]\n{v}\n\n" for k, v in fields.items()) + "[[ ## completed ## ]]"


class StubPolicy:
    """What the stub answers: gold query first, then stop; counts its calls in `calls` (shared with
    the benchmark's process)."""

    def __init__(self, gold_by_question: dict[str, str], calls: Any):
        self.gold = gold_by_question
        self.calls = calls

    def answer(self, messages: list[dict]) -> str:
        with self.calls.get_lock():
            self.calls.value += 1
        system = messages[0]["content"] if messages and messages[0]["role"] == "system" else ""
        outputs = output_fields(system)
        fields = prompt_fields(messages[-1]["content"] if messages else "")
        question = fields.get("question", "")
        if "next_tool_name" in outputs:
            done = len(re.findall(r"^Step \d+$", fields.get("trajectory", ""), re.M))
            if done == 0 and question in self.gold:
                out = {
                    "next_thought": "run the query",
                    "next_tool_name": "execute_sparql",
                    "next_tool_args": json.dumps({"sparql": self.gold[question]}),
                }
            else:
                out = {"next_thought": "done", "next_tool_name": "stop", "next_tool_args": "{}"}
        elif "answer_type_label" in outputs:
            out = {"answer_type_label": "thing", "answer_type_qid": ""}
        else:
            out = {name: "" for name in outputs}
        return _reply(out)


def _serve_stub(gold_by_question: dict[str, str], latency: float, calls: Any, ready: Any) -> None:
    """The stub server's process: serve until killed."""
    stub = OpenAIStub(reply=StubPolicy(gold_by_question, calls).answer, delay=latency).__enter__()
    ready.send(stub.api_base)
    threading.Event().wait()


def start_stub(gold_by_question: dict[str, str], latency: float) -> tuple[Any, Any, str]:
    """(process, shared call counter, api_base) of a stub served from a fresh process."""
    ctx = multiprocessing.get_context("spawn")
    calls = ctx.Value("i", 0)
    ready, child_end = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_serve_stub, args=(gold_by_question, latency, calls, child_end), daemon=True)
    proc.start()
    if not ready.poll(60):
        proc.kill()
        raise SystemExit("the stub server did not start within 60 s")
    return proc, calls, ready.recv()


def trace_bytes(db: Path) -> int:
    """Bytes of span content in an MLflow sqlite store (0 when there is none)."""
    import sqlite3

    if not db.exists():
        return 0
    con = sqlite3.connect(db)
    try:
        row = con.execute("SELECT COALESCE(SUM(LENGTH(content)), 0) FROM spans").fetchone()
        return int(row[0] or 0)
    except sqlite3.Error:
        return 0
    finally:
        con.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    ap.add_argument("--questions", type=int, default=32)
    ap.add_argument("--latency", type=float, default=0.3)
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 4, 8, 16])
    ap.add_argument("--no-mlflow", action="store_true")
    ap.add_argument(
        "--trace",
        choices=("all", "sample", "none"),
        default="all",
        help="DSPy traces with tracking on (default: all, the default setting)",
    )
    ap.add_argument("--dataset", default="qald10")
    ap.add_argument("--split", default="test")  # the questions of the earlier figures; no answer quality is measured
    args = ap.parse_args()

    from saga_dspy.config import Settings, apply_offline_env

    apply_offline_env()
    from saga_dspy.eval.loading.evalset import load_eval_set
    from saga_dspy.eval.running.runner import evaluate
    from saga_dspy.kg.endpoint import open_endpoint

    base = Settings(dataset=args.dataset, split=args.split, lm_cache=False, result_cache=False)
    evalset = load_eval_set(base, progress=False)
    items = evalset.items[: args.questions + 1]
    ids = [it.id for it in items]
    stub, calls, url = start_stub({it.question: it.gold_sparql for it in items}, args.latency)
    tmp = Path(tempfile.mkdtemp(prefix="saga-throughput-"))
    endpoint = open_endpoint(base)
    rows = []
    try:
        for n in args.threads:
            db = tmp / f"mlflow-{n}.db"
            s = base.model_copy(
                update={
                    "lm": "openai/stub",
                    "api_base": url,
                    "num_threads": n,
                    "mlflow": not args.no_mlflow,
                    "mlflow_uri": f"sqlite:///{db}",
                    "trace": args.trace,
                }
            )
            sink = open(os.devnull, "w")
            evaluate(s, ["full"], out=tmp / f"warm-{n}", ids=ids[:1], endpoint=endpoint, progress=False, stream=sink)
            before_calls, before_bytes = calls.value, trace_bytes(db)
            started, cpu_started = time.perf_counter(), time.process_time()
            res = evaluate(
                s, ["full"], out=tmp / f"run-{n}", ids=ids[1:], endpoint=endpoint, progress=False, stream=sink
            )
            wall = time.perf_counter() - started
            cpu = time.process_time() - cpu_started
            lines = res["full"].lines
            lm_calls = calls.value - before_calls
            q_seconds = sum(float((line.get("counters") or {}).get("seconds") or 0.0) for line in lines)
            lm_wait = lm_calls * args.latency
            phase = res["full"].metrics["phase"]
            rows.append(
                {
                    "threads": n,
                    "questions": len(lines),
                    "seconds": round(wall, 2),
                    "q_per_s": round(len(lines) / wall, 3),
                    "phase_seconds": phase["seconds"],
                    "phase_q_per_s": round(phase["questions"] / phase["seconds"], 3),
                    "lm_calls": lm_calls,
                    "cpu_ms_per_q": round(1000 * cpu / max(1, len(lines)), 1),
                    "non_lm_share": round(max(0.0, q_seconds - lm_wait) / q_seconds, 3) if q_seconds else None,
                    "trace_kb_per_q": round((trace_bytes(db) - before_bytes) / 1024 / max(1, len(lines)), 1),
                    "f1": res["full"].metrics.get("f1"),
                }
            )
            print(json.dumps(rows[-1]), flush=True)
    finally:
        endpoint.close()
        stub.kill()
    one = rows[0] if rows else None
    print(
        "\n| threads | questions | question phase s | q/s | speed-up | whole evaluate s | q/s | speed-up "
        "| non-LM share | CPU ms/q | trace KB/q | F1 |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        phase_speed = r["phase_q_per_s"] / one["phase_q_per_s"] if one else float("nan")
        speed = r["q_per_s"] / one["q_per_s"] if one else float("nan")
        share = f"{100 * r['non_lm_share']:.1f} %" if r["non_lm_share"] is not None else "-"
        print(
            f"| {r['threads']} | {r['questions']} | {r['phase_seconds']} | {r['phase_q_per_s']} | {phase_speed:.2f}x "
            f"| {r['seconds']} | {r['q_per_s']} | {speed:.2f}x | {share} | {r['cpu_ms_per_q']} | "
            f"{r['trace_kb_per_q']} | {r['f1']} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
