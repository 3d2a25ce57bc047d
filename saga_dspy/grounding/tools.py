"""The five SAGA tools as plain typed functions over a `QuestionContext`.

`make_tools(ctx)` returns `[search_wikidata, get_wikidata_entry, get_property_examples,
execute_sparql, stop]` (names and argument shapes of the paper's controller prompt).
Each returns a string observation within `settings.observation_chars` that says what
it cut; none raises (errors come back as `[ERROR] …` observations)."""

from __future__ import annotations

import logging
import re
import time
from collections import Counter
from typing import Callable

from ..kg.errors import SparqlError
from ..kg.results import AskResult, SelectResult
from ..kg.search import SearchHit
from .checks import find_conflicts, reversed_direction_hints, unknown_iri_hints
from .context import Execution, QuestionContext
from .lookup_view import arrange, rest_block, tail_lines
from .neighbourhood import Neighbourhood, Value, fetch_neighbourhood, type_filter
from .patterns import ParsedQuery, parse_query
from .render import DESCRIPTION, Block, class_names, clip, entity_text, fit, literal_text, render_ask, render_blocks, render_table

log = logging.getLogger(__name__)

VALUES_FULL = 3
LOOKUP_DESCRIPTION = 70
VALUES_COMPACT = 2
QUALIFIED_VALUES = 2
NEXT_AFTER_OK = "Next: stop if these results answer the question; else refine the query."
SEARCH_ITEMS = 8
SEARCH_PROPERTIES = 4
EXAMPLES = 5
RESULT_TYPE_SAMPLE = 5
RESULT_TYPE_TOTAL = 15
TABLE_LABELS = 60
_DATES = ("Time", "type.datetime")
_NUMBERS = ("Quantity", "type.int", "type.float")
_STRINGS = ("String", "Monolingualtext", "type.text", "type.rawstring")
SCALAR_ANSWERS = {
    "date": _DATES, "time": _DATES, "year": _DATES,
    "quantity": _NUMBERS, "number": _NUMBERS, "count": _NUMBERS, "amount": _NUMBERS,
    "string": _STRINGS, "text": _STRINGS, "name": _STRINGS,
}
ITEM_DATATYPES = ("WikibaseItem", "WikibaseProperty", "WikibaseLexeme", "WikibaseForm", "WikibaseSense", "entity", "")
EXTERNAL_DATATYPES = ("ExternalId", "type.key", "type.id")
PID_IN_TEXT = re.compile(r"\b(P[1-9]\d*)\b")
_WORDS = re.compile(r"\w+")


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
    return head + (f" (+{more} more, {len(values)} values)" if more > 0 else "")


def _qualifier_text(ctx: QuestionContext, v: Value, limit: int = 4) -> str:
    parts = []
    for pid, q in v.qualifiers[:limit]:
        parts.append(f"{ctx.property_label(pid)} ({pid}): {_value_text(q, 30)}")
    more = len(v.qualifiers) - limit
    return "; ".join(parts) + (f" +{more}" if more > 0 else "")


def _evidence_text(ctx: QuestionContext, ev, observed: tuple[str, ...] = ()) -> str:
    if ev is not None and ev.classes:
        soft = "typically " if ev.source == "empirical" else ""
        return soft + class_names(ev.classes, ctx.class_label, 2)
    if observed:
        return class_names(observed, ctx.class_label, 2) + " (seen in this question)"
    return "unknown"


def _prior_active(ctx: QuestionContext) -> bool:
    return bool(ctx.flags.answer_type_prior and ctx.state.answer_type)


def _fits_answer(ctx: QuestionContext, pid: str, values: list[Value]) -> bool:
    """Does this property's range (indexed, or seen in this question) or its values fit the expected answer type?"""
    at = ctx.state.answer_type
    if at is None:
        return False
    ps = ctx.schema.get(pid)
    label = at.label.lower().strip()
    scalar = SCALAR_ANSWERS.get(label)
    if scalar:
        return bool(ps and ps.datatype in scalar)
    if not at.qid:
        return False
    h = ctx.hierarchy
    ranges = list(ps.range.classes) if ps and ps.range else list(ctx.state.observed_range(pid))
    try:
        near = {at.qid, *h.parents(at.qid)}  # the answer type and its direct superclasses
        for r in ranges:
            # the range is the answer type, a subclass of it, or its direct superclass (human ~ person);
            # broader ranges would make every property fit
            if r in near or at.qid in h.ancestors(r):
                return True
        for v in values[:5]:
            for t in v.types:
                if at.qid in h.ancestors(t):
                    return True
    except Exception:  # noqa: BLE001 - ranking is best effort
        return False
    return False


