"""Answer metrics: set F1 over answers (the paper's Eq. 4-5), SPINACH's row-major F1, aggregates.

Both sides of a comparison may be a SPARQL-JSON dict (or its JSON text), a bare
bindings list, a bool, or a typed result (`SelectResult` / `AskResult`). The rules
are spelled out in `METRIC_RULES`, which eval writes into every run's config.
"""

from __future__ import annotations

import json
import math
import re
from collections import defaultdict
from collections.abc import Iterable
from decimal import Decimal, InvalidOperation
from typing import Any, Literal

from saga_dspy.eval.scoring.breakdown import breakdown
from saga_dspy.kg.results import XSD, AskResult, Binding, QueryResult, SelectResult, parse_sparql_json

MetricMode = Literal["answers", "rows"]

METRIC_VERSION = "2"  # 2: empty vs empty scores 0

METRIC_RULES: dict[str, Any] = {
    "version": METRIC_VERSION,
    "inputs": (
        "Prediction and gold are SPARQL-JSON (a dict or its JSON text), a bare bindings list, a bool, "
        "or a typed SelectResult/AskResult. A prediction of None means no answer (scores 0). "
        "Anything else, or malformed SPARQL-JSON, raises ValueError."
    ),
    "answers": (
        "mode 'answers' (SAGA Eq. 4-5): the set of all values bound in the result, over all columns and rows "
        "(duplicates collapse); precision = |pred ∩ gold| / |pred|, recall = |pred ∩ gold| / |gold|, F1 their "
        "harmonic mean (0 when both are 0)."
    ),
    "rows": (
        "mode 'rows' (SPINACH's row-major F1): rows are a multiset; a (predicted row, gold row) pair scores the "
        "share of the gold row's cells whose value occurs anywhere in the predicted row (variable names ignored, "
        "extra predicted columns free); rows are matched one-to-one maximising the total score (Hungarian "
        "algorithm; a greedy matching by descending score when predicted rows x matched gold rows exceeds "
        "4,000,000); precision = total / predicted rows, recall = total / gold rows. Rows with no cell left "
        "are not counted."
    ),
    "labels": (
        "Label columns are ignored: a literal bound to a variable whose name ends with 'Label', 'label', "
        "'Description' or 'AltLabel' (e.g. ?itemLabel from SERVICE wikibase:label) is dropped when the same "
        "row binds an IRI. A result made only of labels is scored on its labels."
    ),
    "iris": "IRIs compare by their full IRI string; blank nodes by their label.",
    "numbers": (
        "Literals of the XSD numeric types compare by exact decimal value across types "
        '(1 = 1.0 = "1"^^xsd:decimal = "1.0E0"^^xsd:double); an untyped or xsd:string literal that is a '
        "plain number compares as that number."
    ),
    "dates": (
        "xsd:dateTime/date/gYearMonth/gYear (and untyped literals of the form YYYY-MM-DD[Thh:mm:ss]) compare "
        "at the precision of the gold value: a time of 00:00:00 (UTC) means day precision, so "
        "1879-03-14T00:00:00Z = 1879-03-14; a predicted value matches a gold value when it agrees on every "
        "component the gold value has. Timezones Z, +00:00 and none are the same."
    ),
    "strings": (
        "Other literals compare by their lexical value; language tags are ignored unless keep_lang=True; "
        "xsd:string and plain literals are the same. Other datatypes (e.g. wktLiteral) compare by (value, datatype)."
    ),
    "booleans": (
        "An ASK gold scores 1 when the prediction is the same boolean, else 0; a SELECT prediction for an ASK "
        "gold scores 0, and an ASK prediction for a SELECT gold scores 0."
    ),
    "empty": (
        "Empty gold and empty prediction: 0 (as the paper: 'nothing' is never a scored answer, so an "
        "unanswerable question cannot inflate the score in --all-questions runs); empty prediction for a "
        "non-empty gold: 0; non-empty prediction for an empty gold: 0."
    ),
    "exact_match": "EM is F1 == 1 (within 1e-9) under the same mode.",
    "aggregate": (
        "summarize(): means over questions of F1 and EM; empty_rate = share whose final query returned nothing "
        "or failed; Boolean (ASK gold) and factoid groups separately; means of the per-question counters; "
        "shares of final_status ok/blocked/error. A mean over no questions is None. Also F1 per answer kind of "
        "the gold (count: one number from a COUNT query; entity: only IRIs; literal: the rest), the share of ASK "
        "golds that are true, and the share of final queries the model executed, its extract call wrote, or "
        "the program ran for it (eval.scoring.breakdown)."
    ),
}

