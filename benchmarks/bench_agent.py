"""Cost of the SAGA agent with the local model on the bundled sample (issue 4 §6).

For N QALD-10 test questions that the sample can answer, runs the program in each mode
(default `full` and `spinach`) and reports seconds per step and per question, LM calls and
prompt / completion tokens per question, and the answer F1 against the gold result.

    .venv/bin/python benchmarks/bench_agent.py                       # 10 questions, full + spinach
    .venv/bin/python benchmarks/bench_agent.py --questions 3 --variants full --max-steps 8
    .venv/bin/python benchmarks/bench_agent.py --out runs/bench_agent.json
    .venv/bin/python benchmarks/bench_agent.py --from-eval runs/table/full runs/table/spinach   # from eval runs

Questions: the frozen gold (`load_benchmark(..., answerable_only=True)`) when it exists, else
the gold queries are run on the sample and the first N with a non-empty answer (and a non-zero
count) are kept, in file order. The LM cache is off, so every call is really computed.
The paper's design spends 1 answer-type call, 2 calls per step (controller + re-parse) and a
pruning call per untyped lookup; the table prints that figure beside ours.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from saga_dspy.config import Settings, add_settings_args, apply_offline_env, settings_from_args  # noqa: E402

apply_offline_env()


def pick_questions(settings: Settings, endpoint, n: int, ids: list[str] | None) -> list[dict]:
    from saga_dspy.eval.loading.datasets import load_benchmark, load_records
    from saga_dspy.kg.results import SelectResult, parse_sparql_json

    try:
        ds = load_benchmark("qald10", "test", settings, answerable_only=True)
        records = [dict(r) for r in ds]
        for r in records:
            r["gold_result"] = parse_sparql_json(json.loads(r["gold"]))
    except ValueError:  # no frozen gold: run the gold queries here
        records = []
        for r in load_records("qald10", "test", settings):
            if ids and r["id"] not in ids:
                continue
            try:
                result = endpoint.query(r["sparql"])
            except Exception:
                continue
            if isinstance(result, SelectResult):
                if not result.rows:
                    continue
                values = result.values()
                if len(values) == 1 and values[0].type == "literal" and values[0].value in ("0", "0.0"):
                    continue  # a count of nothing
            r["gold_result"] = result
            records.append(r)
            if not ids and len(records) >= n:
                break
    if ids:
        records = [r for r in records if r["id"] in ids]
    return records[:n] if not ids else records


def run(args) -> dict:
    from saga_dspy.agent.program import SagaProgram
    from saga_dspy.eval.scoring.metrics import answer_f1
    from saga_dspy.kg.endpoint import open_endpoint
    from saga_dspy.kg.search import open_search
    from saga_dspy.lm import build_lm, configure_lm_cache

    base = settings_from_args(args, lm_cache=False)
    configure_lm_cache(base)
    lm = build_lm(base)
    endpoint = open_endpoint(base)
    search = open_search(base, endpoint)
    questions = pick_questions(base, endpoint, args.questions, args.ids)
    print(f"{len(questions)} questions: {', '.join(q['id'] for q in questions)}", flush=True)
    report: dict = {"lm": base.lm, "max_steps": base.max_steps, "demos": base.demos, "variants": {}}
    # rows are appended to <out>.rows.jsonl as they finish; a rerun skips the (variant, id) pairs done
    rows_path = args.out.with_suffix(".rows.jsonl") if args.out else None
    done: dict[tuple[str, str], dict] = {}
    if rows_path is not None and rows_path.exists():
        for line in rows_path.read_text().splitlines():
            row = json.loads(line)
            done[(row["variant"], row["id"])] = row
    try:
        for variant in args.variants:
            settings = base.model_copy(update={"variant": variant})
            program = SagaProgram(settings, endpoint, search, lm=lm)
            rows = []
            for q in questions:
                if (variant, q["id"]) in done:
                    rows.append(done[(variant, q["id"])])
                    continue
                started = time.monotonic()
                pred = program(question=q["question"])
                wall = time.monotonic() - started
                f1 = answer_f1(pred.answers, q["gold_result"]) if pred.answers is not None else 0.0
                row = cost_row(
                    q["id"],
                    q["question"],
                    variant,
                    wall,
                    pred.counters,
                    f1=round(f1, 3),
                    final_status=pred.final_status,
                    sparql=pred.sparql,
                    error=pred.error,
                    load_average=round(os.getloadavg()[0], 2),
                )
                c = pred.counters
                rows.append(row)
                if rows_path is not None:
                    rows_path.parent.mkdir(parents=True, exist_ok=True)
                    with rows_path.open("a") as handle:
                        handle.write(json.dumps(row, default=str) + "\n")
                print(
                    f"[{variant}] {q['id']:>4} {wall:7.1f}s steps={c['steps']:2d} calls={c['lm_calls']:2d} "
                    f"tok={c['prompt_tokens']}+{c['completion_tokens']} f1={f1:.2f} {pred.final_status}  "
                    f"{q['question'][:60]}",
                    flush=True,
                )
            report["variants"][variant] = {"questions": rows, "summary": summarize(rows)}
    finally:
        endpoint.close()
    return report


def cost_row(qid, question, variant, wall, c: dict, **extra) -> dict:
    """One question's cost: wall time, steps, LM calls and tokens, and the paper design's call count."""
    return {
        "id": qid,
        "question": question,
        "seconds": round(wall, 2),
        "steps": c["steps"],
        "seconds_per_step": round(wall / c["steps"], 2) if c["steps"] else None,
        "lm_calls": c["lm_calls"],
        "prompt_tokens": c["prompt_tokens"],
        "completion_tokens": c["completion_tokens"],
        "lookups": c["lookups"],
        "executions": c["executions"],
        "blocked": c["blocked"],
        "empty": c["empty"],
        # the paper: 1 answer-type call, controller + re-parse per step, a pruning call per untyped lookup
        "paper_design_calls": 1 + 2 * c["steps"] + c.get("prunes", 0),
        "variant": variant,
        **extra,
    }


def from_eval(directories: list[Path]) -> dict:
    """The same report from finished `python -m saga_dspy.eval` runs (their predictions.jsonl)."""
    report: dict = {"source": [str(d) for d in directories], "variants": {}}
    for directory in directories:
        config = json.loads((directory / "config.json").read_text()) if (directory / "config.json").exists() else {}
        variant = (config.get("settings") or {}).get("variant") or directory.name
        rows = []
        for line in (directory / "predictions.jsonl").read_text().splitlines():
            p = json.loads(line)
            c = p.get("counters") or {}
            if not c.get("lm_calls"):
                continue  # a question that never reached the LM (error before the agent) has no cost
            rows.append(
                cost_row(
                    p["id"],
                    p["question"],
                    variant,
                    float(c.get("seconds") or 0.0),
                    c,
                    f1=round(float(p.get("f1") or 0.0), 3),
                    final_status=p.get("final_status"),
                    sparql=p.get("sparql"),
                    error=p.get("error"),
                )
            )
        report["variants"][variant] = {"questions": rows, "summary": summarize(rows)}
    return report


def summarize(rows: list[dict]) -> dict:
    def mean(key):
        values = [r[key] for r in rows if r.get(key) is not None]
        return round(statistics.fmean(values), 2) if values else None

    steps = sum(r["steps"] for r in rows)
    seconds = sum(r["seconds"] for r in rows)
    return {
        "questions": len(rows),
        "seconds_per_question": mean("seconds"),
        "seconds_per_step": round(seconds / steps, 2) if steps else None,
        "steps_per_question": mean("steps"),
        "lm_calls_per_question": mean("lm_calls"),
        "paper_design_calls_per_question": mean("paper_design_calls"),
        "prompt_tokens_per_question": mean("prompt_tokens"),
        "completion_tokens_per_question": mean("completion_tokens"),
        "f1": mean("f1"),
        "errors": sum(1 for r in rows if r["error"]),
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--questions", type=int, default=10)
    parser.add_argument("--ids", nargs="*", help="QALD-10 test ids to run instead of the first answerable ones")
    parser.add_argument("--variants", nargs="+", default=["full", "spinach"])
    parser.add_argument("--out", type=Path, help="write the report as JSON here")
    parser.add_argument(
        "--from-eval",
        type=Path,
        nargs="+",
        metavar="RUN_DIR",
        help="report on finished eval runs (one directory per variant) instead of running",
    )
    add_settings_args(
        parser,
        [
            "cache_dir",
            "lm",
            "api_base",
            "api_key",
            "max_steps",
            "demos",
            "max_tokens",
            "context_window",
            "temperature",
            "seed",
            "endpoint",
        ],
    )
    args = parser.parse_args(argv)
    report = from_eval(args.from_eval) if args.from_eval else run(args)
    print()
    print(
        f"{'variant':10} {'s/question':>10} {'s/step':>7} {'steps':>6} {'LM calls':>9} {'paper calls':>11} "
        f"{'prompt tok':>10} {'compl tok':>9} {'F1':>5}"
    )
    for variant, block in report["variants"].items():
        s = block["summary"]
        print(
            f"{variant:10} {s['seconds_per_question']!s:>10} {s['seconds_per_step']!s:>7} "
            f"{s['steps_per_question']!s:>6} {s['lm_calls_per_question']!s:>9} "
            f"{s['paper_design_calls_per_question']!s:>11} {s['prompt_tokens_per_question']!s:>10} "
            f"{s['completion_tokens_per_question']!s:>9} {s['f1']!s:>5}"
        )
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=2, default=str))
        print(f"report written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