def _group(ctx: QuestionContext, pid: str) -> int:
    if pid in (ctx.flavour.type_pid, ctx.flavour.subclass_pid):
        return 0
    ps = ctx.schema.get(pid)
    dt = (ps.datatype if ps else None) or ""
    if dt in EXTERNAL_DATATYPES:
        return 3
    return 1 if dt in ITEM_DATATYPES else 2


def _pid_order(pid: str) -> tuple[int, str]:
    return (int(pid[1:]), pid) if pid[1:].isdigit() else (1 << 40, pid)


def _guarded(ctx: QuestionContext, name: str, argument: str, fn: Callable[[], str]) -> str:
    started = time.monotonic()
    before = ctx.counters["sparql_queries"]
    try:
        out = fn()
    except Exception as exc:  # noqa: BLE001 - a tool never raises into the agent loop
        log.warning("tool %s failed: %s", name, exc, exc_info=log.isEnabledFor(logging.DEBUG))
        ctx.counters["errors"] += 1
        out = f"[ERROR] {name} failed: {type(exc).__name__}: {clip(str(exc), 200)}"
    ctx.record_call(name, argument, started, before)
    return fit(out, ctx.budget)


# --- search ---------------------------------------------------------------------------------------------------------


def do_search(ctx: QuestionContext, query: str) -> str:
    ctx.counters["searches"] += 1
    query = (query or "").strip().strip('"').strip("'")
    if not query:
        return "[ERROR] search_wikidata needs a search string."
    if ctx.search is None:
        return "[ERROR] entity search is not available for this endpoint."
    try:
        items = ctx.search.search(query, limit=SEARCH_ITEMS, kind="item")
        props = ctx.search.search(query, limit=SEARCH_PROPERTIES, kind="property")
    except Exception as exc:  # noqa: BLE001 - the search service failing is an observation
        return f"[ERROR] search failed: {clip(str(exc), 200)}"
    for hit in items + props:
        ctx.remember(hit.id, hit.label)
    annotate = ctx.flags.schema_annotations
    types = ctx.entity_types([h.id for h in items]) if (annotate and items) else {}
    blocks = []
    for hit in items:
        desc = f": {clip(hit.description, DESCRIPTION)}" if hit.description else ""
        tail = ""
        et = types.get(hit.id)
        if et is not None:
            if et.types and et.is_class and et.source != "p31":
                tail = f" [class; subclass of {class_names(et.types, ctx.class_label, 2)}]"
            elif et.types:
                tail = f" [{class_names(et.types, ctx.class_label, 2)}]"
            else:
                tail = " [no types]"
        name = f"{hit.id} {clip(hit.label, 40)}"
        blocks.append(Block(f"- {hit.id} {clip(hit.label, 60)}{desc}{tail}", f"- {name}{tail}", name))
    prop_blocks = []
    for hit in props:
        ps = ctx.schema.get(hit.id)
        desc = f": {clip(hit.description or (ps.description if ps else ''), DESCRIPTION)}"
        ann = ""
        if annotate:
            ann = (f" [domain: {_evidence_text(ctx, ps.domain if ps else None)} | "
                   f"range: {_evidence_text(ctx, ps.range if ps else None, ctx.state.observed_range(hit.id))}]")
        dt = f" ({hit.datatype or (ps.datatype if ps else '')})" if (hit.datatype or (ps and ps.datatype)) else ""
        name = f"{hit.id} {clip(hit.label, 40)}"
        prop_blocks.append(Block(f"- {hit.id} {clip(hit.label, 60)}{dt}{desc}{ann}", f"- {name}{ann}", name))
    if not blocks and not prop_blocks:
        return f'No entities or properties match "{clip(query, 80)}". Try another wording (a shorter name, no qualifiers).'
    head = [f'Search results for "{clip(query, 80)}":']
    all_blocks = []
    if blocks:
        all_blocks.append(Block("Entities:", "Entities:", ""))
        all_blocks.extend(blocks)
    if prop_blocks:
        all_blocks.append(Block("Properties:", "Properties:", ""))
        all_blocks.extend(prop_blocks)
    tail = []
    if items:  # a small model repeats its search unless told the next move (measured with the 1.5B model)
        pick = _hint_pick(query, items)
        tail.append(f'Next: get_wikidata_entry({{"qid": "{pick.id}"}}) if {pick.id} ({clip(pick.label, 40)}) is what '
                    f"the question means; else look up another hit or search again.")
    rendered = render_blocks(head, all_blocks, ctx.budget, what="hits", tail=tail)
    return rendered.text


