"""Scoring rules of saga_dspy.eval.scoring.metrics (answers set F1, SPINACH row F1, EM, aggregates)."""

from __future__ import annotations

import json

import pytest

from saga_dspy.eval.scoring import metrics
from saga_dspy.eval.scoring.metrics import METRIC_RULES, answer_f1, exact_match, summarize
from saga_dspy.kg.results import AskResult, Binding, SelectResult

WD = "http://www.wikidata.org/entity/"
XSD = "http://www.w3.org/2001/XMLSchema#"


def iri(q: str) -> dict:
    return {"type": "uri", "value": WD + q}


def lit(value: str, datatype: str | None = None, lang: str | None = None) -> dict:
    out = {"type": "literal", "value": value}
    if datatype:
        out["datatype"] = XSD + datatype
    if lang:
        out["xml:lang"] = lang
    return out


def sel(*rows: dict, variables: list[str] | None = None) -> dict:
    vars_ = variables or sorted({v for r in rows for v in r})
    return {"head": {"vars": vars_}, "results": {"bindings": list(rows)}}


def col(var: str, *terms: dict) -> dict:
    return sel(*({var: t} for t in terms), variables=[var])


# --------------------------------------------------------------------------- sets


def test_exact_set_match():
    gold = col("x", iri("Q1"), iri("Q2"))
    pred = col("answer", iri("Q2"), iri("Q1"))  # order and variable names do not matter
    assert answer_f1(pred, gold) == 1.0
    assert exact_match(pred, gold)


def test_partial_set():
    gold = col("x", iri("Q1"), iri("Q2"), iri("Q3"), iri("Q4"))
    pred = col("x", iri("Q1"), iri("Q2"), iri("Q9"))
    # precision 2/3, recall 1/2
    assert answer_f1(pred, gold) == pytest.approx(4 / 7)
    assert not exact_match(pred, gold)


def test_disjoint_scores_zero():
    assert answer_f1(col("x", iri("Q5")), col("x", iri("Q1"))) == 0.0


def test_duplicates_collapse_in_answers_but_count_in_rows():
    gold = col("x", iri("Q1"), iri("Q2"))
    pred = col("x", iri("Q1"), iri("Q1"), iri("Q2"))
    assert answer_f1(pred, gold) == 1.0
    # rows: 3 predicted rows, 2 matched -> precision 2/3, recall 1
    assert answer_f1(pred, gold, mode="rows") == pytest.approx(0.8)


def test_all_columns_form_the_answer_set():
    gold = sel({"p": iri("Q1"), "d": lit("1879-03-14T00:00:00Z", "dateTime")})
    pred = col("p", iri("Q1"))
    # gold set {Q1, date}; pred {Q1}: precision 1, recall 1/2
    assert answer_f1(pred, gold) == pytest.approx(2 / 3)


def test_iris_compare_by_full_iri():
    gold = col("x", {"type": "uri", "value": "http://www.wikidata.org/entity/Q1"})
    pred = col("x", {"type": "uri", "value": "http://example.org/Q1"})
    assert answer_f1(pred, gold) == 0.0


# --------------------------------------------------------------------------- rows


def test_rows_hungarian_beats_greedy():
    # gold g1=(A,B), g2=(A,C,E); pred p1=(A,B,C) scores g1 1.0 / g2 2/3, p2=(A,B) scores g1 1.0 / g2 1/3.
    # Greedy takes p1-g1 then p2-g2 (total 4/3); the optimum is p1-g2 + p2-g1 = 5/3.
    gold = sel(
        {"a": iri("A"), "b": iri("B")},
        {"a": iri("A"), "c": iri("C"), "e": iri("E")},
        variables=["a", "b", "c", "e"],
    )
    pred = sel(
        {"u": iri("A"), "v": iri("B"), "w": iri("C")},
        {"u": iri("A"), "v": iri("B")},
        variables=["u", "v", "w"],
    )
    assert answer_f1(pred, gold, mode="rows") == pytest.approx(5 / 6)


def test_rows_greedy_fallback_when_too_large(monkeypatch):
    gold = sel(
        {"a": iri("A"), "b": iri("B")},
        {"a": iri("A"), "c": iri("C"), "e": iri("E")},
        variables=["a", "b", "c", "e"],
    )
    pred = sel({"u": iri("A"), "v": iri("B"), "w": iri("C")}, {"u": iri("A"), "v": iri("B")}, variables=["u", "v", "w"])
    monkeypatch.setattr(metrics, "_DENSE_LIMIT", 1)
    assert answer_f1(pred, gold, mode="rows") == pytest.approx(2 / 3)


