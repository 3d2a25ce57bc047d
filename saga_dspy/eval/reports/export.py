"""`eval export RUN_DIR --format qald`: a run's answers as QALD-JSON, the file format of QALD-10 (and of GERBIL's QA
experiments): `{"dataset": {"id"}, "questions": [{"id", "answertype", "aggregation", "question": [{"language",
"string"}], "query": {"sparql"}, "answers": [SPARQL-JSON]}]}`, one question per predictions line with the final
SPARQL and its result (an empty SELECT result where the run had none).

A query runs as exported on any endpoint (QLever, GERBIL's): the graph's prefixes it uses are declared in it
(query.wikidata.org predeclares them, others do not). Ids are written as the benchmark's source file wrote them
(QALD-10's test ids are numbers, other benchmarks' strings; a run's own --data-file is read for its ids).
`answertype` (QALD's resource / boolean / number / date / string) and `aggregation` (the query counts, sums,
groups or orders) describe the exported query and its answers."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from saga_dspy.eval.files import write_file
from saga_dspy.eval.loading.datasets import BENCHMARKS, read_records
from saga_dspy.eval.reports.runs import Run
from saga_dspy.kg.flavours import flavour_for
from saga_dspy.kg.prefixes import with_prefixes
from saga_dspy.kg.query_text import tokenize
from saga_dspy.kg.results import parse_sparql_json

FORMATS = ("qald",)
EMPTY_RESULT: dict[str, Any] = {"head": {"vars": []}, "results": {"bindings": []}}
ANSWER_TYPES = ("resource", "boolean", "number", "date", "string")  # QALD's answertype values
XSD = "http://www.w3.org/2001/XMLSchema#"
NUMBER_TYPES = frozenset(
    XSD + t
    for t in (
        "integer decimal double float int long short byte nonNegativeInteger positiveInteger "
        "negativeInteger nonPositiveInteger unsignedInt unsignedLong unsignedShort unsignedByte"
    ).split()
)
DATE_TYPES = frozenset(XSD + t for t in ("date", "dateTime", "gYear", "gYearMonth", "time"))
AGGREGATES = frozenset({"COUNT", "SUM", "AVG", "MIN", "MAX", "GROUP_CONCAT", "SAMPLE", "HAVING"})


def _answer(answers: Any) -> dict[str, Any]:
    """A prediction's result as plain SPARQL-JSON (no `capped` flag), else an empty SELECT result."""
    if answers is None:
        return dict(EMPTY_RESULT)
    try:
        result = parse_sparql_json(answers).to_json()
    except (ValueError, TypeError, KeyError, AttributeError):
        return dict(EMPTY_RESULT)
    return {k: v for k, v in result.items() if k != "capped"}


def answer_type(answer: Mapping[str, Any], sparql: str = "") -> str:
    """QALD's answertype of a SPARQL-JSON result: boolean (ASK), resource (IRIs), number, date, else string; an
    empty result by its query (ASK: boolean, a COUNT: number, else resource)."""
    if "boolean" in answer:
        return "boolean"
    cells = [cell for row in answer.get("results", {}).get("bindings", []) for cell in row.values()]
    if not cells:
        names = {tok.upper for tok in tokenize(sparql) if tok.kind == "name"}
        return "boolean" if "ASK" in names else "number" if "COUNT" in names else "resource"
    if all(cell.get("type") == "uri" for cell in cells):
        return "resource"
    datatypes = {cell.get("datatype") for cell in cells if cell.get("type") != "uri"}
    if datatypes <= NUMBER_TYPES:
        return "number"
    if datatypes <= DATE_TYPES:
        return "date"
    return "string"


def aggregation(sparql: str) -> bool:
    """QALD's aggregation flag of a query: it counts, sums, averages, takes a minimum or maximum, groups or
    orders (a superlative) — the words as SPARQL keywords, not inside strings or IRIs."""
    tokens = [tok for tok in tokenize(sparql) if tok.kind == "name"]
    names = [tok.upper for tok in tokens]
    return bool(AGGREGATES & set(names)) or any(a in ("GROUP", "ORDER") and b == "BY" for a, b in zip(names, names[1:]))


def runnable_query(sparql: str, kg: str) -> str:
    """The query with declarations of the graph's prefixes it uses and does not declare."""
    return with_prefixes(sparql, flavour_for(kg).prefixes) if sparql.strip() else sparql


def source_ids(run: Run) -> dict[str, int]:
    """The ids the run's source file writes as JSON numbers: a --data-file's own (read again), else those of a
    bundled benchmark whose official file has numeric ids (its bundled copy keeps them as strings)."""
    data_file = (run.config.get("invocation") or {}).get("data_file")
    if data_file:
        try:
            records = read_records(data_file)
        except (OSError, ValueError):
            return {}
        return {
            str(r["id"]): r["id"]
            for r in records
            if isinstance(r, dict) and isinstance(r.get("id"), int) and not isinstance(r.get("id"), bool)
        }
    info = BENCHMARKS.get(str(run.config.get("dataset")))
    if info is None or str(run.config.get("split")) not in info.numeric_ids:
        return {}
    return {str(line["id"]): int(line["id"]) for line in run.lines if str(line["id"]).isdigit()}


def qald_json(run: Run, dataset_id: str | None = None) -> dict[str, Any]:
    """The run's questions as one QALD-JSON object."""
    kg = str((run.config.get("endpoint") or {}).get("kg") or (run.config.get("settings") or {}).get("kg") or "")
    numeric = source_ids(run)
    questions = []
    for line in run.lines:
        qid = str(line["id"])
        sparql = runnable_query(str(line.get("sparql") or ""), kg)
        answer = _answer(line.get("answers"))
        questions.append(
            {
                "id": numeric.get(qid, qid),
                "answertype": answer_type(answer, sparql),
                "aggregation": aggregation(sparql),
                "question": [{"language": "en", "string": str(line.get("question") or "")}],
                "query": {"sparql": sparql},
                "answers": [answer],
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
