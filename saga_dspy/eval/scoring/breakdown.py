"""What a run's F1 is made of: F1 per answer kind of the gold (boolean, count, entity list, literal), the share
of ASK golds that are `true` (what always answering yes would score), and who wrote each final query
(`agent.authorship`: the model, a shown candidate the model executed, its extract call, or the program).

Computed from predictions lines alone (gold result, gold SPARQL, final author, or for older runs final source and
trajectory), so `rescore` gives the same figures for runs written before these existed."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from saga_dspy.agent.authorship import AUTHORS, author_of_line

ANSWER_KINDS = ("boolean", "count", "entity", "literal")
ORIGINS = AUTHORS  # who wrote a final query (agent.authorship)

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
    """Who wrote a predictions line's final query: its author's kind (`agent.authorship.AUTHORS`)."""
    return author_of_line(line).kind


def rate_key(author: str) -> str:
    """The summary key of an author's share: `author_model_candidate_rate`."""
    return f"author_{author.replace('-', '_')}_rate"


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def breakdown(lines: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Flat figures over predictions lines: `<kind>_n` / `<kind>_f1` for count, entity and literal golds (the
    boolean ones are `metrics.summarize`'s `boolean_*`), `boolean_true_rate` (share of ASK golds that are true),
    `author_<author>_rate` for each author of the final query (shares of all lines; `rate_key`),
    `author_edited_rate` (a shown candidate the model edited), `final_rewritten_rate`, `final_repaired_rate`."""
    lines = list(lines)
    f1s: dict[str, list[float]] = {kind: [] for kind in ANSWER_KINDS}
    true_golds = 0
    origins = dict.fromkeys(ORIGINS, 0)
    edited = rewritten = repaired = 0
    for line in lines:
        kind = answer_kind(line.get("gold"), line.get("gold_sparql"))
        if kind is not None:
            f1s[kind].append(float(line.get("f1") or 0.0))
        if kind == "boolean":
            true_golds += bool(line["gold"].get("boolean"))
        author = author_of_line(line)
        origins[author.kind] += 1
        edited += author.edited
        rewritten += author.rewritten
        repaired += author.repaired
    out: dict[str, Any] = {}
    for kind in ANSWER_KINDS[1:]:
        out[f"{kind}_n"] = len(f1s[kind])
        out[f"{kind}_f1"] = _mean(f1s[kind])
    out["boolean_true_rate"] = true_golds / len(f1s["boolean"]) if f1s["boolean"] else None
    for origin in ORIGINS:
        out[rate_key(origin)] = origins[origin] / len(lines) if lines else None
    flags = {"author_edited_rate": edited, "final_rewritten_rate": rewritten, "final_repaired_rate": repaired}
    for key, n in flags.items():
        out[key] = n / len(lines) if lines else None
    return out
