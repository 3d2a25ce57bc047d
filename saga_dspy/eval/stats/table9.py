"""The paper's Table 9 (Appendix C) beside the measured one: per dataset and filter mode raw edges, edge reduction
and gold-property recall from `stats grounding`'s reports, each mode's average over the datasets, and the paper's
figures on the same line (`python -m saga_dspy.stats grounding`)."""

from __future__ import annotations

import sys
from typing import Any

from .conflicts import fmt

# the paper's Table 9 (Appendix C): raw edges, edge reduction (%), gold-property recall (%) per test set
PAPER_TABLE9 = {
    "qald9plus": (2718, 26.6, 61.4),
    "qald10": (12352, 28.6, 59.7),
    "spinach": (3647, 22.4, 64.8),
    "lcquad2": (21034, 25.5, 62.6),
}
PAPER_TABLE9_AVERAGE = (25.8, 62.1)


def table9(reports: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Table 9 beside the paper's: per dataset and filter mode raw edges, edge reduction and gold-property recall
    (over all gold pairs, and over those in the entity's neighbourhood: on live Wikidata nearly every gold pair
    is, on the sample many are not), then each mode's unweighted average over the datasets, the paper's
    average over its four beside it."""
    rows: list[dict[str, Any]] = []
    for report in reports:
        paper = PAPER_TABLE9.get(report["dataset"])
        for mode, row in report["filters"].items():
            rows.append(
                {
                    "dataset": report["dataset"],
                    "filter": mode,
                    "raw_edges": row["raw_edges"],
                    "edge_reduction_pct": row["edge_reduction_pct"],
                    "gold_recall_pct": row["gold_recall_all_pairs_pct"],
                    "gold_recall_in_neighbourhood_pct": row["gold_recall_in_neighbourhood_pct"],
                    "paper": paper,
                }
            )
    if len(reports) > 1:
        for mode in dict.fromkeys(r["filter"] for r in rows):
            mine = [r for r in rows if r["filter"] == mode and r["dataset"] != "average"]

            def mean(key: str, mine: list[dict[str, Any]] = mine) -> float | None:
                """Over the datasets that have the figure (a dataset without gold pairs in N(e) has no recall)."""
                values = [r[key] for r in mine if r[key] is not None]
                return round(sum(values) / len(values), 1) if values else None

            rows.append(
                {
                    "dataset": "average",
                    "filter": mode,
                    "raw_edges": None,
                    "edge_reduction_pct": mean("edge_reduction_pct"),
                    "gold_recall_pct": mean("gold_recall_pct"),
                    "gold_recall_in_neighbourhood_pct": mean("gold_recall_in_neighbourhood_pct"),
                    "paper": (None, *PAPER_TABLE9_AVERAGE),
                }
            )
    return rows


def print_table9(rows: list[dict[str, Any]], out=None) -> None:
    out = out or sys.stdout  # the stream of the call, not of the import
    print("\n== Table 9: measured | paper (its test sets)", file=out)
    head = "dataset | filter | raw edges | edge red. | gold recall (all) | (in N(e)) | paper: raw / red. / recall"
    print(head, file=out)
    for r in rows:
        paper = r["paper"]
        theirs = " / ".join(fmt(v, "" if i == 0 else "%") for i, v in enumerate(paper)) if paper else "—"
        print(
            " | ".join(
                [
                    r["dataset"],
                    r["filter"],
                    fmt(r["raw_edges"]),
                    fmt(r["edge_reduction_pct"], "%"),
                    fmt(r["gold_recall_pct"], "%"),
                    fmt(r["gold_recall_in_neighbourhood_pct"], "%"),
                    theirs,
                ]
            ),
            file=out,
        )