def _hint_pick(query: str, items: list[SearchHit]) -> SearchHit:
    """The hit a search's "Next:" line proposes: an exact label match, else the hit whose whole
    label the query names (most words first, then the search's order), else the first hit.
    The first hit alone misled the agent when it searched a phrase: for "Tencent company
    founders" the index once ranked "Worshipful Company of Founders" first (measured here)."""
    wanted = " ".join(_WORDS.findall(query.lower()))
    named = []
    for rank, hit in enumerate(items):
        label = " ".join(_WORDS.findall((hit.label or "").lower()))
        if label == wanted:
            return hit
        if label and f" {label} " in f" {wanted} ":
            named.append((-label.count(" "), rank, hit))
    return min(named, key=lambda t: t[:2])[2] if named else items[0]


# --- lookup ------------------------------------------------------------------------------------------------------------


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


def _annotation(ctx: QuestionContext, pid: str, ps) -> str:
    """' / domain: … / range: …' with the parts that are known (nothing when annotations are off)."""
    if not ctx.flags.schema_annotations or ps is None:
        return ""
    parts = []
    if ps.domain is not None and ps.domain.classes:
        parts.append(f"domain: {_evidence_text(ctx, ps.domain)}")
    observed = ctx.state.observed_range(pid)
    if (ps.range is not None and ps.range.classes) or observed:
        parts.append(f"range: {_evidence_text(ctx, ps.range, observed)}")
    return "".join(f" / {p}" for p in parts)


def _property_block(ctx: QuestionContext, pid: str, values: list[Value], fits: bool) -> Block:
    ps = ctx.schema.get(pid)
    label = ctx.property_label(pid)
    name = f"{label} ({pid})"
    star = " ★" if fits else ""
    external = _group(ctx, pid) == 3
    desc = clip(ps.description, LOOKUP_DESCRIPTION) if ps and ps.description and not external else ""
    first = f"- {name}{star}" + (f": {desc}" if desc else "") + ("" if external else _annotation(ctx, pid, ps))
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
    return Block("\n".join(lines), compact, name)


