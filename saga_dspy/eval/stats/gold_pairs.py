"""The gold entities, (subject entity, property) pairs and (object entity, property) pairs of gold SPARQL queries:
what the LLM-free statistics (`stats grounding`, `stats components`) measure the grounding against."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from saga_dspy.grounding.patterns import NEGATED, parse_query
from saga_dspy.kg.flavours import CLAIM, DIRECT, Flavour


@dataclass
class GoldQuery:
    qid: str
    entities: list[str]
    pairs: list[tuple[str, str]]  # (entity, property) with the entity as the property's subject
    incoming: list[tuple[str, str]] = field(default_factory=list)  # (entity, property), the entity as its value


def gold_queries(records: Iterable[dict], flavour: Flavour) -> tuple[list[GoldQuery], int]:
    """Entity constants and (subject entity, property) pairs of each gold query; and the unparsable count."""
    out, unparsable = [], 0
    for rec in records:
        parsed = parse_query(rec.get("sparql") or "", flavour)
        if parsed is None:
            unparsable += 1
            continue
        entities: list[str] = []
        pairs: list[tuple[str, str]] = []
        incoming: list[tuple[str, str]] = []
        for p in parsed.patterns:
            for term in (p.subject, p.obj):
                if term.kind == "iri":
                    eid = flavour.entity_id(term.value)
                    if eid and flavour.entity_re.match(eid) and eid not in entities:
                        entities.append(eid)
            if p.context == NEGATED or p.alternative:
                continue
            for steps, term, is_subject in ((p.subject_steps, p.subject, True), (p.object_steps, p.obj, False)):
                if not steps or len(steps) != 1 or term.kind != "iri":
                    continue
                step = steps[0]
                ref = flavour.prop_ref(step.iri)
                eid = flavour.entity_id(term.value)
                if ref is None or eid is None or not flavour.entity_re.match(eid):
                    continue
                if ref.role not in (DIRECT, CLAIM):
                    continue
                side = pairs if is_subject != step.inverse else incoming
                if (eid, ref.pid) not in side:
                    side.append((eid, ref.pid))
        out.append(GoldQuery(str(rec.get("id")), entities, pairs, incoming))
    return out, unparsable


__all__ = ["GoldQuery", "gold_queries"]
