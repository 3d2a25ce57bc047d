"""get_wikidata_entry: an entity's types and its outgoing properties, filtered by the type check (Eq. 3),
ranked by relevance to the question (grounding.lookup_view: the top ones in full, the rest on one line) and
annotated with [domain | range]; a proposed next query only when relevance and the answer type agree."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from saga_dspy.grounding.answer_fit import fits_answer
from saga_dspy.grounding.context import QuestionContext
from saga_dspy.grounding.incoming import (
    IncomingView,
    arrange_incoming,
    describe_incoming,
    fetch_incoming,
    incoming_block,
    rank_incoming,
)
from saga_dspy.grounding.lookup_view import WITH_DESCRIPTION, Arrangement, arrange, rest_block, tail_lines
from saga_dspy.grounding.neighbourhood import Neighbourhood, fetch_neighbourhood, type_filter
from saga_dspy.grounding.ranking import id_order
from saga_dspy.grounding.render import (
    Block,
    body_pids,
    class_names,
    clip,
    entity_text,
    fit,
    literal_text,
    one_hop_query,
    render_blocks,
)
from saga_dspy.kg.flavours.datatypes import EXTERNAL_DATATYPES
from saga_dspy.kg.flavours.datatypes import LOOKUP_ITEM_DATATYPES as ITEM_DATATYPES
from saga_dspy.kg.values import Value
from saga_dspy.proposer import Candidate, propose
from saga_dspy.schema.compat import Decision, Outcome, filterable
from saga_dspy.tools.evidence import evidence_text
from saga_dspy.tools.examples import do_examples
from saga_dspy.tools.results import LookupResult

VALUES_FULL = 3
LOOKUP_DESCRIPTION = 56
VALUES_COMPACT = 2
QUALIFIED_VALUES = 2
TITLE_DESCRIPTION = 100
TYPES_SHOWN = 4
ANNOTATED_CLASSES = 3  # a domain or range of more classes is not annotated
PID_IN_TEXT = re.compile(r"\b(P[1-9]\d*)\b")
CANDIDATE_QUERY_CHARS = 240
CANDIDATES_HEAD = "Candidate queries (executed; run one as it is, edit one, or write your own):"
NEXT_OTHERWISE = "; else execute one edited, or write your own query with the properties above."


# --- helpers ---------------------------------------------------------------------------------------------------------


def _value_text(v: Value, limit: int = 50) -> str:
    if v.id:
        return entity_text(v.id, v.label, limit)
    if v.binding.type == "uri":
        return clip(v.binding.value, limit)
    return literal_text(v.binding, limit)


def _values_text(values: list[Value], shown: int) -> str:
    head = "; ".join(_value_text(v) for v in values[:shown])
    more = len(values) - shown
    return head + (f" (+{more} more)" if more > 0 else "")


def _qualifier_text(ctx: QuestionContext, v: Value, limit: int = 4) -> str:
    parts = []
    for pid, q in v.qualifiers[:limit]:
        parts.append(f"{ctx.property_label(pid)} ({pid}): {_value_text(q, 30)}")
    more = len(v.qualifiers) - limit
    return "; ".join(parts) + (f" +{more}" if more > 0 else "")


def _prior_active(ctx: QuestionContext) -> bool:
    return bool(ctx.flags.answer_type_prior and ctx.state.answer_type)


def _group(ctx: QuestionContext, pid: str) -> int:
    if pid in (ctx.flavour.type_pid, ctx.flavour.subclass_pid):
        return 0
    ps = ctx.schema.get(pid)
    dt = (ps.datatype if ps else None) or ""
    if dt in EXTERNAL_DATATYPES:
        return 3
    return 1 if dt in ITEM_DATATYPES else 2


# --- search ---------------------------------------------------------------------------------------------------------


# --- lookup -----------------------------------------------------------------------------------------------------------


def _prune_with_lm(ctx: QuestionContext, nb: Neighbourhood, pids: list[str]) -> tuple[list[str], str]:
    """The fallback pruning call: (kept pids, note)."""
    if ctx.prune is None:
        return pids, ""
    lines = []
    for pid in pids:
        lines.append(f"{ctx.property_label(pid)} ({pid}): {_values_text(nb.edges[pid], 4)}")
    text = fit(f"{nb.label} ({nb.id}): {nb.description}\n" + "\n".join(lines), 8000)
    ctx.counters["prune_calls"] += 1
    try:
        answer = ctx.prune(ctx.question, text)
    except Exception as exc:  # noqa: BLE001 - the LM failing must not lose the lookup
        return pids, f"relevance pruning failed ({type(exc).__name__}); all properties shown"
    wanted: list[str] = []
    for item in answer or []:
        wanted.extend(PID_IN_TEXT.findall(str(item)) or ([str(item)] if str(item) in nb.edges else []))
    keep = [p for p in pids if p in set(wanted)]
    if ctx.flavour.type_pid in pids and ctx.flavour.type_pid not in keep:
        keep.insert(0, ctx.flavour.type_pid)
    if not keep or keep == [ctx.flavour.type_pid] and len(pids) > 1 and not wanted:
        return pids, "relevance pruning kept nothing; all properties shown"
    return keep, f"pruned for relevance to the question: {len(keep)} of {len(pids)} properties kept"


def _annotation(ctx: QuestionContext, pid: str, ps, domain_holds: bool = False) -> str:
    """' / domain: … / range: …' with the parts that are known (nothing when annotations are off).
    A domain the filter found to hold for the entity is left out: it says nothing new; so is a class list
    longer than ANNOTATED_CLASSES (a broad domain or range says little, as in the compact form)."""
    if not ctx.flags.schema_annotations or ps is None:
        return ""
    parts = []
    if ps.domain is not None and 0 < len(ps.domain.classes) <= ANNOTATED_CLASSES and not domain_holds:
        parts.append(f"domain: {evidence_text(ctx, ps.domain)}")
    observed = ctx.state.observed_range(pid)
    if (ps.range is not None and 0 < len(ps.range.classes) <= ANNOTATED_CLASSES) or (
        observed and not (ps.range is not None and ps.range.classes)
    ):
        parts.append(f"range: {evidence_text(ctx, ps.range, observed)}")
    return "".join(f" / {p}" for p in parts)


def _property_block(
    ctx: QuestionContext, pid: str, values: list[Value], fits: bool, domain_holds: bool = False, described: bool = True
) -> Block:
    """A property with its values: in full (description, annotations, qualifiers) when `described`,
    else in its compact form (values and range) at every size."""
    ps = ctx.schema.get(pid)
    label = ctx.property_label(pid)
    name = f"{label} ({pid})"
    star = " ★" if fits else ""
    external = _group(ctx, pid) == 3
    desc = clip(ps.description, LOOKUP_DESCRIPTION) if ps and ps.description and not external else ""
    first = (
        f"- {name}{star}"
        + (f": {desc}" if desc else "")
        + ("" if external else _annotation(ctx, pid, ps, domain_holds))
    )
    lines = [first, f"  = {_values_text(values, VALUES_FULL)}"]
    for v in [v for v in values[:VALUES_FULL] if v.qualifiers][:QUALIFIED_VALUES]:
        lines.append(f"    [{_value_text(v, 30)}: {_qualifier_text(ctx, v)}]")
    compact = f"- {name}{star} = {_values_text(values, VALUES_COMPACT)}"
    if ctx.flags.schema_annotations and not external and ps is not None:
        observed = ctx.state.observed_range(pid)
        ev = ps.range if ps.range is not None and ps.range.classes else None
        classes = ev.classes if ev else observed
        if classes and len(classes) <= 3:  # a long class list says little in one line
            soft = "typically " if ev is not None and ev.source == "empirical" else ""
            compact += f" [range: {soft}{class_names(classes, ctx.class_label, 2)}]"
    return Block("\n".join(lines) if described else compact, compact, name)


def do_lookup(ctx: QuestionContext, qid: str) -> LookupResult:
    """The lookup tool: the entity's types and its outgoing properties, filtered by type (SAGA Eq. 3) or pruned
    (SPINACH, or an entity without types), ranked by the question, as head lines + property blocks + a next step."""
    flavour = ctx.flavour
    eid = flavour.normalise_entity(qid or "")
    if eid is None:
        return LookupResult(_not_an_entity(ctx, qid))
    ctx.counters["lookups"] += 1
    prior = _prior_active(ctx)
    nb = fetch_neighbourhood(
        ctx.endpoint,
        flavour,
        eid,
        qualifiers=flavour.has_qualifiers or flavour.has_cvt,
        value_types=prior and bool(ctx.state.answer_type and ctx.state.answer_type.qid),
    )
    if nb.error:
        return LookupResult(f"[ERROR] lookup of {eid} failed: {nb.error}")
    if not nb.exists:
        return LookupResult(
            f"[NOT FOUND] {eid} has no statements in the knowledge graph. Search for the entity by name instead."
        )
    _remember(ctx, eid, nb)
    selection = _select(ctx, nb)
    arrangement, order, fits = _rank(ctx, eid, nb, selection.kept, prior)
    head = _head_lines(ctx, eid, nb, selection, fits, prior, arrangement)
    if not selection.all_pids:
        incoming = _incoming(ctx, eid, nb)
        block = incoming_block(ctx, eid, incoming)
        if block is None:
            head.append(
                "No outgoing properties in the knowledge graph: look for it as the object of triples, "
                "or search for a better-connected entity of the same name."
            )
            return LookupResult(fit("\n".join(head), ctx.budget))
        head.append("No outgoing properties in the knowledge graph.")
        tail = [f"Next: execute e.g. {incoming.proposal}"] if incoming.proposal else []  # none without proposals
        text = render_blocks(head, [block], ctx.budget, tail=tail).text
        return LookupResult(text, incoming.proposal, incoming.proposal)
    return _render(ctx, eid, nb, selection, head, arrangement, order, fits)


@dataclass
class _Selection:
    """What the filter (or the LM prune) kept of an entity's properties, and why the rest went."""

    all_pids: list[str]
    kept: list[str]
    removed: list[tuple[str, Decision]] = field(default_factory=list)
    confirmed: set[str] = field(default_factory=set)  # kept because a domain class holds the entity's types
    notes: list[str] = field(default_factory=list)
    filtered: bool = False  # the type filter ran (the entity has types it can check)


