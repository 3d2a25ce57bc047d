#!/usr/bin/env python
"""Build the controller's demo pools with the gold teacher, from TRAIN questions only.

    python scripts/build_demos.py                      # all pools into data/demos/
    python scripts/build_demos.py --datasets qald10 --limit 50 --out /tmp/demos

For each dataset's train split (qald10 train = GRASP's QALD-10 train, qald7 train, qald9plus
train, wwq train) the answerable questions (frozen gold on the embedded sample) are solved by
`saga_dspy.optimize.gold_teacher.gold_trace`: search each entity's label, look the entity up, execute the
gold query, stop — with real observations from our tools. The records (the format of
`saga_dspy.agent.demos`) go to `<out>/<dataset>.jsonl`, in benchmark order; the agent picks its
per-question demonstrations from them by BM25 (`--demos N`).

A train question whose text also occurs in the dataset's test split is left out (no test
leakage through near-copies). `<out>/MANIFEST.json` records counts, skip reasons, the endpoint,
the schema index and the versions.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import re
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from saga_dspy.config import Settings, apply_offline_env, default_data_dir  # noqa: E402

POOLS = {"qald10": "train", "qald7": "train", "qald9plus": "train", "wwq": "train"}


def _norm(text: str) -> str:
    return " ".join(re.findall(r"\w+", (text or "").lower()))


def build_pool(settings: Settings, dataset: str, split: str, endpoint, search, *, limit: int | None,
               variant: str, progress: bool) -> tuple[list[dict], dict]:
    from saga_dspy.eval.datasets import BENCHMARKS, load_records
    from saga_dspy.eval.evalset import load_eval_set
    from saga_dspy.optimize.gold_teacher import gold_traces

    info = BENCHMARKS[dataset]
    resolved = info.resolve_split(split)
    if resolved == info.test:
        raise SystemExit(f"{dataset}/{resolved} is a test split: demo pools come from train questions only")
    s = settings.model_copy(update={"dataset": dataset, "split": resolved, "limit": limit})
    evalset = load_eval_set(s, answerable_only=True, progress=progress)
    test_questions: set[str] = set()
    if info.test:
        test_questions = {_norm(r["question"]) for r in load_records(dataset, info.test, s)}
    items = [i for i in evalset.items if _norm(i.question) not in test_questions]
    leaked = len(evalset.items) - len(items)
    started = time.monotonic()
    records, skipped = gold_traces(items, settings=s, endpoint=endpoint, search=search, variant=variant,
                                   progress=progress, extra={"dataset": dataset, "split": resolved})
    stats = {
        "split": resolved,
        "questions": (evalset.filter_report or {}).get("total"),
        "answerable": (evalset.filter_report or {}).get("kept"),
        "left_out_in_test": leaked,
        "tried": len(items),
        "records": len(records),
        "skipped": skipped,
        "forms": {f: sum(1 for r in records if r["query_form"] == f) for f in ("SELECT", "ASK", "COUNT")},
        "seconds": round(time.monotonic() - started, 1),
        "gold_file": _under(evalset.gold_file, Path(s.data_dir)),  # relative to the data directory
    }
    return records, stats


def _under(path, root: Path) -> str | None:
    """`path` relative to `root` when it lies under it (no machine paths in committed files)."""
    if not path:
        return None
    try:
        return Path(path).resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return str(path)


def main(argv=None) -> int:
    apply_offline_env()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", nargs="+", default=list(POOLS), choices=list(POOLS))
    parser.add_argument("--out", type=Path, default=default_data_dir() / "demos")
    parser.add_argument("--limit", type=int, default=None, help="at most N answerable questions per dataset")
    parser.add_argument("--variant", default="full", help="grounding variant the observations come from")
    parser.add_argument("--cache-dir", type=Path, default=None)
    parser.add_argument("--no-progress", action="store_true")
    args = parser.parse_args(argv)

    from saga_dspy.eval.records import versions
    from saga_dspy.kg.endpoint import open_endpoint
    from saga_dspy.kg.search import open_search

    overrides = {"result_cache": False, "variant": args.variant}
    if args.cache_dir:
        overrides["cache_dir"] = args.cache_dir
    settings = Settings(**overrides)
    if not settings.is_embedded:
        raise SystemExit("demo pools are built on the embedded sample (its frozen gold)")
    args.out.mkdir(parents=True, exist_ok=True)
    manifest_path = args.out / "MANIFEST.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {"pools": {}}
    endpoint = open_endpoint(settings)
    search = open_search(settings, endpoint)
    try:
        for dataset in args.datasets:
            records, stats = build_pool(settings, dataset, POOLS[dataset], endpoint, search, limit=args.limit,
                                        variant=args.variant, progress=not args.no_progress)
            name = f"{dataset}.jsonl" if args.variant == "full" else f"{dataset}.{args.variant}.jsonl"
            path = args.out / name
            tmp = path.with_name(path.name + ".tmp")
            with open(tmp, "w", encoding="utf-8") as fh:
                for rec in records:
                    fh.write(json.dumps(rec, ensure_ascii=False, sort_keys=False) + "\n")
            os.replace(tmp, path)  # readers (a running eval) never see a half-written pool
            stats["file"] = name
            stats["bytes"] = path.stat().st_size
            manifest["pools"][name] = stats
            print(f"{dataset}: {stats['records']} demos of {stats['tried']} answerable train questions "
                  f"(skipped {stats['skipped'] or 'none'}; {stats['left_out_in_test']} also in test) -> {path}")
    finally:
        endpoint.close()
    manifest.update({
        "built": _dt.datetime.now(_dt.timezone.utc).date().isoformat(),
        "teacher": "gold (saga_dspy.optimize.gold_teacher.gold_trace: search labels, look up entities, execute the gold query, stop)",
        "endpoint": "embedded",
        "variant": args.variant,
        "versions": {k: v for k, v in versions().items() if k in ("saga_dspy", "dspy", "pyoxigraph", "git")},
        "format": "saga_dspy.agent.demos (one solved question a line: question, answer_type, query_form, steps, sparql)",
    })
    manifest_path.write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