_NUMERIC = {
    XSD + t
    for t in (
        "integer",
        "decimal",
        "float",
        "double",
        "int",
        "long",
        "short",
        "byte",
        "nonNegativeInteger",
        "positiveInteger",
        "negativeInteger",
        "nonPositiveInteger",
        "unsignedLong",
        "unsignedInt",
        "unsignedShort",
        "unsignedByte",
    )
}
_DATE_TYPES = {XSD + t for t in ("dateTime", "date", "gYearMonth", "gYear", "dateTimeStamp")}
_STRING_TYPES = {None, XSD + "string"}
_BOOLEAN = XSD + "boolean"

_LABEL_SUFFIXES = ("Label", "label", "Description", "AltLabel")

_NUMBER_RE = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$")
_DATE_RE = re.compile(
    r"^(?P<y>[+-]?\d{1,})"
    r"(?:-(?P<m>\d{1,2})"
    r"(?:-(?P<d>\d{1,2})"
    r"(?:T(?P<t>\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?))?)?)?"
    r"(?P<tz>Z|[+-]\d{2}:?\d{2})?$"
)
_UNTYPED_DATE_RE = re.compile(r"^[+-]?\d{4,}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2}(\.\d+)?)?)?(Z|[+-]\d{2}:?\d{2})?$")

_DENSE_LIMIT = 4_000_000
_EPS = 1e-9

Key = tuple


# --------------------------------------------------------------------------- terms


def _number_key(text: str) -> Key | None:
    try:
        value = Decimal(text.strip())
    except (InvalidOperation, ValueError):
        return None
    if not value.is_finite():
        return ("num", str(value))
    return ("num", value)


def _date_key(text: str) -> Key | None:
    """("date", year, month, day, time): None components are below the value's precision."""
    m = _DATE_RE.match(text.strip())
    if not m:
        return None
    year = int(m["y"])
    month = int(m["m"]) if m["m"] else None
    day = int(m["d"]) if m["d"] else None
    if month == 0:  # Wikidata's "1879-00-00": year precision
        month = day = None
    if day == 0:
        day = None
    time = m["t"]
    tz = m["tz"] or "Z"
    if tz in ("+00:00", "-00:00", "+0000", "-0000"):
        tz = "Z"
    if time is not None:
        if len(time) == 5:
            time += ":00"
        hh, mm, ss = time.split(":")
        seconds = Decimal(ss)
        if int(hh) == 0 and int(mm) == 0 and seconds == 0 and tz == "Z":
            time = None  # midnight UTC: day precision
        else:
            time = f"{hh}:{mm}:{seconds.normalize():f}{'' if tz == 'Z' else tz}"
    if day is None:
        time = None
    return ("date", year, month, day, time)


def _date_variants(key: Key) -> tuple[Key, ...]:
    _, y, m, d, t = key
    out = [key]
    if t is not None:
        out.append(("date", y, m, d, None))
    if d is not None:
        out.append(("date", y, m, None, None))
    if m is not None:
        out.append(("date", y, None, None, None))
    return tuple(dict.fromkeys(out))


def _term_key(b: Binding, keep_lang: bool) -> Key:
    if b.type == "uri":
        return ("iri", b.value)
    if b.type == "bnode":
        return ("bnode", b.value)
    dt = b.datatype
    if dt in _NUMERIC:
        key = _number_key(b.value)
        if key is not None:
            return key
    elif dt in _DATE_TYPES:
        key = _date_key(b.value)
        if key is not None:
            return key
    elif dt == _BOOLEAN:
        return ("bool", b.value.strip().lower() in ("true", "1"))
    elif dt in _STRING_TYPES and not b.lang:
        text = b.value.strip()
        if _NUMBER_RE.match(text):
            key = _number_key(text)
            if key is not None:
                return key
        if _UNTYPED_DATE_RE.match(text):
            key = _date_key(text)
            if key is not None:
                return key
    if dt in _STRING_TYPES:
        return ("str", b.value, (b.lang or "").lower() if keep_lang else "")
    return ("lit", b.value, dt)


