"""The execute tool's conflict check over every gold query of a benchmark, nothing executed (`stats conflicts`):
every flag on a gold query is a false conflict (a schema or hierarchy gap, or a data error).

    python -m saga_dspy.stats conflicts [--dataset NAME ...] [--json]
"""

from __future__ import annotations

import sys
import time
from collections import Counter
from typing import Any

from saga_dspy.config import Settings
from saga_dspy.eval.loading.datasets import load_benchmark
from saga_dspy.grounding.checks import find_conflicts
from saga_dspy.grounding.context import QuestionContext
from saga_dspy.grounding.patterns import parse_query
from saga_dspy.services import KgServices


def fmt(value: object, suffix: str = "") -> str:
    """A figure for a printed table: a dash when there is none."""
    return "—" if value is None else f"{value}{suffix}"


def conflict_stats(
    settings: Settings,
    datasets: list[str],
    *,
    endpoint=None,
    search=None,
    schema=None,
    hierarchy=None,
    limit: int | None = None,
    log=None,
) -> dict[str, Any]:
    """Run the execute tool's conflict check over every gold query (nothing is executed)."""
    log = log or (lambda msg: None)
    with KgServices(settings, endpoint, search, schema, hierarchy) as kg:
        ctx = QuestionContext(settings, kg.endpoint, search, schema, hierarchy, variant="full")
        out: dict[str, Any] = {"datasets": {}, "filter": settings.filter_mode}
        offenders: Counter = Counter()
        examples: dict[tuple, dict] = {}
        for name in datasets:
            started = time.monotonic()
            records = [dict(r) for r in load_benchmark(name, "test", settings)]
            if limit:
                records = records[:limit]
            row = _dataset_conflicts(ctx, name, records, offenders, examples)
            row["seconds"] = round(time.monotonic() - started, 1)
            out["datasets"][name] = row
            log(f"{name}: {row['flagged_queries']}/{row['parsed']} gold queries flagged")
        rows = out["datasets"].values()
        total_q, total_flagged = sum(r["parsed"] for r in rows), sum(r["flagged_queries"] for r in rows)
        out["overall"] = {
            "parsed": total_q,
            "patterns": sum(r["patterns"] for r in rows),
            "flagged_queries": total_flagged,
            "flagged_required": sum(r["flagged_required"] for r in rows),
            "declared_variable_notes": sum(r["declared_variable_notes"] for r in rows),
            "false_conflict_rate_pct": round(100.0 * total_flagged / total_q, 2) if total_q else None,
        }
        out["worst_offenders"] = _worst_offenders(ctx, offenders, examples)
        return out


def _dataset_conflicts(
    ctx: QuestionContext,
    name: str,
    records: list[dict[str, Any]],
    offenders: Counter,
    examples: dict[tuple, dict],
) -> dict[str, Any]:
    """One benchmark's gold queries checked: its row of counts; each conflict counted in `offenders` (by property,
    subject and types) with its first example in `examples`."""
    flagged = required = parsed_n = checked = noted = 0
    parsed_all = [(rec, parse_query(rec.get("sparql") or "", ctx.flavour)) for rec in records]
    constants = [
        ctx.flavour.entity_id(t.value)
        for _, q in parsed_all
        if q
        for p in q.patterns
        for t in (p.subject, p.obj)
        if t.kind == "iri"
    ]
    ctx.entity_types([c for c in constants if c and ctx.flavour.entity_re.match(c)])  # batched prefetch
    for rec, parsed in parsed_all:
        if parsed is None:
            continue
        parsed_n += 1
        checked += len(parsed.patterns)
        conflicts = find_conflicts(ctx, parsed)
        flags = [c for c in conflicts if not c.declared]
        if len(flags) < len(conflicts):
            noted += 1
        if flags:
            flagged += 1
            if any(c.required for c in flags):
                required += 1
        for c in conflicts:
            key = (c.pid, c.subject if not c.declared else "?var", tuple(c.types[:3]))
            offenders[key] += 1
            examples.setdefault(key, _example(ctx, name, rec, c))
    return {
        "queries": len(records),
        "parsed": parsed_n,
        "patterns": checked,
        "flagged_queries": flagged,
        "flagged_required": required,
        "declared_variable_notes": noted,
        "false_conflict_rate_pct": round(100.0 * flagged / parsed_n, 2) if parsed_n else None,
    }


def _example(ctx: QuestionContext, name: str, rec: dict[str, Any], c: Any) -> dict[str, Any]:
    """A conflict as the report shows it, with the labels of its property and classes."""
    return {
        "dataset": name,
        "id": rec.get("id"),
        "property": c.pid,
        "property_label": ctx.property_label(c.pid),
        "subject": c.subject,
        "types": [f"{t} {ctx.class_label(t)}" for t in c.types[:4]],
        "domain": [f"{d} {ctx.class_label(d)}" for d in c.domain[:6]],
        "declared_variable": c.declared,
        "required": c.required,
    }


def _worst_offenders(ctx: QuestionContext, offenders: Counter, examples: dict[tuple, dict]) -> list[dict[str, Any]]:
    """The 15 most frequent conflicts on a constant subject, then the 5 on a declared variable, with labels."""
    ranked = offenders.most_common()
    worst = [{**examples[key], "count": n} for key, n in ranked if not examples[key]["declared_variable"]][:15]
    worst += [{**examples[key], "count": n} for key, n in ranked if examples[key]["declared_variable"]][:5]
    ids = [w["subject"].split(":", 1)[1] for w in worst if w["subject"].startswith("wd:")]
    labels = ctx.labels(ids) if ids else {}
    for w in worst:
        w["subject_label"] = labels.get(w["subject"].split(":", 1)[-1], "")
    return worst


def print_conflicts(report: dict[str, Any], out=sys.stdout) -> None:
    print(f"Conflict check over gold queries (filter {report['filter']}):", file=out)
    print(
        "dataset | gold queries parsed | patterns | flagged | flagged (required pattern) | false-conflict rate"
        " | declared-variable notes",
        file=out,
    )
    for name, row in report["datasets"].items():
        print(
            f"{name} | {row['parsed']}/{row['queries']} | {row['patterns']} | {row['flagged_queries']} | "
            f"{row['flagged_required']} | {fmt(row['false_conflict_rate_pct'], '%')} | "
            f"{row['declared_variable_notes']}",
            file=out,
        )
    o = report["overall"]
    print(
        f"overall | {o['parsed']} | {o['patterns']} | {o['flagged_queries']} | {o['flagged_required']} | "
        f"{fmt(o['false_conflict_rate_pct'], '%')} | {o['declared_variable_notes']}",
        file=out,
    )
    if report["worst_offenders"]:
        print("worst offenders (flags on known entities first, then declared-variable notes):", file=out)
        for w in report["worst_offenders"]:
            kind = " (declared variable type: a note, never a block)" if w["declared_variable"] else ""
            print(
                f"  {w['count']}× {w['property']} {w['property_label']!r} "
                f"on {w['subject']} {w['subject_label']!r}{kind} "
                f"[{', '.join(w['types'][:3])}] vs domain [{', '.join(w['domain'][:4])}] "
                f"(e.g. {w['dataset']} #{w['id']})",
                file=out,
            )