def _not_an_entity(ctx: QuestionContext, qid: str) -> str:
    """A property id gets its examples; anything else an error with search hints."""
    flavour = ctx.flavour
    pid = flavour.normalise_property(qid or "")
    if pid is not None:
        return (
            f"{pid} is a property, not an entity: use get_property_examples({pid}) to see how it is used.\n"
            + do_examples(ctx, pid, count=False)
        )
    hint = ""
    if ctx.search is not None and (qid or "").strip():
        try:
            hits = ctx.search.search(str(qid), limit=3, kind="item")
            hint = " Search hits: " + "; ".join(f"{h.id} {clip(h.label, 40)}" for h in hits) if hits else ""
        except Exception:  # noqa: BLE001 - hints are a courtesy: the error below says what matters
            pass
    return f"[ERROR] {clip(str(qid), 60)!r} is not an entity id (e.g. {flavour.entity_example}).{hint}"


def _remember(ctx: QuestionContext, eid: str, nb: Neighbourhood) -> None:
    """Labels and types the lookup saw, for later renderings and the type state."""
    ctx.remember(eid, nb.label)
    for pid, values in nb.edges.items():
        if (plabel := ctx.property_label(pid)) != pid:
            ctx.remember(pid, plabel)
        for v in values:
            if v.id and v.label:
                ctx.remember(v.id, v.label)
    ctx.record_entity_types(eid, nb.types, nb.label)


