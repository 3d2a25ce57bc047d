"""get_property_examples: a few subject-value pairs that use a property, with its domain and range."""

from __future__ import annotations

from saga_dspy.grounding.context import QuestionContext
from saga_dspy.grounding.render import Block, clip, entity_text, literal_text, render_blocks
from saga_dspy.kg.errors import SparqlError
from saga_dspy.kg.results import SelectResult
from saga_dspy.tools.evidence import evidence_text

EXAMPLES = 5


def do_examples(ctx: QuestionContext, pid: str, count: bool = True) -> str:
    flavour = ctx.flavour
    norm = flavour.normalise_property(pid or "")
    if norm is None:
        return f"[ERROR] {clip(str(pid), 60)!r} is not a property id (e.g. {flavour.property_example})."
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
        head.append(
            f"domain: {evidence_text(ctx, ps.domain)} | "
            f"range: {evidence_text(ctx, ps.range, ctx.state.observed_range(pid))}"
        )
    seen_subjects, source = _usage_examples(ctx, pid, head)
    with_values = sum(1 for _, vals in seen_subjects.values() if vals)
    sampled = _sampled_uses(ctx, pid, seen_subjects, head) if with_values < 2 else {}  # the examples say little
    if not seen_subjects and not sampled:
        head.append("No examples or uses of this property in the knowledge graph.")
        return "\n".join(head)
    head.append(f"Pattern: ?subject {flavour.property_token(pid)} ?value")
    blocks = []
    if seen_subjects:
        blocks.append(Block(f"Usage examples ({source}):", f"Usage examples ({source}):", ""))
        # examples with a value first
        ordered = sorted(seen_subjects.items(), key=lambda kv: not kv[1][1])
        blocks.extend(_example_block(ctx, iri, sl, vals) for iri, (sl, vals) in ordered[:EXAMPLES])
    if sampled:
        blocks.append(Block("Uses in the knowledge graph (sampled):", "Uses in the knowledge graph (sampled):", ""))
        blocks.extend(_example_block(ctx, iri, sl, vals) for iri, (sl, vals) in list(sampled.items())[:EXAMPLES])
    more = max(0, len(seen_subjects) - EXAMPLES)
    tail = [f"(+{more} more usage examples not shown)"] if more > 0 else []
    return render_blocks(head, blocks, ctx.budget, tail=tail, what="examples").text


def _usage_examples(ctx: QuestionContext, pid: str, head: list[str]) -> tuple[dict[str, list], str]:
    """The property's usage examples the graph states (the flavour's example property), by subject: (subject
    label, [(value, value label)]), and where they come from; a failed query is noted in `head`."""
    flavour = ctx.flavour
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
    return seen_subjects, source


def _sampled_uses(ctx: QuestionContext, pid: str, seen_subjects: dict[str, list], head: list[str]) -> dict[str, list]:
    """Real uses of the property sampled from the graph, by subject (none of the examples'), at most three values
    each; a failed query is noted in `head`."""
    sampled: dict[str, list] = {}
    try:
        result = ctx.query(ctx.flavour.sample_triples_query(pid, EXAMPLES * 3))
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
    return sampled


def _example_block(ctx: QuestionContext, iri: str, sl, vals) -> Block:
    """One subject with up to three of its values, the ids it shows remembered."""
    flavour = ctx.flavour
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
