"""Latency of the lookup tool (`get_wikidata_entry`) on the embedded sample (issue 3 §6).

For every entity constant of the QALD-10 test gold queries that the sample knows, runs the
full lookup (neighbourhood, qualifiers, type filter, ranking, rendering) in a fresh
question context and reports the median / p95 / max latency and the SPARQL round trips
per lookup. Target: median <= 50 ms, round trips bounded by a small constant.

    .venv/bin/python benchmarks/bench_lookup.py
    .venv/bin/python benchmarks/bench_lookup.py --answer-type country Q6256 --json
    .venv/bin/python benchmarks/bench_lookup.py --dataset wwq --limit 300
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from saga_dspy.config import add_settings_args, apply_offline_env, settings_from_args  # noqa: E402

apply_offline_env()


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    k = (len(ordered) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", default="qald10", help="benchmark whose gold entity constants are looked up")
    parser.add_argument("--limit", type=int, help="at most this many entities")
    parser.add_argument(
        "--answer-type", nargs=2, metavar=("LABEL", "QID"), help="set an expected answer type (ranking prior on)"
    )
    parser.add_argument("--variant", default="full")
    parser.add_argument("--warmup", type=int, default=5, help="lookups run first and not measured")
    parser.add_argument("--json", action="store_true")
    add_settings_args(
        parser,
        ["cache_dir", "data_dir", "endpoint", "schema_index", "filter_mode", "observation_chars", "embedded_workers"],
    )
    args = parser.parse_args(argv)
    settings = settings_from_args(args, result_cache=False)

    from saga_dspy.eval.loading.datasets import load_benchmark
    from saga_dspy.eval.stats.gold_pairs import gold_queries
    from saga_dspy.grounding.context import QuestionContext
    from saga_dspy.kg.endpoint import open_endpoint
    from saga_dspy.kg.flavours import flavour_for
    from saga_dspy.kg.search import open_search
    from saga_dspy.schema import load_hierarchy, load_schema_index
    from saga_dspy.tools import make_tools

    started = time.monotonic()
    endpoint = open_endpoint(settings)
    try:
        search = open_search(settings, endpoint)
        schema = load_schema_index(settings)
        hierarchy = load_hierarchy(settings, endpoint, schema)
        setup = time.monotonic() - started
        flavour = flavour_for(settings.kg)
        queries, _ = gold_queries([dict(r) for r in load_benchmark(args.dataset, "test", settings)], flavour)
        entities = list(dict.fromkeys(e for q in queries for e in q.entities))
        if args.limit:
            entities = entities[: args.limit]

        def lookup(eid: str):
            ctx = QuestionContext(
                settings,
                endpoint,
                search,
                schema,
                hierarchy,
                variant=args.variant,
                answer_type=tuple(args.answer_type) if args.answer_type else None,
            )
            tool = make_tools(ctx)[1]
            t0 = time.perf_counter()
            out = tool(eid)
            return time.perf_counter() - t0, ctx.counters["sparql_queries"], out

        for eid in entities[: args.warmup]:
            lookup(eid)
        seconds, trips, sizes = [], Counter(), []
        found = 0
        for eid in entities:
            dt, n, out = lookup(eid)
            if out.startswith("[NOT FOUND]"):
                continue
            found += 1
            seconds.append(dt * 1000)
            trips[n] += 1
            sizes.append(len(out))
        report = {
            "dataset": args.dataset,
            "variant": args.variant,
            "answer_type": args.answer_type,
            "entities": len(entities),
            "looked_up": found,
            "setup_seconds": round(setup, 2),
            "median_ms": round(statistics.median(seconds), 1),
            "p95_ms": round(percentile(seconds, 0.95), 1),
            "max_ms": round(max(seconds), 1),
            "mean_ms": round(statistics.mean(seconds), 1),
            "round_trips_per_lookup": dict(sorted(trips.items())),
            "max_round_trips": max(trips),
            "median_observation_chars": int(statistics.median(sizes)),
            "budget_chars": settings.observation_chars,
        }
    finally:
        endpoint.close()
    if args.json:
        print(json.dumps(report, indent=1))
    else:
        print(
            f"lookup latency over {report['looked_up']} {args.dataset} entities ({args.variant}, embedded, "
            f"{settings.embedded_workers} workers): median {report['median_ms']} ms, p95 {report['p95_ms']} ms, "
            f"max {report['max_ms']} ms"
        )
        print(f"SPARQL round trips per lookup: {report['round_trips_per_lookup']} (max {report['max_round_trips']})")
        print(f"observation size: median {report['median_observation_chars']} chars (budget {report['budget_chars']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
