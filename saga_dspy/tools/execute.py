"""execute_sparql: run a query, check it against the type state (domain conflicts: [BLOCKED]), learn the types of its
results, and render a labelled table."""

from __future__ import annotations

import re
import time
from collections import Counter

from saga_dspy.grounding.checks import find_conflicts, reversed_direction_hints, unknown_iri_hints
from saga_dspy.grounding.context import Execution, QuestionContext
from saga_dspy.grounding.patterns import ParsedQuery, parse_query
from saga_dspy.grounding.render import clip, fit, render_ask, render_table
from saga_dspy.kg.errors import SparqlError
from saga_dspy.kg.results import AskResult, SelectResult
from saga_dspy.tools.results import ExecuteResult

NEXT_AFTER_OK = "Next: stop if these results answer the question; else refine the query."


RESULT_TYPE_SAMPLE = 5


RESULT_TYPE_TOTAL = 15


TABLE_LABELS = 60


def _result_entities(ctx: QuestionContext, result: SelectResult) -> dict[str, list[str]]:
    """variable → up to RESULT_TYPE_SAMPLE distinct entity ids bound to it (bounded in total)."""
    out: dict[str, list[str]] = {}
    total = 0
    for var in result.variables:
        ids: list[str] = []
        for row in result.rows:
            b = row.get(var)
            if b is None or not b.is_iri:
                continue
            eid = ctx.flavour.entity_id(b.value)
            if eid and eid not in ids and ctx.flavour.entity_re.match(eid):
                ids.append(eid)
                if len(ids) >= RESULT_TYPE_SAMPLE:
                    break
        ids = ids[: max(0, RESULT_TYPE_TOTAL - total)]
        if ids:
            out[var] = ids
            total += len(ids)
    return out


def _learn_from_result(
    ctx: QuestionContext, parsed: ParsedQuery | None, result: SelectResult, sample: dict[str, list[str]], types: dict
) -> list[str]:
    """Θ updates from a non-empty result: entity types, observed variable types, trace-local ranges."""
    learnt: list[str] = []
    if not ctx.flags.type_state:
        return learnt
    for var, ids in sample.items():
        counter: Counter = Counter()
        for eid in ids:
            et = types.get(eid)
            if et is None or not et.types:
                continue
            counter.update(et.types)
            ctx.state.record_entity(
                eid, et.types, ctx.seen.get(eid, ""), is_class=et.is_class, source="result", has_p31=et.source != "p279"
            )
        if counter:
            top = [c for c, _ in counter.most_common(3)]
            ctx.state.observe_variable(var, top)
    if parsed is None:
        return learnt
    for p in parsed.required():
        if not p.object_steps or len(p.object_steps) != 1 or p.obj.kind != "var" or p.object_steps[0].inverse:
            continue
        ref = ctx.flavour.prop_ref(p.object_steps[0].iri)
        if ref is None or ref.pid == ctx.flavour.type_pid:
            continue
        ps = ctx.schema.get(ref.pid)
        if ps is not None and ps.range is not None:
            continue
        ids = sample.get(p.obj.value, [])
        classes = [t for eid in ids if (et := types.get(eid)) for t in et.types]
        if classes:
            ctx.state.add_range_evidence(ref.pid, classes)
            observed = ctx.state.observed_range(ref.pid, 2)
            learnt.append(f"{ref.pid} returns {', '.join(ctx.class_label(c) for c in observed)}")
    return learnt


def _summary(sparql: str) -> str:
    body = " ".join(sparql.split())
    m = re.search(r"\{(.*)\}", body)
    return clip(m.group(1).strip() if m else body, 70)