def _select(ctx: QuestionContext, nb: Neighbourhood) -> _Selection:
    """SPINACH prunes every neighbourhood with the LM; SAGA filters by type, and prunes only an untyped entity."""
    et = nb.types
    sel = _Selection(all_pids=list(nb.edges), kept=list(nb.edges))
    has_types = filterable(et, ctx.filter_mode)
    if ctx.flags.prune_all and sel.all_pids:
        sel.kept, note = _prune_with_lm(ctx, nb, sel.all_pids)
        sel.notes += [note] if note else []
    elif ctx.flags.type_filter and has_types:
        fr = type_filter(nb, ctx.schema, ctx.hierarchy, ctx.filter_mode, et)
        sel.kept, sel.removed, sel.filtered = fr.kept, fr.removed, True
        sel.confirmed = {pid for pid, d in fr.decisions.items() if d.outcome is Outcome.COMPATIBLE}
    elif ctx.flags.type_filter:
        sel.notes.append("Type filter skipped: the entity has no types.")
        if ctx.prune is not None and sel.all_pids:  # nothing to prune: no LM call
            sel.kept, note = _prune_with_lm(ctx, nb, sel.all_pids)
            sel.notes += [note] if note else []
    return sel


def _rank(ctx: QuestionContext, eid: str, nb: Neighbourhood, kept: list[str], prior: bool):
    """(arrangement, order, fits): by relevance to the question (see lookup_view); SPINACH and the paper's compact
    view (`question_view` off) keep the plain order (answer-type fit, then group, then id) and have no arrangement."""
    if ctx.flags.prune_all or not ctx.flags.question_view:
        fits = {pid: (prior and fits_answer(ctx, pid, nb.edges[pid])) for pid in kept}
        return None, sorted(kept, key=lambda p: (not fits[p], _group(ctx, p), id_order(p))), fits
    at = ctx.state.answer_type
    confident = prior and at is not None and at.label not in ("", "entity")
    arrangement = arrange(
        ctx,
        eid,
        nb.label,
        kept,
        lambda p: fits_answer(ctx, p, nb.edges.get(p, [])),
        lambda p: any(v.id for v in nb.edges.get(p, [])) or _group(ctx, p) == 1,
        confident=confident,
        values=_named_values(ctx, nb, kept),
        echoes=frozenset(p for p in kept if nb.edges.get(p) and all(v.id == eid for v in nb.edges[p])),
    )
    return arrangement, arrangement.order, {pid: pid in arrangement.starred for pid in kept}


