"""The end-of-run tables and what they are made of: F1 per answer kind, the ASK-true baseline, who chose the final
query, each variant's paired bootstrap CI against the first, all within 120 characters."""

from __future__ import annotations

import json
import re

import pytest

from saga_dspy.eval.scoring.breakdown import answer_kind, breakdown, final_origin
from saga_dspy.eval.scoring.metrics import compute_metrics
from saga_dspy.eval.scoring.report import MAX_WIDTH, against_first, f1_by_id, markdown_table, summary_table
from saga_dspy.eval.scoring.significance import paired_by_id
from saga_dspy.variants import VARIANT_NAMES

XSD = "http://www.w3.org/2001/XMLSchema#"


def _select(*cells: dict) -> dict:
    return {"head": {"vars": ["x"]}, "results": {"bindings": [{"x": c} for c in cells]}}


def _iri(q: str) -> dict:
    return {"type": "uri", "value": f"http://www.wikidata.org/entity/{q}"}


def _lit(value: str, datatype: str | None = None) -> dict:
    return {"type": "literal", "value": value, **({"datatype": datatype} if datatype else {})}


def test_answer_kind_of_a_gold_result():
    assert answer_kind({"head": {}, "boolean": True}) == "boolean"
    count = _select(_lit("7", XSD + "integer"))
    assert answer_kind(count, "SELECT (COUNT(?x) AS ?n) WHERE { ?x wdt:P31 wd:Q5 }") == "count"
    assert answer_kind(count, "SELECT ?pop WHERE { wd:Q64 wdt:P1082 ?pop }") == "literal"  # a number, no COUNT
    assert answer_kind(_select(_iri("Q1"), _iri("Q2"))) == "entity"
    labelled = {"head": {}, "results": {"bindings": [{"x": _iri("Q1"), "xLabel": _lit("one")}]}}
    assert answer_kind(labelled) == "entity"  # a label column beside an IRI is not a literal answer
    assert answer_kind(_select(_lit("1879-03-14T00:00:00Z", XSD + "dateTime"))) == "literal"
    assert answer_kind(_select(_iri("Q1"), _lit("x"))) == "literal"
    assert answer_kind(None) is None and answer_kind(_select()) is None


def _line(source, sparql, steps=(), f1=1.0, gold=None, rewritten_from=None):
    return {
        "id": sparql or "none",
        "f1": f1,
        "em": f1 == 1.0,
        "final_source": source,
        "sparql": sparql,
        "rewritten_from": rewritten_from,
        "trajectory": [{"tool_name": "execute_sparql", "tool_args": {"sparql": q}, "note": note} for q, note in steps],
        "gold": gold,
    }


def test_final_origin_tells_the_models_query_from_the_programs():
    q = "SELECT ?x WHERE { wd:Q1 wdt:P31 ?x }"
    assert final_origin(_line("stop", q, [(q, None)])) == "model"
    assert final_origin(_line("stop", q, [(q, "from-stop")])) == "model"  # the model wrote it into stop
    assert final_origin(_line("stop", q, [(q, "from-suggestion")])) == "program"  # the lookup's proposal
    assert final_origin(_line("stop+rewritten", "ASK {}", [(q, "from-candidate")], rewritten_from=q)) == "program"
    assert final_origin(_line("last-nonempty", q, [(q, "from-repeat")])) == "program"
    assert final_origin(_line("candidate", q, [(q, "from-candidate")])) == "program"
    assert final_origin(_line("extract", q)) == "extract"
    assert final_origin(_line(None, "")) == "none"


def test_breakdown_per_kind_true_share_and_sources():
    q = "SELECT ?x WHERE { wd:Q1 wdt:P31 ?x }"
    count = "SELECT (COUNT(?x) AS ?n) WHERE { ?x wdt:P31 wd:Q5 }"
    lines = [
        {**_line("stop", q, [(q, None)], f1=1.0, gold={"head": {}, "boolean": True}), "id": "a"},
        {**_line("stop", q, [(q, "from-suggestion")], f1=0.0, gold={"head": {}, "boolean": False}), "id": "b"},
        {**_line("extract", q, f1=0.5, gold=_select(_iri("Q1"), _iri("Q2"))), "id": "c"},
        {**_line(None, "", f1=0.0, gold=_select(_lit("3", XSD + "integer"))), "id": "d", "gold_sparql": count},
    ]
    b = breakdown(lines)
    assert b["boolean_true_rate"] == 0.5
    assert (b["entity_n"], b["entity_f1"]) == (1, 0.5)
    assert (b["count_n"], b["count_f1"]) == (1, 0.0)
    assert (b["literal_n"], b["literal_f1"]) == (0, None)
    assert [b[f"author_{o}_rate"] for o in ("model", "extract", "program", "none")] == [0.25, 0.25, 0.25, 0.25]
    metrics = compute_metrics(lines)  # and in every run's metrics.json
    assert metrics["boolean_n"] == 0 or metrics["boolean_true_rate"] == 0.5
    assert metrics["author_program_rate"] == 0.25