def do_execute(ctx: QuestionContext, sparql: str) -> ExecuteResult:
    """Run the query: its observation (a labelled table, or what went wrong and what to check) and its execution."""
    flavour = ctx.flavour
    ctx.counters["executions"] += 1
    sparql = _strip_fences(sparql or "")
    started = time.monotonic()
    try:
        result = ctx.query(sparql)
    except SparqlError as exc:
        text = _failed(ctx, sparql, parse_query(sparql, flavour), exc, started)
        return ExecuteResult(text, ctx.executions[-1])
    parsed = parse_query(sparql, flavour)  # after the check: it reuses the check's parse
    seconds = time.monotonic() - started
    _state_from_query(ctx, parsed)

    # types needed: constants of the query (conflict check, Θ) and a sample of the result's entities
    sample = _result_entities(ctx, result) if isinstance(result, SelectResult) and result.rows else {}
    constants = _query_constants(ctx, parsed)
    wanted = list(dict.fromkeys(constants[:20] + [e for ids in sample.values() for e in ids]))
    types = ctx.entity_types(wanted) if wanted and (ctx.flags.conflict_check or ctx.flags.type_state) else {}
    const_labels = (
        ctx.labels(constants[:20]) if constants and (ctx.flags.conflict_check or ctx.flags.type_state) else {}
    )
    conflicts = find_conflicts(ctx, parsed) if ctx.flags.conflict_check else []
    # a conflict blocks only when it is demonstrated on a known entity in a required pattern; a variable's
    # declared type is only part of its bound entities' types, so that one is a note
    required_conflicts = [c for c in conflicts if c.required and not c.declared]
    _record_constants(ctx, constants, types, const_labels)

    ask = result if isinstance(result, AskResult) else None
    ask_false = ask is not None and not ask.value
    if isinstance(result, SelectResult) and result.rows:
        lines, status = _observe_rows(ctx, sparql, parsed, result, constants, sample, types, conflicts), "ok"
    elif ask is not None and ask.value:
        lines, status = _observe_ask_true(ctx, sparql, ask, conflicts), "ok"
    elif required_conflicts:
        lines, status = _observe_blocked(ctx, sparql, parsed, required_conflicts, ask_false), "blocked"
    else:
        lines, status = _observe_no_answer(ctx, sparql, parsed, result, ask_false, conflicts)
    rows = len(result.rows) if isinstance(result, SelectResult) else 1
    execution = Execution(sparql, result, None, status, [c.short(ctx) for c in conflicts], rows, seconds)
    ctx.executions.append(execution)
    return ExecuteResult(fit("\n".join(lines), ctx.budget), execution)


def _failed(ctx: QuestionContext, sparql: str, parsed: ParsedQuery | None, exc: SparqlError, started: float) -> str:
    """The observation of a query the endpoint refused or could not run (and its record)."""
    ctx.counters["errors"] += 1
    ex = Execution(sparql, None, str(exc), "error", seconds=time.monotonic() - started, error_kind=exc.kind)
    ctx.executions.append(ex)
    if ctx.flags.type_state:
        ctx.state.note("fail error", f"{exc.kind}: {_summary(sparql)}")
    lines = [f"[ERROR] {exc.kind}: {clip(str(exc), 240)}"]
    lines.extend(unknown_iri_hints(ctx, sparql, parsed, check_existence=exc.kind == "syntax"))
    return fit("\n".join(lines), ctx.budget)


def _state_from_query(ctx: QuestionContext, parsed: ParsedQuery | None) -> None:
    """Θ from the query text."""
    flavour = ctx.flavour
    if ctx.flags.type_state and parsed is not None:

        def dom(pid: str) -> tuple[str, ...]:
            ps = ctx.schema.get(pid)
            return tuple(ps.domain.classes) if ps and ps.domain else ()

        def rng(pid: str) -> tuple[str, ...]:
            ps = ctx.schema.get(pid)
            return tuple(ps.range.classes) if ps and ps.range else ()

        ctx.state.update_from_query(parsed, flavour, dom, rng)


def _query_constants(ctx: QuestionContext, parsed: ParsedQuery | None) -> list[str]:
    """The entity constants of the query (not the classes of its type patterns)."""
    flavour = ctx.flavour
    constants = []
    if parsed is not None:
        for p in parsed.patterns:
            for term in (p.subject, p.obj):
                if term.kind == "iri":
                    eid = flavour.entity_id(term.value)
                    if eid and flavour.entity_re.match(eid) and not (p.type_kind and term is p.obj):
                        constants.append(eid)
    return constants


def _record_constants(ctx: QuestionContext, constants: list[str], types: dict, const_labels: dict[str, str]) -> None:
    """The types of the query's entity constants, into Θ."""
    if ctx.flags.type_state:
        for eid in dict.fromkeys(constants[:20]):
            et = types.get(eid)
            if et is not None and et.types and eid not in ctx.state.entities:
                ctx.state.record_entity(
                    eid,
                    et.types,
                    const_labels.get(eid, ""),
                    is_class=et.is_class,
                    source="query",
                    has_p31=et.source != "p279",
                )


