"""A demo pool record as a variant's own tools would have shown it (so an ablation is not confounded).

The bundled pools are recorded by the full variant's tools. A variant without a mechanism must not be
shown what only that mechanism produces: `for_variant(record, variant)` removes it from the record's
observations and controller inputs (type-filter notes, `[domain | range]` annotations, ★ marks and the
proposed query, a search's named next lookup, the incoming section, the expected answer type, the type context
and knowledge log, the imposed form). What it cannot undo, it refuses: a record with a `[BLOCKED]` observation
is dropped for a variant without the conflict check (the order a lookup's properties were shown in stays:
`question_view` off cannot be undone). A per-variant pool file recorded by the variant's own tools
(`<data_dir>/demos/<dataset>.<variant>.jsonl`) is preferred to this rendering wherever it exists.
"""

from __future__ import annotations

import copy
import re
from typing import Any

from saga_dspy.variants import Variant

NOT_KEPT = "(not kept in this configuration)"  # what the no-type-state controller reads (agent.episode)
PLAIN_NEXT = "Next: execute a query with the property above that leads to the answer."

_TYPE_FILTER_LINE = re.compile(r"^(Type filter:|Type filter skipped:).*$\n?", re.M)
_STAR_LINE = re.compile(r"^★ = .*$\n?", re.M)
_STAR = re.compile(r" ★")
_NEXT_PROPOSAL = re.compile(r"^Next: execute a query with the property that leads to the answer, e\.g\. .*$", re.M)
_LOOKUP_ANNOTATION = re.compile(r" / (?:domain|range):[^\n]*")  # ' / domain: … / range: …' to the end of the line
_COMPACT_RANGE = re.compile(r" \[range: [^\]\n]*(?:\]|…|$)", re.M)
_SEARCH_SCHEMA = re.compile(r" \[domain: [^\n]*")  # '[domain: … | range: …]', last on its line (maybe clipped)
_SEARCH_TYPES = re.compile(r" \[(?:class; subclass of [^\]\n]*|no types|[^\]\n]*)\]$", re.M)
_EXPECTED_LINE = re.compile(r"^Expected answer type:.*$\n?", re.M)
_INCOMING = re.compile(
    r"^Incoming:.*$\n?(?:^  ← .*$\n?)*", re.M
)  # the section (or its compact line, or its clipped header)
_NEXT_INCOMING = re.compile(r"^Next: (?:the items asked for point at this entity; )?execute e\.g\. .*$", re.M)
_NEXT_TWO_HOP = re.compile(r"^(.*\(path [^\n]*\)\.) Next: execute .*$", re.M)
_NEXT_LOOKUP = re.compile(r"^Next: get_wikidata_entry\(.*$\n?", re.M)  # a search's named next lookup


def _observation(text: str, variant: Variant, tool: str) -> str:
    g = variant.grounding
    if not g.type_filter:
        text = _TYPE_FILTER_LINE.sub("", text)
    if not g.incoming_edges:
        text = _INCOMING.sub("", text)
    if not g.answer_type_prior or not g.incoming_edges or not g.proposals:  # an incoming proposal needs all three
        text = _NEXT_INCOMING.sub(PLAIN_NEXT, text)
    if not g.proposals:  # no proposed query, no named next lookup
        text = _NEXT_PROPOSAL.sub(PLAIN_NEXT, text)
        text = _NEXT_TWO_HOP.sub(PLAIN_NEXT, text)
        text = _NEXT_LOOKUP.sub("", text)
    if not g.answer_type_prior:
        text = _STAR_LINE.sub("", text)
        text = _STAR.sub("", text)
        text = _NEXT_PROPOSAL.sub(PLAIN_NEXT, text)
    if not g.schema_annotations:
        text = _LOOKUP_ANNOTATION.sub("", text)
        text = _COMPACT_RANGE.sub("", text)
        text = _SEARCH_SCHEMA.sub("", text)
        if tool == "search_wikidata":  # entity hits carry their types only with annotations on
            text = _SEARCH_TYPES.sub("", text)
    return text


def _state(text: Any, variant: Variant) -> Any:
    if not isinstance(text, str):
        return text
    if not variant.grounding.type_state:
        return NOT_KEPT
    if not variant.grounding.answer_type_prior:
        text = _EXPECTED_LINE.sub("", text).strip() or "(none yet)"
    return text


def for_variant(record: dict[str, Any], variant: Variant | None) -> dict[str, Any] | None:
    """The record as `variant`'s tools would show it (a copy), or None when it cannot be rendered so."""
    if variant is None or variant.is_full:
        return record
    out = copy.deepcopy(record)
    if "trajectory" in out and "next_tool_name" in out:  # a ready step example: nothing per step to render
        return out
    for step in out.get("steps") or []:
        if not isinstance(step, dict):
            continue
        obs = str(step.get("observation") or "")
        if not variant.grounding.conflict_check and obs.startswith("[BLOCKED]"):
            return None
        step["observation"] = _observation(obs, variant, str(step.get("tool_name") or ""))
        for key in ("type_context", "knowledge_log"):
            if key in step:
                step[key] = _state(step[key], variant)
    for key in ("type_context", "knowledge_log"):
        if key in out:
            out[key] = _state(out[key], variant)
    if not variant.agent.answer_type_step:
        out["answer_type"] = "unknown"
    if not variant.agent.query_form:
        out["shown_form"] = "ANY"  # the controller is held to no form (the record keeps its own for selection)
    return out


__all__ = ["for_variant"]
