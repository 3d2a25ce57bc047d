"""Which reading of Eq. 3 ("the entity's types against the P2302 domains") reproduces the paper's Table 9 on the
sample: edge reduction and gold-property recall of each `schema.compat.PaperReading` (P279 steps above the P31
types: 0 = P31 only, 1, 2, 3, all; soft domain evidence counted or not; classes typed by their superclasses or not)
and of the `bare` mode, per split, with the unweighted averages. Choose on dev and train (never on test); report
the chosen reading's test figures with `python -m saga_dspy.stats grounding --split test`.

    .venv/bin/python benchmarks/filter_readings.py qald9plus:dev qald9plus:train qald10:dev qald10:train spinach:dev
    .venv/bin/python benchmarks/filter_readings.py --json out.json qald10:dev:50   # DATASET:SPLIT[:LIMIT]

Each split's gold entities are looked up once (the lookups `stats grounding` makes); every reading is then a pure
function of those neighbourhoods, the schema index and the class hierarchy.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from saga_dspy.config import Settings, apply_offline_env  # noqa: E402
from saga_dspy.eval.stats.components import measured_records  # noqa: E402
from saga_dspy.eval.stats.gold_pairs import gold_queries  # noqa: E402
from saga_dspy.grounding.neighbourhood import Neighbourhood, fetch_neighbourhood, type_filter  # noqa: E402
from saga_dspy.kg.flavours import flavour_for  # noqa: E402
from saga_dspy.schema.compat import PAPER_READING, PaperReading  # noqa: E402
from saga_dspy.services import KgServices  # noqa: E402


def readings() -> dict[str, PaperReading | None]:
    """Every reading compared (None: the `bare` mode), named as the table prints them."""
    out: dict[str, PaperReading | None] = {"bare": None}
    for steps, soft, classes in itertools.product([0, 1, 2, 3, None], [False, True], [False, True]):
        name = f"P31+{'*' if steps is None else steps}{' soft' if soft else ''}{' classes' if classes else ''}"
        out[name] = PaperReading(steps=steps, soft=soft, classes=classes)
    return out


def measure(nbs: dict[str, Neighbourhood], pairs: list[tuple[str, str]], kg: KgServices, reading) -> dict[str, Any]:
    """Raw edges, edge reduction and gold-property recall (all gold pairs; those in N(e)) of one reading."""
    raw = removed = 0
    kept: dict[str, set[str]] = {}
    for eid, nb in nbs.items():
        if reading is None:
            fr = type_filter(nb, kg.schema, kg.hierarchy, "bare")
        else:
            fr = type_filter(nb, kg.schema, kg.hierarchy, "paper", reading=reading)
        raw += nb.edge_count
        removed += sum(len(nb.edges[pid]) for pid, _ in fr.removed)
        kept[eid] = set(fr.kept)
    known = [(e, p) for e, p in pairs if e in nbs]
    in_nb = [(e, p) for e, p in known if p in nbs[e].edges]
    survived = sum(1 for e, p in in_nb if p in kept[e])
    pct = lambda a, b: round(100.0 * a / b, 1) if b else None  # noqa: E731
    return {
        "raw_edges": raw,
        "edge_reduction_pct": pct(removed, raw),
        "gold_pairs": len(known),
        "gold_pairs_in_neighbourhood": len(in_nb),
        "gold_recall_pct": pct(survived, len(known)),
        "gold_recall_in_neighbourhood_pct": pct(survived, len(in_nb)),
    }


def main(argv: list[str] | None = None) -> int:
    apply_offline_env()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("splits", nargs="+", help="DATASET:SPLIT[:LIMIT]")
    parser.add_argument("--json", type=Path, help="also write the figures as JSON here")
    args = parser.parse_args(argv)
    settings = Settings()
    flavour = flavour_for(settings.kg)
    table: dict[str, dict[str, Any]] = {name: {} for name in readings()}
    with KgServices(settings) as kg:
        for spec in args.splits:
            dataset, split, *limit = spec.split(":")
            records, _, _ = measured_records(settings, dataset, split, int(limit[0]) if limit else None)
            queries, _ = gold_queries(records, flavour)
            pairs = list(dict.fromkeys(p for q in queries for p in q.pairs))
            entities = list(dict.fromkeys(e for q in queries for e in q.entities))
            nbs = {}
            for eid in entities:
                nb = fetch_neighbourhood(kg.endpoint, flavour, eid, qualifiers=False)
                if nb.exists:
                    nbs[eid] = nb
            print(f"{spec}: {len(records)} questions, {len(nbs)} entities known, {len(pairs)} gold pairs", flush=True)
            for name, reading in readings().items():
                table[name][spec] = measure(nbs, pairs, kg, reading)
    chosen = next(name for name, r in readings().items() if r == PAPER_READING)
    print("\nreading | " + " | ".join(args.splits) + " | average  (edge reduction / gold recall in N(e), %)")
    for name, row in table.items():
        cells = [f"{r['edge_reduction_pct']} / {r['gold_recall_in_neighbourhood_pct']}" for r in row.values()]
        reductions = [r["edge_reduction_pct"] for r in row.values() if r["edge_reduction_pct"] is not None]
        recalls = [r["gold_recall_in_neighbourhood_pct"] for r in row.values()]
        recalls = [x for x in recalls if x is not None]
        average = ""
        if reductions and recalls:
            average = f"{sum(reductions) / len(reductions):.1f} / {sum(recalls) / len(recalls):.1f}"
        mark = "  <- the paper mode's reading" if name == chosen else ""
        print(f"{name} | " + " | ".join(cells) + f" | {average}{mark}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(table, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
