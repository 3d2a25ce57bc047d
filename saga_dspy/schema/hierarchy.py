"""The class hierarchy: P279* closures with bounded depth, cached per class.

A class is *known* when its closure reaches the root class (Q35120 "entity") through
P279 edges in the data; a class without such a path is a hierarchy gap, and checks
through it are undecidable (UNKNOWN), never conflicts.

Two backends behind one interface:
- static edges, e.g. the P279 edges the bundled sample's index carries (no queries);
- an endpoint: closures fetched by SPARQL (`?c wdt:P279* ?sub . ?sub wdt:P279 ?sup`,
  batched with VALUES), cached; the depth bound is applied locally to the fetched edges.

It also carries the index's usage evidence (`usage`: instance and property-usage counts per
well-populated class, `schema.index.ClassUsage`) when the index has it, so that the domain check
(`schema.compat`) finds all class-level knowledge of the KG in one object; None otherwise.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from ..config import Settings
from ..kg.errors import SparqlError
from ..kg.flavours import WIKIDATA, Flavour, flavour_for
from ..kg.flavours.wikidata_ids import SUBCLASS
from ..kg.results import SelectResult
from .index import ClassUsage, SchemaIndex, load_schema_index, normalize_pid

if TYPE_CHECKING:  # pragma: no cover
    from ..kg.endpoint import Endpoint

ROOT = WIKIDATA.root_class  # entity
MAX_DEPTH = 20


class ClassHierarchy:
    """P279 closures (including the class itself), bounded by `max_depth` levels, cached per class.

    `all_known=True` declares every class known (a closed, flat schema such as Freebase's,
    where a missing type is a real mismatch rather than a hierarchy gap: `Flavour.closed_types`).
    `flavour`: the vocabulary of the live backend's queries."""

    def __init__(
        self,
        parents: Mapping[str, Sequence[str]] | None = None,
        *,
        endpoint: Endpoint | None = None,
        root: str | None = ROOT,
        max_depth: int = MAX_DEPTH,
        all_known: bool = False,
        batch_size: int = 25,
        flavour: Flavour = WIKIDATA,
        usage: ClassUsage | None = None,
    ):
        # static edges are read, never written (no copy); the live backend fills its own dict
        self._parents: dict[str, Sequence[str]] = parents if parents is not None else {}  # type: ignore[assignment]
        self.endpoint = endpoint
        self.root = root
        self.max_depth = max_depth
        self.all_known = all_known
        self.batch_size = max(1, batch_size)
        self.flavour = flavour
        self.usage = usage  # usage evidence per well-populated class (the index's), or None
        self._closure: dict[str, frozenset[str]] = {}
        self._parent_cache: dict[str, tuple[str, ...]] = {}  # decoded lookups of the (compact) edge table
        self._fetched: set[str] = set()  # live: classes whose whole upward closure is in _parents
        self._incomplete: set[str] = set()  # live: classes whose closure could not be fetched whole
        self._lock = threading.RLock()
        self.queries = 0  # SPARQL round trips made (live backend)

    # --- constructors -----------------------------------------------------------------------------------
    @classmethod
    def from_edges(cls, edges: Iterable[tuple[str, str]], **kwargs) -> ClassHierarchy:
        parents: dict[str, list[str]] = {}
        for child, sup in edges:
            parents.setdefault(child, []).append(sup)
        return cls(parents, **kwargs)

    @classmethod
    def from_index(cls, index: SchemaIndex, **kwargs) -> ClassHierarchy:
        edges = index.p279_edges
        if edges is None:
            raise ValueError(f"this schema index carries no {SUBCLASS} edges; use ClassHierarchy.from_endpoint")
        flavour = flavour_for(index.kg)
        if flavour.closed_types:
            kwargs.setdefault("root", None)
            kwargs.setdefault("all_known", True)
        kwargs.setdefault("flavour", flavour)
        kwargs.setdefault("usage", index.usage)
        return cls(edges, **kwargs)

    @classmethod
    def from_endpoint(cls, endpoint: Endpoint, **kwargs) -> ClassHierarchy:
        flavour = flavour_for(endpoint.settings.kg)
        if flavour.closed_types:
            kwargs.setdefault("root", None)
            kwargs.setdefault("all_known", True)
        kwargs.setdefault("flavour", flavour)
        return cls(None, endpoint=endpoint, **kwargs)

    # --- queries ------------------------------------------------------------------------------------------
    def parents(self, qid: str) -> tuple[str, ...]:
        qid = normalize_pid(qid)
        if self.endpoint is not None and qid not in self._fetched:
            self.prefetch([qid])
        return tuple(self._parents.get(qid, ()))

    def ancestors(self, qid: str) -> frozenset[str]:
        """The P279* closure of `qid`, including itself, up to `max_depth` levels."""
        qid = normalize_pid(qid)
        hit = self._closure.get(qid)
        if hit is not None:
            return hit
        if self.endpoint is not None and qid not in self._fetched:
            self.prefetch([qid])
        seen = {qid}
        frontier = deque([(qid, 0)])
        parents = self._parent_cache
        source = self._parents
        while frontier:
            node, depth = frontier.popleft()
            if depth >= self.max_depth:
                continue
            sups = parents.get(node)
            if sups is None:
                sups = parents[node] = tuple(source.get(node, ()))
            for sup in sups:
                if sup not in seen:
                    seen.add(sup)
                    frontier.append((sup, depth + 1))
        closure = frozenset(seen)
        self._closure[qid] = closure
        return closure

    def is_known(self, qid: str) -> bool:
        """True when the closure of `qid` is trustworthy: it reaches the root (or the schema is closed)."""
        qid = normalize_pid(qid)
        if self.all_known:
            return True
        if qid in self._incomplete:
            return False
        return self.root is not None and self.root in self.ancestors(qid)

    def is_subclass(self, qid: str, of: Iterable[str]) -> bool:
        return not self.ancestors(qid).isdisjoint(normalize_pid(o) for o in of)

    # --- the live backend ---------------------------------------------------------------------------------
    def prefetch(self, qids: Iterable[str]) -> None:
        """Fetch the closures of these classes in batched queries (no-op for static edges)."""
        if self.endpoint is None:
            return
        with self._lock:
            todo = sorted({normalize_pid(q) for q in qids} - self._fetched - self._incomplete)
            todo = [q for q in todo if self.flavour.is_class_id(q)]
            for start in range(0, len(todo), self.batch_size):
                self._fetch(todo[start : start + self.batch_size])

    def _fetch(self, qids: list[str]) -> None:
        assert self.endpoint is not None  # the live backend
        prefix = self.flavour.entity_ns
        try:
            self.queries += 1
            result = self.endpoint.query(self.flavour.closure_query(qids))
        except SparqlError:
            self._incomplete.update(qids)  # a failed fetch leaves them undecidable, never conflicts
            return
        if not isinstance(result, SelectResult):
            self._incomplete.update(qids)
            return
        if result.capped:
            if len(qids) > 1:
                half = len(qids) // 2
                self._fetch(qids[:half])
                self._fetch(qids[half:])
            else:
                self._incomplete.update(qids)
            return
        edges: dict[str, list[str]] = {}
        for row in result.rows:
            sub, sup = row.get("sub"), row.get("sup")
            if sub is None or sup is None or not sub.value.startswith(prefix) or not sup.value.startswith(prefix):
                continue
            edges.setdefault(sub.value[len(prefix) :], []).append(sup.value[len(prefix) :])
        for child, sups in edges.items():
            self._parents[child] = sorted(set(sups))
        self._fetched.update(qids)
        self._fetched.update(edges)  # every node of a fetched closure has its own closure fetched too
        for sups in edges.values():
            for top in sups:
                if top not in edges:  # a top node: no parents
                    self._parents.setdefault(top, ())
                    self._fetched.add(top)
        for q in qids:
            self._parents.setdefault(q, ())
        self._closure.clear()  # closures computed before may have been partial
        self._parent_cache.clear()


_HIERARCHIES: dict[int, tuple[object, ClassHierarchy]] = {}
_HLOCK = threading.Lock()


def load_hierarchy(
    settings: Settings, endpoint: Endpoint | None = None, index: SchemaIndex | None = None
) -> ClassHierarchy:
    """The class hierarchy for these settings: from the index's P279 edges when it carries them
    (the bundled sample; shared per process), else by SPARQL through `endpoint`."""
    index = index if index is not None else load_schema_index(settings)
    if index.p279_edges is not None:
        edges = index.p279_edges
        with _HLOCK:
            entry = _HIERARCHIES.get(id(edges))
            if entry is None or entry[0] is not edges:
                entry = _HIERARCHIES[id(edges)] = (edges, ClassHierarchy.from_index(index))
            return entry[1]
    if endpoint is None:
        raise ValueError("the schema index carries no hierarchy: pass the endpoint to fetch closures from")
    return ClassHierarchy.from_endpoint(endpoint, usage=index.usage)