def test_rows_multi_column_exact_and_misaligned():
    gold = sel({"p": iri("Q1"), "y": lit("1990", "integer")}, {"p": iri("Q2"), "y": lit("2000", "integer")})
    same = sel({"q": iri("Q2"), "z": lit("2000.0", "decimal")}, {"q": iri("Q1"), "z": lit("1990", "integer")})
    assert answer_f1(same, gold, mode="rows") == 1.0
    assert exact_match(same, gold, mode="rows")
    # Same values but paired wrongly: every gold row finds only half of its cells.
    crossed = sel({"q": iri("Q1"), "z": lit("2000", "integer")}, {"q": iri("Q2"), "z": lit("1990", "integer")})
    assert answer_f1(crossed, gold, mode="answers") == 1.0
    assert answer_f1(crossed, gold, mode="rows") == pytest.approx(0.5)


def test_rows_extra_predicted_columns_are_free():
    gold = col("x", iri("Q1"))
    pred = sel({"x": iri("Q1"), "extra": iri("Q99")})
    assert answer_f1(pred, gold, mode="rows") == 1.0
    assert answer_f1(pred, gold, mode="answers") == pytest.approx(2 / 3)


def test_rows_unmatched_rows_are_misses():
    gold = col("x", iri("Q1"), iri("Q2"), iri("Q3"), iri("Q4"))
    pred = col("x", iri("Q1"))
    # precision 1, recall 1/4
    assert answer_f1(pred, gold, mode="rows") == pytest.approx(0.4)


# --------------------------------------------------------------------------- labels


def test_label_columns_ignored():
    gold = col("item", iri("Q90"))
    pred = sel(
        {
            "item": iri("Q90"),
            "itemLabel": lit("Paris", lang="en"),
            "itemDescription": lit("capital of France", lang="en"),
            "itemAltLabel": lit("City of Light", lang="en"),
        }
    )
    assert answer_f1(pred, gold) == 1.0
    assert answer_f1(pred, gold, mode="rows") == 1.0
    # and the other way round: gold with labels, bare prediction
    assert answer_f1(gold, pred) == 1.0


def test_label_only_results_are_scored_on_labels():
    gold = col("itemLabel", lit("Paris", lang="en"))
    assert answer_f1(col("itemLabel", lit("Paris", lang="en")), gold) == 1.0
    assert answer_f1(col("itemLabel", lit("Lyon", lang="en")), gold) == 0.0
    # an entity is not its label
    assert answer_f1(col("item", iri("Q90")), gold) == 0.0


def test_label_named_non_label_literal_kept_without_iri():
    # a literal answer whose variable ends in 'label' and no IRI in the row is an answer
    gold = col("label", lit("Berlin"))
    assert answer_f1(col("x", lit("Berlin")), gold) == 1.0


# --------------------------------------------------------------------------- booleans


def test_booleans():
    t = {"head": {}, "boolean": True}
    f = {"head": {}, "boolean": False}
    assert answer_f1(t, t) == 1.0
    assert answer_f1(True, t) == 1.0
    assert answer_f1(AskResult(False), t) == 0.0
    assert answer_f1(f, f) == 1.0
    assert exact_match(False, f)
    assert not exact_match(True, f)


def test_select_for_ask_and_ask_for_select_score_zero():
    t = {"head": {}, "boolean": True}
    truthy_select = col("x", lit("true", "boolean"))
    assert answer_f1(truthy_select, t) == 0.0
    assert answer_f1(t, truthy_select) == 0.0
    assert answer_f1(True, col("x", iri("Q1")), mode="rows") == 0.0
    assert answer_f1(col("x"), t) == 0.0  # an empty SELECT is no boolean either


# --------------------------------------------------------------------------- literals


@pytest.mark.parametrize(
    "pred",
    [
        lit("1", "integer"),
        lit("1.0", "double"),
        lit("1.00", "decimal"),
        lit("1.0E0", "float"),
        lit("1"),  # untyped number
    ],
)
def test_numbers_compare_by_value(pred):
    gold = col("n", lit("1", "decimal"))
    assert answer_f1(col("n", pred), gold) == 1.0


def test_numbers_differ():
    assert answer_f1(col("n", lit("2", "integer")), col("n", lit("1", "integer"))) == 0.0
    assert answer_f1(col("n", lit("67000000", "integer")), col("n", lit("6.7E7", "double"))) == 1.0
    assert answer_f1(col("n", lit("67000001", "integer")), col("n", lit("6.7E7", "double"))) == 0.0


