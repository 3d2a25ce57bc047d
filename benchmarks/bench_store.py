#!/usr/bin/env python3
"""Store benchmark: first build, reopen, and per-query latency embedded vs HTTP.

    python benchmarks/bench_store.py [--queries 60] [--json]

Targets (issue 2): build <= 90 s, reopen <= 2 s on a 2-core machine.
The build goes into a fresh temporary cache, so it measures a first use."""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from saga_dspy.config import Settings, apply_offline_env  # noqa: E402
from saga_dspy.kg.endpoint import EmbeddedEndpoint, HttpEndpoint  # noqa: E402
from saga_dspy.kg.errors import SparqlError  # noqa: E402
from saga_dspy.kg.store import ensure_store  # noqa: E402


def gold_queries(limit: int) -> list[str]:
    from saga_dspy.eval.loading.datasets import load_benchmark

    rows = load_benchmark("qald10", "test")
    return [r["sparql"] for r in rows if r["sparql"]][:limit]


def latency(endpoint, queries: list[str]) -> dict:
    times, errors = [], 0
    for q in queries:
        started = time.perf_counter()
        try:
            endpoint.query(q, timeout=20)
        except SparqlError:
            errors += 1
        times.append((time.perf_counter() - started) * 1000)
    times.sort()
    return {
        "queries": len(times),
        "errors": errors,
        "median_ms": round(statistics.median(times), 2),
        "p95_ms": round(times[int(0.95 * (len(times) - 1))], 2),
        "mean_ms": round(statistics.fmean(times), 2),
    }


def main() -> int:
    apply_offline_env()
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--queries", type=int, default=60)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    report: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(cache_dir=Path(tmp), result_cache=False)
        started = time.perf_counter()
        path = ensure_store(settings)
        report["build_s"] = round(time.perf_counter() - started, 2)
        report["store_mb"] = round(sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 2**20, 1)

        started = time.perf_counter()
        ensure_store(settings)
        endpoint = EmbeddedEndpoint(settings)
        endpoint.query("ASK { wd:Q761383 wdt:P138 wd:Q42299 }")
        report["reopen_s"] = round(time.perf_counter() - started, 2)

        queries = gold_queries(args.queries)
        latency(endpoint, queries[:5])  # warm the page cache
        report["embedded"] = latency(endpoint, queries)
        endpoint.close()

        server_bin = Path(sys.executable).with_name("oxigraph")
        port = 17878
        proc = subprocess.Popen(
            [str(server_bin), "serve-read-only", "--location", str(path), "--bind", f"127.0.0.1:{port}"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            for _ in range(100):
                try:
                    urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=1)
                    break
                except OSError as exc:
                    if getattr(exc, "code", None):
                        break
                    time.sleep(0.1)
            http = HttpEndpoint(settings, f"http://127.0.0.1:{port}/query")
            latency(http, queries[:5])
            report["http"] = latency(http, queries)
        finally:
            proc.terminate()
            proc.wait(10)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(f"first build: {report['build_s']} s (store {report['store_mb']} MB)  reopen: {report['reopen_s']} s")
        for name in ("embedded", "http"):
            r = report[name]
            print(
                f"{name:9s} {r['queries']} QALD-10 gold queries: median {r['median_ms']} ms, p95 {r['p95_ms']} ms, "
                f"mean {r['mean_ms']} ms, errors {r['errors']}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
