"""Latency of the entity search (`LocalSearch.search`, the search tool's engine) on the bundled label index (issue 15).

Searches, in order, a fixed set of mentions: the label and the first alias of every entity constant of a
benchmark's gold queries that the index knows (as the agent would type them), and reports the mean /
median / p95 per search, with the label index's version (1: the exact alias match scans every row;
2: through the alias table's index).

    .venv/bin/python benchmarks/bench_search.py
    .venv/bin/python benchmarks/bench_search.py --store PATH_TO_A_STORE --json
"""

from __future__ import annotations

import argparse
import json
import re
import sqlite3
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from saga_dspy.config import add_settings_args, apply_offline_env, settings_from_args  # noqa: E402

apply_offline_env()


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    k = (len(ordered) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def mentions(index: Path, qids: list[str], limit: int) -> list[str]:
    """Label and first alias of each entity, in the order given."""
    db = sqlite3.connect(f"file:{index}?mode=ro", uri=True)
    out: list[str] = []
    for qid in qids:
        row = db.execute("SELECT label, aliases FROM entity WHERE id=?", (qid,)).fetchone()
        if not row:
            continue
        out += [t for t in (row[0], (row[1] or "").split("\n")[0]) if t]
        if len(out) >= limit:
            break
    db.close()
    return out[:limit]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", default="qald10", help="benchmark whose gold entity constants give the mentions")
    parser.add_argument("--split", default="train")
    parser.add_argument("--limit", type=int, default=400, help="at most this many searches")
    parser.add_argument("--store", type=Path, help="a built store directory (default: the bundled sample's)")
    parser.add_argument("--repeat", type=int, default=2, help="passes over the mentions; the first one warms up")
    parser.add_argument("--json", action="store_true")
    add_settings_args(parser, ["cache_dir", "data_dir"])
    args = parser.parse_args(argv)
    settings = settings_from_args(args)

    from saga_dspy.eval.loading.datasets import load_benchmark
    from saga_dspy.kg.label_index import label_index_version
    from saga_dspy.kg.search import LocalSearch
    from saga_dspy.kg.store import store_path

    store = args.store or store_path(settings)
    index = Path(store) / "search.sqlite"
    qids: list[str] = []
    for item in load_benchmark(args.dataset, args.split, settings):
        for qid in re.findall(r"wd:(Q[1-9]\d*)", str(dict(item).get("sparql") or "")):
            if qid not in qids:
                qids.append(qid)
    texts = mentions(index, qids, args.limit)
    search = LocalSearch(index)
    times: list[float] = []
    for rep in range(max(1, args.repeat)):
        for text in texts:
            started = time.perf_counter()
            search.search(text, limit=8, kind="item")
            if rep:
                times.append((time.perf_counter() - started) * 1000)
    if not times:
        times = [0.0]
    out = {
        "index_version": label_index_version(index),
        "searches": len(texts),
        "mean_ms": statistics.fmean(times),
        "median_ms": statistics.median(times),
        "p95_ms": percentile(times, 0.95),
    }
    if args.json:
        print(json.dumps(out))
    else:
        print(
            f"label index v{out['index_version']}: {out['searches']} searches, mean {out['mean_ms']:.2f} ms, "
            f"median {out['median_ms']:.2f} ms, p95 {out['p95_ms']:.2f} ms"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
