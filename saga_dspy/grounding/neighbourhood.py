"""An entity's outgoing neighbourhood N(e) and the type filter of Eq. 3.

`fetch_neighbourhood` reads N(e) with a constant number of SPARQL queries whatever the
number of properties (edges with value labels; qualifiers, or CVT hops on Freebase;
value types only when the answer-type prior needs them). τ(e) is read off the edges
themselves (P31, or P279 for a class without P31), so typing costs no extra query.
`type_filter` decides each property with the schema layer's three-outcome check; only a
demonstrated conflict removes a property."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field

from ..kg.errors import SparqlError
from ..kg.flavours import Flavour
from ..kg.results import QueryResult, SelectResult
from ..kg.values import Value
from ..schema import Decision, EntityTypes, check_domain
from ..schema.compat import PAPER_READING, Mode, PaperReading, filterable, typed


@dataclass
class Neighbourhood:
    id: str
    label: str = ""
    description: str = ""
    edges: OrderedDict[str, list[Value]] = field(default_factory=OrderedDict)  # pid → values
    types: EntityTypes = field(default_factory=lambda: EntityTypes((), source="none"))  # τ(e), read off the edges
    capped: bool = False
    queries: int = 0
    error: str | None = None

    @property
    def exists(self) -> bool:
        return bool(self.edges or self.label or self.description)

    @property
    def edge_count(self) -> int:
        return sum(len(v) for v in self.edges.values())


@dataclass
class FilterResult:
    kept: list[str]
    removed: list[tuple[str, Decision]]
    decisions: dict[str, Decision]
    skipped: str | None = None  # why the filter did not run (no types, switched off)


def _entity_types_from_edges(eid: str, edges: dict[str, list[Value]], flavour: Flavour) -> EntityTypes:
    declared = (v.id for v in edges.get(flavour.type_pid, []) if v.id)
    superclasses = (v.id for v in edges.get(flavour.subclass_pid, []) if v.id) if flavour.subclass_pid else ()
    return typed(eid, declared, superclasses, flavour)


def fetch_neighbourhood(
    endpoint, flavour: Flavour, eid: str, *, qualifiers: bool = True, value_types: bool = False
) -> Neighbourhood:
    """N(e) with labels, in at most three queries. SparqlErrors of the first query are returned in `.error`."""
    nb = Neighbourhood(eid)
    label_p, desc_p = flavour.label_predicates()
    try:
        nb.queries += 1
        result = endpoint.query(flavour.neighbourhood_query(eid))
    except SparqlError as exc:
        nb.error = f"{exc.kind}: {exc}"
        return nb
    if not isinstance(result, SelectResult):
        nb.error = "unexpected result shape"
        return nb
    nb.capped = result.capped
    by_key: dict[tuple[str, str], Value] = {}
    for row in result.rows:
        p, v = row.get("p"), row.get("v")
        if p is None or v is None:
            continue
        if p.value == label_p:
            nb.label = nb.label or v.value
            continue
        if p.value == desc_p:
            nb.description = nb.description or v.value
            continue
        pid = flavour.edge_property(p.value)
        if pid is None:
            continue
        key = (pid, v.value)
        if key in by_key:
            if not by_key[key].label and "l" in row:
                by_key[key].label = row["l"].value
            continue
        vid = flavour.entity_id(v.value) if v.is_iri else None
        value = Value(v, vid, row["l"].value if "l" in row else "")
        by_key[key] = value
        nb.edges.setdefault(pid, []).append(value)
    if qualifiers and nb.edges:
        q = flavour.qualifier_query(eid)
        if q:
            try:
                nb.queries += 1
                _attach_qualifiers(endpoint.query(q), by_key, flavour)
            except SparqlError:
                pass
    if value_types and nb.edges:
        try:
            nb.queries += 1
            vt = endpoint.query(flavour.value_types_query(eid))
            if isinstance(vt, SelectResult):
                types: dict[str, list[str]] = {}
                for row in vt.rows:
                    t = flavour.entity_id(row["t"].value) if "t" in row else None
                    if t:
                        types.setdefault(row["v"].value, []).append(t)
                for value in by_key.values():
                    value.types = tuple(types.get(value.binding.value, ()))
        except SparqlError:
            pass
    nb.types = _entity_types_from_edges(eid, nb.edges, flavour)
    return nb


def _attach_qualifiers(result: QueryResult, by_key: dict[tuple[str, str], Value], flavour: Flavour) -> None:
    if not isinstance(result, SelectResult):
        return
    flavour.attach_qualifiers(result, by_key)


def type_filter(
    nb: Neighbourhood, schema, hierarchy, mode: Mode, types=None, *, reading: PaperReading = PAPER_READING
) -> FilterResult:
    """Eq. 3 with three outcomes: keep unless the domain check demonstrates a conflict.
    With no types the filter is skipped (every property kept, decisions UNKNOWN). Every property of a
    neighbourhood is one the entity carries (what the calibrated mode's inferred conflicts yield to).
    `reading`: the `paper` mode's reading (benchmarks/filter_readings.py compares them)."""
    et = types if types is not None else nb.types
    decisions: dict[str, Decision] = {}
    kept: list[str] = []
    removed: list[tuple[str, Decision]] = []
    has_types = et is not None and filterable(et, mode, reading)
    for pid in nb.edges:
        ps = schema.get(pid)
        decision = check_domain(et, ps.domain if ps else None, hierarchy, mode, pid=pid, carried=True, reading=reading)
        decisions[pid] = decision
        if decision.keep:
            kept.append(pid)
        else:
            removed.append((pid, decision))
    return FilterResult(kept, removed, decisions, None if has_types else "the entity has no types")


__all__ = ["Value", "Neighbourhood", "FilterResult", "fetch_neighbourhood", "type_filter"]