def _observe_rows(
    ctx: QuestionContext,
    sparql: str,
    parsed: ParsedQuery | None,
    result: SelectResult,
    constants: list[str],
    sample: dict[str, list[str]],
    types: dict,
    conflicts: list,
) -> list[str]:
    """[OK] and the labelled table of a non-empty result; what the rows teach goes into Θ."""
    flavour = ctx.flavour
    lines: list[str] = []
    ids = []
    for row in result.rows[:TABLE_LABELS]:
        for b in row.values():
            if b.is_iri:
                eid = flavour.entity_id(b.value)
                if eid:
                    ids.append(eid)
    labels = ctx.labels(list(dict.fromkeys(constants[:20] + ids[: TABLE_LABELS * 2])))
    for eid, lab in labels.items():
        ctx.remember(eid, lab)
    learnt = _learn_from_result(ctx, parsed, result, sample, types)

    def label_of(iri: str):
        eid = flavour.entity_id(iri)
        return (eid, labels.get(eid) or ctx.seen.get(eid, "")) if eid else (None, "")

    notes = []
    if conflicts:
        notes.append(
            "Note: type conflict in the query (rows shown anyway): " + "; ".join(c.short(ctx) for c in conflicts[:2])
        )
    body_budget = ctx.budget - sum(len(n) + 1 for n in notes) - 60
    lines.append(render_table(result, label_of, body_budget, head="[OK]"))
    lines.extend(notes)
    lines.append(NEXT_AFTER_OK)
    if ctx.flags.type_state:
        first = result.rows[0]
        preview = ", ".join(
            clip(label_of(b.value)[1] or b.value.rsplit("/", 1)[-1], 25) if b.is_iri else clip(b.value, 25)
            for b in list(first.values())[:2]
        )
        ctx.state.note("ok", f"{len(result.rows)}{'+' if result.capped else ''} rows ({preview}): {_summary(sparql)}")
        for text in learnt[:1]:
            ctx.state.note("info", text)
    extra = unknown_iri_hints(ctx, sparql, parsed, check_existence=False)
    lines.extend(extra)
    return lines


def _observe_ask_true(ctx: QuestionContext, sparql: str, result: AskResult, conflicts: list) -> list[str]:
    lines: list[str] = []
    lines.append("[OK] " + render_ask(result))
    lines.append(NEXT_AFTER_OK)
    if conflicts:
        lines.append("Note: type conflict in the query: " + "; ".join(c.short(ctx) for c in conflicts[:2]))
    if ctx.flags.type_state:
        ctx.state.note("ok", f"ASK true: {_summary(sparql)}")
    return lines


def _observe_blocked(
    ctx: QuestionContext, sparql: str, parsed: ParsedQuery | None, required_conflicts: list, ask_false: bool
) -> list[str]:
    """[BLOCKED]: no answer, and a required pattern applies a property to a subject of a conflicting type."""
    lines: list[str] = []
    ctx.counters["blocked"] += 1
    what = "false" if ask_false else "no results"
    lines.append(
        f"[BLOCKED] The query returned {what}, and a triple pattern is type-incompatible: "
        + " Also: ".join(c.describe(ctx) + "." for c in required_conflicts[:2])
    )
    lines.append(
        "Use a property whose domain fits the subject's type, or look for another entity "
        "(the one used may be the wrong one)."
    )
    lines.extend(reversed_direction_hints(ctx, parsed))
    lines.extend(unknown_iri_hints(ctx, sparql, parsed, check_existence=True))
    if ctx.flags.type_state:
        ctx.state.note("fail blocked", required_conflicts[0].short(ctx))
    return lines


def _observe_no_answer(
    ctx: QuestionContext, sparql: str, parsed: ParsedQuery | None, result, ask_false: bool, conflicts: list
) -> tuple[list[str], str]:
    """An ASK false (with hints before trusting it) or an empty result ([WARNING] and what to check)."""
    lines: list[str] = []
    status = "ok"
    hints = reversed_direction_hints(ctx, parsed)
    hints.extend(unknown_iri_hints(ctx, sparql, parsed, check_existence=True))
    if ask_false:
        lines.append("[OK] " + render_ask(result))
        if hints:
            lines.append("[WARNING] Before trusting `false`: " + " ".join(hints))
        if ctx.flags.type_state:
            ctx.state.note("ok", f"ASK false: {_summary(sparql)}")
    else:
        status = "empty"
        ctx.counters["empty"] += 1
        lines.append("[WARNING] The query returned no results.")
        lines.extend(hints)
        if not hints:
            lines.append(
                "Check each triple's direction (subject → object), the property (its domain and range) "
                "and the entities; run smaller fragments to find the pattern that fails."
            )
        if conflicts:
            lines.append("Note: " + "; ".join(c.short(ctx) for c in conflicts[:2]))
        if ctx.flags.type_state:
            ctx.state.note("fail empty", _summary(sparql))
    return lines, status


def _strip_fences(text: str) -> str:
    text = text.strip()
    m = re.match(r"^```(?:sparql|SPARQL)?\s*(.*?)\s*```$", text, re.S)
    return m.group(1) if m else text
