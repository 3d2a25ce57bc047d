"""Grounding statistics without an LLM (paper Appendix C, Table 9).

    python -m saga_dspy.stats grounding --dataset qald10 [--split test] [--filter bare|closure|calibrated|paper|all]
        [--json]
    python -m saga_dspy.stats conflicts [--dataset NAME ...] [--json]
    python -m saga_dspy.stats components --dataset NAME --split dev|train|test [--json]  (eval/stats/components.py)

`grounding`: for every entity constant of the dataset's gold SPARQL that the endpoint
knows, look the entity up with and without the type filter and report raw edges, edge
reduction, gold-property recall (over gold pairs whose property is in the entity's
neighbourhood, and over all gold pairs: the paper's definition), the decision counts,
false conflicts on gold pairs, wrong-entity detection (the other top search hits for the
entity's label, checked against the gold property; also the share of those pairs flagged while the
same check keeps the gold entity: detection that tells the wrong entity from the right one, which a
filter flagging both does not), and the gold pairs each filter removes. Every check knows whether the
entity carries the property (its neighbourhood; the candidates' statements), as the tools' checks do.
Each dataset the paper's Table 9 reports is printed with the paper's figures beside the measured ones, and
several datasets end with their averages (the paper's: unweighted over its four).

`conflicts`: the execute tool's conflict check over every gold query (eval/stats/conflicts.py).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from saga_dspy.cli import ArgumentParser, run_main

from .config import Settings, add_settings_args, apply_offline_env, settings_from_args
from .eval.loading.evalset import parse_ids
from .eval.stats.components import component_stats, measured_records, print_components
from .eval.stats.conflicts import conflict_stats, fmt, print_conflicts
from .eval.stats.gold_pairs import gold_queries
from .eval.stats.table9 import PAPER_TABLE9, print_table9, table9
from .grounding.neighbourhood import Neighbourhood, fetch_neighbourhood, type_filter
from .kg.endpoint import Endpoint
from .kg.flavours import Flavour, flavour_for
from .kg.flavours.wikidata_ids import SUBCLASS, TYPE
from .kg.search import Search
from .schema import ClassHierarchy, EntityTypes, Outcome, SchemaIndex, check_domain, entity_types_many
from .schema.carried import carried_properties
from .schema.compat import Mode, as_mode
from .services import KgServices

WIKIDATA_BENCHMARKS = ("qald7", "qald9plus", "qald10", "wwq", "spinach", "lcquad2")
FILTER_MODES: tuple[Mode, ...] = ("bare", "closure", "calibrated", "paper")
WRONG_CANDIDATES = 5  # search hits looked at per gold entity label


# --- the grounding statistics --------------------------------------------------------------------------------


@dataclass
class FilterStats:
    mode: Mode
    raw_edges: int = 0
    removed_edges: int = 0
    raw_props: int = 0
    removed_props: int = 0
    decisions: Counter = field(default_factory=Counter)  # compatible / conflict / unknown / skipped (no types)
    pairs_total: int = 0  # gold pairs of known entities
    pairs_in_nb: int = 0
    pairs_kept_in_nb: int = 0
    pairs_flagged: int = 0  # gold pairs whose check is a conflict (in the neighbourhood or not)
    pairs_checkable: int = 0  # gold pairs with a typed entity and a known domain
    wrong_pairs: int = 0
    wrong_flagged: int = 0
    wrong_checkable: int = 0
    wrong_sparing_gold: int = 0  # flagged wrong candidates whose gold entity the same check keeps
    removed_gold: list[dict] = field(default_factory=list)
    wrong_examples: list[dict] = field(default_factory=list)

    def row(self) -> dict[str, Any]:
        pct = lambda a, b: round(100.0 * a / b, 1) if b else None  # noqa: E731
        return {
            "filter": self.mode,
            "raw_edges": self.raw_edges,
            "edge_reduction_pct": pct(self.removed_edges, self.raw_edges),
            "raw_properties": self.raw_props,
            "property_reduction_pct": pct(self.removed_props, self.raw_props),
            "gold_pairs": self.pairs_total,
            "gold_pairs_in_neighbourhood": self.pairs_in_nb,
            "gold_recall_in_neighbourhood_pct": pct(self.pairs_kept_in_nb, self.pairs_in_nb),
            "gold_recall_all_pairs_pct": pct(self.pairs_kept_in_nb, self.pairs_total),
            "raw_recall_all_pairs_pct": pct(self.pairs_in_nb, self.pairs_total),
            "false_conflicts_on_gold_pairs": self.pairs_flagged,
            "false_conflict_rate_pct": pct(self.pairs_flagged, self.pairs_total),
            "false_conflict_rate_checkable_pct": pct(self.pairs_flagged, self.pairs_checkable),
            "decisions": dict(self.decisions),
            "wrong_candidate_pairs": self.wrong_pairs,
            "wrong_entity_detection_pct": pct(self.wrong_flagged, self.wrong_pairs),
            "wrong_entity_detection_checkable_pct": pct(self.wrong_flagged, self.wrong_checkable),
            "wrong_checkable_pairs": self.wrong_checkable,
            # detection that tells the wrong entity from the right one: the gold pair is not flagged too
            "wrong_entity_detection_sparing_gold_pct": pct(self.wrong_sparing_gold, self.wrong_pairs),
        }


def grounding_stats(
    settings: Settings,
    dataset: str,
    modes: list[Mode],
    *,
    endpoint: Endpoint | None = None,
    search: Search | None = None,
    schema: SchemaIndex | None = None,
    hierarchy: ClassHierarchy | None = None,
    limit: int | None = None,
    log=None,
    split: str = "test",
    ids: list[str] | None = None,
) -> dict[str, Any]:
    log = log or (lambda msg: None)
    started = time.monotonic()
    with KgServices(settings, endpoint, search, schema, hierarchy) as kg:
        flavour = flavour_for(settings.kg)
        records, _, _ = measured_records(settings, dataset, split, limit, ids)
        queries, unparsable = gold_queries(records, flavour)
        entities = list(dict.fromkeys(e for q in queries for e in q.entities))
        pairs = list(dict.fromkeys(p for q in queries for p in q.pairs))
        log(f"{dataset}: {len(records)} questions, {len(entities)} entity constants, {len(pairs)} gold pairs")
        neighbourhoods = _neighbourhoods(kg.endpoint, flavour, entities, log)
        known = set(neighbourhoods)
        labels = {eid: nb.label for eid, nb in neighbourhoods.items()}
        candidates = _wrong_candidates(kg.search, pairs, known, labels)
        cand_ids = sorted({c for cs in candidates.values() for c in cs})
        cand_types = entity_types_many(kg.endpoint, cand_ids) if cand_ids else {}
        carried = {eid: set(nb.edges) for eid, nb in neighbourhoods.items()}
        carried.update(carried_properties(kg.endpoint, flavour, cand_ids))
        results = {}
        for mode in modes:
            st = FilterStats(mode)
            kept_by_entity = _count_filter(st, neighbourhoods, kg.schema, kg.hierarchy, mode)
            _count_pairs(
                st,
                pairs,
                neighbourhoods,
                kept_by_entity,
                candidates,
                cand_types,
                carried,
                kg.schema,
                kg.hierarchy,
                mode,
            )
            results[mode] = st
        return {
            "dataset": dataset,
            "endpoint": kg.endpoint.name,
            "questions": len(records),
            "unparsable_gold": unparsable,
            "entity_constants": len(entities),
            "entities_known": len(known),
            "gold_pairs": len(pairs),
            "wrong_candidates": len(cand_ids),
            "seconds": round(time.monotonic() - started, 1),
            "filters": {
                mode: {**st.row(), "removed_gold_pairs": st.removed_gold, "wrong_examples": st.wrong_examples}
                for mode, st in results.items()
            },
        }


def _neighbourhoods(endpoint: Endpoint, flavour: Flavour, entities: list[str], log) -> dict[str, Neighbourhood]:
    """The lookups (the neighbourhood query only: qualifiers do not change the filter) of the known entities."""
    neighbourhoods = {}
    for i, eid in enumerate(entities):
        nb = fetch_neighbourhood(endpoint, flavour, eid, qualifiers=False)
        if nb.exists:
            neighbourhoods[eid] = nb
        if i and i % 500 == 0:
            log(f"  {i}/{len(entities)} lookups")
    return neighbourhoods


def _wrong_candidates(
    search: Search | None, pairs: list[tuple[str, str]], known: set[str], labels: dict[str, str]
) -> dict[str, list[str]]:
    """Wrong candidates: the other top search hits for each gold entity's label."""
    candidates: dict[str, list[str]] = {}
    if search is not None:
        for eid in dict.fromkeys(e for e, _ in pairs if e in known):
            label = labels.get(eid)
            if not label:
                continue
            try:
                hits = search.search(label, limit=WRONG_CANDIDATES + 1, kind="item")
            except Exception:  # noqa: BLE001 - a failed search leaves this entity without candidates
                hits = []
            candidates[eid] = [h.id for h in hits if h.id != eid][:WRONG_CANDIDATES]
    return candidates