def do_lookup(ctx: QuestionContext, qid: str) -> str:
    flavour = ctx.flavour
    eid = flavour.normalise_entity(qid or "")
    if eid is None:
        pid = flavour.normalise_property(qid or "")
        if pid is not None:
            return (f"{pid} is a property, not an entity: use get_property_examples({pid}) to see how it is used.\n"
                    + do_examples(ctx, pid, count=False))
        hint = ""
        if ctx.search is not None and (qid or "").strip():
            try:
                hits = ctx.search.search(str(qid), limit=3, kind="item")
                hint = " Search hits: " + "; ".join(f"{h.id} {clip(h.label, 40)}" for h in hits) if hits else ""
            except Exception:  # noqa: BLE001
                pass
        return f"[ERROR] {clip(str(qid), 60)!r} is not an entity id (e.g. {'Q42' if flavour.name == 'wikidata' else 'm.0abc'}).{hint}"
    ctx.counters["lookups"] += 1
    prior = _prior_active(ctx)
    nb = fetch_neighbourhood(ctx.endpoint, flavour, eid, qualifiers=flavour.has_qualifiers or flavour.has_cvt,
                             value_types=prior and bool(ctx.state.answer_type and ctx.state.answer_type.qid))
    if nb.error:
        return f"[ERROR] lookup of {eid} failed: {nb.error}"
    if not nb.exists:
        return f"[NOT FOUND] {eid} has no statements in the knowledge graph. Search for the entity by name instead."
    ctx.remember(eid, nb.label)
    for pid, values in nb.edges.items():
        if (plabel := ctx.property_label(pid)) != pid:
            ctx.remember(pid, plabel)
        for v in values:
            if v.id and v.label:
                ctx.remember(v.id, v.label)
    et = nb.types
    ctx.record_entity_types(eid, et, nb.label)
    all_pids = list(nb.edges)
    raw_edges = nb.edge_count

    # --- filter / prune -------------------------------------------------------------------------------------------------
    removed: list[tuple[str, object]] = []
    notes: list[str] = []
    kept = all_pids
    has_types = bool(et.types) and (ctx.filter_mode != "bare" or bool(et.p31))
    if ctx.flags.prune_all and all_pids:
        kept, note = _prune_with_lm(ctx, nb, all_pids)
        if note:
            notes.append(note)
    elif ctx.flags.type_filter and has_types:
        fr = type_filter(nb, ctx.schema, ctx.hierarchy, ctx.filter_mode, et)
        kept, removed = fr.kept, fr.removed
    elif ctx.flags.type_filter:
        notes.append("Type filter skipped: the entity has no types.")
        if ctx.prune is not None and all_pids:  # nothing to prune: no LM call
            kept, note = _prune_with_lm(ctx, nb, all_pids)
            if note:
                notes.append(note)

    # --- rank (issue 12: by relevance to the question, see lookup_view; spinach keeps the plain order) ---------------------
    arrangement = None
    if ctx.flags.prune_all:
        fits = {pid: (prior and _fits_answer(ctx, pid, nb.edges[pid])) for pid in kept}
        order = sorted(kept, key=lambda p: (not fits[p], _group(ctx, p), _pid_order(p)))
    else:
        confident = prior and ctx.state.answer_type.label not in ("", "entity")
        arrangement = arrange(ctx, eid, nb.label, kept, lambda p: _fits_answer(ctx, p, nb.edges.get(p, [])),
                              lambda p: any(v.id for v in nb.edges.get(p, [])) or _group(ctx, p) == 1,
                              confident=confident, wikidata=flavour.name == "wikidata")
        order = arrangement.order
        fits = {pid: pid in arrangement.starred for pid in kept}
    # --- end rank ---

    # --- head ----------------------------------------------------------------------------------------------------------------
    head = [f"{nb.label or eid} ({eid})" + (f": {clip(nb.description, 160)}" if nb.description else "")]
    if et.types:
        if et.is_class and et.source == "p279":
            head.append(f"Types: none declared; a class, subclass of {class_names(et.types, ctx.class_label, 4, ids=True)}")
        else:
            head.append(f"Types: {class_names(et.types, ctx.class_label, 4, ids=True)}")
    else:
        head.append("Types: none known")
    n_vals = sum(len(nb.edges[p]) for p in kept)
    if removed:
        why = "; ".join(
            f"{ctx.property_label(pid)} ({pid}) [domain: {class_names(ctx.schema.get(pid).domain.classes, ctx.class_label, 2)}]"
            for pid, _ in removed[:6]
        )
        more = f" and {len(removed) - 6} more" if len(removed) > 6 else ""
        type_names = class_names(et.types, ctx.class_label, 2)
        head.append(
            f"Type filter: {len(removed)} of {len(all_pids)} properties removed because their domain conflicts with "
            f"this entity's types ({type_names}): {why}{more}. If the question needs one of them, this is probably the wrong entity."
        )
    elif ctx.flags.type_filter and has_types:
        head.append(f"Type filter: no property conflicts with this entity's types (all {len(all_pids)} kept).")
    head.extend(notes)
    if prior and any(fits.values()):
        head.append(f"★ = range fits the expected answer type ({ctx.state.answer_type.render()})"
                    + ("; listed first." if arrangement is None else " and the property matches the question."))
    cap = " (the endpoint cut the neighbourhood off)" if nb.capped else ""
    if not all_pids:
        head.append("No outgoing properties in the knowledge graph: look for it as the object of triples, "
                    "or search for a better-connected entity of the same name.")
        return fit("\n".join(head), ctx.budget)
    shown = f"{len(kept)} shown" if arrangement is None else f"{len(kept)} (most relevant first, {len(arrangement.full)} in full)"
    head.append(f"Outgoing properties: {shown} of {len(all_pids)}, {n_vals} of {raw_edges} values{cap}:")
    if arrangement is not None:  # issue 12: top properties in full, the rest as one line; hints only when they agree
        blocks = [_property_block(ctx, pid, nb.edges[pid], fits[pid]) for pid in arrangement.full]
        rest = rest_block(ctx, arrangement.rest)
        blocks += [rest] if rest is not None else []
        if arrangement.proposal:
            ctx.suggested_sparql = arrangement.proposal
        return render_blocks(head, blocks, ctx.budget, tail=tail_lines(ctx, arrangement)).text
    blocks = [_property_block(ctx, pid, nb.edges[pid], fits[pid]) for pid in order]
    starred = [pid for pid in order if fits[pid]]
    if starred and flavour.name == "wikidata":
        ctx.suggested_sparql = f"SELECT DISTINCT ?x WHERE {{ wd:{eid} wdt:{starred[0]} ?x }}"
        tail = [f"Next: execute a query with the property that leads to the answer, e.g. {ctx.suggested_sparql}"]
    else:
        tail = ["Next: execute a query with the property above that leads to the answer."]
    return render_blocks(head, blocks, ctx.budget, tail=tail).text