def _variants(key: Key) -> tuple[Key, ...]:
    return _date_variants(key) if key[0] == "date" else (key,)


def _is_label_var(var: str) -> bool:
    return var.endswith(_LABEL_SUFFIXES)


def _row_keys(result: SelectResult, keep_lang: bool) -> list[list[Key]]:
    """The kept cells of each row, as keys (label literals dropped where the row has an IRI)."""
    order = list(result.variables)
    rows = []
    for row in result.rows:
        variables = order + [v for v in row if v not in order]
        cells = [(v, row[v]) for v in variables if v in row]
        has_iri = any(b.is_iri for _, b in cells)
        rows.append(
            [_term_key(b, keep_lang) for v, b in cells if not (has_iri and b.type == "literal" and _is_label_var(v))]
        )
    return rows


# --------------------------------------------------------------------------- parsing


def _parse(obj: Any, what: str) -> QueryResult:
    if isinstance(obj, (bytes, bytearray)):
        obj = obj.decode("utf-8")
    if isinstance(obj, str):
        try:
            obj = json.loads(obj)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{what}: not valid SPARQL-JSON text ({exc.msg})") from exc
    try:
        return parse_sparql_json(obj)
    except ValueError as exc:
        raise ValueError(f"{what}: {exc}") from exc
    except (TypeError, AttributeError, KeyError) as exc:
        raise ValueError(f"{what}: malformed SPARQL-JSON ({type(exc).__name__}: {exc})") from exc


def _check_mode(mode: str) -> None:
    if mode not in ("answers", "rows"):
        raise ValueError(f"metric mode must be 'answers' or 'rows', got {mode!r}")


# --------------------------------------------------------------------------- F1


def _f1(precision: float, recall: float) -> float:
    return 0.0 if precision + recall <= 0 else 2 * precision * recall / (precision + recall)


def _answers_f1(pred: SelectResult, gold: SelectResult, keep_lang: bool) -> float:
    gold_set = {k for row in _row_keys(gold, keep_lang) for k in row}
    pred_set = {k for row in _row_keys(pred, keep_lang) for k in row}
    if not gold_set or not pred_set:
        return 0.0  # empty vs empty included (METRIC_RULES["empty"])
    hit_gold: set[Key] = set()
    correct = 0
    for key in pred_set:
        hits = [v for v in _variants(key) if v in gold_set]
        if hits:
            correct += 1
            hit_gold.update(hits)
    return _f1(correct / len(pred_set), len(hit_gold) / len(gold_set))


def _rows_f1(pred: SelectResult, gold: SelectResult, keep_lang: bool) -> float:
    gold_rows = [r for r in _row_keys(gold, keep_lang) if r]
    pred_rows = [{v for k in r for v in _variants(k)} for r in _row_keys(pred, keep_lang) if r]
    if not gold_rows or not pred_rows:
        return 0.0  # empty vs empty included (METRIC_RULES["empty"])
    index: dict[Key, list[tuple[int, int]]] = defaultdict(list)
    for j, row in enumerate(gold_rows):
        counts: dict[Key, int] = defaultdict(int)
        for k in row:
            counts[k] += 1
        for k, c in counts.items():
            index[k].append((j, c))
    scores: list[dict[int, float]] = []
    for prow in pred_rows:
        acc: dict[int, int] = defaultdict(int)
        for k in prow:
            for j, c in index.get(k, ()):
                acc[j] += c
        scores.append({j: n / len(gold_rows[j]) for j, n in acc.items()})
    total = _best_matching(scores)
    return _f1(total / len(pred_rows), total / len(gold_rows))


def _best_matching(scores: list[dict[int, float]]) -> float:
    """Maximum total score of a one-to-one matching of predicted rows to gold rows."""
    cols = sorted({j for s in scores for j in s})
    if not cols:
        return 0.0
    if len(scores) * len(cols) <= _DENSE_LIMIT:
        import numpy as np
        from scipy.optimize import linear_sum_assignment

        pos = {j: n for n, j in enumerate(cols)}
        matrix = np.zeros((len(scores), len(cols)))
        for i, s in enumerate(scores):
            for j, v in s.items():
                matrix[i, pos[j]] = v
        r, c = linear_sum_assignment(matrix, maximize=True)
        return float(matrix[r, c].sum())
    # Too large for the dense Hungarian algorithm: greedy by descending score.
    pairs = sorted(((v, i, j) for i, s in enumerate(scores) for j, v in s.items()), key=lambda t: (-t[0], t[1], t[2]))
    used_i: set[int] = set()
    used_j: set[int] = set()
    total = 0.0
    for v, i, j in pairs:
        if i not in used_i and j not in used_j:
            used_i.add(i)
            used_j.add(j)
            total += v
    return total


