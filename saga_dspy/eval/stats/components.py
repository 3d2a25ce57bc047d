"""LLM-free component metrics over whole splits (`stats components`).

    python -m saga_dspy.stats components --dataset qald10 --split dev|train|test [--limit N] [--json]

What is measured, per question of the split (the gold SPARQL gives the gold entities and the
gold (subject entity, property) pairs; see `eval.stats.gold_pairs`):

- entity linking: for each gold entity constant with a label, its rank in the search tool's
  item hits (`search_wikidata`: 8 hits) for the question's own mention of it — the question
  n-gram (1–6 words) that best matches the entity's label or aliases (token-set overlap), or the
  whole question when none overlaps. recall@1 / recall@8 over those entities.
- property ranking: for each gold pair whose entity the endpoint knows, the gold property's
  position among the properties of the lookup observation (`get_wikidata_entry`) the agent would
  see for that question, with the answer type the program can predict without an LLM (`--answer-type
  rules`: `agent.answer_cues`; `none`: only yes/no questions get `boolean`, the program's fallback).
  recall@1 / @3 / @10 over pairs whose property is in the entity's neighbourhood (what a lookup can
  show) and over all pairs. `misled`: questions whose first gold subject's lookup stars or proposes
  first a property that is not one of the query's gold properties.
- incoming ranking: for each gold (property, object entity) pair — the entity is the value, as in
  `?film wdt:P161 wd:Q219512` — the gold property's position in the lookup's incoming section,
  recall@1 / @3; and, for the questions whose gold query has only such pairs (asked from the
  object's side), the answers F1 of the query the lookup of the first such entity proposes.
- the proposed query: answers F1 (eval.scoring.metrics.answer_f1) against the frozen gold result of the query the
  lookup of the question's first gold subject proposes (0 when it proposes none); over answerable questions.
- the candidate query: the same F1 for the query the program runs when the model ends without executing
  anything (the proposal, else the lookup's best candidate), over the subject- and object-side questions together.
- candidate oracle: for the same questions, the answers F1 of the top-1 candidate and oracle@K (K = 1, 3, 5: the
  best of the first K ranked candidates the lookup would show, `saga_dspy.proposer`), once from the lookup of the
  gold entity and once from the lookup of the search tool's first hit for the question's mention of it (so linking
  errors count); the headroom a model choosing among the shown candidates has.
- observation size: tokens per lookup observation, median / p95. Tokens are approximated without a
  tokenizer download: word pieces (`\\w+`) × 1.3 + one per punctuation mark (close to cl100k on
  English prose with ids; offline, so tiktoken's encodings are not fetched).
- answer type: the rule-based (or fallback) answer type against the gold result's kind —
  boolean (ASK), quantity (numeric literal or COUNT), date (xsd date/time literal), string (other
  literal), entity (IRIs). Accuracy over answerable questions; a predicted class counts as entity.
  Class accuracy: for entity answers with a predicted class, the share where the class is a type, a
  P279 ancestor or a direct subclass of a type of one of the first five gold entities.
- a train split leaves out the twins of any test question of its graph's benchmarks (`test_twins_left_out`): what
  is read there to make a choice is then no test question (QALD-10 train holds most of QALD-7 test).
- beside these, the `stats components` command adds `stats grounding`'s filter figures per filter mode
  (false conflicts on gold pairs, wrong-entity detection).
"""

from __future__ import annotations

import json
import re
import statistics
import sys
import time
from collections import Counter
from collections.abc import Sequence
from typing import Any, TextIO

