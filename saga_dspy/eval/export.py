"""`eval export RUN_DIR --format qald`: a run's answers as QALD-JSON, the file format of QALD-10 (and of GERBIL's QA
experiments): `{"dataset": {"id"}, "questions": [{"id", "question": [{"language", "string"}], "query": {"sparql"},
"answers": [SPARQL-JSON]}]}`, one question per predictions line with the final SPARQL and its result (an empty
SELECT result where the run had none)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from saga_dspy.eval.rundir import write_file
from saga_dspy.eval.runs import Run
from saga_dspy.kg.results import parse_sparql_json

FORMATS = ("qald",)
EMPTY_RESULT: dict[str, Any] = {"head": {"vars": []}, "results": {"bindings": []}}


def _answer(answers: Any) -> dict[str, Any]:
    """A prediction's result as plain SPARQL-JSON (no `capped` flag), else an empty SELECT result."""
    if answers is None:
        return dict(EMPTY_RESULT)
    try:
        result = parse_sparql_json(answers).to_json()
    except (ValueError, TypeError, KeyError, AttributeError):
        return dict(EMPTY_RESULT)
    return {k: v for k, v in result.items() if k != "capped"}


def qald_json(run: Run, dataset_id: str | None = None) -> dict[str, Any]:
    """The run's questions as one QALD-JSON object; ids that are numbers are written as numbers (as QALD-10's)."""
    questions = []
    for line in run.lines:
        qid = str(line["id"])
        questions.append(
            {
                "id": int(qid) if qid.isdigit() else qid,
                "question": [{"language": "en", "string": str(line.get("question") or "")}],
                "query": {"sparql": str(line.get("sparql") or "")},
                "answers": [_answer(line.get("answers"))],
            }
        )
    default_id = f"{run.config.get('dataset', 'saga')}-{run.config.get('split', 'run')}-{run.variant}"
    return {"dataset": {"id": dataset_id or default_id}, "questions": questions}


def export_run(run: Run, fmt: str, out: str | Path | None = None, dataset_id: str | None = None) -> Path:
    """Write the run in `fmt` to `out` (default: `<run dir>/qald.json`); returns the path written."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown export format {fmt!r} (one of {', '.join(FORMATS)})")
    path = Path(out) if out is not None else run.path / f"{fmt}.json"
    return write_file(path, json.dumps(qald_json(run, dataset_id), ensure_ascii=False, indent=1) + "\n")