def test_the_summary_fits_in_120_characters_with_words_for_headers():
    worst = {
        "n": 1000,
        "f1": 1.0,
        "em": 1.0,
        "empty_rate": 1.0,
        "n_failed": 1000,
        "mean_seconds": 1234.5,
        "mean_tokens": 123456.0,
        "mean_prompt_tokens_evaluated": 123456.0,
        "mean_prompt_tokens_reused": 123456.0,
        **{f"mean_{c}": 100.0 for c in ("steps", "lm_steps", "lm_calls", "answer_type_calls", "prunes", "extracts")},
        "mean_auto_runs": 100.0,
        **{f"{k}_n": 1000 for k in ("boolean", "count", "entity", "literal")},
        **{f"{k}_f1": 1.0 for k in ("boolean", "count", "entity", "literal")},
        "boolean_true_rate": 1.0,
        **{f"author_{o}_rate": 1.0 for o in ("model", "model_candidate", "extract", "program", "none")},
    }
    results = {name: worst for name in VARIANT_NAMES}
    ids = [str(i) for i in range(1000)]
    # the widest interval: -100 .. +100 points
    lines = {
        name: [{"id": i, "f1": float(k % 2 if n else 1 - k % 2)} for k, i in enumerate(ids)]
        for n, name in enumerate(VARIANT_NAMES)
    }
    table = summary_table(results, "title", against_first(lines))
    widths = [len(line) for line in table.splitlines()]
    assert max(widths) <= MAX_WIDTH, table
    header = table.splitlines()[1]
    assert "F1 change [95% CI]" in header and "wins/losses/ties" in header and "seconds" in header
    assert not re.search(r"\b(AT|ktok eval|s/q)\b", table)


def test_against_first_is_the_shared_paired_bootstrap():
    a = [{"id": str(i), "f1": float(i % 3 == 0)} for i in range(30)]
    b = [{"id": str(i), "f1": float(i % 2 == 0)} for i in range(30)]
    got = against_first({"full": a, "spinach": b})
    assert set(got) == {"spinach"}
    assert got["spinach"] == paired_by_id(f1_by_id(a), f1_by_id(b))
    md = markdown_table({"full": compute_metrics(a), "spinach": compute_metrics(b)}, got)
    assert got["spinach"].describe().split(" (")[0].split(" [")[0] in md  # the delta, as the table shows it


def test_a_two_variant_run_reports_the_ci_kinds_and_sources(two_variant_run):
    out, evalset, printed = two_variant_run
    full = [json.loads(x) for x in (out / "full" / "predictions.jsonl").read_text().splitlines()]
    spinach = [json.loads(x) for x in (out / "spinach" / "predictions.jsonl").read_text().splitlines()]
    expected = paired_by_id(f1_by_id(full), f1_by_id(spinach))
    assert expected.losses == 2 and expected.wins == 0 and expected.delta < 0
    comparison = json.loads((out / "comparison.json").read_text())
    assert "f1_delta" not in comparison["full"]
    got = comparison["spinach"]
    assert got["f1_delta"] == pytest.approx(expected.delta)
    assert (got["f1_delta_low"], got["f1_delta_high"]) == pytest.approx((expected.low, expected.high))
    assert (got["f1_wins"], got["f1_losses"], got["f1_ties"]) == (0, 2, 4)
    ci = f"{100 * expected.delta:+.1f} [{100 * expected.low:+.1f}, {100 * expected.high:+.1f}]"
    assert re.search(rf"^spinach\s+6\s+\S+\s+{re.escape(ci)}\s+0/2/4\s", printed, re.M), printed
    assert ci in (out / "comparison.md").read_text()
    tables = printed[printed.index("\nqald10/test on embedded") : printed.index("\nscored:")]
    assert max(len(line) for line in tables.splitlines()) <= MAX_WIDTH, tables
    # one question of each kind but entity (three), every final query the model's own execution
    for kind, n in (("entity", 3), ("boolean", 1), ("count", 1), ("literal", 1)):
        assert comparison["full"][f"{kind}_n"] == n, kind
    assert comparison["full"]["count_f1"] == 1.0 and comparison["spinach"]["count_f1"] == 0.0
    assert comparison["full"]["author_model_rate"] == 1.0
    metrics = json.loads((out / "full" / "metrics.json").read_text())
    assert metrics["entity_n"] == 3 and metrics["boolean_true_rate"] in (0.0, 1.0)
