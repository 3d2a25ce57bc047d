#!/usr/bin/env python3
"""How the domain check treats the gold (entity, property) pairs of a benchmark's gold SPARQL.

    python benchmarks/bench_schema_gold.py [--dataset qald10] [--split test] [--json] [--list N]

For every triple pattern `wd:E <property P> ?x` of a gold query (P from wdt:/p:, also
inside property paths' first step), decide the domain check of E against P's domain
with `closure` (ours) and `bare` (the paper's Eq. 3), on the embedded sample with the
bundled schema index. Every CONFLICT on a gold pair is a false conflict: the gold query
uses the property on that entity. Also reported: the share of decidable checks.

A measurement, not a test (the numbers depend on the sample)."""

from __future__ import annotations

import argparse
import collections
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from saga_dspy.config import Settings, apply_offline_env  # noqa: E402

WD = "http://www.wikidata.org/entity/"
PROP_PREFIXES = ("http://www.wikidata.org/prop/direct/", "http://www.wikidata.org/prop/")


def _pid(iri: str) -> str | None:
    for prefix in PROP_PREFIXES:
        if iri.startswith(prefix):
            rest = iri[len(prefix) :]
            return rest if rest.startswith("P") and rest[1:].isdigit() else None
    return None


def _first_step(pred):
    """The property IRI of a predicate, or of the first step of a sequence/alternative path."""
    from rdflib import URIRef
    from rdflib.paths import AlternativePath, MulPath, SequencePath

    if isinstance(pred, URIRef):
        return [str(pred)]
    if isinstance(pred, SequencePath):
        return _first_step(pred.args[0])
    if isinstance(pred, AlternativePath):
        return [x for a in pred.args for x in _first_step(a)]
    if isinstance(pred, MulPath):  # a P279* step may be zero-length: not a use of the property
        return []
    return []


def gold_pairs(sparql: str) -> tuple[set[tuple[str, str]], set[tuple[str, str]]] | None:
    """((entity, pid) subject pairs, (entity, pid) object pairs) of a query, or None if unparsable."""
    from rdflib import URIRef
    from rdflib.plugins.sparql import prepareQuery

    from saga_dspy.kg.prefixes import with_prefixes

    try:
        query = prepareQuery(with_prefixes(sparql))
    except Exception:
        return None
    subj, obj = set(), set()

    def walk(node):
        if isinstance(node, dict):
            if "triples" in node and isinstance(node["triples"], list):
                for triple in node["triples"]:
                    if not (isinstance(triple, tuple) and len(triple) == 3):
                        continue
                    s, p, o = triple
                    for iri in _first_step(p):
                        pid = _pid(iri)
                        if not pid or pid in ("P31", "P279"):
                            continue
                        if isinstance(s, URIRef) and str(s).startswith(WD):
                            subj.add((str(s)[len(WD) :], pid))
                        if isinstance(o, URIRef) and str(o).startswith(WD) and iri.startswith(PROP_PREFIXES[0]):
                            obj.add((str(o)[len(WD) :], pid))
            for value in node.values():
                walk(value)
        elif isinstance(node, (list, tuple)):
            for value in node:
                walk(value)

    walk(query.algebra)
    return subj, obj


