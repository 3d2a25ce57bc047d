"""What a question costs with the local model, before and after the cost settings, on a fixed 20-question dev set.

Each question is answered by `before` (the settings that reproduce the behaviour before the cost work: every
demonstration chosen per question and shown whole, the thought uncapped, nothing drafted) and then by `after`
(today's defaults), in one process, one thread, the LM cache off. Each configuration keeps its own prefix-state
cache, and the model's live prefix is dropped between questions, so neither reuses what the other evaluated; a
configuration's later questions reuse what its earlier ones did, as in an eval run. Each question is a real
`saga_dspy.eval.running.runner.evaluate` call in its own run directory under `--out` (re-scorable), its row kept
beside it (`row.json`): `--run-dir` continues a run, a configuration's answered questions are not run again.
`after` keeps the shared prompt prefixes it evaluates on disk in the run's own store (`<run>/prefix-states`), so
a new run starts cold; `--set prefix_store=<an earlier run>/prefix-states` measures a later run's (warm) cost.

Reported per configuration, a question's mean: seconds (the prediction's clock: only comparable on one machine
in one run, and meaningless on a loaded one), LM calls, prompt tokens, those evaluated and reused, completion tokens
(the model's and the markers the engine wrote), tokens the model sampled, and F1 with the paired interval of
after - before (`eval.scoring.significance`). Token counts do not depend on the machine's load.

`--lookup-calls N` then replays N of `after`'s controller calls (the same messages) with and without prompt-lookup
drafts, alternating which goes first, and reports the reply's tokens a second of each and whether the replies
are the same (greedy decoding: they should be).

    .venv/bin/python benchmarks/bench_question_cost.py                 # the 20 questions, before and after
    .venv/bin/python benchmarks/bench_question_cost.py --questions 5 --lookup-calls 20
    .venv/bin/python benchmarks/bench_question_cost.py --dev60 --only before --run-dir runs/question-cost/R  # then
    .venv/bin/python benchmarks/bench_question_cost.py --dev60 --only after --run-dir runs/question-cost/R   # after
"""

from __future__ import annotations

import argparse
import io
import json
import statistics
import sys
import time
from itertools import zip_longest
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from saga_dspy.config import Settings, apply_offline_env  # noqa: E402

apply_offline_env()

# the fixed set: the first questions of each benchmark's part of the dev slice (data/slices/dev60/), in this order
QUESTIONS: tuple[tuple[str, str], ...] = (
    ("qald10", "train_118"),
    ("qald10", "train_125"),
    ("qald10", "train_132"),
    ("qald10", "train_138"),
    ("qald10", "train_139"),
    ("qald10", "train_148"),
    ("qald10", "train_149"),
    ("qald10", "train_159"),
    ("qald10", "train_160"),
    ("qald10", "train_161"),
    ("qald10", "train_162"),
    ("qald10", "train_164"),
    ("qald9plus", "140"),
    ("qald9plus", "17"),
    ("qald9plus", "194"),
    ("qald9plus", "25"),
    ("wwq", "WebQTrn-3151"),
    ("wwq", "WebQTrn-3194"),
    ("wwq", "WebQTrn-3212"),
    ("wwq", "WebQTrn-3235"),
)

# the settings before the cost work (each a field that work added or whose default it changed)
BEFORE: dict[str, Any] = {
    "demos": 2,
    "demo_anchors": 0,
    "demo_observation_chars": 500,
    "demo_steps": 8,
    "thought_tokens": 0,
    "cut_invented_turns": False,
    "prompt_lookup": 0,
    "write_choices": False,
    "write_arguments": False,
    "prefix_store": "none",
    "demo_picks": False,
    "state_in_trajectory": False,
    "closing_line": "dspy",
    "compact_observations": False,
    "shown_candidates": 3,
}
COMMON: dict[str, Any] = {"split": "dev", "max_steps": 10, "lm_cache": False, "mlflow": False, "num_threads": 1}
COUNTERS = ("lm_calls", "prompt_tokens", "prompt_tokens_evaluated", "prompt_tokens_reused", "completion_tokens")
ENGINE = ("sampled", "written", "restored", "prompt_ms", "reply_ms")


def configurations(overrides: dict[str, Any]) -> dict[str, Settings]:
    """before and after (today's defaults, `overrides` on top: a choice tried before it becomes a default)."""
    after = Settings(lm="local", **COMMON, **overrides)
    return {"before": after.model_copy(update=BEFORE), "after": after}


def _llama(lm: Any) -> Any:
    return lm.llama_engine._handle().llama


