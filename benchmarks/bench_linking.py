"""Entity-linking recall of the search tool per split, cheaply: only the searches of `stats components`'s
`entity_linking` (each named gold entity searched by its mention in the question), no lookups.

    .venv/bin/python benchmarks/bench_linking.py                       # every dev split
    .venv/bin/python benchmarks/bench_linking.py --split test --dataset qald10 --dataset qald7
    .venv/bin/python benchmarks/bench_linking.py --misses 30            # also list dev misses
    .venv/bin/python benchmarks/bench_linking.py --out results/components/linking-{dataset}-{split}.json

Choices are made on the dev splits; test splits are for a final, untouched confirmation.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from saga_dspy.config import add_settings_args, apply_offline_env, settings_from_args  # noqa: E402

apply_offline_env()

DEV_SPLITS = ("qald10", "qald7", "qald9plus", "wwq")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--dataset", dest="datasets", action="append", help=f"benchmark (repeatable; default: {', '.join(DEV_SPLITS)})"
    )
    parser.add_argument("--split", default="dev")
    parser.add_argument("--misses", type=int, default=0, help="print up to this many misses at rank 1 per split")
    parser.add_argument("--out", help="write each split's figures to this path ({dataset}, {split} are filled in)")
    add_settings_args(parser, ["cache_dir", "data_dir"])
    args = parser.parse_args(argv)
    settings = settings_from_args(args)

    from saga_dspy.eval.loading.datasets import load_benchmark
    from saga_dspy.eval.stats.entity_linking import entity_linking, entity_names
    from saga_dspy.eval.stats.gold_pairs import gold_queries
    from saga_dspy.kg.flavours import flavour_for
    from saga_dspy.services import KgServices

    flavour = flavour_for(settings.kg)
    with KgServices(settings) as kg:
        for dataset in args.datasets or DEV_SPLITS:
            started = time.monotonic()
            records = [dict(r) for r in load_benchmark(dataset, args.split, settings)]
            queries, _ = gold_queries(records, flavour)
            by_id = {str(r.get("id")): r for r in records}
            names = entity_names(kg.endpoint, list(dict.fromkeys(e for q in queries for e in q.entities)))
            linking = entity_linking(queries, by_id, names, kg.search, misses=args.misses)
            misses = [f"  {line}" for line in linking.pop("misses", [])]
            total = linking["entities"]
            out = {
                "dataset": dataset,
                "split": records[0]["split"] if records else args.split,
                "entities": total,
                "recall_at_1_pct": linking["recall_at_1_pct"],
                "recall_at_8_pct": linking["recall_at_8_pct"],
            }
            print(
                f"{dataset}/{out['split']}: {total} entities, R@1 {out['recall_at_1_pct']}, "
                f"R@8 {out['recall_at_8_pct']} ({time.monotonic() - started:.1f}s)"
            )
            for line in misses:
                print(line)
            if args.out:
                path = Path(args.out.format(dataset=dataset, split=args.split))
                path.write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
