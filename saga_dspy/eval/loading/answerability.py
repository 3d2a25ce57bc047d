"""Answerability that cannot inflate: which frozen gold results are worth scoring.

On a sample of Wikidata a gold query can return a result that says nothing: an aggregate
over an empty pattern (COUNT = 0, SUM/AVG = 0, MIN/MAX unbound) or ASK `false` only because
facts are missing. Any predicted query of the same shape then scores F1 = 1 (a COUNT over a
wrong pattern also returns 0), so such questions inflate the score. A gold result counts as
answerable only when it is non-empty and not degenerate; a degenerate one counts only where
the dataset's own stored answer confirms it (answer F1 = 1 against `source_answers`).
"""

from __future__ import annotations

import re
from typing import Any

REASONS = ("empty", "degenerate_aggregate", "ask_false_unconfirmed")

_PROJECTION = re.compile(r"(?is)\bSELECT\b(.*?)(?:\bWHERE\b|\{)")
_AGGREGATE = re.compile(r"(?i)\b(COUNT|SUM|AVG|MIN|MAX|SAMPLE|GROUP_CONCAT)\s*\(")


def has_aggregate(sparql: str | None) -> bool:
    """Whether the query's projection has an aggregate (`SELECT (COUNT(?x) AS ?n) ...`)."""
    projection = _PROJECTION.search(sparql or "")
    return bool(projection and _AGGREGATE.search(projection.group(1)))


def _nothing(binding: dict[str, Any] | None) -> bool:
    """An unbound value, an empty string or a numeric zero."""
    if not binding:
        return True
    value = str(binding.get("value", "")).strip()
    if not value:
        return True
    try:
        return float(value) == 0.0
    except ValueError:
        return False


def is_degenerate(result: dict[str, Any], sparql: str | None) -> bool:
    """A SELECT result that only says 'nothing matched': one row whose values are all unbound,
    or, for an aggregate query, all zero / empty / unbound."""
    bindings = (result.get("results") or {}).get("bindings") or []
    if len(bindings) != 1:
        return False
    row = bindings[0]
    if not any(row.values()):
        return True
    names = (result.get("head") or {}).get("vars") or list(row)
    return has_aggregate(sparql) and all(_nothing(row.get(v)) for v in names)


def unanswerable_reason(
    result: dict[str, Any] | None, sparql: str | None, source_f1: float | None = None
) -> str | None:
    """Why a frozen gold result is not worth scoring (one of `REASONS`), or None when it is.

    `source_f1` is the answer F1 of the result against the dataset's stored answers (None: the
    dataset has none); 1.0 confirms a degenerate result."""
    if result is None:
        return "empty"
    confirmed = source_f1 is not None and source_f1 >= 1.0 - 1e-9
    if "boolean" in result:
        return None if bool(result["boolean"]) or confirmed else "ask_false_unconfirmed"
    bindings = (result.get("results") or {}).get("bindings") or []
    if not bindings:
        return "empty"
    if is_degenerate(result, sparql):
        return None if confirmed else "degenerate_aggregate"
    return None


def subset_record(filter_report: dict[str, Any] | None, n_scored: int) -> dict[str, Any]:
    """What a run's metrics are over: the answerable subset (n, left out by reason) or all
    questions (where an unanswerable gold scores 0)."""
    if not filter_report:
        return {
            "answerable_only": False,
            "scored": n_scored,
            "rule": "all questions; a question whose gold is not answerable scores 0",
        }
    return {
        "answerable_only": True,
        "scored": n_scored,
        "answerable": filter_report.get("kept"),
        "total": filter_report.get("total"),
        "left_out": filter_report.get("left_out"),
        "left_out_by_reason": filter_report.get("reasons") or {},
    }


def describe_subset(subset: dict[str, Any]) -> str:
    if not subset.get("answerable_only"):
        return f"scored: all {subset['scored']} questions (unanswerable gold scores 0)"
    reasons = ", ".join(f"{k} {v}" for k, v in subset["left_out_by_reason"].items()) or "none"
    return (
        f"scored: {subset['scored']} questions of the answerable subset ({subset['answerable']} of "
        f"{subset['total']} answerable; left out {subset['left_out']}: {reasons})"
    )


__all__ = ["REASONS", "describe_subset", "has_aggregate", "is_degenerate", "subset_record", "unanswerable_reason"]