# --- property examples -------------------------------------------------------------------------------------------------------


def do_examples(ctx: QuestionContext, pid: str, count: bool = True) -> str:
    flavour = ctx.flavour
    norm = flavour.normalise_property(pid or "")
    if norm is None:
        return f"[ERROR] {clip(str(pid), 60)!r} is not a property id (e.g. {'P19' if flavour.name == 'wikidata' else 'people.person.place_of_birth'})."
    pid = norm
    if count:
        ctx.counters["examples"] += 1
    ps = ctx.schema.get(pid)
    if ps is None:
        return f"[NOT FOUND] {pid} is not a known property. Use search_wikidata to find the property by name."
    ctx.remember(pid, ps.label)
    head = [f"{ps.label or pid} ({pid})" + (f": {clip(ps.description, 200)}" if ps.description else "")]
    if ps.datatype:
        head.append(f"Value type: {ps.datatype}")
    if ctx.flags.schema_annotations:
        head.append(f"domain: {_evidence_text(ctx, ps.domain)} | range: {_evidence_text(ctx, ps.range, ctx.state.observed_range(pid))}")
    rows = []
    source = ""
    if flavour.example_pid:
        try:
            result = ctx.query(flavour.examples_query(pid, EXAMPLES))
            if isinstance(result, SelectResult):
                rows = result.rows
                source = flavour.example_pid
        except SparqlError as exc:
            head.append(f"[examples query failed: {exc.kind}]")
    seen_subjects: dict[str, list] = {}
    for row in rows:
        s = row.get("s")
        if s is None:
            continue
        entry = seen_subjects.setdefault(s.value, [row.get("sl"), []])
        if "v" in row and all(row["v"].value != v[0].value for v in entry[1]):
            entry[1].append((row["v"], row.get("vl")))
    with_values = sum(1 for _, vals in seen_subjects.values() if vals)
    sampled: dict[str, list] = {}
    if with_values < 2:  # the examples say little: show real uses too
        try:
            result = ctx.query(flavour.sample_triples_query(pid, EXAMPLES * 3))
            if isinstance(result, SelectResult):
                for row in result.rows:
                    s = row.get("s")
                    if s is None or s.value in seen_subjects:
                        continue
                    entry = sampled.setdefault(s.value, [row.get("sl"), []])
                    if "v" in row and len(entry[1]) < 3:
                        entry[1].append((row["v"], row.get("vl")))
        except SparqlError as exc:
            head.append(f"[sample query failed: {exc.kind}]")
    if not seen_subjects and not sampled:
        head.append("No examples or uses of this property in the knowledge graph.")
        return "\n".join(head)
    head.append(f"Pattern: ?subject {flavour.property_token(pid)} ?value")

    def block(iri: str, sl, vals) -> Block:
        sid = flavour.entity_id(iri)
        subj = entity_text(sid, sl.value if sl else "") if sid else clip(iri, 50)
        if sid and sl:
            ctx.remember(sid, sl.value)
        shown = []
        for v, vl in vals[:3]:
            vid = flavour.entity_id(v.value) if v.is_iri else None
            shown.append(entity_text(vid, vl.value if vl else "") if vid else literal_text(v, 50))
            if vid and vl:
                ctx.remember(vid, vl.value)
        line = f"- {subj} → {'; '.join(shown)}" if shown else f"- {subj} → (its value is not in the knowledge graph)"
        return Block(line, clip(line, 100), subj)

    blocks = []
    if seen_subjects:
        blocks.append(Block(f"Usage examples ({source}):", f"Usage examples ({source}):", ""))
        # examples with a value first
        ordered = sorted(seen_subjects.items(), key=lambda kv: not kv[1][1])
        blocks.extend(block(iri, sl, vals) for iri, (sl, vals) in ordered[:EXAMPLES])
    if sampled:
        blocks.append(Block("Uses in the knowledge graph (sampled):", "Uses in the knowledge graph (sampled):", ""))
        blocks.extend(block(iri, sl, vals) for iri, (sl, vals) in list(sampled.items())[:EXAMPLES])
    more = max(0, len(seen_subjects) - EXAMPLES)
    tail = [f"(+{more} more usage examples not shown)"] if more > 0 else []
    return render_blocks(head, blocks, ctx.budget, tail=tail, what="examples").text


