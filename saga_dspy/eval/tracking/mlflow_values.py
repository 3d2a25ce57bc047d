"""What MLflow shows of a run and of each question, as plain values (nothing here imports mlflow).

One unit with the CLI: a score or a share of questions (`f1`, `em`, a name ending in `_f1`, `_em`, `_rate`, and
the bounds of an F1 change: `_delta`, `_low`, `_high`) is 0-1 in metrics.json and predictions.jsonl and is
shown in percent, as the CLI's tables print it: the runs' metrics, each trace's `f1` assessment and tag, the
per-question table. Counts, means and seconds are shown as they are.

Each question's trace is tagged with its variant, scores, dataset and question id (`question_tags`), so the
Traces tab has a column for each and the traces of several variants can be told apart; its answers are one
line of values (`answer_text`). The shared views (the runs table's, the Traces tab's) and the addresses that
open them (`ui_hint`, what the CLI prints last) are named here too.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

FINAL_CHARS = 4000  # a trace's final SPARQL and answers, and its gold in the assessments
PERCENT_NAMES = frozenset({"f1", "em"})
PERCENT_ENDINGS = ("_f1", "_em", "_rate", "_delta", "_low", "_high")
# the trace tags each question carries; the first three are the Traces tab's columns in the shared view
QUESTION_TAGS = ("variant", "f1", "em", "question_id", "dataset")

SHARED_VIEW = "saga"  # `?viewStateShareKey=saga` opens the runs table with the comparison columns
# `?traceViewShareKey=saga` opens the Traces tab with the input, the output and the tags variant, f1 and em as
# columns (the UI orders tag columns by name; more would push variant off a laptop's screen; the id and dataset
# are a click away: "Expand tag columns"); the UI keeps a saved traces view as an experiment tag
# {name, createdAt, updatedAt, state}
TRACES_VIEW_TAG = f"mlflow.tracesV4ViewState.{SHARED_VIEW}"
TRACES_VIEW_STATE = {
    "single": {"cols": "input,output"},
    "multi": {},
    "customColumns": {f"tag:{key}": True for key in QUESTION_TAGS[:3]},
    # the tags say the same as the assessments; the gold stays in each trace's assessments
    "assessmentColumns": dict.fromkeys(("f1", "em", "expected_answers", "expected_sparql"), False),
}
UI_PORT = 5000  # `mlflow ui`'s default port


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


def ui_hint(uri: str, experiment_id: str) -> str:
    """The MLflow UI's runs table (share-key view: a row per variant with its metrics, in percent as the CLI
    prints them) and Traces tab (a column per question tag) of an experiment; for a local store (sqlite, file) the
    command that serves it on loopback, for a tracking server its own address."""
    if re.match(r"^https?://", uri):
        base = uri.rstrip("/")
        serve = ""
    else:
        base = f"http://127.0.0.1:{UI_PORT}"
        store = uri if re.match(r"^(sqlite|file):", uri) else "<your tracking store>"  # no database password
        serve = f"  serve: mlflow ui --backend-store-uri {store} --port {UI_PORT}\n"
    page = f"{base}/#/experiments/{experiment_id}"
    return (
        f"MLflow UI (scores in percent):\n{serve}"
        f"  runs:   {page}/runs?viewStateShareKey={SHARED_VIEW}\n"
        f"  traces: {page}/traces?traceViewShareKey={SHARED_VIEW}"
    )


__all__ = [
    "FINAL_CHARS",
    "QUESTION_TAGS",
    "SHARED_VIEW",
    "TRACES_VIEW_STATE",
    "TRACES_VIEW_TAG",
    "answer_text",
    "display_value",
    "in_percent",
    "question_tags",
    "shown_metric",
    "ui_hint",
]
