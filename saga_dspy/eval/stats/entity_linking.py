"""Entity linking measured without an LLM: for each gold entity constant with a label, the rank of the search
tool's item hits for the question's own mention of it (the n-gram, 1-6 words, that best matches its label or
aliases; the whole question when none overlaps). Part of `stats components`; `benchmarks/bench_linking.py`."""

from __future__ import annotations

import re
from typing import Any

from saga_dspy.eval.stats.gold_pairs import GoldQuery
from saga_dspy.kg.endpoint import Endpoint
from saga_dspy.kg.results import SelectResult
from saga_dspy.kg.search import Search

SEARCH_HITS = 8
MAX_NGRAM = 6
_WORD = re.compile(r"\w+")
_LABELS_QUERY = """SELECT ?e ?k ?v WHERE {{
  VALUES ?e {{ {values} }}
  {{ ?e rdfs:label ?v BIND("l" AS ?k) }} UNION {{ ?e skos:altLabel ?v BIND("a" AS ?k) }}
  FILTER(LANG(?v) = "en")
}}"""


def percent(a: int | float, b: int | float) -> float | None:
    """a / b in percent, one decimal; None for an empty base."""
    return round(100.0 * a / b, 1) if b else None


def entity_names(endpoint: Endpoint, ids: list[str], batch: int = 200) -> dict[str, list[str]]:
    """id → [label, aliases…] (English) from the endpoint."""
    out: dict[str, list[str]] = {}
    for start in range(0, len(ids), batch):
        chunk = ids[start : start + batch]
        values = " ".join(f"wd:{i}" for i in chunk)
        result = endpoint.query(_LABELS_QUERY.format(values=values))
        if not isinstance(result, SelectResult):
            continue
        rows = sorted(result.rows, key=lambda r: r["k"].value != "l")  # labels first
        for row in rows:
            eid = row["e"].value.rsplit("/", 1)[-1]
            names = out.setdefault(eid, [])
            if row["v"].value not in names:
                names.append(row["v"].value)
    return out


def mention_of(question: str, names: list[str]) -> str:
    """The question n-gram that best matches one of the names (token-set F1), else the whole question."""
    words = _WORD.findall(question)
    lower = [w.lower() for w in words]
    best, best_score = question, 0.0
    name_sets = [set(_WORD.findall(n.lower())) for n in names if n]
    for n in range(1, min(MAX_NGRAM, len(words)) + 1):
        for i in range(len(words) - n + 1):
            gram = set(lower[i : i + n])
            for ns in name_sets:
                if not ns:
                    continue
                common = len(gram & ns)
                if not common:
                    continue
                score = 2 * common / (len(gram) + len(ns))
                if score > best_score + 1e-9:
                    best, best_score = " ".join(words[i : i + n]), score
    return best


def entity_linking(
    queries: list[GoldQuery],
    by_id: dict[str, dict],
    names: dict[str, list[str]],
    search: Search | None,
    misses: int = 0,
) -> dict[str, Any]:
    """Recall@1 / @8 of the search tool for each named gold entity, searched by its mention in the question; with
    `misses`, up to that many lines naming a gold entity the first hit is not (mention, rank, top hit)."""
    total = at1 = at8 = whole = 0
    missed: list[str] = []
    for q in queries:
        question = by_id[q.qid].get("question") or ""
        for eid in q.entities:
            if eid not in names:
                continue
            total += 1
            mention = mention_of(question, names[eid])
            whole += mention == question
            try:
                hits = search.search(mention, limit=SEARCH_HITS, kind="item") if search is not None else []
            except Exception:  # noqa: BLE001 - a failing search is a miss, the measurement goes on
                hits = []
            ids = [h.id for h in hits]
            at1 += ids[:1] == [eid]
            at8 += eid in ids[:SEARCH_HITS]
            if ids[:1] != [eid] and len(missed) < misses:
                rank = ids.index(eid) + 1 if eid in ids else None
                top = f"{hits[0].id} {hits[0].label!r}" if hits else "-"
                missed.append(f"{mention!r}: gold {eid} {names[eid][0]!r} rank {rank}; top {top}")
    out: dict[str, Any] = {
        "entities": total,
        "recall_at_1_pct": percent(at1, total),
        "recall_at_8_pct": percent(at8, total),
        "mention_is_whole_question": whole,
    }
    if misses:
        out["misses"] = missed
    return out