from saga_dspy.agent.answer_cues import items_class
from saga_dspy.agent.answer_cues import rule_answer_type as cue_answer_type
from saga_dspy.agent.answer_type import AnswerTypeInfo
from saga_dspy.agent.query_form import decide_query_form, is_yes_no_question, to_form
from saga_dspy.config import Settings
from saga_dspy.eval.loading.datasets import load_benchmark
from saga_dspy.eval.loading.splits import without_test_twins
from saga_dspy.eval.scoring.metrics import answer_f1
from saga_dspy.eval.stats.candidate_oracle import CandidateOracle, LookupServices, print_oracle
from saga_dspy.eval.stats.entity_linking import entity_linking, entity_names, percent
from saga_dspy.eval.stats.gold_pairs import GoldQuery, gold_queries
from saga_dspy.grounding.incoming import incoming_order
from saga_dspy.grounding.lexicon import Lexicon, load_lexicon
from saga_dspy.grounding.neighbourhood import fetch_neighbourhood
from saga_dspy.kg.endpoint import Endpoint
from saga_dspy.kg.errors import SparqlError
from saga_dspy.kg.flavours import flavour_for
from saga_dspy.kg.search import Search
from saga_dspy.schema import ClassHierarchy, SchemaIndex, entity_types_many
from saga_dspy.services import KgServices
from saga_dspy.tools.lookup import do_lookup
from saga_dspy.tools.results import LookupResult

_WORD = re.compile(r"\w+")
_PUNCT = re.compile(r"[^\w\s]")
_PID_REF = re.compile(r"\((P[1-9]\d*)\)")
DATE_TYPES = ("dateTime", "date", "gYear", "gYearMonth")
NUMBER_TYPES = ("decimal", "integer", "double", "float", "int", "long", "nonNegativeInteger")


def approx_tokens(text: str) -> int:
    """Token count approximation (documented in the module docstring)."""
    return round(len(_WORD.findall(text)) * 1.3 + len(_PUNCT.findall(text)))


def _p95(values: list[int]) -> int | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(0.95 * (len(ordered) - 1))))]


# --- gold result kinds ------------------------------------------------------------------------------------------


def gold_kind(gold_text: str | None, sparql: str) -> tuple[str | None, list[str]]:
    """('boolean'|'quantity'|'date'|'string'|'entity', first entity ids) of a frozen gold result."""
    if not gold_text:
        return None, []
    obj = json.loads(gold_text) if isinstance(gold_text, str) else gold_text
    if "boolean" in obj:
        return "boolean", []
    if re.search(r"\bCOUNT\s*\(", sparql or "", re.I):
        return "quantity", []
    bindings = obj.get("results", {}).get("bindings", [])
    variables = [v for v in obj.get("head", {}).get("vars", []) if not v.lower().endswith("label")]
    kinds: Counter = Counter()
    entities: list[str] = []
    for row in bindings[:50]:
        for var in variables[:1] or list(row)[:1]:
            b = row.get(var)
            if not b:
                continue
            if b["type"] == "uri":
                kinds["entity"] += 1
                eid = b["value"].rsplit("/", 1)[-1]
                if eid.startswith("Q") and len(entities) < 5:
                    entities.append(eid)
            else:
                dt = (b.get("datatype") or "").rsplit("#", 1)[-1]
                kinds["date" if dt in DATE_TYPES else "quantity" if dt in NUMBER_TYPES else "string"] += 1
    if not kinds:
        return None, []
    return kinds.most_common(1)[0][0], entities


def predicted_kind(label: str) -> str:
    if label in ("boolean", "quantity", "date", "string"):
        return label
    return "entity" if label else "unknown"


# --- the lookup observation ------------------------------------------------------------------------------------


def observed_order(observation: str) -> list[str]:
    """The properties of a lookup observation in the order it shows them (full blocks, then the compact rest)."""
    order: list[str] = []
    listing = False
    for line in observation.splitlines():
        if line.startswith("Outgoing properties"):
            listing = True
            continue
        if not listing:
            continue
        if line.startswith("- "):
            m = _PID_REF.search(line)
            if m and m.group(1) not in order:
                order.append(m.group(1))
        elif line.startswith(("Other properties", "More properties")):
            for pid in _PID_REF.findall(line):
                if pid not in order:
                    order.append(pid)
    return order