# --- execute ------------------------------------------------------------------------------------------------------------------


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


def _learn_from_result(ctx: QuestionContext, parsed: ParsedQuery | None, result: SelectResult,
                       sample: dict[str, list[str]], types: dict) -> list[str]:
    """Θ updates from a non-empty result: entity types, observed variable types, trace-local ranges."""
    learnt = []
    if not ctx.flags.type_state:
        return learnt
    for var, ids in sample.items():
        counter: Counter = Counter()
        for eid in ids:
            et = types.get(eid)
            if et is None or not et.types:
                continue
            counter.update(et.types)
            ctx.state.record_entity(eid, et.types, ctx.seen.get(eid, ""), is_class=et.is_class, source="result",
                                   has_p31=et.source != "p279")
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
        classes = [t for eid in ids for t in (types.get(eid).types if types.get(eid) else ())]
        if classes:
            ctx.state.add_range_evidence(ref.pid, classes)
            top = ctx.state.observed_range(ref.pid, 2)
            learnt.append(f"{ref.pid} returns {', '.join(ctx.class_label(c) for c in top)}")
    return learnt


def _summary(sparql: str) -> str:
    body = " ".join(sparql.split())
    m = re.search(r"\{(.*)\}", body)
    return clip(m.group(1).strip() if m else body, 70)