def answer(settings: Settings, dataset: str, qid: str, lm: Any, cache: Any, out: Path) -> dict[str, Any]:
    """One question by one configuration: its prediction's counters, the engine's counts, F1, seconds."""
    from saga_dspy.eval.running.runner import evaluate

    run_dir = out / dataset / qid
    if (run_dir / "row.json").exists():  # answered by an earlier run of the same configuration: kept, not rerun
        return dict(json.loads((run_dir / "row.json").read_text(encoding="utf-8")))
    llama = _llama(lm)
    llama.set_cache(cache)  # this configuration's evaluated prefixes only
    llama.reset()  # and none of the other's live KV prefix
    engine = lm.llama_engine
    before = dict(engine.totals)
    evaluate(
        settings.model_copy(update={"dataset": dataset}),
        [settings.variant],
        out=run_dir,
        ids=[qid],
        lm=lm,
        resume=True,
        progress=False,
        stream=io.StringIO(),
    )
    record = json.loads((run_dir / "predictions.jsonl").read_text(encoding="utf-8").splitlines()[-1])
    counters = record.get("counters") or {}
    row: dict[str, Any] = {"dataset": dataset, "id": qid, "f1": float(record.get("f1") or 0.0)}
    row["seconds"] = float(counters.get("seconds") or 0.0)
    row.update({k: int(counters.get(k) or 0) for k in COUNTERS})
    row.update({k: int(engine.totals.get(k, 0) - before.get(k, 0)) for k in ENGINE})
    row["steps"] = len(record.get("trajectory") or [])
    (run_dir / "row.json").write_text(json.dumps(row), encoding="utf-8")
    return row


