"""What a run's F1 is made of: F1 per answer kind of the gold (boolean, count, entity list, literal), the share
of ASK golds that are `true` (what always answering yes would score), and who chose each final query (the
model's own execution, its extract call, or a query the program ran for it).

Computed from predictions lines alone (gold result, gold SPARQL, final source, trajectory), so `rescore`
gives the same figures for runs written before these existed."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

ANSWER_KINDS = ("boolean", "count", "entity", "literal")
ORIGINS = ("model", "extract", "program", "none")

# Notes of an execute step the program took (agent.episode): the lookup's proposal or best candidate, run at a
# bare stop, at a repeated lookup, or at the episode's end. "from-stop" is not among them: the model wrote that
# query as stop's argument, the program only executed it.
PROGRAM_NOTES = frozenset({"from-suggestion", "from-candidate", "from-repeat"})

_COUNT = re.compile(r"\bCOUNT\s*\(", re.I)
_XSD = "http://www.w3.org/2001/XMLSchema#"
_NUMERIC = {
    _XSD + t
    for t in ("integer", "decimal", "float", "double", "int", "long", "short", "nonNegativeInteger", "positiveInteger")
}
_LABEL_SUFFIXES = ("Label", "label", "Description", "AltLabel")


def answer_kind(gold: Any, gold_sparql: str | None = None) -> str | None:
    """The kind of a gold result (SPARQL-JSON dict): boolean (ASK), count (one number from a COUNT query),
    entity (a list of items: every kept cell an IRI), literal (dates, strings, numbers, mixed); None when
    there is no gold result."""
    if not isinstance(gold, Mapping):
        return None
    if "boolean" in gold and "results" not in gold:
        return "boolean"
    rows = (gold.get("results") or {}).get("bindings") or []
    cells = []
    for row in rows:
        if not isinstance(row, Mapping):
            continue
        values = [(k, v) for k, v in row.items() if isinstance(v, Mapping)]
        has_iri = any(v.get("type") == "uri" for _, v in values)
        cells += [v for k, v in values if not (has_iri and v.get("type") != "uri" and k.endswith(_LABEL_SUFFIXES))]
    if not cells:
        return None
    numeric = len(cells) == 1 and cells[0].get("datatype") in _NUMERIC
    if numeric and _COUNT.search(gold_sparql or ""):
        return "count"
    if all(c.get("type") == "uri" for c in cells):
        return "entity"
    return "literal"


def final_origin(line: Mapping[str, Any]) -> str:
    """Who chose a predictions line's final query: `model` (an execute_sparql step of its own, or the query it
    gave stop), `extract` (its extract call wrote it after the steps ran out), `program` (the lookup's proposal
    or candidate, run by the program), `none` (no final query)."""
    source = str(line.get("final_source") or "")
    final = (line.get("rewritten_from") or line.get("sparql") or "").strip()
    if not source or not final:
        return "none"
    base = source.split("+", 1)[0]
    if base == "candidate":
        return "program"
    if base == "extract":
        return "extract"
    for step in line.get("trajectory") or []:
        if not isinstance(step, Mapping) or step.get("tool_name") != "execute_sparql":
            continue
        args = step.get("tool_args") or {}
        sparql = args.get("sparql") if isinstance(args, Mapping) else None
        if isinstance(sparql, str) and sparql.strip() == final:
            return "program" if step.get("note") in PROGRAM_NOTES else "model"
    return "model"


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def breakdown(lines: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Flat figures over predictions lines: `<kind>_n` / `<kind>_f1` for count, entity and literal golds (the
    boolean ones are `metrics.summarize`'s `boolean_*`), `boolean_true_rate` (share of ASK golds that are true),
    `source_<origin>_rate` for each origin of the final query (shares of all lines)."""
    lines = list(lines)
    f1s: dict[str, list[float]] = {kind: [] for kind in ANSWER_KINDS}
    true_golds = 0
    origins = dict.fromkeys(ORIGINS, 0)
    for line in lines:
        kind = answer_kind(line.get("gold"), line.get("gold_sparql"))
        if kind is not None:
            f1s[kind].append(float(line.get("f1") or 0.0))
        if kind == "boolean":
            true_golds += bool(line["gold"].get("boolean"))
        origins[final_origin(line)] += 1
    out: dict[str, Any] = {}
    for kind in ANSWER_KINDS[1:]:
        out[f"{kind}_n"] = len(f1s[kind])
        out[f"{kind}_f1"] = _mean(f1s[kind])
    out["boolean_true_rate"] = true_golds / len(f1s["boolean"]) if f1s["boolean"] else None
    for origin in ORIGINS:
        out[f"source_{origin}_rate"] = origins[origin] / len(lines) if lines else None
    return out