def test_dates_at_gold_precision():
    dt_midnight = lit("1879-03-14T00:00:00Z", "dateTime")
    date = lit("1879-03-14", "date")
    assert answer_f1(col("d", date), col("d", dt_midnight)) == 1.0
    assert answer_f1(col("d", dt_midnight), col("d", date)) == 1.0
    assert answer_f1(col("d", lit("1879-03-14T00:00:00+00:00", "dateTime")), col("d", dt_midnight)) == 1.0
    assert answer_f1(col("d", lit("1879-03-14T00:00:00Z")), col("d", date)) == 1.0  # untyped date text
    # a more precise prediction matches a coarser gold value...
    assert answer_f1(col("d", lit("1879-03-14T10:30:00Z", "dateTime")), col("d", date)) == 1.0
    assert answer_f1(col("d", date), col("d", lit("1879", "gYear"))) == 1.0
    # ... but a coarser prediction does not match a finer gold value
    assert answer_f1(col("d", date), col("d", lit("1879-03-14T10:30:00Z", "dateTime"))) == 0.0
    assert answer_f1(col("d", lit("1879", "gYear")), col("d", date)) == 0.0
    # different days differ
    assert answer_f1(col("d", lit("1879-03-15", "date")), col("d", dt_midnight)) == 0.0


def test_dates_in_rows_mode():
    gold = sel({"p": iri("Q937"), "d": lit("1879-03-14T00:00:00Z", "dateTime")})
    pred = sel({"p": iri("Q937"), "d": lit("1879-03-14", "date")})
    assert answer_f1(pred, gold, mode="rows") == 1.0


def test_language_tags():
    gold = col("s", lit("Paris", lang="en"))
    assert answer_f1(col("s", lit("Paris", lang="fr")), gold) == 1.0
    assert answer_f1(col("s", lit("Paris")), gold) == 1.0
    assert answer_f1(col("s", lit("Paris", "string")), gold) == 1.0
    assert answer_f1(col("s", lit("Paris", lang="fr")), gold, keep_lang=True) == 0.0
    assert answer_f1(col("s", lit("Paris", lang="EN")), gold, keep_lang=True) == 1.0
    assert answer_f1(col("s", lit("paris", lang="en")), gold) == 0.0


def test_other_datatypes_compare_with_datatype():
    wkt = "http://www.opengis.net/ont/geosparql#wktLiteral"
    gold = col("c", {"type": "literal", "value": "Point(2.35 48.85)", "datatype": wkt})
    assert answer_f1(col("c", {"type": "literal", "value": "Point(2.35 48.85)", "datatype": wkt}), gold) == 1.0
    assert answer_f1(col("c", lit("Point(2.35 48.85)")), gold) == 0.0


# --------------------------------------------------------------------------- empties and inputs


def test_empty_gold_and_prediction():
    empty = col("x")
    # as the paper: 'nothing' vs 'nothing' scores 0, so an unanswerable question cannot inflate F1
    assert answer_f1(empty, empty) == 0.0
    assert not exact_match([], empty)
    assert answer_f1(empty, empty, mode="rows") == 0.0
    assert answer_f1(col("x", iri("Q1")), empty) == 0.0
    assert answer_f1(empty, col("x", iri("Q1"))) == 0.0
    assert answer_f1(empty, col("x", iri("Q1")), mode="rows") == 0.0
    assert answer_f1(None, col("x", iri("Q1"))) == 0.0
    assert answer_f1(None, empty) == 0.0


def test_input_forms():
    gold = col("x", iri("Q1"))
    typed = SelectResult(["y"], [{"y": Binding("uri", WD + "Q1")}])
    assert answer_f1(typed, gold) == 1.0
    assert answer_f1(json.dumps(gold), json.dumps(gold)) == 1.0
    assert answer_f1([{"z": iri("Q1")}], gold) == 1.0  # bare bindings list
    assert answer_f1(typed, typed, mode="rows") == 1.0


@pytest.mark.parametrize(
    "bad",
    [
        {"foo": 1},
        "this is not json",
        42,
        [1, 2],
        {"results": {"bindings": [{"x": {"type": "weird", "value": "a"}}]}},
        {"results": {"bindings": [{"x": {"type": "uri"}}]}},
        {"head": "x", "results": {"bindings": []}},
        {"results": "nope"},
    ],
)
def test_malformed_inputs_raise_value_error(bad):
    gold = col("x", iri("Q1"))
    with pytest.raises(ValueError):
        answer_f1(bad, gold)
    with pytest.raises(ValueError):
        answer_f1(gold, bad)
    with pytest.raises(ValueError):
        exact_match(bad, gold, mode="rows")


def test_gold_none_and_bad_mode_raise():
    with pytest.raises(ValueError, match="gold"):
        answer_f1(col("x", iri("Q1")), None)
    with pytest.raises(ValueError, match="mode"):
        answer_f1(col("x", iri("Q1")), col("x", iri("Q1")), mode="bogus")


# --------------------------------------------------------------------------- aggregates