def _first_hint(found: LookupResult, observation: str) -> str | None:
    """The property the lookup puts forward: its proposed query's property, else the first starred one."""
    sparql = found.proposal
    if sparql:
        m = re.search(r"wdt:(P\d+)", sparql)
        if m:
            return m.group(1)
    for line in observation.splitlines():
        if line.startswith("- ") and "★" in line:
            m = _PID_REF.search(line)
            if m:
                return m.group(1)
    return None


def rule_answer_type(
    question: str, mode: str, schema: SchemaIndex | None = None, lexicon: Lexicon | None = None
) -> tuple[str, str, bool, str] | None:
    """(label, qid, confident, items) the program can know without an LLM. `none`: only the yes/no fallback."""
    if mode == "rules":
        cue = cue_answer_type(question, schema, lexicon)
        return cue.label, cue.qid, cue.confident, items_class(question, schema, lexicon)
    return ("boolean", "", True, "") if is_yes_no_question(question) else None


def _kind_label(rec: dict[str, Any], kind: str | None) -> str:
    """The gold's answer kind, a boolean split by its value (an ASK of any non-empty pattern answers true)."""
    if kind != "boolean":
        return kind or "unknown"
    gold = json.loads(rec["gold"]) if isinstance(rec["gold"], str) else rec["gold"]
    return "boolean-true" if gold.get("boolean") else "boolean-false"


def _form(question: str, at, lexicon: Lexicon | None) -> str:
    """The query form the program decides for the question from the LLM-free answer type."""
    info = AnswerTypeInfo.from_raw(at[0], at[1]) if at else None
    return decide_query_form(info, question, lexicon)


# --- the report ----------------------------------------------------------------------------------------------------


def measured_records(
    settings: Settings, dataset: str, split: str, limit: int | None = None, ids: Sequence[str] | None = None
) -> tuple[list[dict[str, Any]], str, int]:
    """The questions an LLM-free figure is measured on: the split without its test twins, only `ids` where
    given, the first `limit`; with the split's resolved name and how many twins were left out."""
    records = [dict(r) for r in load_benchmark(dataset, split, settings)]
    resolved = records[0]["split"] if records else split
    records, twins = without_test_twins(records, dataset, resolved, settings)
    if ids is not None:
        wanted = {str(i) for i in ids}
        records = [r for r in records if str(r.get("id")) in wanted]
    return (records[:limit] if limit else records), resolved, twins


def component_stats(
    settings: Settings,
    dataset: str,
    split: str,
    *,
    endpoint: Endpoint | None = None,
    search: Search | None = None,
    schema: SchemaIndex | None = None,
    hierarchy: ClassHierarchy | None = None,
    limit: int | None = None,
    answer_type: str = "rules",
    ids: Sequence[str] | None = None,
    log=None,
) -> dict[str, Any]:
    """The component figures of one split (the module docstring says what each one is); `ids`: only these
    questions of it."""
    log = log or (lambda msg: None)
    started = time.monotonic()
    with KgServices(settings, endpoint, search, schema, hierarchy) as kg:
        endpoint, schema, hierarchy = kg.endpoint, kg.schema, kg.hierarchy
        if search is None:
            try:
                search = kg.search
            except Exception:  # noqa: BLE001 - no label index for this endpoint: entity linking is not measured
                search = None
        flavour = flavour_for(settings.kg)
        lexicon = load_lexicon(settings)
        records, resolved, twins = measured_records(settings, dataset, split, limit, ids)
        queries, unparsable = gold_queries(records, flavour)
        by_id = {str(r.get("id")): r for r in records}
        all_entities = list(dict.fromkeys(e for q in queries for e in q.entities))
        names = entity_names(endpoint, all_entities)
        log(f"{dataset}/{resolved}: {len(records)} questions, {len(all_entities)} entity constants")
        linking = entity_linking(queries, by_id, names, search)
        tally = _Tally(LookupServices(settings, endpoint, search, schema, hierarchy), flavour)
        tally.oracle.names = names
        for n, q in enumerate(queries):
            rec = by_id[q.qid]
            at = rule_answer_type(rec.get("question") or "", answer_type, schema, lexicon)
            kind, gold_entities = gold_kind(rec.get("gold"), rec.get("sparql") or "")
            tally.answer_type(rec, at, kind, gold_entities)
            tally.lookups(q, rec, at, _form(rec.get("question") or "", at, lexicon), _kind_label(rec, kind))
            if n and n % 100 == 0:
                log(f"  {n}/{len(queries)} questions")
    return {
        "dataset": dataset,
        "split": resolved,
        "questions": len(records),
        "test_twins_left_out": twins,
        "unparsable_gold": unparsable,
        "answer_type_source": answer_type,
        "entity_linking": linking,
        **tally.report(),
        "seconds": round(time.monotonic() - started, 1),
    }


