"""Building the schema index from an endpoint: every property's datatype, P2302 domain / range
constraints (or, without them, evidence sampled from the property's own subjects and objects), the
P279 edges and class labels, for Wikidata and for Freebase; for the embedded sample also the usage
evidence (`ClassUsage`: instances per well-populated class and how many carry each property).

Everything is read through SPARQL (`endpoint.query`), with the same paged queries for the bundled
sample and for query.wikidata.org, bounded by `BuildOptions`; the result is a `SchemaIndex`
(`schema.index`), which is what the rest of the program loads.
"""

from __future__ import annotations

import datetime as _dt
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..config import DEFAULT_KG
from ..kg.errors import SparqlError
from ..kg.flavours import FREEBASE, WIKIDATA
from ..kg.flavours.datatypes import FREEBASE_LITERAL_TYPES, ITEM, ITEM_DATATYPES
from ..kg.flavours.wikidata_ids import RELATIONS, ROOT, STATUSES, SUBCLASS, SUBJECT_TYPE, UNIVERSAL_PROPERTIES
from ..kg.flavours.wikidata_schema import (
    CLASS_SIZES_QUERY,
    CLASS_USAGE_QUERY,
    CONSTRAINED_BODY,
    CONSTRAINT_QUERY,
    HIERARCHY_BODY,
    HIERARCHY_COUNT,
    PROPERTY_SUBJECTS_QUERY,
    TYPE_LABELS_BODY,
    TYPED_ENTITIES_QUERY,
    TYPES_QUERY,
)
from ..kg.prefixes import WD, WIKIBASE
from ..kg.results import Binding, SelectResult
from .index import (
    FB,
    ClassUsage,
    SchemaIndex,
    id_order,
    normalize_pid,
)
from .parent_table import ParentTable

if TYPE_CHECKING:  # pragma: no cover
    from ..kg.endpoint import Endpoint


@dataclass
class BuildOptions:
    """Bounds of a build. The defaults keep a live build at a few hundred queries."""

    page_size: int = 20000  # rows per LIMIT/OFFSET page (capped by the endpoint's row cap)
    values_batch: int = 200  # properties per VALUES batch
    empirical: bool = True
    sample_pairs: int = 50  # subject–object pairs sampled per property
    empirical_batch: int = 20  # properties per empirical query
    min_share: float = 0.2  # a type must cover this share of the typed sampled entities
    max_types: int = 5
    min_typed: int = 3  # fewer typed sampled entities than this: no evidence
    max_empirical: int | None = None  # at most this many properties sampled (None: all)
    hierarchy: bool | None = None  # include the P279 edges (default: for the embedded sample)
    entity_type_labels: bool | None = None  # labels for every P31 class (default: with the hierarchy)
    properties: tuple[str, ...] | None = None  # index only these properties (a partial index; tests)
    usage: bool | None = None  # usage evidence per well-populated class (default: with the hierarchy)
    usage_min_instances: int = 20  # classes with fewer P31 instances are not recorded
    usage_batch: int = 25  # classes per usage query


def _local(iri: str, prefix: str) -> str | None:
    return iri[len(prefix) :] if iri.startswith(prefix) else None


def _select(endpoint: Endpoint, sparql: str, timeout: float | None = None) -> SelectResult:
    result = endpoint.query(sparql, timeout=timeout)
    if not isinstance(result, SelectResult):
        raise SparqlError("expected a SELECT result")
    return result


def _select_values(
    endpoint: Endpoint, template: str, ids: list[str], render: Callable[[list[str]], str] | None = None
) -> list[dict]:
    """Rows of `template` with `{values}` filled from `ids`; a batch whose answer hit the row cap is
    halved until it fits, so nothing is silently lost."""
    render = render or _values
    result = _select(endpoint, template.format(values=render(ids)))
    if not result.capped:
        return result.rows
    if len(ids) == 1:
        raise SparqlError(f"the answer for {ids[0]} exceeds the endpoint's row cap; raise --row-cap")
    half = len(ids) // 2
    return _select_values(endpoint, template, ids[:half], render) + _select_values(
        endpoint, template, ids[half:], render
    )


def _page_size(endpoint: Endpoint, wanted: int) -> int:
    return max(1, min(wanted, endpoint.settings.row_cap))


