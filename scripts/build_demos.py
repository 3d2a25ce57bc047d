#!/usr/bin/env python
"""Build the controller's demo pools with the gold teacher, from TRAIN questions only.

    python scripts/build_demos.py                      # all pools into data/demos/, then the shared pool
    python scripts/build_demos.py --datasets qald10 --limit 50 --out /tmp/demos
    python scripts/build_demos.py --shared-only        # the shared pool from the pools already built
    python scripts/build_demos.py --picks              # <dataset>.picks.jsonl: a shown candidate picked

For each dataset's train split (qald10 train = GRASP's QALD-10 train, qald7 train, qald9plus
train, wwq train) the answerable questions (frozen gold on the embedded sample) are solved by
`saga_dspy.optimize.gold_teacher.gold_trace`: search each entity's label, look the entity up, execute the
gold query, stop — with real observations from our tools. The records (the format of
`saga_dspy.agent.demos`) go to `<out>/<dataset>.jsonl` (`--variant V`: `<dataset>.V.jsonl`,
observations from that variant's own tools), in benchmark order; the agent picks its
per-question demonstrations from them by BM25 (`--demos N`). `--picks`: where the last lookup showed a
candidate query whose answers are the gold answers, the question ends by picking it (`stop {"candidate": N}`)
instead of writing the gold query (`<dataset>[.<variant>].picks.jsonl`, used with `--demo-picks`).

A train question that collides (`saga_dspy.eval.loading.firewall`: same text, content-word Jaccard >= 0.8,
the same normalised gold SPARQL up to pattern order, or the same query form and constants at Jaccard
>= 0.5) with any test or dev question of a benchmark on the same graph
is left out, so a pool leaks into no evaluation it may be used for. Train is already train minus
dev (`saga_dspy.eval.loading.splits`).

The shared pool (`<out>/shared[.V].jsonl`, `--demo-pool shared`, and the pool of any dataset without
its own) holds every pool's records in the order of `POOLS`, each question once (a record colliding with
an earlier one, e.g. QALD-10 train's copy of a QALD-9-plus train question, is left out), checked again
against the firewall; each record keeps its `dataset` and lists in `sources` every benchmark whose train
split holds a question colliding with it (`--demo-pool-exclude` leaves out a record when any of them is
excluded). `<out>/MANIFEST.json` records counts, skip reasons, the endpoint, the schema index and the
versions.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from saga_dspy.agent.demos import ends_with_pick  # noqa: E402
from saga_dspy.agent.pools import SHARED_POOL, SHARED_POOL_VARIANT, pool_file_name  # noqa: E402
from saga_dspy.config import Settings, apply_offline_env, default_data_dir  # noqa: E402
from saga_dspy.variants import VARIANT_NAMES  # noqa: E402

POOLS = {"qald10": "train", "qald7": "train", "qald9plus": "train", "wwq": "train"}


def build_pool(
    settings: Settings,
    dataset: str,
    split: str,
    endpoint,
    search,
    *,
    limit: int | None,
    variant: str,
    progress: bool,
    picks: bool = False,
) -> tuple[list[dict], dict]:
    from saga_dspy.eval.loading.datasets import BENCHMARKS
    from saga_dspy.eval.loading.evalset import load_eval_set
    from saga_dspy.eval.loading.splits import held_out_firewall
    from saga_dspy.optimize.gold_teacher import TeacherConfig, gold_traces

    info = BENCHMARKS[dataset]
    resolved = info.resolve_split(split)
    if resolved == info.test:
        raise SystemExit(f"{dataset}/{resolved} is a test split: demo pools come from train questions only")
    s = settings.model_copy(update={"dataset": dataset, "split": resolved, "limit": limit})
    evalset = load_eval_set(s, answerable_only=True, progress=progress)
    # the test firewall: no pool question collides with any test or dev question of the graph
    firewall = held_out_firewall(s, info.kg)
    items, leaked = [], {}
    for item in evalset.items:
        hits = firewall.collisions(item.question, item.gold_sparql)
        if hits:
            leaked[hits[0].source] = leaked.get(hits[0].source, 0) + 1
        else:
            items.append(item)
    started = time.monotonic()
    records, skipped = gold_traces(
        items,
        settings=s,
        endpoint=endpoint,
        search=search,
        variant=variant,
        config=TeacherConfig(picks=picks),
        progress=progress,
        extra={"dataset": dataset, "split": resolved},
    )
    kept = []
    for record in records:  # a picked candidate is the record's query: it must pass the firewall too
        hits = firewall.collisions(record["question"], record["sparql"])
        if hits:
            leaked[hits[0].source] = leaked.get(hits[0].source, 0) + 1
        else:
            kept.append(record)
    records = kept
    stats = {
        "split": resolved,
        "questions": (evalset.filter_report or {}).get("total"),
        "answerable": (evalset.filter_report or {}).get("kept"),
        "left_out_by_firewall": dict(sorted(leaked.items())),
        "left_out_by_firewall_total": sum(leaked.values()),
        "tried": len(items),
        "records": len(records),
        "skipped": skipped,
        "forms": {f: sum(1 for r in records if r["query_form"] == f) for f in ("SELECT", "ASK", "COUNT")},
        "picks": sum(1 for r in records if ends_with_pick(r)),
        "seconds": round(time.monotonic() - started, 1),
        "gold_file": _under(evalset.gold_file, Path(s.data_dir)),  # relative to the data directory
    }
    return records, stats


def build_shared(settings: Settings, out: Path, variant: str, picks: bool = False) -> tuple[list[dict], dict]:
    """The shared pool from the pools in `out` recorded by `variant`'s tools (see the module docstring)."""
    from collections import Counter

    from saga_dspy.eval.loading.datasets import load_records
    from saga_dspy.eval.loading.firewall import Entry, Firewall
    from saga_dspy.eval.loading.splits import held_out_firewall

    held_out = held_out_firewall(settings, "wikidata")
    trains = {name: Firewall.of_records(load_records(name, split, settings), name) for name, split in POOLS.items()}
    seen = Firewall()
    records: list[dict] = []
    leaked: Counter[str] = Counter()
    merged: Counter[str] = Counter()
    built_from = []
    for dataset in POOLS:
        path = out / pool_file_name(dataset, variant, picks)
        if not path.is_file():
            continue
        built_from.append(path.name)
        for line in path.read_text(encoding="utf-8").splitlines():
            if not line.strip():
                continue
            rec = json.loads(line)
            question, sparql = rec.get("question"), rec.get("sparql")
            hits = held_out.collisions(question, sparql)
            if hits:
                leaked[hits[0].source] += 1
            elif seen.collides(question, sparql):
                merged[dataset] += 1
            else:
                own = rec.get("dataset") or dataset
                others = [name for name, train in trains.items() if name != own and train.collides(question, sparql)]
                records.append({**rec, "dataset": own, "sources": [own, *others]})
                seen.add(Entry.of(question, sparql))
    stats = {
        "variant": variant,
        "built_from": built_from,
        "records": len(records),
        "sources": dict(Counter(r["dataset"] for r in records)),
        "in_several_train_splits": sum(1 for r in records if len(r["sources"]) > 1),
        "left_out_as_twins_of_earlier_records": dict(merged),
        "left_out_by_firewall": dict(sorted(leaked.items())),
        "forms": {f: sum(1 for r in records if r.get("query_form") == f) for f in ("SELECT", "ASK", "COUNT")},
        "picks": sum(1 for r in records if ends_with_pick(r)),
    }
    return records, stats