def _named_values(ctx: QuestionContext, nb: Neighbourhood, kept: list[str]) -> dict[str, list[str]] | None:
    """The labels of the entity's values a yes/no question may name ("Is Obama a democrat?": member of political
    party = Democratic Party). Only there: in a wh-question the answer is not in it, and the values its words
    meet name other things around the subject ("Cameron's Titanic": director)."""
    at = ctx.state.answer_type
    if at is None or not at.yes_no:
        return None
    return {pid: [v.label for v in nb.edges.get(pid, []) if v.id and v.label] for pid in kept}


def _incoming(ctx: QuestionContext, eid: str, nb: Neighbourhood, outgoing: Arrangement | None = None) -> IncomingView:
    """The properties pointing at the entity (a SAGA grounding flag; none for SPINACH), beside the `outgoing`
    arrangement (None: no outgoing properties). A proposal only when the outgoing side makes none and its property
    matches the question better than the outgoing ones, on type fit alone only when no outgoing property fits the
    answer type or matches the question. When the outgoing side proposes, a section no property of which matches
    the question is not shown, so its examples and subject types are not fetched either."""
    if not ctx.flags.incoming_edges:
        return IncomingView({})
    scores = outgoing.scores if outgoing is not None else []
    outgoing_proposal = outgoing is not None and outgoing.proposal is not None
    at = ctx.state.answer_type if _prior_active(ctx) else None
    qid = at.qid if at else None
    edges = fetch_incoming(ctx, eid)
    ranked = rank_incoming(ctx, nb.label, edges)
    if outgoing_proposal and not IncomingView(edges, scores=ranked).relevant_shown:
        return IncomingView({})
    items = at.items if at else ""
    describe_incoming(ctx, eid, edges, subject_types=bool(qid or items))
    return arrange_incoming(
        ctx,
        eid,
        nb.label,
        edges,
        qid,
        propose=not outgoing_proposal and ctx.flags.proposals,
        fit_alone=not any(s.fits for s in scores),
        ranked=ranked,
        outgoing_best=max((s.relevance for s in scores), default=0.0),
        items=items,
    )


def _head_lines(
    ctx: QuestionContext, eid: str, nb: Neighbourhood, sel: _Selection, fits: dict[str, bool], prior: bool, arrangement
) -> list[str]:
    """The entity, its types, what the filter removed (and what that suggests), the ★ legend."""
    et = nb.types
    title = f"{nb.label} ({eid})" if nb.label and nb.label != eid else eid
    head = [title + (f": {clip(nb.description, TITLE_DESCRIPTION)}" if nb.description else "")]
    if et.types:
        if et.is_class and et.source == "p279":
            head.append(
                "Types: none declared; a class, subclass of "
                + class_names(et.types, ctx.class_label, TYPES_SHOWN, ids=True)
            )
        else:
            head.append(f"Types: {class_names(et.types, ctx.class_label, TYPES_SHOWN, ids=True)}")
    else:
        head.append("Types: none known")
    if sel.removed:
        domains = {
            pid: class_names(ctx.schema.get(pid).domain.classes, ctx.class_label, 2) for pid, _ in sel.removed[:6]
        }
        why = "; ".join(f"{ctx.property_label(pid)} ({pid}) [domain: {domain}]" for pid, domain in domains.items())
        more = f" and {len(sel.removed) - 6} more" if len(sel.removed) > 6 else ""
        type_names = class_names(et.types, ctx.class_label, 2)
        head.append(
            f"Type filter: {len(sel.removed)} of {len(sel.all_pids)} properties removed, their domain conflicts with "
            f"the types ({type_names}): {why}{more}. If the question needs one, this is probably the wrong entity."
        )
    elif sel.filtered:
        head.append("Type filter: no property conflicts.")
    head.extend(sel.notes)
    if prior and ctx.state.answer_type is not None and any(fits.values()):
        head.append(
            f"★ = range fits the expected answer type ({ctx.state.answer_type.render()})"
            + ("; listed first." if arrangement is None else " and it is the question's clear best match.")
        )
    return head