def _paged(
    endpoint: Endpoint, body: str, order: str | None, page: int, log: Callable[[str], None], what: str
) -> Iterator[dict]:
    """Rows of `SELECT … WHERE { body } [ORDER BY order]`, page by page (LIMIT/OFFSET)."""
    offset = 0
    ordering = f" ORDER BY {order}" if order else ""
    while True:
        result = _select(endpoint, f"{body}{ordering} LIMIT {page} OFFSET {offset}")
        yield from result.rows
        offset += len(result.rows)
        if len(result.rows) < page:
            break
        if offset % (page * 10) == 0:
            log(f"{what}: {offset} rows")


def _batches(items: list, size: int) -> Iterator[list]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _values(ids: Iterable[str], prefix: str = "wd:") -> str:
    return " ".join(f"{prefix}{i}" for i in ids)


_PROPERTIES_BODY = """SELECT ?p ?dt WHERE { ?p a wikibase:Property . OPTIONAL { ?p wikibase:propertyType ?dt } }"""
_DATATYPES_QUERY = """SELECT ?p ?dt WHERE {{ VALUES ?p {{ {values} }} ?p wikibase:propertyType ?dt }}"""
_TERMS_QUERY = """SELECT ?p ?k ?v WHERE {{
  VALUES ?p {{ {values} }}
  {{ ?p rdfs:label ?v BIND("label" AS ?k) }} UNION {{ ?p schema:description ?v BIND("description" AS ?k) }}
  UNION {{ ?p skos:altLabel ?v BIND("alias" AS ?k) }}
  FILTER(LANG(?v) = "en")
}}"""

_LABELS_QUERY = (
    """SELECT ?c ?label WHERE {{ VALUES ?c {{ {values} }} ?c rdfs:label ?label FILTER(LANG(?label) = "en") }}"""
)

# A bounded sample of each property's triples (one query for a batch of properties) …
_SAMPLE_PART = "{{ SELECT ?s ?o (wd:{pid} AS ?p) WHERE {{ ?s wdt:{pid} ?o }} LIMIT {n} }}"
_SAMPLE_QUERY = "SELECT ?p ?s ?o WHERE {{ {parts} }}"
WDT = "http://www.wikidata.org/prop/direct/"


def _build_usage(endpoint: Endpoint, options: BuildOptions, log: Callable[[str], None]) -> ClassUsage:
    """Exact counts over the whole store (meant for the embedded sample, not a public endpoint)."""
    sizes_result = _select(endpoint, CLASS_SIZES_QUERY.format(min=max(1, options.usage_min_instances)))
    subjects_result = _select(endpoint, PROPERTY_SUBJECTS_QUERY)
    if sizes_result.capped or subjects_result.capped:
        raise SparqlError("a usage-evidence answer exceeds the endpoint's row cap; raise --row-cap")
    sizes = {}
    for row in sizes_result.rows:
        cls = _local(row["t"].value, WD)
        if cls:
            sizes[cls] = int(row["n"].value)
    carried: dict[str, dict[str, int]] = {c: {} for c in sizes}
    ordered = sorted(sizes, key=id_order)
    for chunk in _batches(ordered, max(1, options.usage_batch)):
        for row in _select_values(endpoint, CLASS_USAGE_QUERY, chunk):
            cls, pid = _local(row["t"].value, WD), _local(row["p"].value, WDT)
            if cls in carried and pid:
                carried[cls][pid] = int(row["n"].value)
    subjects = {}
    for row in subjects_result.rows:
        pid = _local(row["p"].value, WDT)
        if pid:
            subjects[pid] = int(row["n"].value)
    typed = int(_select(endpoint, TYPED_ENTITIES_QUERY).rows[0]["n"].value)
    log(
        f"usage evidence: {len(sizes)} classes with ≥ {options.usage_min_instances} instances, "
        f"{sum(len(v) for v in carried.values())} (class, property) counts, {len(subjects)} properties in use"
    )
    return ClassUsage({c: (sizes[c], carried[c]) for c in ordered}, subjects, options.usage_min_instances, typed)