def write_pool(path: Path, records: list[dict]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        for rec in records:
            fh.write(json.dumps(rec, ensure_ascii=False, sort_keys=False) + "\n")
    os.replace(tmp, path)  # readers (a running eval) never see a half-written pool


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
    parser.add_argument(
        "--variant",
        default=SHARED_POOL_VARIANT,
        choices=VARIANT_NAMES,
        help="the variant whose tools record the observations (its pool: <dataset>.<variant>.jsonl)",
    )
    parser.add_argument(
        "--shared-only", action="store_true", help="only build the shared pool, from the pools already in --out"
    )
    parser.add_argument(
        "--picks",
        action="store_true",
        help="end a question by picking a shown candidate whose answers are the gold answers (<dataset>.picks.jsonl)",
    )
    parser.add_argument("--cache-dir", type=Path, default=None)
    parser.add_argument("--no-progress", action="store_true")
    args = parser.parse_args(argv)

    from saga_dspy.eval.running.records import versions
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
        for dataset in [] if args.shared_only else args.datasets:
            records, stats = build_pool(
                settings,
                dataset,
                POOLS[dataset],
                endpoint,
                search,
                limit=args.limit,
                variant=args.variant,
                progress=not args.no_progress,
                picks=args.picks,
            )
            name = pool_file_name(dataset, args.variant, args.picks)
            path = args.out / name
            write_pool(path, records)
            stats["file"] = name
            stats["variant"] = args.variant  # whose tools recorded the observations
            stats["bytes"] = path.stat().st_size
            manifest["pools"][name] = stats
            print(
                f"{dataset}: {stats['records']} demos of {stats['tried']} answerable train questions "
                f"(skipped {stats['skipped'] or 'none'}; firewall left out {stats['left_out_by_firewall_total']}: "
                f"{stats['left_out_by_firewall'] or 'none'}) -> {path}"
            )
        name = pool_file_name(SHARED_POOL, args.variant, args.picks)
        records, stats = build_shared(settings, args.out, args.variant, args.picks)
        write_pool(args.out / name, records)
        manifest["pools"][name] = {**stats, "file": name, "bytes": (args.out / name).stat().st_size}
        print(
            f"shared: {stats['records']} demos from {', '.join(stats['built_from']) or 'no pool'} "
            f"({stats['sources']}; twins of earlier records left out: {stats['left_out_as_twins_of_earlier_records']}; "
            f"firewall left out {stats['left_out_by_firewall'] or 'none'}) -> {args.out / name}"
        )
    finally:
        endpoint.close()
    manifest.pop("variant", None)  # per pool now
    manifest.update(
        {
            "built": _dt.datetime.now(_dt.UTC).date().isoformat(),
            "teacher": "gold (saga_dspy.optimize.gold_teacher.gold_trace: search labels, look up entities, "
            "execute the gold query or, in a picks pool, pick a shown candidate that answers as it does; stop)",
            "endpoint": "embedded",
            "versions": {k: v for k, v in versions().items() if k in ("saga_dspy", "dspy", "pyoxigraph", "git")},
            "format": "saga_dspy.agent.demos "
            "(one solved question a line: question, answer_type, query_form, steps, sparql)",
        }
    )
    manifest_path.write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