def do_execute(ctx: QuestionContext, sparql: str) -> str:
    flavour = ctx.flavour
    ctx.counters["executions"] += 1
    sparql = _strip_fences(sparql or "")
    started = time.monotonic()
    parsed = parse_query(sparql, flavour)
    try:
        result = ctx.query(sparql)
    except SparqlError as exc:
        ctx.counters["errors"] += 1
        ex = Execution(sparql, None, str(exc), "error", seconds=time.monotonic() - started, error_kind=exc.kind)
        ctx.executions.append(ex)
        if ctx.flags.type_state:
            ctx.state.note("fail error", f"{exc.kind}: {_summary(sparql)}")
        lines = [f"[ERROR] {exc.kind}: {clip(str(exc), 240)}"]
        lines.extend(unknown_iri_hints(ctx, sparql, parsed, check_existence=exc.kind == "syntax"))
        return fit("\n".join(lines), ctx.budget)
    seconds = time.monotonic() - started

    # Θ from the query text
    if ctx.flags.type_state and parsed is not None:
        dom = lambda pid: tuple(ctx.schema.get(pid).domain.classes) if ctx.schema.get(pid) and ctx.schema.get(pid).domain else ()  # noqa: E731
        rng = lambda pid: tuple(ctx.schema.get(pid).range.classes) if ctx.schema.get(pid) and ctx.schema.get(pid).range else ()  # noqa: E731
        ctx.state.update_from_query(parsed, flavour, dom, rng)

    # types needed: constants of the query (conflict check, Θ) and a sample of the result's entities
    sample = _result_entities(ctx, result) if isinstance(result, SelectResult) and result.rows else {}
    constants = []
    if parsed is not None:
        for p in parsed.patterns:
            for term in (p.subject, p.obj):
                if term.kind == "iri":
                    eid = flavour.entity_id(term.value)
                    if eid and flavour.entity_re.match(eid) and not (p.type_kind and term is p.obj):
                        constants.append(eid)
    wanted = list(dict.fromkeys(constants[:20] + [e for ids in sample.values() for e in ids]))
    types = ctx.entity_types(wanted) if wanted and (ctx.flags.conflict_check or ctx.flags.type_state) else {}
    const_labels = ctx.labels(constants[:20]) if constants and (ctx.flags.conflict_check or ctx.flags.type_state) else {}
    conflicts = find_conflicts(ctx, parsed) if ctx.flags.conflict_check else []
    # a conflict blocks only when it is demonstrated on a known entity in a required pattern; a variable's
    # declared type is only part of its bound entities' types, so that one is a note
    required_conflicts = [c for c in conflicts if c.required and not c.declared]
    if ctx.flags.type_state:
        for eid in dict.fromkeys(constants[:20]):
            et = types.get(eid)
            if et is not None and et.types and eid not in ctx.state.entities:
                ctx.state.record_entity(eid, et.types, const_labels.get(eid, ""), is_class=et.is_class, source="query",
                                        has_p31=et.source != "p279")

    is_ask = isinstance(result, AskResult)
    ask_false = is_ask and not result.value
    lines: list[str] = []
    status = "ok"
    if isinstance(result, SelectResult) and result.rows:
        ids = []
        for row in result.rows[:TABLE_LABELS]:
            for b in row.values():
                if b.is_iri:
                    eid = flavour.entity_id(b.value)
                    if eid:
                        ids.append(eid)
        labels = ctx.labels(list(dict.fromkeys(constants[:20] + ids[:TABLE_LABELS * 2])))
        for eid, lab in labels.items():
            ctx.remember(eid, lab)
        learnt = _learn_from_result(ctx, parsed, result, sample, types)

        def label_of(iri: str):
            eid = flavour.entity_id(iri)
            return (eid, labels.get(eid) or ctx.seen.get(eid, "")) if eid else (None, "")

        notes = []
        if conflicts:
            notes.append("Note: type conflict in the query (rows shown anyway): " + "; ".join(c.short(ctx) for c in conflicts[:2]))
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
    elif is_ask and result.value:
        lines.append("[OK] " + render_ask(result))
        lines.append(NEXT_AFTER_OK)
        if conflicts:
            lines.append("Note: type conflict in the query: " + "; ".join(c.short(ctx) for c in conflicts[:2]))
        if ctx.flags.type_state:
            ctx.state.note("ok", f"ASK true: {_summary(sparql)}")
    elif required_conflicts:
        status = "blocked"
        ctx.counters["blocked"] += 1
        what = "false" if ask_false else "no results"
        lines.append(f"[BLOCKED] The query returned {what}, and a triple pattern is type-incompatible: "
                     + " Also: ".join(c.describe(ctx) + "." for c in required_conflicts[:2]))
        lines.append("Use a property whose domain fits the subject's type, or look for another entity "
                     "(the one used may be the wrong one).")
        lines.extend(reversed_direction_hints(ctx, parsed))
        lines.extend(unknown_iri_hints(ctx, sparql, parsed, check_existence=True))
        if ctx.flags.type_state:
            ctx.state.note("fail blocked", required_conflicts[0].short(ctx))
    else:
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
                lines.append("Check each triple's direction (subject → object), the property (its domain and range) "
                             "and the entities; run smaller fragments to find the pattern that fails.")
            if conflicts:
                lines.append("Note: " + "; ".join(c.short(ctx) for c in conflicts[:2]))
            if ctx.flags.type_state:
                ctx.state.note("fail empty", _summary(sparql))
    rows = len(result.rows) if isinstance(result, SelectResult) else 1
    ctx.executions.append(Execution(sparql, result, None, status, [c.short(ctx) for c in conflicts], rows, seconds))
    return fit("\n".join(lines), ctx.budget)


