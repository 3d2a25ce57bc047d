#!/usr/bin/env python3
"""Schema layer benchmark: index load time, closure computation time, and the index counts.

    python benchmarks/bench_schema.py [--classes 2000] [--json] [--cache-dir DIR]

- load: `SchemaIndex.load` of the bundled index (cold, in a fresh process, and warm), target < 0.5 s;
- closures from the index's P279 edges: cold `ancestors()` of every P31 class of the sample
  (up to --classes of them), then the cached second pass;
- closures by SPARQL (the live-endpoint path) against the embedded store, batched with VALUES;
- `entity_types` latency (one query per entity);
- counts: formal / empirical / unknown, per property and per role; file size."""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from saga_dspy.config import Settings, apply_offline_env  # noqa: E402

_COLD_LOAD = (
    "import time; t=time.perf_counter(); from saga_dspy.schema.index import SchemaIndex; t1=time.perf_counter();"
    "SchemaIndex.load({path!r}); print(time.perf_counter()-t1, t1-t)"
)


def _ms(values: list[float]) -> dict:
    values = sorted(values)
    return {
        "n": len(values),
        "median_ms": round(statistics.median(values) * 1000, 3),
        "p95_ms": round(values[int(0.95 * (len(values) - 1))] * 1000, 3),
        "total_s": round(sum(values), 3),
    }


def main() -> int:
    apply_offline_env()
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--classes", type=int, default=2000, help="classes whose closure is computed")
    parser.add_argument("--cache-dir", type=Path, help="cache directory (the embedded store lives there)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    from saga_dspy.kg.endpoint import open_endpoint
    from saga_dspy.schema import ClassHierarchy, SchemaIndex, entity_types
    from saga_dspy.schema.index import index_path

    settings = Settings(
        **({"cache_dir": args.cache_dir} if args.cache_dir else {}), result_cache=False, row_cap=100_000
    )
    path = index_path(settings)
    report: dict = {"file": str(path), "file_bytes": path.stat().st_size}

    cold = subprocess.run(
        [sys.executable, "-c", _COLD_LOAD.format(path=str(path))],
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parents[1],
        check=True,
    )
    load_s, import_s = (float(x) for x in cold.stdout.split())
    warm = []
    for _ in range(3):
        started = time.perf_counter()
        index = SchemaIndex.load(path)
        warm.append(time.perf_counter() - started)
    report["load"] = {"cold_s": round(load_s, 3), "import_s": round(import_s, 3), "warm_best_s": round(min(warm), 3)}
    report["counts"] = index.counts

    with open_endpoint(settings) as endpoint:
        endpoint.query("ASK {}")  # start the worker outside the measurements
        result = endpoint.query("SELECT DISTINCT ?c WHERE { [] wdt:P31 ?c }")
        classes = [b.value.rsplit("/", 1)[-1] for b in result.column("c")][: args.classes]

        hierarchy = ClassHierarchy.from_index(index)
        first, second = [], []
        for qid in classes:
            started = time.perf_counter()
            hierarchy.ancestors(qid)
            first.append(time.perf_counter() - started)
        for qid in classes:
            started = time.perf_counter()
            hierarchy.ancestors(qid)
            second.append(time.perf_counter() - started)
        known = sum(hierarchy.is_known(q) for q in classes)
        sizes = [len(hierarchy.ancestors(q)) for q in classes]
        report["closure_index"] = {
            "cold": _ms(first),
            "cached": _ms(second),
            "classes": len(classes),
            "known_share": round(known / max(1, len(classes)), 4),
            "median_closure_size": statistics.median(sizes) if sizes else 0,
        }

        live = ClassHierarchy.from_endpoint(endpoint)
        sample = classes[:200]
        started = time.perf_counter()
        live.prefetch(sample)
        elapsed = time.perf_counter() - started
        agree = sum(live.ancestors(q) == hierarchy.ancestors(q) for q in sample)
        report["closure_sparql"] = {
            "classes": len(sample),
            "queries": live.queries,
            "seconds": round(elapsed, 3),
            "agree_with_index": agree,
        }

        entities = ["Q42", "Q64", "Q212", "Q3624078", "Q761383", "Q11835640", "Q1055", "Q142", "Q5", "Q15862"]
        times = []
        for qid in entities:
            started = time.perf_counter()
            entity_types(endpoint, qid)
            times.append(time.perf_counter() - started)
        report["entity_types"] = _ms(times)

    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    c = report["counts"]
    print(f"index {path} ({report['file_bytes'] / 1e6:.2f} MB)")
    print(
        f"  load: cold {report['load']['cold_s']} s (+{report['load']['import_s']} s imports), "
        f"warm {report['load']['warm_best_s']} s   [target < 0.5 s]"
    )
    print(f"  properties {c['properties']}: formal {c['formal']} / empirical {c['empirical']} / unknown {c['unknown']}")
    print(f"    domain: {c['domain']}   range: {c['range']}")
    ci = report["closure_index"]
    print(
        f"closures from the index, {ci['classes']} P31 classes: cold median {ci['cold']['median_ms']} ms, "
        f"p95 {ci['cold']['p95_ms']} ms, total {ci['cold']['total_s']} s; "
        f"cached median {ci['cached']['median_ms']} ms; "
        f"known {ci['known_share']:.1%}, median closure {ci['median_closure_size']} classes"
    )
    cs = report["closure_sparql"]
    print(
        f"closures by SPARQL (live path, embedded): {cs['classes']} classes in {cs['queries']} queries, "
        f"{cs['seconds']} s; {cs['agree_with_index']} agree with the index"
    )
    et = report["entity_types"]
    print(f"entity_types: median {et['median_ms']} ms, p95 {et['p95_ms']} ms (one query each)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
