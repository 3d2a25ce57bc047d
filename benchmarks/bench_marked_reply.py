"""The local engine writing a chat-format reply's field markers (`--write-markers`, `lm.llama.marked_reply`)
against the model generating them: seconds a question, generated tokens, and whether the replies stay the same.

Replays recorded questions of a local-model eval run through today's program (the prompts its recorded actions
produce, as `bench_prompt_tokens.py` does), then sends each question's calls, in order, to the bundled model
once with the markers generated and once with them written: each setting in its own process (a cold prefix
cache, as a fresh eval run), alternating, `--rounds` times. Both settings answer the same prompts. A reply that
differs from the generated-markers reply is counted and, with `--show`, printed.

    .venv/bin/python benchmarks/bench_marked_reply.py results/local-dev30-s19/full --limit 5 --out FILE.json

Run it on an idle machine: every figure is wall-clock on this CPU.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

SETTINGS = {"generated": False, "written": True}  # Settings.write_markers


def worker(calls_file: Path, write_markers: bool, out: Path) -> None:
    """One setting: every recorded call through the local backend, timed."""
    from saga_dspy.config import Settings, apply_offline_env
    from saga_dspy.lm.llama import _eval_meter, local_lm

    apply_offline_env()
    lm = local_lm(Settings(lm_cache=False, write_markers=write_markers))
    lm.llama_engine.load()
    meter = _eval_meter(lm.llama_engine._handle().llama)
    results = []
    for q in json.loads(calls_file.read_text()):
        for messages in q["calls"]:
            start = time.perf_counter()
            text = lm(messages=messages)[0]
            seconds = time.perf_counter() - start
            usage = lm.history[-1].get("usage") or {}
            results.append(
                {
                    "id": q["id"],
                    "seconds": round(seconds, 3),
                    "text": text,
                    "completion_tokens": usage.get("completion_tokens"),
                    "evaluated": sum(meter.sizes),
                    "decode_steps": len(meter.sizes),
                }
            )
    out.write_text(json.dumps(results))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path, nargs="?", help="a local-model eval run (predictions.jsonl, config.json)")
    parser.add_argument("--limit", type=int, default=5, help="its first N questions")
    parser.add_argument("--ids", default=None, help="these question ids instead (comma-separated)")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--show", action="store_true", help="print the replies that differ")
    parser.add_argument("--out", type=Path, default=None, help="write the figures as JSON here")
    parser.add_argument("--worker", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--setting", choices=SETTINGS, help=argparse.SUPPRESS)
    parser.add_argument("--worker-out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker, SETTINGS[args.setting], args.worker_out)
        return 0
    if args.run is None:
        parser.error("the run directory is required")

    from bench_prompt_tokens import replayed_calls

    ids = args.ids.split(",") if args.ids else None
    questions = [
        {"id": r["id"], "calls": [messages for messages, _ in calls]}
        for r, calls in replayed_calls(args.run, args.limit, ids)
    ]
    runs: dict[str, list[list[dict]]] = {name: [] for name in SETTINGS}
    with tempfile.TemporaryDirectory() as tmp:
        calls_file = Path(tmp) / "calls.json"
        calls_file.write_text(json.dumps(questions))
        for round_ in range(args.rounds):
            for name in SETTINGS:
                out = Path(tmp) / f"{name}-{round_}.json"
                subprocess.run(
                    [
                        sys.executable,
                        __file__,
                        "--worker",
                        str(calls_file),
                        "--setting",
                        name,
                        "--worker-out",
                        str(out),
                    ],
                    check=True,
                )
                runs[name].append(json.loads(out.read_text()))
                print(
                    f"round {round_ + 1}, markers {name}: {sum(c['seconds'] for c in runs[name][-1]):.1f} s", flush=True
                )
    n = len(questions)
    reference = runs["generated"][0]
    report = {
        "run": str(args.run),
        "questions": [q["id"] for q in questions],
        "calls": sum(len(q["calls"]) for q in questions),
        "settings": {},
    }
    print(f"\n{args.run}: {n} questions, {report['calls']} calls; per question:")
    print(f"{'markers':>9} {'s/question (rounds)':>22} {'reply tokens':>12} {'decode steps':>12} {'differ':>6}")
    for name in SETTINGS:
        per_round = [sum(c["seconds"] for c in calls) / n for calls in runs[name]]
        first = runs[name][0]
        differ = [(a, b) for a, b in zip(first, reference) if a["text"].strip() != b["text"].strip()]
        row = {
            "seconds_per_question": [round(s, 2) for s in per_round],
            "reply_tokens": sum(c["completion_tokens"] or 0 for c in first) / n,
            "decode_steps": sum(c["decode_steps"] for c in first) / n,
            "replies_differing": len(differ),
            "per_call": [{k: c[k] for k in ("id", "seconds", "completion_tokens", "decode_steps")} for c in first],
        }
        report["settings"][name] = row
        print(
            f"{name:>9} {' / '.join(f'{s:.1f}' for s in per_round):>22} {row['reply_tokens']:>12.1f} "
            f"{row['decode_steps']:>12.1f} {len(differ):>6}"
        )
        if args.show:
            for a, b in differ:
                print(f"--- {a['id']}\n[generated]\n{b['text']}\n[written]\n{a['text']}")
    if args.out:
        args.out.write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
