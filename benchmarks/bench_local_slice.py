"""Local-model seconds a question on the fixed 5-question QALD-10 dev slice, the variants interleaved.

The slice is the first N answerable questions of QALD-10 dev (`--limit N` of an eval run). This
machine's speed drifts by a quarter from hour to hour, so two variants timed one after the other
compare badly; here every question is answered by each variant in turn before the next question, in
one process (one model, one prefix cache: as each eval run has its own, a variant's first question
starts cold here too, and later ones reuse what that variant's earlier questions evaluated). Each
question is a real `saga_dspy.eval.running.runner.evaluate` call (LM cache off, default settings unless flags say
otherwise) in its own run directory under `--out`, so the figures can be re-scored.

Reported per variant: seconds a question (the prediction's own clock), prompt tokens evaluated and
reused, completion tokens, LM calls, F1; and full's seconds over spinach's. Run it on an idle machine.

    .venv/bin/python benchmarks/bench_local_slice.py [--questions 5] [--variants full spinach]
                                                     [--demo-anchors 2] [--out runs/local-slice]
"""

from __future__ import annotations

import argparse
import io
import json
import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from saga_dspy.config import Settings, apply_offline_env  # noqa: E402

apply_offline_env()

FIGURES = ("seconds", "prompt_tokens_evaluated", "prompt_tokens_reused", "completion_tokens", "lm_calls")


def slice_ids(settings: Settings, n: int) -> list[str]:
    from saga_dspy.eval.loading.evalset import load_eval_set

    evalset = load_eval_set(settings.model_copy(update={"limit": n}), progress=False)
    return list(evalset.data["id"])


def prediction(run_dir: Path) -> dict:
    lines = (run_dir / "predictions.jsonl").read_text(encoding="utf-8").splitlines()
    return json.loads(lines[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=5, help="the first N answerable dev questions")
    parser.add_argument("--variants", nargs="+", default=["full", "spinach"])
    parser.add_argument("--demo-anchors", type=int, default=None, help="Settings.demo_anchors (default: the setting's)")
    parser.add_argument("--max-steps", type=int, default=10)
    parser.add_argument("--out", type=Path, default=REPO / "runs" / "local-slice")
    args = parser.parse_args()

    from saga_dspy.eval.running.runner import evaluate

    update = {"max_steps": args.max_steps, "lm_cache": False, "mlflow": False, "num_threads": 1}
    if args.demo_anchors is not None:
        update["demo_anchors"] = args.demo_anchors
    base = Settings(dataset="qald10", split="dev", lm="local", **update)
    ids = slice_ids(base, args.questions)
    rows: dict[str, list[dict]] = {v: [] for v in args.variants}
    for qid in ids:
        for variant in args.variants:
            run_dir = args.out / variant / qid
            if not (run_dir / "predictions.jsonl").exists():
                evaluate(
                    base.model_copy(update={"variant": variant}),
                    [variant],
                    out=run_dir,
                    ids=[qid],
                    resume=True,
                    progress=False,
                    stream=io.StringIO(),
                )
            record = prediction(run_dir)
            counters = record.get("counters") or {}
            row = {k: counters.get(k) for k in FIGURES} | {"id": qid, "f1": record.get("f1") or 0.0}
            rows[variant].append(row)
            print(
                f"{variant:10s} {qid:12s} {row['seconds']:7.1f} s  evaluated {row['prompt_tokens_evaluated']}"
                f"  reused {row['prompt_tokens_reused']}  completion {row['completion_tokens']}  f1 {row['f1']:.2f}",
                flush=True,
            )
    report = {"questions": ids, "settings": update, "variants": {}}
    print(f"\nmean per question, {len(ids)} QALD-10 dev questions:")
    for variant, got in rows.items():
        means = {k: round(statistics.mean(float(r[k] or 0) for r in got), 1) for k in FIGURES}
        means["f1"] = round(100 * statistics.mean(r["f1"] for r in got), 1)
        report["variants"][variant] = {"mean": means, "per_question": got}
        print(f"  {variant:10s} " + "  ".join(f"{k} {v}" for k, v in means.items()))
    if "full" in rows and "spinach" in rows:
        ratio = report["variants"]["full"]["mean"]["seconds"] / max(
            report["variants"]["spinach"]["mean"]["seconds"], 1e-9
        )
        report["full_over_spinach"] = round(ratio, 3)
        print(f"  full / spinach seconds: {ratio:.3f}")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "slice.json").write_text(json.dumps(report, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
