"""What MLflow shows of a run and of each question, as plain values (nothing here imports mlflow).

One unit with the CLI: a score or a share of questions (`f1`, `em`, a name ending in `_f1`, `_em`, `_rate`, and
the bounds of an F1 change: `_delta`, `_low`, `_high`) is 0-1 in metrics.json and predictions.jsonl and is
shown in percent, as the CLI's tables print it: the runs' metrics, each trace's `f1` assessment and tag, the
per-question table. Counts, means and seconds are shown as they are.

Each question's trace is tagged with its variant, scores, dataset and question id (`question_tags`), so the
Traces tab has a column for each and the traces of several variants can be told apart; its answers are one
line of values (`answer_text`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

FINAL_CHARS = 4000  # a trace's final SPARQL and answers, and its gold in the assessments
PERCENT_NAMES = frozenset({"f1", "em"})
PERCENT_ENDINGS = ("_f1", "_em", "_rate", "_delta", "_low", "_high")
# the trace tags each question carries; the first three are the Traces tab's columns in the shared view
QUESTION_TAGS = ("variant", "f1", "em", "question_id", "dataset")


def in_percent(name: str) -> bool:
    """Whether the metric `name` is a score or a share of questions (shown in percent)."""
    return name in PERCENT_NAMES or name.endswith(PERCENT_ENDINGS)


def display_value(value: float) -> float:
    """A metric rounded for the runs table: 4 decimals below 1, 2 up to 100 (a percent, a mean of calls), 1 above."""
    size = abs(value)
    return round(value, 4 if size < 1 else 2 if size < 100 else 1)


def shown_metric(name: str, value: float) -> float:
    """A metric as MLflow shows it: a score or share in percent (`in_percent`), rounded for display."""
    return round(100.0 * value, 2) if in_percent(name) else display_value(value)


def answer_text(answers: Any, limit: int = 300, labels: Mapping[str, str] | None = None) -> str:
    """SPARQL-JSON results (or a list of values) as one short line of values; an IRI as its id, followed by its
    label where `labels` (id -> label) has one."""
    if answers is None:
        return ""
    if isinstance(answers, dict):
        if "boolean" in answers:
            return str(bool(answers["boolean"])).lower()
        bindings = (answers.get("results") or {}).get("bindings")
        if bindings is not None:
            values = [cell.get("value", "") for row in bindings for cell in row.values() if isinstance(cell, dict)]
            named = labels or {}

            def shown(value: str) -> str:
                if not value.startswith("http"):
                    return value
                eid = value.rsplit("/", 1)[-1]
                return f"{eid} {named[eid]}" if named.get(eid) else eid

            text = "; ".join(shown(v) for v in values)
            return text if len(text) <= limit else text[: limit - 1] + "…"
    text = str(answers)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def question_tags(line: Mapping[str, Any], variant: str, dataset: str) -> dict[str, str]:
    """A question's trace tags (`QUESTION_TAGS`): its variant, F1 in percent, EM (`true`/`false`), id, dataset."""
    f1 = float(line.get("f1") or 0.0)
    return {
        "variant": variant,
        "f1": f"{shown_metric('f1', f1):.1f}",
        "em": str(bool(line.get("em"))).lower(),
        "question_id": str(line.get("id")),
        "dataset": dataset,
    }


__all__ = [
    "FINAL_CHARS",
    "QUESTION_TAGS",
    "answer_text",
    "display_value",
    "in_percent",
    "question_tags",
    "shown_metric",
]
