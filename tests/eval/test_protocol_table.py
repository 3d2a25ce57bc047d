"""benchmarks/protocol_table.py: pooled rows over one run per dataset, F1 per gold kind, paired CI vs the first row."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.scripts import load_script

from saga_dspy.eval.scoring.significance import paired_by_id

REPO = Path(__file__).resolve().parents[2]

ASK_TRUE = {"head": {}, "boolean": True}
ASK_FALSE = {"head": {}, "boolean": False}
ITEMS = {"head": {"vars": ["x"]}, "results": {"bindings": [{"x": {"type": "uri", "value": "http://e/Q1"}}]}}
COUNT = {
    "head": {"vars": ["n"]},
    "results": {
        "bindings": [{"n": {"type": "literal", "value": "3", "datatype": "http://www.w3.org/2001/XMLSchema#integer"}}]
    },
}


def _run(path: Path, dataset: str, rows: list[tuple[str, dict, str, float]]) -> Path:
    path.mkdir(parents=True)
    (path / "config.json").write_text(json.dumps({"dataset": dataset}))
    lines = [
        {"id": qid, "gold": gold, "gold_sparql": sparql, "f1": f1, "em": f1, "sparql": "ASK {}", "final_source": "stop"}
        for qid, gold, sparql, f1 in rows
    ]
    (path / "predictions.jsonl").write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    return path


def test_pooled_rows_key_questions_by_dataset_and_compare_against_the_first(tmp_path):
    table = load_script("benchmarks/protocol_table.py")
    count_q = "SELECT (COUNT(?x) AS ?n) WHERE { ?x ?p ?o }"
    # the same id "1" in two datasets: pooled rows must keep both
    a1 = _run(tmp_path / "qa" / "full", "qa", [("1", ASK_TRUE, "ASK {}", 1.0), ("2", COUNT, count_q, 1.0)])
    a2 = _run(tmp_path / "qb" / "full", "qb", [("1", ITEMS, "SELECT ?x {}", 0.5), ("2", ASK_FALSE, "ASK {}", 0.0)])
    b1 = _run(tmp_path / "qa" / "base", "qa", [("1", ASK_TRUE, "ASK {}", 1.0), ("2", COUNT, count_q, 0.0)])
    b2 = _run(tmp_path / "qb" / "base", "qb", [("1", ITEMS, "SELECT ?x {}", 0.0), ("2", ASK_FALSE, "ASK {}", 0.0)])
    rows = [table.protocol_row(f"full={a1},{a2}"), table.protocol_row(f"base={b1},{b2}")]
    assert [r["n"] for r in rows] == [4, 4] and rows[0]["run"] == "full"
    assert rows[0]["f1"] == pytest.approx(2.5 / 4) and rows[1]["f1"] == pytest.approx(1 / 4)
    assert (rows[0]["boolean_n"], rows[0]["count_n"], rows[0]["entity_n"], rows[0]["literal_n"]) == (2, 1, 1, 0)
    assert rows[0]["boolean_f1"] == 0.5 and rows[0]["count_f1"] == 1.0 and rows[0]["literal_f1"] is None
    assert rows[0]["boolean_true_rate"] == 0.5
    cmp = table.against_first(rows)
    assert cmp[0] is None
    expected = paired_by_id(
        {"qa:1": 1, "qa:2": 1, "qb:1": 0.5, "qb:2": 0}, {"qa:1": 1, "qa:2": 0, "qb:1": 0, "qb:2": 0}
    )
    assert cmp[1] == expected and (cmp[1].wins, cmp[1].losses, cmp[1].ties) == (0, 2, 2)
    md = table.markdown(rows)
    assert "| full | 50.0 (2) | 100.0 (1) | 50.0 (1) | – (0) | 50 % |  |" in md
    assert "| base | 50.0 (2) | 0.0 (1) | 0.0 (1) | – (0) | 50 % | " + expected.describe() in md


def test_a_pooled_row_refuses_the_same_dataset_twice(tmp_path):
    table = load_script("benchmarks/protocol_table.py")
    a = _run(tmp_path / "x" / "full", "qa", [("1", ASK_TRUE, "ASK {}", 1.0)])
    b = _run(tmp_path / "y" / "full", "qa", [("1", ASK_TRUE, "ASK {}", 1.0)])
    with pytest.raises(SystemExit, match="pools the same question more than once"):
        table.protocol_row(f"both={a},{b}")


def test_the_cli_writes_json_with_the_comparison(tmp_path, capsys):
    table = load_script("benchmarks/protocol_table.py")
    a = _run(tmp_path / "qa" / "full", "qa", [("1", ASK_TRUE, "ASK {}", 1.0), ("2", ITEMS, "SELECT ?x {}", 1.0)])
    b = _run(tmp_path / "qa" / "spinach", "qa", [("1", ASK_TRUE, "ASK {}", 0.0), ("2", ITEMS, "SELECT ?x {}", 1.0)])
    assert table.main([str(a), str(b), "--json", str(tmp_path / "t.json")]) == 0
    rows = json.loads((tmp_path / "t.json").read_text())
    assert rows[0]["against_first"] is None and rows[1]["against_first"]["delta"] == -0.5
    assert "f1_by_key" not in rows[1] and str(b) in capsys.readouterr().out