def answer_f1(predicted: Any, gold: Any, mode: MetricMode = "answers", keep_lang: bool = False) -> float:
    """F1 of a predicted result against the gold result (rules: `METRIC_RULES`)."""
    _check_mode(mode)
    if gold is None:
        raise ValueError("gold: no gold result (None)")
    gold_r = _parse(gold, "gold")
    if predicted is None:
        return 0.0
    pred_r = _parse(predicted, "predicted")
    if isinstance(gold_r, AskResult) or isinstance(pred_r, AskResult):
        if isinstance(gold_r, AskResult) and isinstance(pred_r, AskResult):
            return 1.0 if gold_r.value == pred_r.value else 0.0
        return 0.0
    if mode == "rows":
        return _rows_f1(pred_r, gold_r, keep_lang)
    return _answers_f1(pred_r, gold_r, keep_lang)


def exact_match(predicted: Any, gold: Any, mode: MetricMode = "answers", keep_lang: bool = False) -> bool:
    """EM: F1 == 1 under the same rules."""
    return answer_f1(predicted, gold, mode=mode, keep_lang=keep_lang) >= 1.0 - _EPS


# --------------------------------------------------------------------------- aggregates

COUNTERS = (
    "steps",
    "lookups",
    "searches",
    "executions",
    "lm_calls",
    "prompt_tokens",
    "completion_tokens",
    "seconds",
    # what each question really cost, counted by the program (agent.calls)
    "lm_steps",
    "auto_runs",
    "prunes",
    "extracts",
    "answer_type_calls",
    "prompt_tokens_evaluated",
    "prompt_tokens_reused",
)
FINAL_STATUSES = ("ok", "empty", "blocked", "error")


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _number(rec: dict[str, Any], key: str, i: int) -> float:
    value = rec[key]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"record {i}: {key!r} must be a number, got {value!r}")
    return float(value)


SCORE_SUFFIXES = ("_f1", "_em", "_rate")  # with `f1` and `em`: the fields that are shares, in [0, 1]


def is_score_field(name: str) -> bool:
    return name in ("f1", "em") or name.endswith(SCORE_SUFFIXES)


def checked_score(value: Any, what: str) -> float | None:
    """`value` as a score: None, or a finite number in [0, 1] (a bool is 0 / 1); a ValueError naming `what`
    otherwise. What decides whether a score read back from a file, or handed to `summarize`, is one."""
    if value is None:
        return None
    ok = isinstance(value, (int, float)) and math.isfinite(value) and 0.0 <= value <= 1.0
    if not ok:
        raise ValueError(f"{what} {value!r:.40} is not a number in [0, 1]")
    return float(value)


def check_scores(record: dict[str, Any], where: str) -> dict[str, Any]:
    """`record` (a predictions line, a metrics.json) when every score field (`is_score_field`) is a score and every
    other number, its counters' included, is finite; a ValueError naming `where` and the field otherwise. Every
    reader of a run's files checks what it reads here, so no NaN or infinity reaches a table or a comparison."""
    counters = record.get("counters")
    fields = [*record.items(), *(counters.items() if isinstance(counters, dict) else ())]
    for name, value in fields:
        if is_score_field(str(name)):
            checked_score(value, f"{where}: {name}")
        elif isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"{where}: {name} {value!r} is not a finite number")
    return record


