"""search_wikidata: entities and properties by name, with types and schema annotations, and a hint that proposes the
entity the question names."""

from __future__ import annotations

import re

from saga_dspy.grounding.context import QuestionContext
from saga_dspy.grounding.render import DESCRIPTION, Block, class_names, clip, render_blocks
from saga_dspy.kg.search import SearchHit
from saga_dspy.tools.evidence import evidence_text

SEARCH_ITEMS = 8


SEARCH_PROPERTIES = 4


_WORDS = re.compile(r"\w+")
_NEXT_LOOKUP = re.compile(r'^Next: get_wikidata_entry\(\{"qid": "([^"]+)"\}\)', re.M)


def lookup_call(eid: str) -> str:
    """The lookup a search's "Next:" line proposes, as the controller writes the action."""
    return f'get_wikidata_entry({{"qid": "{eid}"}})'


def named_lookup(observation: str) -> str | None:
    """The entity id a search observation's "Next:" line proposes to look up, if any."""
    match = _NEXT_LOOKUP.search(observation or "")
    return match.group(1) if match else None


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
            ann = (
                f" [domain: {evidence_text(ctx, ps.domain if ps else None)} | "
                f"range: {evidence_text(ctx, ps.range if ps else None, ctx.state.observed_range(hit.id))}]"
            )
        dt = f" ({hit.datatype or (ps.datatype if ps else '')})" if (hit.datatype or (ps and ps.datatype)) else ""
        name = f"{hit.id} {clip(hit.label, 40)}"
        prop_blocks.append(Block(f"- {hit.id} {clip(hit.label, 60)}{dt}{desc}{ann}", f"- {name}{ann}", name))
    if not blocks and not prop_blocks:
        return (
            f'No entities or properties match "{clip(query, 80)}". Try another wording (a shorter name, no qualifiers).'
        )
    head = [f'Search results for "{clip(query, 80)}":']
    all_blocks = []
    if blocks:
        all_blocks.append(Block("Entities:", "Entities:", ""))
        all_blocks.extend(blocks)
    if prop_blocks:
        all_blocks.append(Block("Properties:", "Properties:", ""))
        all_blocks.extend(prop_blocks)
    next_move: list[str] = []
    if items and ctx.flags.proposals:  # without a next move named, a model tends to repeat its search
        pick = _hint_pick(query, items)
        next_move.append(
            f"Next: {lookup_call(pick.id)} if {pick.id} ({clip(pick.label, 40)}) is what "
            f"the question means; else look up another hit or search again."
        )
    rendered = render_blocks(head, all_blocks, ctx.budget, what="hits", tail=next_move)
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