def rest_of_dev(fixed: tuple[tuple[str, str], ...]) -> list[tuple[str, str]]:
    """The dev slice's other questions (data/slices/dev60/), one benchmark after another in turn."""
    lists = []
    for path in sorted((REPO / "data" / "slices" / "dev60").glob("*.ids")):
        ids = [line.strip() for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        lists.append([(path.stem, qid) for qid in ids if (path.stem, qid) not in fixed])
    return [item for group in zip_longest(*lists) for item in group if item]


def summary(rows: list[dict[str, Any]]) -> dict[str, float]:
    keys = ("seconds", *COUNTERS, *ENGINE, "steps", "f1")
    return {k: round(statistics.mean(r[k] for r in rows), 3) for k in keys} if rows else {}


def lookup_replay(lm_plain: Any, lm_draft: Any, calls: list[list[dict]], cache: Any) -> dict[str, Any]:
    """The same controller calls with and without drafts: the reply's sampled tokens a second, and equal replies."""
    out = {"calls": 0, "same_reply": 0, "plain": {"sampled": 0, "reply_ms": 0}, "draft": {"sampled": 0, "reply_ms": 0}}
    llama = _llama(lm_plain)
    llama.set_cache(cache)
    for i, messages in enumerate(calls):
        order = [("plain", lm_plain), ("draft", lm_draft)]
        replies = {}
        for name, lm in order if i % 2 == 0 else order[::-1]:
            engine = lm.llama_engine
            before = dict(engine.totals)
            replies[name] = lm(messages=messages)[0]
            for k in ("sampled", "reply_ms"):
                out[name][k] += engine.totals.get(k, 0) - before.get(k, 0)
        out["calls"] += 1
        out["same_reply"] += replies["plain"] == replies["draft"]
    for name in ("plain", "draft"):
        part = out[name]
        part["tokens_per_second"] = round(part["sampled"] / max(part["reply_ms"], 1) * 1000, 2)
    out["speedup"] = round(out["draft"]["tokens_per_second"] / max(out["plain"]["tokens_per_second"], 1e-9), 3)
    return out


def build_report(
    configs: dict[str, Settings],
    overrides: dict[str, Any],
    rows: dict[str, list[dict[str, Any]]],
    fixed: tuple[tuple[str, str], ...],
    started: float,
) -> dict[str, Any]:
    """The report so far: the fixed questions' means and F1 interval, and the same over every question answered."""
    from saga_dspy.eval.scoring.significance import paired_by_id

    def part(keep: Any) -> tuple[dict[str, Any], dict[str, Any]]:
        chosen = {name: [r for r in rs if keep(r)] for name, rs in rows.items()}
        f1 = {name: {f"{r['dataset']}/{r['id']}": r["f1"] for r in rs} for name, rs in chosen.items()}
        return {name: summary(r) for name, r in chosen.items()}, paired_by_id(f1["before"], f1["after"]).as_dict()

    fixed_set = set(fixed)
    summary_fixed, f1_fixed = part(lambda r: (r["dataset"], r["id"]) in fixed_set)
    summary_all, f1_all = part(lambda r: True)
    return {
        "questions": [f"{d}/{q}" for d, q in fixed],
        "before": BEFORE,
        "after": {k: configs["after"].model_dump(mode="json")[k] for k in BEFORE} | overrides,
        "common": COMMON,
        "wall_seconds": round(time.time() - started, 1),
        "loadavg_end": Path("/proc/loadavg").read_text().split()[:3] if Path("/proc/loadavg").exists() else None,
        "summary": summary_fixed,
        "f1_after_minus_before": f1_fixed,
        "answered": len(rows["before"]),
        "summary_all": summary_all,
        "f1_all_after_minus_before": f1_all,
        "rows": rows,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=len(QUESTIONS), help="the first N of the fixed 20")
    parser.add_argument("--out", type=Path, default=REPO / "runs" / "question-cost")
    parser.add_argument("--run-dir", type=Path, default=None, help="continue this run directory (default: new)")
    parser.add_argument("--json", type=Path, default=None, help="the report (default: results/question-cost/<time>)")
    parser.add_argument("--set", action="append", default=[], help="an after-setting, NAME=VALUE (JSON value)")
    parser.add_argument("--lookup-calls", type=int, default=0, help="replay this many of after's calls, drafts on/off")
    parser.add_argument("--dev60", action="store_true", help="then the dev slice's other 42 questions (F1, costs)")
    parser.add_argument("--lookup-tokens", type=int, default=8, help="tokens drafted in that replay")
    parser.add_argument(
        "--only",
        choices=("before", "after"),
        default=None,
        help="answer with this configuration alone (the other's "
        "rows in --run-dir are read, not rerun): two processes one after the other, each prefix cache its own",
    )
    args = parser.parse_args()

    from saga_dspy.lm import configure_lm_cache, local_lm
    from saga_dspy.lm.llama import LOCAL_PREFIX_CACHE_BYTES
    from saga_dspy.lm.prefix_cache import PrefixStateCache

    overrides = {}
    for item in args.set:
        name, _, value = item.partition("=")
        try:
            overrides[name] = json.loads(value)
        except ValueError:
            overrides[name] = value
    configs = configurations(overrides)
    configure_lm_cache(configs["after"])
    stamp = time.strftime("%Y%m%d-%H%M%S")
    out = args.run_dir or args.out / stamp
    if "prefix_store" not in overrides:  # after's store of shared prefixes is the run's own: a new run starts cold
        configs["after"] = configs["after"].model_copy(update={"prefix_store": str(out / "prefix-states")})
    lms = {name: local_lm(s) for name, s in configs.items() if args.only in (None, name)}
    caches = {name: PrefixStateCache(LOCAL_PREFIX_CACHE_BYTES) for name in configs}
    rows: dict[str, list[dict[str, Any]]] = {name: [] for name in configs}
    started = time.time()
    fixed = QUESTIONS[: args.questions]
    todo = list(fixed) + (rest_of_dev(fixed) if args.dev60 else [])
    path = args.json or REPO / "results" / "question-cost" / f"{stamp}.json"
    report: dict[str, Any] = {}
    for n, (dataset, qid) in enumerate(todo, 1):
        for name, settings in configs.items():
            if args.only and name != args.only:
                done = out / name / dataset / qid / "row.json"
                if not done.exists():
                    continue
                row = json.loads(done.read_text(encoding="utf-8"))
            else:
                row = answer(settings, dataset, qid, lms[name], caches[name], out / name)
            rows[name].append(row)
            print(
                f"{name:6s} {dataset}/{qid}: {row['seconds']:.1f} s, {row['lm_calls']} calls, "
                f"{row['prompt_tokens_evaluated']} evaluated / {row['prompt_tokens_reused']} reused, "
                f"{row['sampled']} sampled, F1 {row['f1']:.2f}",
                flush=True,
            )
        report = build_report(configs, overrides, rows, fixed, started) | {"done": f"{n}/{len(todo)}"}
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(report, indent=1), encoding="utf-8")  # a stopped run keeps what it answered
    if args.lookup_calls:
        after = configs["after"]
        plain = local_lm(after.model_copy(update={"prompt_lookup": 0}))
        draft = local_lm(after.model_copy(update={"prompt_lookup": args.lookup_tokens}))
        calls = [e["messages"] for e in lms["after"].history if e.get("messages")][: args.lookup_calls]
        report["prompt_lookup"] = {"tokens": args.lookup_tokens} | lookup_replay(plain, draft, calls, caches["after"])
    for name, part in report["summary"].items():
        print(f"\n{name}: " + ", ".join(f"{k} {v}" for k, v in part.items()))
    for key in ("f1_after_minus_before", "f1_all_after_minus_before"):
        print(f"\n{key}:", json.dumps(report[key]))
    if "prompt_lookup" in report:
        print("prompt lookup:", json.dumps(report["prompt_lookup"]))
    path.write_text(json.dumps(report, indent=1), encoding="utf-8")
    print(f"\nwrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