def _count_filter(
    st: FilterStats,
    neighbourhoods: dict[str, Neighbourhood],
    schema: SchemaIndex,
    hierarchy: ClassHierarchy,
    mode: Mode,
) -> dict[str, set[str]]:
    """Edges and decisions of the type filter over every neighbourhood; returns what it kept per entity."""
    kept_by_entity: dict[str, set[str]] = {}
    for eid, nb in neighbourhoods.items():
        fr = type_filter(nb, schema, hierarchy, mode)
        kept_by_entity[eid] = set(fr.kept)
        st.raw_edges += nb.edge_count
        st.raw_props += len(nb.edges)
        st.removed_props += len(fr.removed)
        st.removed_edges += sum(len(nb.edges[pid]) for pid, _ in fr.removed)
        for decision in fr.decisions.values():
            if fr.skipped:
                st.decisions["skipped (no types)"] += 1
            else:
                st.decisions[str(decision.outcome)] += 1
    return kept_by_entity


def _count_pairs(
    st: FilterStats,
    pairs: list[tuple[str, str]],
    neighbourhoods: dict[str, Neighbourhood],
    kept_by_entity: dict[str, set[str]],
    candidates: dict[str, list[str]],
    cand_types: dict[str, EntityTypes],
    carried: dict[str, set[str]],
    schema: SchemaIndex,
    hierarchy: ClassHierarchy,
    mode: Mode,
) -> None:
    """Gold-pair recall and false conflicts, and wrong-entity detection on the candidates (each check knows
    whether the entity carries the property, as the lookup and the execute tool's check do)."""
    for eid, pid in pairs:
        if eid not in neighbourhoods:
            continue
        nb = neighbourhoods[eid]
        st.pairs_total += 1
        ps = schema.get(pid)
        decision = check_domain(
            nb.types, ps.domain if ps else None, hierarchy, mode, pid=pid, carried=pid in carried.get(eid, ())
        )
        if nb.types.types and ps is not None and ps.domain is not None:
            st.pairs_checkable += 1
        if decision.outcome is Outcome.CONFLICT:
            st.pairs_flagged += 1
        in_nb = pid in nb.edges
        if in_nb:
            st.pairs_in_nb += 1
            if pid in kept_by_entity[eid]:
                st.pairs_kept_in_nb += 1
        if decision.outcome is Outcome.CONFLICT:
            st.removed_gold.append(
                {
                    "entity": eid,
                    "label": nb.label,
                    "property": pid,
                    "property_label": ps.label if ps else "",
                    "in_neighbourhood": in_nb,
                    "types": [f"{t} {schema.class_label(t)}" for t in nb.types.types[:6]],
                    "domain": [
                        f"{c} {schema.class_label(c)}" for c in (ps.domain.classes[:8] if ps and ps.domain else ())
                    ],
                    "domain_source": ps.domain.source if ps and ps.domain else None,
                    "reason": decision.reason,
                }
            )
        # wrong-entity detection
        for cand in candidates.get(eid, []):
            et = cand_types.get(cand) or EntityTypes((), False, "none", cand)
            st.wrong_pairs += 1
            d = check_domain(
                et, ps.domain if ps else None, hierarchy, mode, pid=pid, carried=pid in carried.get(cand, ())
            )
            if et.types and ps is not None and ps.domain is not None:
                st.wrong_checkable += 1
            if d.outcome is Outcome.CONFLICT:
                st.wrong_flagged += 1
                st.wrong_sparing_gold += decision.outcome is not Outcome.CONFLICT
                if len(st.wrong_examples) < 12:
                    st.wrong_examples.append(
                        {"gold": f"{eid} {nb.label}", "candidate": cand, "property": pid, "reason": d.reason}
                    )


