"""The headroom of a model choosing among the shown candidates, without an LLM (part of `stats components`): per
answerable question, the answers F1 of each candidate the lookup would show (`saga_dspy.proposer`), ranked; top-1
and oracle@K (the best of the first K), once from the lookup of the gold entity and once from the lookup of the
search tool's first hit for the question's mention of it (so linking errors count)."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, replace
from typing import Any, TextIO

from saga_dspy.config import Settings
from saga_dspy.eval.scoring.metrics import answer_f1
from saga_dspy.eval.stats.entity_linking import mention_of
from saga_dspy.grounding.context import QuestionContext
from saga_dspy.kg.endpoint import Endpoint
from saga_dspy.kg.errors import SparqlError
from saga_dspy.kg.search import Search
from saga_dspy.schema import ClassHierarchy, SchemaIndex
from saga_dspy.tools.lookup import do_lookup

ORACLE_KS = (1, 3, 5)  # oracle@K: the best of the first K candidates a lookup shows
SIDES = {"gold": "gold entity", "search": "first search hit"}


@dataclass(frozen=True)
class LookupServices:
    """What a measured lookup runs against: the settings and the graph's services (no search: linking is not
    measured, and the search side finds nothing)."""

    settings: Settings
    endpoint: Endpoint
    search: Search | None
    schema: SchemaIndex
    hierarchy: ClassHierarchy

    def context(self, question: str, at: Any) -> QuestionContext:
        """A measured lookup's context: `full`, with the rule answer type `at` (`components.rule_answer_type`)."""
        answer_type = (at[0], at[1], at[3]) if at and at[2] else None
        return QuestionContext(
            self.settings,
            self.endpoint,
            self.search,
            self.schema,
            self.hierarchy,
            question=question,
            variant="full",
            answer_type=answer_type,
        )


class CandidateOracle:
    """The candidates' F1s of each question, from both sides; `names`: entity → label and aliases (its mention)."""

    def __init__(self, services: LookupServices):
        settings = services.settings.model_copy(update={"shown_candidates": ORACLE_KS[-1]})
        self.services = replace(services, settings=settings)
        self.names: dict[str, list[str]] = {}
        self.f1s: dict[str, list[list[float]]] = {side: [] for side in SIDES}  # each question's candidates' F1s
        self.hit_is_gold = 0

    def add(self, eid: str, rec: dict[str, Any], at) -> None:
        """A question whose first gold subject is `eid`; `at`: the rule answer type (`components.rule_answer_type`)."""
        question = rec.get("question") or ""
        self.f1s["gold"].append(self._candidate_f1s(eid, question, at, rec))
        mention = mention_of(question, self.names.get(eid, []))
        try:
            search = self.services.search
            hits = search.search(mention, limit=1, kind="item") if search is not None else []
        except Exception:  # noqa: BLE001 - a failing search is a miss, the measurement goes on
            hits = []
        self.f1s["search"].append(self._candidate_f1s(hits[0].id, question, at, rec) if hits else [])
        self.hit_is_gold += bool(hits) and hits[0].id == eid

    def _candidate_f1s(self, eid: str, question: str, at, rec: dict[str, Any]) -> list[float]:
        """The answers F1 of each candidate a lookup of `eid` shows, in rank order."""
        out = []
        for candidate in do_lookup(self.services.context(question, at), eid).shown:
            try:
                out.append(answer_f1(self.services.endpoint.query(candidate.sparql), rec["gold"]))
            except SparqlError:
                out.append(0.0)
        return out

    def report(self) -> dict[str, Any]:
        def mean(values: list[float]) -> float | None:
            return round(statistics.fmean(values), 3) if values else None

        out: dict[str, Any] = {
            "answerable_questions": len(self.f1s["gold"]),
            "search_first_hit_is_gold": self.hit_is_gold,
        }
        for side, per_question in self.f1s.items():
            out[f"{side}_top1_mean_f1"] = mean([f1s[0] if f1s else 0.0 for f1s in per_question])
            for k in ORACLE_KS:
                out[f"{side}_oracle_at_{k}_mean_f1"] = mean([max(f1s[:k], default=0.0) for f1s in per_question])
        return out


def print_oracle(report: dict[str, Any] | None, out: TextIO | None) -> None:
    if not report:
        return
    for side, what in SIDES.items():
        ks = " ".join(f"@{k} {report.get(f'{side}_oracle_at_{k}_mean_f1')}" for k in ORACLE_KS)
        print(
            f"candidates from the {what}: top-1 F1 {report.get(f'{side}_top1_mean_f1')}, oracle {ks} over "
            f"{report['answerable_questions']} answerable",
            file=out,
        )


__all__ = ["ORACLE_KS", "CandidateOracle", "LookupServices", "print_oracle"]