def _strip_fences(text: str) -> str:
    text = text.strip()
    m = re.match(r"^```(?:sparql|SPARQL)?\s*(.*?)\s*```$", text, re.S)
    return m.group(1) if m else text


# --- stop -----------------------------------------------------------------------------------------------------------------------


def do_stop(ctx: QuestionContext) -> str:
    ctx.counters["stops"] += 1
    ctx.stopped = True
    ex = ctx.last_successful()
    if ex is None:
        ctx.final_sparql = None
        ctx.final_execution = None
        return "Stopped. No query was executed successfully, so there is no final query."
    ctx.final_sparql = ex.sparql
    ctx.final_execution = ex
    what = {"ok": f"{ex.rows} row{'s' if ex.rows != 1 else ''}" if isinstance(ex.result, SelectResult) else "an answer",
            "empty": "no results", "blocked": "no results (blocked)"}.get(ex.status, ex.status)
    return f"Stopped. Final query (the last successful execution, {what}):\n{clip(ex.sparql, 600)}"


# --- the tool set -----------------------------------------------------------------------------------------------------------------


def make_tools(ctx: QuestionContext) -> list[Callable]:
    """The five tools bound to `ctx`, as plain typed functions (DSPy reads names, docstrings and annotations)."""
    kg = ctx.flavour.kg_label
    eid = "QID" if ctx.flavour.name == "wikidata" else "MID"
    pid = "PID" if ctx.flavour.name == "wikidata" else "property id"

    def search_wikidata(query: str) -> str:
        return _guarded(ctx, "search_wikidata", query, lambda: do_search(ctx, query))

    def get_wikidata_entry(qid: str) -> str:
        return _guarded(ctx, "get_wikidata_entry", qid, lambda: do_lookup(ctx, qid))

    def get_property_examples(pid: str) -> str:
        return _guarded(ctx, "get_property_examples", pid, lambda: do_examples(ctx, pid))

    def execute_sparql(sparql: str) -> str:
        return _guarded(ctx, "execute_sparql", sparql, lambda: do_execute(ctx, sparql))

    def stop() -> str:
        return _guarded(ctx, "stop", "", lambda: do_stop(ctx))

    search_wikidata.__doc__ = (
        f"Search {kg} for entities and properties matching a name. Entity hits show their types; property hits "
        "carry [domain: … | range: …] type constraints when known.")
    get_wikidata_entry.__doc__ = (
        f"Look up an entity by its {eid}: its label, description and types, then its outgoing properties with values "
        "(and qualifiers). Properties whose domain conflicts with the entity's types are removed and listed; "
        "if the property you need was removed, you probably have the wrong entity.")
    get_property_examples.__doc__ = f"Show a few examples of how a property ({pid}) is used, with its domain and range."
    execute_sparql.__doc__ = (
        f"Run a SPARQL query on {kg} and return a truncated, labelled result table. [BLOCKED] means the query "
        "applies a property to a subject of an incompatible type; [WARNING] means the result is empty.")
    stop.__doc__ = "Mark the last successfully executed SPARQL query as the final answer and end."
    tools = [search_wikidata, get_wikidata_entry, get_property_examples, execute_sparql, stop]
    return tools


__all__ = ["make_tools", "do_search", "do_lookup", "do_examples", "do_execute", "do_stop"]