def summarize(records: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """Aggregate per-question records into one flat dict of numbers (None: no question in the group).

    A record needs `f1` (0..1) and `em` (bool); optional: `is_boolean`, `empty`,
    `final_status` (ok|empty|blocked|error, default ok) and the counters in `COUNTERS`
    (a counter's mean is over the records that have it).
    """
    recs = list(records)
    f1s: list[float] = []
    ems: list[float] = []
    groups: dict[str, tuple[list[float], list[float]]] = {"boolean": ([], []), "factoid": ([], [])}
    empties = 0
    statuses = {s: 0 for s in FINAL_STATUSES}
    counters: dict[str, list[float]] = {c: [] for c in COUNTERS}
    for i, rec in enumerate(recs):
        if not isinstance(rec, dict):
            raise ValueError(f"record {i}: expected a dict, got {type(rec).__name__}")
        for key in ("f1", "em"):
            if key not in rec:
                raise ValueError(f"record {i}: missing {key!r}")
        f1 = checked_score(rec["f1"], f"record {i}: f1")
        if f1 is None:
            raise ValueError(f"record {i}: f1 is None")
        em = rec["em"]
        if not isinstance(em, (bool, int)) or em not in (0, 1):
            raise ValueError(f"record {i}: 'em' must be a bool, got {em!r}")
        status = rec.get("final_status", "ok")
        if status not in statuses:
            raise ValueError(f"record {i}: final_status {status!r} not in {FINAL_STATUSES}")
        statuses[status] += 1
        f1s.append(f1)
        ems.append(float(em))
        group = groups["boolean" if rec.get("is_boolean") else "factoid"]
        group[0].append(f1)
        group[1].append(float(em))
        empties += bool(rec.get("empty"))
        for c in COUNTERS:
            if rec.get(c) is not None:
                counters[c].append(_number(rec, c, i))
    n = len(recs)
    out: dict[str, Any] = {
        "n": n,
        "f1": _mean(f1s),
        "em": _mean(ems),
        "empty_rate": empties / n if n else None,
    }
    for name, (gf1, gem) in groups.items():
        out[f"{name}_n"] = len(gf1)
        out[f"{name}_f1"] = _mean(gf1)
        out[f"{name}_em"] = _mean(gem)
    for c in COUNTERS:
        out[f"mean_{c}"] = _mean(counters[c])
    for s in FINAL_STATUSES:
        out[f"n_{s}"] = statuses[s]
    out["ok_rate"] = statuses["ok"] / n if n else None
    out["blocked_rate"] = statuses["blocked"] / n if n else None
    out["error_rate"] = statuses["error"] / n if n else None
    return out


__all__ = [
    "COUNTERS",
    "FINAL_STATUSES",
    "METRIC_RULES",
    "MetricMode",
    "answer_f1",
    "check_scores",
    "checked_score",
    "exact_match",
    "summarize",
]


# Counters copied from the prediction into the line and into summarize()'s records.
LINE_COUNTERS = COUNTERS


# The agent's final_status values that summarize() knows; 'none' (no final query) counts as empty.
STATUS_FOR_SUMMARY = {"ok": "ok", "empty": "empty", "blocked": "blocked", "error": "error", "none": "empty"}


def summary_record(line: dict[str, Any]) -> dict[str, Any]:
    """A predictions line as a `metrics.summarize()` record."""
    counters = line.get("counters") or {}
    rec = {
        "f1": float(line.get("f1") or 0.0),
        "em": bool(line.get("em")),
        "is_boolean": bool(line.get("is_boolean")),
        "empty": bool(line.get("empty")),
        "final_status": STATUS_FOR_SUMMARY.get(str(line.get("final_status")), "error"),
    }
    for key in LINE_COUNTERS:
        value = counters.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            rec[key] = float(value)
    return rec


def compute_metrics(lines: Iterable[dict[str, Any]], *, total: int | None = None) -> dict[str, Any]:
    lines = list(lines)
    out = summarize(summary_record(line) for line in lines)
    if out.get("mean_prompt_tokens") is not None or out.get("mean_completion_tokens") is not None:
        out["mean_tokens"] = (out.get("mean_prompt_tokens") or 0.0) + (out.get("mean_completion_tokens") or 0.0)
    out["n_failed"] = sum(1 for line in lines if line.get("error"))
    out["n_infra_failed"] = sum(1 for line in lines if line.get("error_kind") == "infrastructure")
    out["n_no_query"] = sum(1 for line in lines if line.get("final_status") == "none")
    out["n_metric_errors"] = sum(1 for line in lines if line.get("metric_error"))
    out.update(breakdown(lines))  # F1 per answer kind, ASK golds that are true, who chose the final query
    if total is not None:
        out["n_total"] = total
        out["complete"] = len(lines) >= total
    return out
