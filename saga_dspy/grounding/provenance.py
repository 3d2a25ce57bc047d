"""Where a query's identifiers come from: the ids it names that the question's observations never showed and the
knowledge graph does not know (an LM that writes a query from memory invents ids such as `wdt:P930933`)."""

from __future__ import annotations

import re

from ..kg.errors import SparqlError
from ..kg.flavours import Flavour
from ..kg.query_text import declared_prefixes, tokenize
from ..kg.results import SelectResult
from .context import QuestionContext

_WORD = re.compile(r"[\w.]+")
MAX_CHECKED = 20  # entity ids asked about in one existence query


def query_ids(sparql: str, flavour: Flavour) -> tuple[list[str], list[str]]:
    """(entity ids, property ids) a query names, by prefixed name or full IRI, in order of appearance."""
    try:
        tokens = tokenize(sparql or "")
    except Exception:  # noqa: BLE001 - a query the tokenizer cannot read names no id we can check
        return [], []
    prefixes = flavour.id_prefixes()
    declared = declared_prefixes(tokens)
    entities: dict[str, None] = {}
    properties: dict[str, None] = {}
    for tok in tokens:
        local = None
        if tok.kind == "pname":
            prefix, _, rest = tok.text.partition(":")
            if prefix in prefixes and declared.get(prefix, flavour.prefixes.get(prefix)) == flavour.prefixes.get(
                prefix
            ):
                local = rest
        elif tok.kind == "iri":
            iri = tok.text[1:-1]
            ref = flavour.prop_ref(iri)
            local = ref.pid if ref is not None else flavour.entity_id(iri)
        if not local:
            continue
        if flavour.entity_re.match(local):
            entities[local] = None
        elif flavour.property_re.match(local):
            properties[local] = None
    return list(entities), list(properties)


def mentioned_ids(text: str) -> set[str]:
    """The id-like words of a text (an observation): `Q42`, `P19`, `m.0abc`, `people.person.place_of_birth`."""
    return {word.strip(".") for word in _WORD.findall(text or "")}


def unseen_ids(ctx: QuestionContext, sparql: str, seen: set[str]) -> list[str]:
    """The ids `sparql` names that are not in `seen` (`mentioned_ids` of the observations) and that the knowledge
    graph does not know: a property the schema index lacks, an entity that is the subject of no triple. An
    existence query that fails counts its entities as known (nothing is dropped on a check that was not made)."""
    entities, properties = query_ids(sparql, ctx.flavour)
    unknown = [pid for pid in properties if pid not in seen and ctx.schema.get(pid) is None]
    todo = [eid for eid in entities if eid not in seen][:MAX_CHECKED]
    if not todo:
        return unknown
    try:
        result = ctx.query(ctx.flavour.exists_query(todo))
    except SparqlError:
        return unknown
    present = (
        {ctx.flavour.entity_id(row["e"].value) for row in result.rows if "e" in row}
        if isinstance(result, SelectResult)
        else set(todo)
    )
    return [eid for eid in todo if eid not in present] + unknown


__all__ = ["query_ids", "mentioned_ids", "unseen_ids"]