class _Tally:
    """The running figures of `component_stats` over a split's questions: answer type, the lookups of the
    gold subjects (rank of each gold property, the observation's size), the first hint and the proposal."""

    def __init__(self, services: LookupServices, flavour):
        self.services, self.flavour = services, flavour
        self.endpoint, self.hierarchy = services.endpoint, services.hierarchy
        self.ranks: list[int | None] = []
        self.ranks_in_nb: list[int | None] = []
        self.tokens: list[int] = []
        self.misled = self.hinted = self.questions_with_pairs = 0
        self.f1s: list[float] = []
        self.proposals = 0
        self.incoming_ranks: list[int | None] = []
        self.incoming_f1s: list[float] = []
        self.incoming_proposals = 0
        self.candidate_f1s: list[float] = []  # the program's fallback query (proposal or best candidate), both sides
        self.candidates = self.rewritten = 0
        self.returned_f1s: list[float] = []  # the same, rewritten to the question's form as the program returns it
        self.candidate_by_kind: dict[str, list[tuple[float, float]]] = {}  # gold kind -> (as run, returned)
        self.per_question: list[dict[str, Any]] = []  # each candidate with its F1s, to see which questions fail
        self.at_total = self.at_ok = self.cls_total = self.cls_ok = 0
        self.at_confusion: Counter = Counter()
        self.examples: list[dict[str, Any]] = []
        self.edges: dict[str, set[str]] = {}  # entity → its outgoing properties (what a lookup can show)
        self.oracle = CandidateOracle(services)

    def answer_type(self, rec: dict[str, Any], at, kind: str | None, gold_entities: list[str]) -> None:
        """`kind`, `gold_entities`: `gold_kind` of the question's gold."""
        if kind is None or not rec.get("answerable"):
            return
        self.at_total += 1
        pk = predicted_kind(at[0] if at else "")
        self.at_confusion[f"{kind}->{pk}"] += 1
        self.at_ok += pk == kind
        if kind == "entity" and at and at[1] and gold_entities:
            self.cls_total += 1
            self.cls_ok += _class_fits(self.endpoint, self.hierarchy, at[1], gold_entities)

    def _lookup(self, eid: str, question: str, at) -> tuple[str, list[str], LookupResult | None]:
        found = do_lookup(self.services.context(question, at), eid)
        obs = found.text
        if obs.startswith(("[NOT FOUND]", "[ERROR]")):
            return obs, [], None
        self.tokens.append(approx_tokens(obs))
        self.edges[eid] = set(fetch_neighbourhood(self.endpoint, self.flavour, eid, qualifiers=False).edges)
        return obs, observed_order(obs), found

    def lookups(self, q: GoldQuery, rec: dict[str, Any], at, form: str, kind: str) -> None:
        """`form`: the query form the program would hold the question to (its final query is rewritten to it);
        `kind`: the gold's answer kind (`_kind_label`)."""
        question = rec.get("question") or ""
        seen: dict[str, tuple[str, list[str], LookupResult | None]] = {}
        for eid, pid in q.incoming:
            if eid not in seen:
                seen[eid] = self._lookup(eid, question, at)
            obs, _, found = seen[eid]
            if found is not None:
                order = incoming_order(obs)
                self.incoming_ranks.append(order.index(pid) + 1 if pid in order else None)
        if not q.pairs:
            if q.incoming and rec.get("answerable") and rec.get("gold"):
                obs, _, found = seen[q.incoming[0][0]]
                if found is not None:
                    self.incoming_f1s.append(self._proposal_f1(found, rec, incoming=True))
                    self._candidate(found, rec, form, kind)
                    self.oracle.add(q.incoming[0][0], rec, at)
            return
        for eid, pid in q.pairs:
            if eid not in seen:
                seen[eid] = self._lookup(eid, question, at)
            obs, order, found = seen[eid]
            if found is None:
                continue
            rank = order.index(pid) + 1 if pid in order else None
            self.ranks.append(rank)
            if pid in self.edges.get(eid, ()):
                self.ranks_in_nb.append(rank)
            if (rank is None or rank > 3) and len(self.examples) < 15:
                self.examples.append(
                    {
                        "id": q.qid,
                        "question": question,
                        "entity": eid,
                        "property": pid,
                        "rank": rank,
                        "first": order[:3],
                    }
                )
        obs, order, found = seen.get(q.pairs[0][0], ("", [], None))
        if found is not None:
            self._first_subject(found, obs, {p for _, p in q.pairs + q.incoming}, rec, form, kind)
            if rec.get("answerable") and rec.get("gold"):
                self.oracle.add(q.pairs[0][0], rec, at)

    def _first_subject(
        self, found: LookupResult, obs: str, gold_props: set[str], rec: dict[str, Any], form: str, kind: str
    ) -> None:
        """The first gold subject's lookup: is its first hint gold, and how good is the query it proposes?"""
        self.questions_with_pairs += 1
        first = _first_hint(found, obs)
        if first is not None:
            self.hinted += 1
            self.misled += first not in gold_props
        if rec.get("answerable") and rec.get("gold"):
            self.f1s.append(self._proposal_f1(found, rec))
            self._candidate(found, rec, form, kind)

    def _proposal_f1(self, found: LookupResult, rec: dict[str, Any], incoming: bool = False) -> float:
        """Answers F1 of the lookup's proposed query against the frozen gold (0 without a proposal)."""
        if not found.proposal:
            return 0.0
        if incoming:
            self.incoming_proposals += 1
        else:
            self.proposals += 1
        return self._query_f1(found.proposal, rec)

    def _candidate(self, found: LookupResult, rec: dict[str, Any], form: str, kind: str) -> None:
        """Answers F1 of the query the program runs when the model ends without executing anything (the lookup's
        proposal, else its best candidate; 0 without one): as run, and as the program returns it (rewritten to the
        question's form, `form_rewrite`)."""
        raw = as_run = 0.0
        if found.candidate:
            self.candidates += 1
            result = self._run(found.candidate)
            if result is not None:
                raw = as_run = answer_f1(result, rec["gold"])
                rewritten = to_form(form, found.candidate, result)
                if rewritten is not None:
                    self.rewritten += 1
                    as_run = self._query_f1(rewritten, rec)
        self.candidate_f1s.append(raw)
        self.returned_f1s.append(as_run)
        self.candidate_by_kind.setdefault(kind, []).append((raw, as_run))
        self.per_question.append(
            {"id": rec.get("id"), "kind": kind, "candidate": found.candidate, "f1": raw, "returned_f1": as_run}
        )

    def _run(self, sparql: str):
        """The query's result; None where it fails (it scores 0)."""
        try:
            return self.endpoint.query(sparql)
        except SparqlError:
            return None

    def _query_f1(self, sparql: str, rec: dict[str, Any]) -> float:
        result = self._run(sparql)
        return 0.0 if result is None else answer_f1(result, rec["gold"])

    def report(self) -> dict[str, Any]:
        def recall(rs: list[int | None], k: int) -> float | None:
            return percent(sum(1 for r in rs if r is not None and r <= k), len(rs))

        return {
            "property_ranking": {
                "gold_pairs_known_entity": len(self.ranks),
                "gold_pairs_in_neighbourhood": len(self.ranks_in_nb),
                **{f"recall_at_{k}_in_neighbourhood_pct": recall(self.ranks_in_nb, k) for k in (1, 3, 10)},
                **{f"recall_at_{k}_all_pairs_pct": recall(self.ranks, k) for k in (1, 3, 10)},
                "questions": self.questions_with_pairs,
                "questions_hinted": self.hinted,
                "non_gold_starred_or_proposed_first": self.misled,
                "non_gold_first_pct": percent(self.misled, self.questions_with_pairs),
            },
            "proposed_query": {
                "answerable_questions": len(self.f1s),
                "proposals": self.proposals,
                "mean_f1": round(statistics.fmean(self.f1s), 3) if self.f1s else None,
            },
            "incoming": {
                "gold_pairs": len(self.incoming_ranks),
                **{f"recall_at_{k}_pct": recall(self.incoming_ranks, k) for k in (1, 3)},
                "object_side_answerable_questions": len(self.incoming_f1s),
                "proposals": self.incoming_proposals,
                "proposal_mean_f1": round(statistics.fmean(self.incoming_f1s), 3) if self.incoming_f1s else None,
            },
            "candidate_query": self._candidate_report(),
            "candidate_oracle": self.oracle.report(),
            "observation_tokens": {
                "lookups": len(self.tokens),
                "median": int(statistics.median(self.tokens)) if self.tokens else None,
                "p95": _p95(self.tokens),
                "tokenizer": "approx: words*1.3 + punctuation",
            },
            "answer_type": {
                "questions": self.at_total,
                "accuracy_pct": percent(self.at_ok, self.at_total),
                "class_checked": self.cls_total,
                "class_accuracy_pct": percent(self.cls_ok, self.cls_total),
                "confusion": dict(self.at_confusion.most_common()),
            },
            "worst_ranked_examples": self.examples,
            "candidate_per_question": self.per_question,
        }

    def _candidate_report(self) -> dict[str, Any]:
        """The query the program runs when the model ends without executing anything, over both sides."""
        return {
            "answerable_questions": len(self.candidate_f1s),
            "candidates": self.candidates,
            "mean_f1": round(statistics.fmean(self.candidate_f1s), 3) if self.candidate_f1s else None,
            # as the program returns it: rewritten to the question's form (ASK / COUNT) where it has another
            "returned_mean_f1": round(statistics.fmean(self.returned_f1s), 3) if self.returned_f1s else None,
            "rewritten_to_form": self.rewritten,
            # per gold answer kind (a boolean gold split by its value: an ASK of any non-empty pattern is true)
            "by_kind": {
                kind: {
                    "n": len(pairs),
                    "mean_f1": round(statistics.fmean(p[0] for p in pairs), 3),
                    "returned_mean_f1": round(statistics.fmean(p[1] for p in pairs), 3),
                }
                for kind, pairs in sorted(self.candidate_by_kind.items())
            },
            # the same questions with the proposals alone (0 where the lookup proposes nothing)
            "proposals_only_mean_f1": round(statistics.fmean(both), 3)
            if (both := self.f1s + self.incoming_f1s)
            else None,
        }