# --- printing ---------------------------------------------------------------------------------------------------------


def print_grounding(report: dict[str, Any], out=None, details: int = 10) -> None:
    out = out or sys.stdout  # the stream of the call (a captured one in tests), not of the import
    print(
        f"\n== {report['dataset']} ({report['questions']} questions, {report['entities_known']}/"
        f"{report['entity_constants']} entity constants known to {report['endpoint']}, "
        f"{report['gold_pairs']} gold (entity, property) pairs, {report['seconds']} s)",
        file=out,
    )
    head = (
        "filter",
        "raw edges",
        "edge red.",
        "gold recall (in N(e))",
        "gold recall (all)",
        "false confl. gold",
        "wrong-entity det.",
        "compatible/conflict/unknown/skipped",
    )
    print(" | ".join(head), file=out)
    for mode, row in report["filters"].items():
        d = row["decisions"]
        print(
            " | ".join(
                [
                    mode,
                    str(row["raw_edges"]),
                    fmt(row["edge_reduction_pct"], "%"),
                    f"{fmt(row['gold_recall_in_neighbourhood_pct'], '%')} of {row['gold_pairs_in_neighbourhood']}",
                    f"{fmt(row['gold_recall_all_pairs_pct'], '%')} of {row['gold_pairs']} "
                    f"(raw {fmt(row['raw_recall_all_pairs_pct'], '%')})",
                    f"{row['false_conflicts_on_gold_pairs']} ({fmt(row['false_conflict_rate_pct'], '%')})",
                    f"{fmt(row['wrong_entity_detection_pct'], '%')} of {row['wrong_candidate_pairs']} "
                    f"({fmt(row['wrong_entity_detection_checkable_pct'], '%')} of "
                    f"{row['wrong_checkable_pairs']} checkable; "
                    f"{fmt(row['wrong_entity_detection_sparing_gold_pct'], '%')} sparing the gold)",
                    "/".join(str(d.get(k, 0)) for k in ("compatible", "conflict", "unknown", "skipped (no types)")),
                ]
            ),
            file=out,
        )
    paper = PAPER_TABLE9.get(report["dataset"])
    if paper is not None:
        print(f"paper, Table 9 (test) | {paper[0]} | {paper[1]}% | — | {paper[2]}% | — | — | —", file=out)
    for mode, row in report["filters"].items():
        removed = row["removed_gold_pairs"]
        if not removed:
            continue
        print(f"  gold pairs flagged by {mode} ({len(removed)}):", file=out)
        for r in removed[:details]:
            where = "in N(e)" if r["in_neighbourhood"] else "not in N(e)"
            print(
                f"    {r['entity']} {r['label']!r} × {r['property']} {r['property_label']!r} ({where}): types "
                f"[{', '.join(r['types'][:3])}] vs domain [{', '.join(r['domain'][:4])}] ({r['domain_source']})",
                file=out,
            )
        if len(removed) > details:
            print(f"    … {len(removed) - details} more", file=out)


