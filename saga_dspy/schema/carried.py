"""Which properties an entity carries as a subject: what the calibrated domain check's inferred conflicts
yield to (`schema.compat.check_domain(..., carried=True)`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..kg.errors import SparqlError
from ..kg.flavours import DIRECT, Flavour
from ..kg.results import Binding

if TYPE_CHECKING:  # pragma: no cover
    from ..kg.endpoint import Endpoint


def carried_properties(endpoint: Endpoint, flavour: Flavour, ids: list[str], batch: int = 10) -> dict[str, set[str]]:
    """The properties each entity carries as a subject (direct statements), in batched queries (one per entity
    where a batch's rows were capped); an entity whose query fails carries nothing known (its checks then get
    no help from its own statements)."""
    out: dict[str, set[str]] = {eid: set() for eid in ids}
    by_iri = {flavour.entity_iri(eid): eid for eid in ids}

    def rows(group: list[str]) -> list[dict[str, Binding]]:
        values = " ".join(f"<{flavour.entity_iri(eid)}>" for eid in group)
        try:
            result = endpoint.select(f"SELECT DISTINCT ?e ?p WHERE {{ VALUES ?e {{ {values} }} ?e ?p ?o }}")
        except SparqlError:
            return []
        if result.capped and len(group) > 1:
            return [row for eid in group for row in rows([eid])]
        return result.rows

    for start in range(0, len(ids), batch):
        for row in rows(ids[start : start + batch]):
            eid = by_iri.get(row["e"].value) if "e" in row else None
            ref = flavour.prop_ref(row["p"].value) if "p" in row else None
            if eid and ref is not None and ref.role == DIRECT:
                out[eid].add(ref.pid)
    return out
