"""Before/after table of `stats components` JSON files (results/components/<tag>-<dataset>-<split>.json).

python benchmarks/components_table.py results/components before after
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROWS = [
    ("EL R@1", "entity_linking", "recall_at_1_pct"),
    ("EL R@8", "entity_linking", "recall_at_8_pct"),
    ("prop R@1 (N(e))", "property_ranking", "recall_at_1_in_neighbourhood_pct"),
    ("prop R@3 (N(e))", "property_ranking", "recall_at_3_in_neighbourhood_pct"),
    ("prop R@10 (N(e))", "property_ranking", "recall_at_10_in_neighbourhood_pct"),
    ("non-gold first %", "property_ranking", "non_gold_first_pct"),
    ("proposal F1", "proposed_query", "mean_f1"),
    ("incoming R@1", "incoming", "recall_at_1_pct"),
    ("incoming R@3", "incoming", "recall_at_3_pct"),
    ("object-side proposal F1", "incoming", "proposal_mean_f1"),
    ("proposals alone F1 (both sides)", "candidate_query", "proposals_only_mean_f1"),
    ("candidate query F1 (both sides)", "candidate_query", "mean_f1"),
    ("lookup tokens median", "observation_tokens", "median"),
    ("lookup tokens p95", "observation_tokens", "p95"),
    ("answer type acc %", "answer_type", "accuracy_pct"),
]


def main(folder: str, *tags: str) -> None:
    files = sorted(Path(folder).glob(f"{tags[0]}-*.json"))
    for f in files:
        key = f.name[len(tags[0]) + 1 : -5]
        reports = {
            t: json.loads((Path(folder) / f"{t}-{key}.json").read_text())
            for t in tags
            if (Path(folder) / f"{t}-{key}.json").exists()
        }
        print(f"\n### {key}\n\n| metric | " + " | ".join(reports) + " |\n|---|" + "---|" * len(reports))
        for name, group, field in ROWS:
            print(
                f"| {name} | " + " | ".join(str((r.get(group) or {}).get(field, "—")) for r in reports.values()) + " |"
            )
        modes = sorted({m for r in reports.values() for m in r.get("filters", {})})
        for mode in modes:
            cells = []
            for r in reports.values():
                row = r.get("filters", {}).get(mode)
                sparing = (
                    ""
                    if row is None or row.get("wrong_entity_detection_sparing_gold_pct") is None
                    else (f" / {row['wrong_entity_detection_sparing_gold_pct']}%")
                )
                cells.append(
                    "—"
                    if row is None
                    else f"{row['false_conflict_rate_pct']}% / {row['wrong_entity_detection_pct']}%{sparing}"
                )
            print(
                f"| filter {mode}: false confl. / wrong-entity det. (/ sparing the gold) | " + " | ".join(cells) + " |"
            )


if __name__ == "__main__":
    main(sys.argv[1], *sys.argv[2:])
