"""Recompute a run's metrics from its predictions, no LM (`python -m saga_dspy.eval rescore RUN_DIR`).

Every figure of a run follows from `predictions.jsonl` (each line keeps the frozen gold result
and the predicted answers) and `config.json` (the question ids, the answerable filter). Rescoring
re-applies the current metric rules, in the run's metric mode or another (`--metric-mode`), and
re-executes a final query only where a line has no answers stored. The result is written to
`metrics.rescored.json` (or `--out`), so the run's own `metrics.json` is compared, not replaced.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from saga_dspy.config import Settings
from saga_dspy.eval.errors import EvalError
from saga_dspy.eval.loading.answerability import subset_record
from saga_dspy.eval.reports.runs import read_metrics
from saga_dspy.eval.running.predictions import PREDICTIONS, PredictionsFile, last_by_id, score_answers
from saga_dspy.eval.running.records import CONFIG, METRICS, write_json
from saga_dspy.eval.scoring.metrics import MetricMode, compute_metrics
from saga_dspy.kg.errors import SparqlError
from saga_dspy.services import KgServices

RESCORED = "metrics.rescored.json"


RUN_FACTS = ("interrupted", "stopped", "warmup_seconds", "phase")


def rescore_line(line: dict[str, Any], mode: MetricMode, answers: Any = None) -> dict[str, Any]:
    """The line with `f1`/`em`/`metric_error` recomputed (answers: re-executed ones, if any)."""
    out = dict(line)
    if answers is not None:
        out["answers"] = answers
    f1, metric_error = score_answers(out.get("answers"), out.get("gold"), mode, out.get("gold_answerable"))
    out.update(f1=f1, em=f1 >= 1.0 - 1e-9, metric_error=metric_error)
    return out


def _execute_missing(lines: list[dict[str, Any]], settings: Any) -> int:
    """Re-execute the final query of each line that has one but no stored answers."""
    missing = [i for i, line in enumerate(lines) if line.get("answers") is None and (line.get("sparql") or "").strip()]
    if not missing:
        return 0
    with KgServices(settings) as services:
        for i in missing:
            try:
                lines[i] = {**lines[i], "answers": services.endpoint.query(lines[i]["sparql"]).to_json()}
            except SparqlError:
                continue  # the query fails today as it did then: no answers, F1 0
    return len(missing)


def rescore(
    run_dir: str | Path, metric_mode: MetricMode | None = None, *, settings: Any = None, out: str | Path | None = None
) -> dict[str, Any]:
    """Recompute the run's metrics from its predictions; writes and returns them."""
    run_dir = Path(run_dir)
    pred_path = run_dir / PREDICTIONS
    if not pred_path.is_file():
        raise FileNotFoundError(f"{run_dir} has no {PREDICTIONS}")
    config = json.loads((run_dir / CONFIG).read_text(encoding="utf-8")) if (run_dir / CONFIG).is_file() else {}
    mode: MetricMode = metric_mode or config.get("metric_mode") or "answers"  # a recorded mode: answer_f1 checks it
    latest = last_by_id(PredictionsFile.read(pred_path))
    ids = config.get("ids") or list(latest)
    lines = [latest[i] for i in ids if i in latest]
    if not lines:
        raise EvalError(f"{pred_path}: no prediction of the run's questions to rescore")
    if settings is None:
        known = {k: v for k, v in (config.get("settings") or {}).items() if k != "api_key"}
        settings = Settings(**{k: v for k, v in known.items() if k in Settings.model_fields})
    executed = _execute_missing(lines, settings)
    lines = [rescore_line(line, mode) for line in lines]
    metrics = compute_metrics(lines, total=len(ids))
    old = read_metrics(run_dir / METRICS)
    for key in RUN_FACTS:  # facts of the run itself, not derivable from its predictions
        if key in old:
            metrics[key] = old[key]
    metrics["subset"] = subset_record(config.get("filter_report"), len(ids))
    metrics["rescored"] = {"metric_mode": mode, "re_executed": executed, "from": PREDICTIONS}
    write_json(Path(out) if out else run_dir / RESCORED, metrics)
    return metrics


__all__ = ["RESCORED", "rescore", "rescore_line"]