def _rec(f1, em, is_boolean=False, empty=False, status="ok", **counters):
    return {"f1": f1, "em": em, "is_boolean": is_boolean, "empty": empty, "final_status": status, **counters}


def test_summarize():
    records = [
        _rec(1.0, True, steps=4, lm_calls=5, seconds=2.0),
        _rec(0.5, False, steps=6, lm_calls=7, seconds=4.0),
        _rec(0.0, False, empty=True, status="empty", steps=15, lm_calls=15),
        _rec(1.0, True, is_boolean=True, steps=3, status="ok"),
        _rec(0.0, False, is_boolean=True, empty=True, status="blocked", steps=2),
        _rec(0.0, False, empty=True, status="error"),
    ]
    s = summarize(records)
    assert s["n"] == 6
    assert s["f1"] == pytest.approx(2.5 / 6)
    assert s["em"] == pytest.approx(2 / 6)
    assert s["empty_rate"] == pytest.approx(3 / 6)
    assert (s["boolean_n"], s["factoid_n"]) == (2, 4)
    assert s["boolean_f1"] == pytest.approx(0.5)
    assert s["boolean_em"] == pytest.approx(0.5)
    assert s["factoid_f1"] == pytest.approx(1.5 / 4)
    assert s["factoid_em"] == pytest.approx(1 / 4)
    assert s["mean_steps"] == pytest.approx(30 / 5)  # over the records that have the counter
    assert s["mean_lm_calls"] == pytest.approx(27 / 3)
    assert s["mean_seconds"] == pytest.approx(3.0)
    assert s["mean_prompt_tokens"] is None
    assert (s["n_ok"], s["n_empty"], s["n_blocked"], s["n_error"]) == (3, 1, 1, 1)
    assert s["blocked_rate"] == pytest.approx(1 / 6)
    assert s["error_rate"] == pytest.approx(1 / 6)
    assert s["ok_rate"] == pytest.approx(3 / 6)
    json.dumps(s)  # loggable as is


def test_summarize_empty_and_malformed():
    s = summarize([])
    assert s["n"] == 0 and s["f1"] is None and s["boolean_f1"] is None
    with pytest.raises(ValueError):
        summarize([{"em": True}])
    with pytest.raises(ValueError):
        summarize([{"f1": 1.5, "em": True}])
    with pytest.raises(ValueError):
        summarize([{"f1": 1.0, "em": True, "final_status": "weird"}])
    with pytest.raises(ValueError):
        summarize([{"f1": "1", "em": True}])
    with pytest.raises(ValueError):
        summarize(["not a dict"])


def test_metric_rules_are_serialisable_and_complete():
    text = json.dumps(METRIC_RULES)
    for key in ("answers", "rows", "labels", "numbers", "dates", "strings", "booleans", "empty", "version"):
        assert key in METRIC_RULES
    assert "Hungarian" in text


def test_the_summary_table_shows_what_each_question_cost():
    """Issue 15: LM-driven steps, spare LM calls by kind, auto-runs and prompt tokens evaluated vs reused."""
    from saga_dspy.eval.scoring.report import markdown_table, summary_table

    lines = [
        {
            "f1": 1.0,
            "em": True,
            "final_status": "ok",
            "counters": {
                "steps": 5,
                "lm_steps": 4,
                "lm_calls": 6,
                "answer_type_calls": 1,
                "prunes": 1,
                "extracts": 0,
                "auto_runs": 1,
                "prompt_tokens": 20000,
                "prompt_tokens_evaluated": 6000,
                "prompt_tokens_reused": 14000,
            },
        },
        {
            "f1": 0.0,
            "em": False,
            "final_status": "empty",
            "counters": {
                "steps": 3,
                "lm_steps": 2,
                "lm_calls": 4,
                "answer_type_calls": 1,
                "prunes": 0,
                "extracts": 1,
                "auto_runs": 0,
                "prompt_tokens": 10000,
                "prompt_tokens_evaluated": 10000,
                "prompt_tokens_reused": 0,
            },
        },
    ]
    m = metrics.compute_metrics(lines)
    assert (m["mean_lm_steps"], m["mean_prunes"], m["mean_extracts"], m["mean_auto_runs"]) == (3.0, 0.5, 0.5, 0.5)
    assert (m["mean_prompt_tokens_evaluated"], m["mean_prompt_tokens_reused"]) == (8000.0, 7000.0)
    table = summary_table({"full": m})
    header = next(line for line in table.splitlines() if line.startswith("variant") and "LM steps" in line)
    assert "kt reused" in header and "auto-runs" in header and "type calls" in header
    assert "| 3.0 | 5.0 | 1.0 | 0.5 | 0.5 | 0.5 | 15.0 | 8.0 | 7.0 |" in markdown_table({"full": m})
