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