# --- CLI --------------------------------------------------------------------------------------------------------------

COMMON = [
    "endpoint",
    "kg",
    "cache_dir",
    "data_dir",
    "schema_index",
    "lexicon",
    "schema_coverage",
    "coverage_seed",
    "query_timeout",
    "search",
]


def _parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(prog="python -m saga_dspy.stats", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    g = sub.add_parser("grounding", help="neighbourhood filtering statistics (paper Table 9)")
    g.add_argument("--dataset", dest="datasets", action="append", required=True, help="benchmark name (repeatable)")
    g.add_argument(
        "--filter",
        choices=[*FILTER_MODES, "both", "all"],
        default="all",
        help=f"domain check: the paper's bare {TYPE} intersection, ours through {SUBCLASS}*, the calibrated one "
        "(hub classes do not count), the paper's reading (schema/compat.py), both (bare and closure) or all four "
        "(default)",
    )
    g.add_argument("--split", default="test", help="dev | train | test (choose a reading on dev and train)")
    g.add_argument("--limit", type=int, help="at most this many questions per dataset")
    g.add_argument("--details", type=int, default=10, help="flagged gold pairs listed per filter")
    g.add_argument("--json", action="store_true", help="print the report as JSON")
    add_settings_args(g, COMMON)
    c = sub.add_parser("conflicts", help="the execute tool's conflict check over every gold query")
    c.add_argument(
        "--dataset",
        dest="datasets",
        action="append",
        help=f"benchmark name (default: {', '.join(WIKIDATA_BENCHMARKS)})",
    )
    c.add_argument("--limit", type=int, help="at most this many questions per dataset")
    c.add_argument("--json", action="store_true")
    add_settings_args(c, COMMON + ["filter_mode"])
    m = sub.add_parser("components", help="entity linking, property ranking, hints, answer type, observation size")
    m.add_argument("--dataset", dest="datasets", action="append", required=True, help="benchmark name (repeatable)")
    m.add_argument("--split", default="dev", help="dev | train | test (a split name or role; never tune on test)")
    m.add_argument("--limit", type=int, help="at most this many questions per dataset")
    m.add_argument("--ids", action="append", help="only these question ids, comma-separated (repeatable), or @FILE")
    m.add_argument(
        "--answer-type",
        choices=["rules", "none"],
        default="rules",
        help="answer type without an LLM: the rule-based cues, or only the yes/no fallback",
    )
    m.add_argument(
        "--filters", default=",".join(FILTER_MODES), help="filter modes whose figures are reported ('' for none)"
    )
    m.add_argument("--json", action="store_true")
    add_settings_args(m, COMMON)
    return parser


FILTER_FIGURES = (
    "false_conflicts_on_gold_pairs",
    "false_conflict_rate_pct",
    "wrong_entity_detection_pct",
    "wrong_entity_detection_checkable_pct",
    "wrong_entity_detection_sparing_gold_pct",
    "edge_reduction_pct",
    "gold_recall_in_neighbourhood_pct",
)


def components_report(
    settings: Settings,
    dataset: str,
    split: str,
    *,
    endpoint: Endpoint,
    search: Search | None,
    limit: int | None,
    answer_type: str,
    filter_modes: list[Mode],
    log,
    ids: list[str] | None = None,
) -> dict[str, Any]:
    """`eval.stats.components.component_stats`, with `stats grounding`'s filter figures per mode beside it."""
    with KgServices(settings, endpoint, search) as kg:
        # the same services, questions and log for both
        common: dict[str, Any] = dict(
            endpoint=kg.endpoint, search=search, schema=kg.schema, hierarchy=kg.hierarchy, limit=limit, ids=ids, log=log
        )
        report = component_stats(settings, dataset, split, answer_type=answer_type, **common)
        if filter_modes:
            g = grounding_stats(settings, dataset, filter_modes, split=split, **common)
            report["filters"] = {mode: {k: row[k] for k in FILTER_FIGURES} for mode, row in g["filters"].items()}
    return report


def main(argv: list[str] | None = None) -> int:
    apply_offline_env()
    args = _parser().parse_args(argv)
    settings = settings_from_args(args)
    say = (lambda msg: print(msg, file=sys.stderr)) if not args.json else (lambda msg: None)
    with KgServices(settings) as kg:
        endpoint = kg.endpoint
        try:
            search = kg.search
        except Exception:  # noqa: BLE001 - no label index for this endpoint: the statistics run without search
            search = None
        if args.command == "grounding":
            named: dict[str, list[Mode]] = {"both": ["bare", "closure"], "all": list(FILTER_MODES)}
            modes = named.get(args.filter) or [as_mode(args.filter)]
            reports = [
                grounding_stats(
                    settings,
                    name,
                    modes,
                    endpoint=endpoint,
                    search=search,
                    limit=args.limit,
                    log=say,
                    split=args.split,
                )
                for name in args.datasets
            ]
            if args.json:
                print(json.dumps(reports if len(reports) > 1 else reports[0], indent=1, ensure_ascii=False))
            else:
                for report in reports:
                    print_grounding(report, details=args.details)
                print_table9(table9(reports))
        elif args.command == "components":
            modes = [m for m in args.filters.split(",") if m]
            reports = [
                components_report(
                    settings,
                    name,
                    args.split,
                    endpoint=endpoint,
                    search=search,
                    limit=args.limit,
                    answer_type=args.answer_type,
                    filter_modes=modes,
                    log=say,
                    ids=parse_ids(args.ids),
                )
                for name in args.datasets
            ]
            if args.json:
                print(json.dumps(reports if len(reports) > 1 else reports[0], indent=1, ensure_ascii=False))
            else:
                for report in reports:
                    print_components(report)
        else:
            report = conflict_stats(
                settings,
                args.datasets or list(WIKIDATA_BENCHMARKS),
                endpoint=endpoint,
                search=search,
                limit=args.limit,
                log=say,
            )
            if args.json:
                print(json.dumps(report, indent=1, ensure_ascii=False))
            else:
                print_conflicts(report)
    return 0


def console_main() -> None:
    """The `saga-stats` console script: `python -m saga_dspy.stats`, errors as one line."""
    sys.exit(run_main(main))


if __name__ == "__main__":
    console_main()