def _class_fits(endpoint: Endpoint, hierarchy: ClassHierarchy, qid: str, entities: list[str]) -> bool:
    """Is the predicted class a type, a P279 ancestor or a direct subclass of a type of one of the entities?"""
    try:
        types = entity_types_many(endpoint, entities)
    except SparqlError:  # the entities' types are unavailable: the class cannot be confirmed
        return False
    for et in types.values():
        for t in et.types:
            if t == qid or qid in hierarchy.ancestors(t) or t in hierarchy.parents(qid):
                return True
    return False


def _print_candidates(report: dict[str, Any], out: TextIO) -> None:
    """The object side's proposals, the candidate query and the candidate oracle (where the report has them)."""
    inc = report.get("incoming")
    if inc:
        print(
            f"incoming ({inc['gold_pairs']} gold pairs): R@1 {inc['recall_at_1_pct']}% R@3 {inc['recall_at_3_pct']}%; "
            f"object-side questions: proposal mean F1 {inc['proposal_mean_f1']} over "
            f"{inc['object_side_answerable_questions']} answerable ({inc['proposals']} proposals)",
            file=out,
        )
    cq = report.get("candidate_query")
    if cq:
        print(
            f"candidate query (run when the model ends without a query): mean F1 {cq['mean_f1']} over "
            f"{cq['answerable_questions']} answerable, both sides ({cq['candidates']} candidates; proposals alone "
            f"{cq.get('proposals_only_mean_f1')}); as returned, in the question's form: {cq.get('returned_mean_f1')} "
            f"({cq.get('rewritten_to_form')} rewritten)",
            file=out,
        )
    print_oracle(report.get("candidate_oracle"), out)