def _render(
    ctx: QuestionContext,
    eid: str,
    nb: Neighbourhood,
    sel: _Selection,
    head: list[str],
    arrangement,
    order: list[str],
    fits: dict[str, bool],
) -> LookupResult:
    """Head, property blocks (the top ones in full, the rest on one line) and the next step within the budget."""
    n_vals = sum(len(nb.edges[p]) for p in sel.kept)
    cap = " (the endpoint cut the neighbourhood off)" if nb.capped else ""
    order_note = "" if arrangement is None else ", most relevant first"
    if len(sel.kept) == len(sel.all_pids) and n_vals == nb.edge_count and not nb.capped:  # nothing left out
        head.append(f"Outgoing properties ({len(sel.kept)}{order_note}):")
    else:
        head.append(
            f"Outgoing properties: {len(sel.kept)} of {len(sel.all_pids)}{order_note}, "
            f"{n_vals} of {nb.edge_count} values{cap}:"
        )
    if arrangement is not None:  # top properties in full, the rest as one line; hints only when they agree
        blocks = [
            _property_block(ctx, pid, nb.edges[pid], fits[pid], pid in sel.confirmed, i < WITH_DESCRIPTION)
            for i, pid in enumerate(arrangement.full)
        ]
        outgoing_proposal = arrangement.proposal is not None
        incoming = _incoming(ctx, eid, nb, arrangement)
        blocks += (
            [b] if (b := incoming_block(ctx, eid, incoming, only_if_relevant=outgoing_proposal)) is not None else []
        )
        rest = rest_block(ctx, arrangement.rest)
        blocks += [rest] if rest is not None else []
        shown = ctx.settings.shown_candidates
        proposes = ctx.flavour.proposes_queries and ctx.flags.proposals
        candidates = tuple(propose(ctx, nb, arrangement, incoming, shown)) if proposes else ()
        tail = candidate_lines(ctx, candidates[:shown]) if shown and candidates else []
        tail = tail or tail_lines(ctx, arrangement, incoming.proposal)
        text = render_blocks(head, blocks, ctx.budget, tail=tail).text
        return LookupResult(
            text,
            arrangement.proposal or incoming.proposal,
            candidates[0].sparql if candidates else None,
            candidates[:shown],
        )
    blocks = [_property_block(ctx, pid, nb.edges[pid], fits[pid], pid in sel.confirmed) for pid in order]
    starred = [pid for pid in order if fits[pid]]
    proposes = ctx.flavour.proposes_queries and ctx.flags.proposals
    proposal = one_hop_query(eid, starred[0]) if starred and proposes else None
    if proposal:
        tail = [f"Next: execute a query with the property that leads to the answer, e.g. {proposal}"]
    else:
        tail = ["Next: execute a query with the property above that leads to the answer."]
    return LookupResult(render_blocks(head, blocks, ctx.budget, tail=tail).text, proposal, proposal)


def candidate_lines(ctx: QuestionContext, candidates: tuple[Candidate, ...]) -> list[str]:
    """The lookup's last section: its ranked candidate queries, each with how it was built, the properties it
    uses, its executed answers (and whether they fit the expected answer type), then the `Next:` line."""
    lines = [CANDIDATES_HEAD]
    for c in candidates:
        props = ", ".join(f"{clip(ctx.property_label(pid), 30)} ({pid})" for pid in body_pids(c.sparql)[:3])
        star = " (fit the answer type)" if c.fits else ""
        lines.append(
            f"{c.rank}. [{' + '.join(c.built)}{'; ' + props if props else ''}] {clip(c.sparql, CANDIDATE_QUERY_CHARS)}"
            f"\n   → {c.preview.render() if c.preview else 'not executed'}{star}"
        )
    return [*lines, next_candidates([c.rank for c in candidates])]


def next_candidates(ranks: Sequence[int]) -> str:
    """The candidates' `Next:` line, each way to pick written out as stop's argument (what the model copies is a
    shown rank; docs/DESIGN.md, demonstrations that pick)."""
    picks = [f'{{"candidate": {rank}}}' for rank in ranks]
    listed = picks[0] if len(picks) == 1 else f"{', '.join(picks[:-1])} or {picks[-1]}"
    which = f"candidate {ranks[0]}" if len(ranks) == 1 else "that candidate"
    return f"Next: stop with {listed} if {which} answers the question{NEXT_OTHERWISE}"


# --- property examples ------------------------------------------------------------------------------------------------


# --- execute ----------------------------------------------------------------------------------------------------------


# --- stop -------------------------------------------------------------------------------------------------------------


# --- the tool set -----------------------------------------------------------------------------------------------------