def build_schema_index(
    endpoint: Endpoint,
    kg: str = DEFAULT_KG,
    options: BuildOptions | None = None,
    log: Callable[[str], None] | None = None,
) -> SchemaIndex:
    """Build the schema index of a Wikidata or Freebase endpoint through SPARQL."""
    options = options or BuildOptions()
    log = log or (lambda msg: None)
    started = time.monotonic()
    builder = _BUILDERS.get(kg)
    if builder is None:
        raise ValueError(f"unknown kg {kg!r}")
    index = builder(endpoint, options, log)
    index.meta.update(
        {
            "kg": kg,
            "endpoint": endpoint.name,
            "endpoint_id": endpoint.cache_id,
            "created": _dt.datetime.now(_dt.UTC).replace(microsecond=0).isoformat(),
            "build_seconds": round(time.monotonic() - started, 1),
            "options": {k: v for k, v in vars(options).items()},
        }
    )
    index.meta["counts"] = index.counts
    return index


def _build_wikidata(endpoint: Endpoint, options: BuildOptions, log: Callable[[str], None]) -> SchemaIndex:
    page = _page_size(endpoint, options.page_size)
    is_embedded = endpoint.name == "embedded"
    partial = options.properties is not None
    with_hierarchy = (is_embedded and not partial) if options.hierarchy is None else options.hierarchy
    with_type_labels = with_hierarchy if options.entity_type_labels is None else options.entity_type_labels

    props = _wikidata_properties(endpoint, options, page, log)  # 1. every property with its datatype
    pids = sorted(props, key=lambda p: int(p[1:]) if p[1:].isdigit() else 0)
    log(f"{len(pids)} properties")

    # 2. labels and descriptions, 3. formal constraints: VALUES batches
    batch = max(1, min(options.values_batch, page // 4 or 1))
    _terms_and_constraints(endpoint, props, pids, batch, log)

    # 4. empirical evidence for what has no formal constraint
    if options.empirical:
        _induce_empirical(endpoint, props, options, log)

    labels = _class_labels(endpoint, props, page, batch, log, with_type_labels=with_type_labels)  # 5.
    p279 = _subclass_edges(endpoint, page, log) if with_hierarchy else None  # 6.

    # 7. usage evidence (the bundled sample: exact counts over the whole store)
    with_usage = with_hierarchy if options.usage is None else options.usage
    usage = _build_usage(endpoint, options, log) if with_usage else None

    ordered = {pid: _ordered_entry(props[pid]) for pid in pids}
    return SchemaIndex(
        ordered,
        dict(sorted(labels.items(), key=lambda kv: id_order(kv[0]))),
        p279,
        {"hierarchy_root": ROOT if with_hierarchy else None},
        usage=usage,
    )


def _wikidata_properties(
    endpoint: Endpoint, options: BuildOptions, page: int, log: Callable[[str], None]
) -> dict[str, dict[str, Any]]:
    """Every property with its datatype (or only `options.properties`); a whole build adds the constrained ones."""
    props: dict[str, dict[str, Any]] = {}
    if options.properties is not None:
        wanted_pids = [normalize_pid(p) for p in options.properties]
        props = {pid: {"label": ""} for pid in wanted_pids}
        rows: Iterable[dict[str, Binding]] = [
            r
            for chunk in _batches(wanted_pids, options.values_batch)
            for r in _select_values(endpoint, _DATATYPES_QUERY, chunk)
        ]
    else:
        rows = _paged(endpoint, _PROPERTIES_BODY, "?p", page, log, "properties")
    for row in rows:
        pid = _local(row["p"].value, WD)
        if not pid or not pid.startswith("P"):
            continue
        entry = props.setdefault(pid, {"label": ""})
        if "dt" in row:
            entry["datatype"] = row["dt"].value.removeprefix(WIKIBASE)
    if options.properties is None:
        for row in _paged(endpoint, CONSTRAINED_BODY, "?p", page, log, "constrained properties"):
            pid = _local(row["p"].value, WD)
            if pid and pid.startswith("P"):
                props.setdefault(pid, {"label": ""})
    return props


def _terms_and_constraints(
    endpoint: Endpoint, props: dict[str, dict[str, Any]], pids: list[str], batch: int, log: Callable[[str], None]
) -> None:
    """Each property's labels, descriptions and aliases, and its formal (P2302) domain and range, in VALUES
    batches; a type constraint without classes says nothing and is dropped."""
    formal: dict[tuple[str, str], dict[str, Any]] = {}
    for chunk in _batches(pids, batch):
        for row in _select_values(endpoint, _TERMS_QUERY, chunk):
            entry = props[_local(row["p"].value, WD) or ""]
            if row["k"].value == "alias":
                entry.setdefault("aliases", []).append(row["v"].value)
            else:
                entry[row["k"].value] = row["v"].value
        for row in _select_values(endpoint, CONSTRAINT_QUERY, chunk):
            pid = _local(row["p"].value, WD)
            role = "domain" if row["kind"].value.endswith(SUBJECT_TYPE) else "range"
            value = _local(row["v"].value, WD)
            if not pid or not value:
                continue
            ev = formal.setdefault((pid, role), {"classes": [], "source": "p2302"})
            what = row["q"].value
            if what == "class" and value not in ev["classes"]:
                ev["classes"].append(value)
            elif what == "relation" and value in RELATIONS:
                ev["relation"] = RELATIONS[value]
            elif what == "status" and value in STATUSES:
                ev["status"] = STATUSES[value]
    for (pid, role), ev in formal.items():
        if ev["classes"]:  # a type constraint without P2308 classes says nothing
            ev["classes"].sort(key=id_order)
            props[pid][role] = {k: ev[k] for k in ("classes", "source", "relation", "status") if k in ev}
    log(
        f"formal constraints: {sum(1 for k in formal if k[1] == 'domain')} domains, "
        f"{sum(1 for k in formal if k[1] == 'range')} ranges"
    )


def _class_labels(
    endpoint: Endpoint,
    props: dict[str, dict[str, Any]],
    page: int,
    batch: int,
    log: Callable[[str], None],
    *,
    with_type_labels: bool,
) -> dict[str, str]:
    """Class labels: every evidence class's; with the entity type labels, every P31 class's too."""
    labels: dict[str, str] = {}
    if with_type_labels:
        for row in _paged(endpoint, TYPE_LABELS_BODY, "?c", page, log, "type labels"):
            cls = _local(row["c"].value, WD)
            if cls:
                labels[cls] = row["label"].value
    wanted = sorted(
        {c for e in props.values() for r in ("domain", "range") if e.get(r) for c in e[r]["classes"]} - set(labels)
    )
    for chunk in _batches(wanted, batch):
        for row in _select_values(endpoint, _LABELS_QUERY, chunk):
            cls = _local(row["c"].value, WD)
            if cls:
                labels[cls] = row["label"].value
    log(f"{len(labels)} class labels")
    return labels


def _subclass_edges(endpoint: Endpoint, page: int, log: Callable[[str], None]) -> Mapping[str, Sequence[str]]:
    """The subclass edges (bundled sample: the hierarchy then needs no queries at run time). Sorting 250k edges
    per page is too slow for the embedded store, so the pages are unordered (a plain index scan, stable within
    one store) and checked against a count."""
    edges: dict[str, list[str]] = {}
    expected = int(_select(endpoint, HIERARCHY_COUNT).rows[0]["n"].value)
    seen: set[tuple[str, str]] = set()
    for row in _paged(endpoint, HIERARCHY_BODY, None, page, log, f"{SUBCLASS} edges"):
        seen.add((row["c"].value, row["sup"].value))
        child, sup = _local(row["c"].value, WD), _local(row["sup"].value, WD)
        if child and sup:
            edges.setdefault(child, []).append(sup)
    if len(seen) != expected:
        raise SparqlError(f"{SUBCLASS} paging returned {len(seen)} distinct edges, the endpoint counts {expected}")
    p279 = ParentTable.from_dict(edges) if ParentTable.encodable(edges) else edges
    log(f"{len(seen)} {SUBCLASS} edges over {len(edges)} classes")
    return p279


def _ordered_entry(entry: dict[str, Any]) -> dict[str, Any]:
    keys = ("label", "description", "aliases", "datatype", "domain", "range")
    out = {k: entry[k] for k in keys if entry.get(k) is not None}
    if "aliases" in out:  # sorted and unique: the bundled index rebuilds byte-for-byte
        out["aliases"] = sorted(set(out["aliases"]), key=lambda a: (a.lower(), a))
    return out


def _induce_empirical(
    endpoint: Endpoint, props: dict[str, dict[str, Any]], options: BuildOptions, log: Callable[[str], None]
) -> None:
    """Soft domain/range evidence from the P31 types of a bounded sample of each property's triples."""
    todo = []
    for pid, entry in props.items():
        if pid in UNIVERSAL_PROPERTIES:
            continue
        need_domain = "domain" not in entry
        need_range = "range" not in entry and entry.get("datatype", ITEM) in ITEM_DATATYPES
        if need_domain or need_range:
            todo.append(pid)
    todo.sort(key=lambda p: int(p[1:]) if p[1:].isdigit() else 0)
    if options.max_empirical is not None:
        todo = todo[: options.max_empirical]
    log(f"empirical induction for {len(todo)} properties")
    found = {"domain": 0, "range": 0}
    for n, chunk in enumerate(_batches(todo, max(1, options.empirical_batch))):
        for pid, stats in _sample_robust(endpoint, chunk, options, log).items():
            entry = props[pid]
            for role, key in (("domain", "s"), ("range", "o")):
                if role in entry or (role == "range" and entry.get("datatype", ITEM) not in ITEM_DATATYPES):
                    continue
                evidence = _frequent(stats[key], options)
                if evidence:
                    entry[role] = evidence
                    found[role] += 1
        if n and n % 50 == 0:
            log(f"empirical: {n * options.empirical_batch}/{len(todo)} properties")
    log(f"empirical evidence: {found['domain']} domains, {found['range']} ranges")


def _sample_robust(
    endpoint: Endpoint, pids: list[str], options: BuildOptions, log: Callable[[str], None]
) -> dict[str, dict[str, dict[str, set[str]]]]:
    """`_sample_types`, retried property by property when a batch fails (a live endpoint's timeout on
    one huge property must not sink the build); a property that still fails stays unknown."""
    try:
        return _sample_types(endpoint, pids, options)
    except SparqlError as exc:
        if len(pids) == 1:
            log(f"empirical: {pids[0]} skipped ({exc.kind}: {exc})")
            return {}
    out: dict[str, dict[str, dict[str, set[str]]]] = {}
    for pid in pids:
        out.update(_sample_robust(endpoint, [pid], options, log))
    return out


def _sample_types(
    endpoint: Endpoint, pids: list[str], options: BuildOptions
) -> dict[str, dict[str, dict[str, set[str]]]]:
    """pid → {'s': subject → P31 types, 'o': object → P31 types} over ≤ sample_pairs triples of each."""
    parts = " UNION ".join(_SAMPLE_PART.format(pid=pid, n=options.sample_pairs) for pid in pids)
    result = _select(endpoint, _SAMPLE_QUERY.format(parts=parts))
    if result.capped and len(pids) > 1:  # more rows than one answer holds: halve the batch
        half = len(pids) // 2
        return {**_sample_types(endpoint, pids[:half], options), **_sample_types(endpoint, pids[half:], options)}
    pairs: dict[str, list[tuple[str | None, str | None]]] = {pid: [] for pid in pids}
    for row in result.rows:
        pid = _local(row["p"].value, WD)
        if pid in pairs:
            s, o = row.get("s"), row.get("o")
            pairs[pid].append(
                (
                    _local(s.value, WD) if s is not None and s.is_iri else None,
                    _local(o.value, WD) if o is not None and o.is_iri else None,
                )
            )
    entities = sorted({e for items in pairs.values() for pair in items for e in pair if e}, key=id_order)
    types = _p31_types(endpoint, entities, max(1, min(options.values_batch * 2, _page_size(endpoint, 10**9) // 4)))
    out: dict[str, dict[str, dict[str, set[str]]]] = {}
    for pid, items in pairs.items():
        side: dict[str, dict[str, set[str]]] = {"s": {}, "o": {}}
        for subject, value in items:
            if subject:
                side["s"][subject] = types.get(subject, set())
            if value:
                side["o"][value] = types.get(value, set())
        out[pid] = side
    return out


def _p31_types(endpoint: Endpoint, entities: list[str], batch: int) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for chunk in _batches(entities, batch):
        for row in _select_values(endpoint, TYPES_QUERY, chunk):
            e, t = _local(row["e"].value, WD), _local(row["t"].value, WD)
            if e and t:
                out.setdefault(e, set()).add(t)
    return out


def _frequent(types_by_entity: dict[str, set[str]], options: BuildOptions) -> dict[str, Any] | None:
    typed = [types for types in types_by_entity.values() if types]
    if len(typed) < options.min_typed:
        return None
    freq: dict[str, int] = {}
    for types in typed:
        for cls in types:
            freq[cls] = freq.get(cls, 0) + 1
    ranked = sorted(freq.items(), key=lambda kv: (-kv[1], id_order(kv[0])))
    keep = [cls for cls, count in ranked if count / len(typed) >= options.min_share][: options.max_types]
    if not keep:
        return None
    return {"classes": keep, "source": "empirical", "sample": len(typed)}


# --- Freebase -------------------------------------------------------------------------------------------------

_FB_PROPERTIES_BODY = (
    "SELECT ?p ?schema ?expected WHERE { "
    "{ ?p <http://rdf.freebase.com/ns/type.property.schema> ?schema } UNION "
    "{ ?p <http://rdf.freebase.com/ns/type.object.type> <http://rdf.freebase.com/ns/type.property> } "
    "OPTIONAL { ?p <http://rdf.freebase.com/ns/type.property.schema> ?schema } "
    "OPTIONAL { ?p <http://rdf.freebase.com/ns/type.property.expected_type> ?expected } }"
)
_FB_NAMES_QUERY = (
    "SELECT ?x ?name ?desc WHERE {{\n"
    "  VALUES ?x {{ {values} }}\n"
    "  OPTIONAL {{ ?x <http://rdf.freebase.com/ns/type.object.name> ?name "
    'FILTER(LANG(?name) = "en" || LANG(?name) = "") }}\n'
    "  OPTIONAL {{ ?x <http://rdf.freebase.com/ns/common.topic.description> ?desc "
    'FILTER(LANG(?desc) = "en" || LANG(?desc) = "") }}\n'
    "}}"
)
_FB_INCLUDED_BODY = "SELECT ?c ?sup WHERE { ?c <http://rdf.freebase.com/ns/freebase.type_hints.included_types> ?sup }"


def _build_freebase(endpoint: Endpoint, options: BuildOptions, log: Callable[[str], None]) -> SchemaIndex:
    page = _page_size(endpoint, options.page_size)
    props: dict[str, dict[str, Any]] = {}
    for row in _paged(endpoint, _FB_PROPERTIES_BODY, "?p ?schema ?expected", page, log, "properties"):
        pid = _local(row["p"].value, FB)
        if not pid:
            continue
        entry = props.setdefault(pid, {"label": ""})
        if "schema" in row and (cls := _local(row["schema"].value, FB)):
            ev = entry.setdefault("domain", {"classes": [], "source": "freebase-schema"})
            if cls not in ev["classes"]:
                ev["classes"].append(cls)
        if "expected" in row and (cls := _local(row["expected"].value, FB)):
            if cls in FREEBASE_LITERAL_TYPES:
                entry["datatype"] = cls
            else:
                entry["datatype"] = "entity"
                ev = entry.setdefault("range", {"classes": [], "source": "freebase-schema"})
                if cls not in ev["classes"]:
                    ev["classes"].append(cls)
    pids = sorted(props)
    classes = sorted({c for e in props.values() for r in ("domain", "range") if e.get(r) for c in e[r]["classes"]})
    labels: dict[str, str] = {}
    fb_values = lambda ids: " ".join(f"<{FB}{i}>" for i in ids)  # noqa: E731  (dotted ids need full IRIs)
    for chunk in _batches(pids + classes, max(1, min(options.values_batch, page // 2 or 1))):
        for row in _select_values(endpoint, _FB_NAMES_QUERY, chunk, fb_values):
            key = _local(row["x"].value, FB)
            if key in props:
                if "name" in row:
                    props[key]["label"] = row["name"].value
                if "desc" in row:
                    props[key]["description"] = row["desc"].value
            elif key and "name" in row:
                labels[key] = row["name"].value
    included: dict[str, list[str]] = {}
    for row in _paged(endpoint, _FB_INCLUDED_BODY, "?c ?sup", page, log, "included types"):
        child, sup = _local(row["c"].value, FB), _local(row["sup"].value, FB)
        if child and sup:
            included.setdefault(child, []).append(sup)
    log(f"{len(pids)} Freebase properties, {len(labels)} type labels, {len(included)} types with included types")
    return SchemaIndex({pid: _ordered_entry(props[pid]) for pid in pids}, labels, included, {"hierarchy_root": None})


# how each knowledge graph's schema is read (by `Flavour.name`)
_BUILDERS: dict[str, Callable[[Endpoint, BuildOptions, Callable[[str], None]], SchemaIndex]] = {
    WIKIDATA.name: _build_wikidata,
    FREEBASE.name: _build_freebase,
}
