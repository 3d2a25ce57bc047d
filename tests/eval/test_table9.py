"""eval.stats.table9: `stats grounding`'s reports as the paper's Table 9, the paper's figures on the same rows."""

from __future__ import annotations

import io

from saga_dspy.eval.stats.table9 import PAPER_TABLE9, PAPER_TABLE9_AVERAGE, print_table9, table9


def _report(dataset: str, reduction: float, recall: float | None) -> dict:
    row = {
        "raw_edges": 100,
        "edge_reduction_pct": reduction,
        "gold_recall_all_pairs_pct": 10.0,
        "gold_recall_in_neighbourhood_pct": recall,
    }
    return {"dataset": dataset, "filters": {"paper": row}}


def test_rows_per_dataset_then_averages_beside_the_papers():
    assert PAPER_TABLE9["qald10"] == (12352, 28.6, 59.7) and PAPER_TABLE9_AVERAGE == (25.8, 62.1)
    rows = table9([_report("qald10", 30.0, 60.0), _report("spinach", 20.0, None), _report("wwq", 10.0, 70.0)])
    assert [(r["dataset"], r["paper"]) for r in rows] == [
        ("qald10", PAPER_TABLE9["qald10"]),
        ("spinach", PAPER_TABLE9["spinach"]),
        ("wwq", None),  # not in the paper's table
        ("average", (None, 25.8, 62.1)),
    ]
    average = rows[-1]
    assert average["edge_reduction_pct"] == 20.0
    assert average["gold_recall_in_neighbourhood_pct"] == 65.0  # a dataset without the figure does not count as 0
    out = io.StringIO()
    print_table9(rows, out)
    assert "qald10 | paper | 100 | 30.0% | 10.0% | 60.0% | 12352 / 28.6% / 59.7%" in out.getvalue()
    assert "average | paper | — | 20.0% | 10.0% | 65.0% | — / 25.8% / 62.1%" in out.getvalue()
    assert len(table9([_report("qald10", 30.0, 60.0)])) == 1  # one dataset: no average row