def main() -> int:
    apply_offline_env()
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", default="qald10")
    parser.add_argument("--split", default="test")
    parser.add_argument("--cache-dir", type=Path, help="cache directory (the embedded store lives there)")
    parser.add_argument("--list", type=int, default=10, help="list this many flagged pairs per mode")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    from saga_dspy.eval.loading.datasets import load_benchmark
    from saga_dspy.kg.endpoint import open_endpoint
    from saga_dspy.schema import (
        Outcome,
        check_domain,
        check_range,
        entity_types_many,
        load_hierarchy,
        load_schema_index,
    )

    settings = Settings(**({"cache_dir": args.cache_dir} if args.cache_dir else {}), result_cache=False)
    rows = load_benchmark(args.dataset, args.split)
    subj_pairs: set[tuple[str, str]] = set()
    obj_pairs: set[tuple[str, str]] = set()
    unparsable = 0
    for row in rows:
        got = gold_pairs(row["sparql"] or "")
        if got is None:
            unparsable += 1
            continue
        subj_pairs |= got[0]
        obj_pairs |= got[1]

    started = time.monotonic()
    schema = load_schema_index(settings)
    with open_endpoint(settings) as endpoint:
        hierarchy = load_hierarchy(settings, endpoint, schema)
        types = entity_types_many(endpoint, sorted({e for e, _ in subj_pairs | obj_pairs}))
    report: dict = {"dataset": args.dataset, "split": args.split, "questions": len(rows), "unparsable": unparsable}
    for side, pairs, check, role in (
        ("subject", subj_pairs, check_domain, "domain"),
        ("object", obj_pairs, check_range, "range"),
    ):
        stats: dict = {"pairs": len(pairs)}
        with_evidence = [(e, p) for e, p in sorted(pairs) if (ps := schema.get(p)) and getattr(ps, role)]
        formal = [(e, p) for e, p in with_evidence if getattr(schema.get(p), role).is_formal]
        typed = [(e, p) for e, p in with_evidence if types[e].types]
        formal_typed = {(e, p) for e, p in formal if types[e].types}
        stats.update(
            {
                f"with_{role}": len(with_evidence),
                f"with_formal_{role}": len(formal),
                f"with_{role}_and_typed_entity": len(typed),
            }
        )
        for mode in ("closure", "bare"):
            outcomes = collections.Counter()
            formal_decided = 0
            flagged = []
            for e, p in sorted(pairs):
                ps = schema.get(p)
                d = check(types[e], getattr(ps, role) if ps else None, hierarchy, mode)
                outcomes[d.outcome.value] += 1
                if (e, p) in formal_typed and d.outcome is not Outcome.UNKNOWN:
                    formal_decided += 1
                if d.outcome is Outcome.CONFLICT:
                    flagged.append({"entity": e, "pid": p, "types": list(types[e].types[:5]), "reason": d.reason})
            decided = outcomes["compatible"] + outcomes["conflict"]
            stats[mode] = {
                "outcomes": dict(outcomes),
                "decidable_share_of_all": round(decided / max(1, len(pairs)), 4),
                "decidable_share_of_checks_with_evidence_and_types": round(decided / max(1, len(typed)), 4),
                "decidable_share_of_formal_checks_with_types": round(formal_decided / max(1, len(formal_typed)), 4),
                "conflicts_on_gold": len(flagged),
                "false_conflict_rate_of_decided": round(len(flagged) / max(1, decided), 4),
                "false_conflict_rate_of_all": round(len(flagged) / max(1, len(pairs)), 4),
                "flagged": flagged[: args.list],
            }
        report[side] = stats
    report["seconds"] = round(time.monotonic() - started, 2)
    report["hierarchy_closures_cached"] = len(hierarchy._closure)
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"{args.dataset}/{args.split}: {len(rows)} questions ({unparsable} unparsable gold queries)")
    for side, role in (("subject", "domain"), ("object", "range")):
        s = report[side]
        print(
            f"\n{side} pairs (check against the {role}): {s['pairs']}, with a {role} {s[f'with_{role}']} "
            f"(formal {s[f'with_formal_{role}']}), "
            f"with a {role} and a typed entity {s[f'with_{role}_and_typed_entity']}"
        )
        for mode in ("closure", "bare"):
            m = s[mode]
            print(
                f"  {mode:7s} outcomes {m['outcomes']}; "
                f"decidable {m['decidable_share_of_checks_with_evidence_and_types']:.1%} "
                f"of checks with evidence and types "
                f"({m['decidable_share_of_formal_checks_with_types']:.1%} of formal ones); "
                f"CONFLICT on gold pairs: {m['conflicts_on_gold']} "
                f"({m['false_conflict_rate_of_all']:.1%} of all pairs)"
            )
            for f in m["flagged"]:
                print(f"      {f['entity']} {f['pid']} types={f['types']}: {f['reason']}")
    print(f"\n{report['seconds']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