def print_components(report: dict[str, Any], out: TextIO | None = None) -> None:
    out = out or sys.stdout
    el, pr, pq, ot, at = (
        report[k] for k in ("entity_linking", "property_ranking", "proposed_query", "observation_tokens", "answer_type")
    )
    print(
        f"\n== {report['dataset']}/{report['split']} ({report['questions']} questions, answer type: "
        f"{report['answer_type_source']}, {report['seconds']} s)",
        file=out,
    )
    print(
        f"entity linking: R@1 {el['recall_at_1_pct']}% R@8 {el['recall_at_8_pct']}% of {el['entities']} entities",
        file=out,
    )
    print(
        f"property ranking (in N(e), {pr['gold_pairs_in_neighbourhood']} pairs): R@1 "
        f"{pr['recall_at_1_in_neighbourhood_pct']}% R@3 {pr['recall_at_3_in_neighbourhood_pct']}% R@10 "
        f"{pr['recall_at_10_in_neighbourhood_pct']}%; all {pr['gold_pairs_known_entity']} pairs: R@3 "
        f"{pr['recall_at_3_all_pairs_pct']}%",
        file=out,
    )
    print(
        f"non-gold starred/proposed first: {pr['non_gold_starred_or_proposed_first']} of {pr['questions']} "
        f"questions ({pr['non_gold_first_pct']}%), hinted {pr['questions_hinted']}",
        file=out,
    )
    print(
        f"proposed query: mean F1 {pq['mean_f1']} over {pq['answerable_questions']} answerable "
        f"({pq['proposals']} proposals)",
        file=out,
    )
    _print_candidates(report, out)
    print(
        f"lookup tokens: median {ot['median']} p95 {ot['p95']} over {ot['lookups']} lookups ({ot['tokenizer']})",
        file=out,
    )
    print(
        f"answer type: {at['accuracy_pct']}% of {at['questions']}; class {at['class_accuracy_pct']}% of "
        f"{at['class_checked']}",
        file=out,
    )
    for mode, row in (report.get("filters") or {}).items():
        print(
            f"filter {mode}: false conflicts {row['false_conflicts_on_gold_pairs']} "
            f"({row['false_conflict_rate_pct']}%), wrong-entity detection {row['wrong_entity_detection_pct']}% "
            f"({row['wrong_entity_detection_checkable_pct']}% checkable, "
            f"{row.get('wrong_entity_detection_sparing_gold_pct')}% sparing the gold)",
            file=out,
        )
