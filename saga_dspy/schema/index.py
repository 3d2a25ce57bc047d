"""The schema index: one entry per property with its label, description, datatype,
domain and range evidence (paper: "Schema Index and Type State").

Evidence sources
- `p2302`: Wikidata property constraints P2302 "subject type" (Q21503250, the domain)
  and "value type" (Q21510865, the range) with their P2308 classes, P2309 relation
  and P2316 status.
- `empirical`: for a property without a formal constraint, the frequent P31 types
  of a bounded sample of its subjects / objects (soft evidence).
- `freebase-schema`: Freebase `type.property.schema` / `type.property.expected_type`.
- unknown: `None`.

Usage evidence (`ClassUsage`, the `usage` section; the bundled sample only): for every class with at
least `min_instances` P31 instances in the KG, its instance count and how many of them carry each
property; and per property how many typed subjects carry it. The `calibrated` domain check reads it
(`schema.compat`): a well-populated class none of whose instances carries p is evidence against p.

`schema.build` reads it through SPARQL from any endpoint; this module is the index itself.
The index is saved as versioned, gzipped JSON; the prebuilt index of the bundled sample
(which also carries the sample's P279 edges for the class hierarchy) ships in `data/schema/`.
"""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
import json
import re
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ..config import BUNDLED_SCHEMA_INDEX, DEFAULT_KG, Settings
from ..input_files import read_input_bytes, reading
from .parent_table import ParentTable

FORMAT = "saga-schema-index"
FORMAT_VERSION = 1

Source = Literal["p2302", "empirical", "freebase-schema"]
FORMAL_SOURCES = frozenset({"p2302", "freebase-schema"})

FB = "http://rdf.freebase.com/ns/"


# --- the data model -----------------------------------------------------------------------------


@dataclass(frozen=True)
class TypeEvidence:
    """Domain or range evidence of a property.

    `relation`: "instance_of" | "subclass_of" | "instance_or_subclass_of" | None (not stated).
    `status`: "mandatory" | "suggestion" | None (a normal constraint, or not stated).
    `sample`: for empirical evidence, how many typed entities the classes were induced from."""

    classes: tuple[str, ...]
    source: Source
    relation: str | None = None
    status: str | None = None
    sample: int | None = None

    @property
    def is_formal(self) -> bool:
        return self.source in FORMAL_SOURCES

    @property
    def is_soft(self) -> bool:
        """Soft evidence annotates but never demonstrates a conflict (in the `closure` mode)."""
        return self.source == "empirical" or self.status == "suggestion"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"classes": list(self.classes), "source": self.source}
        if self.relation:
            out["relation"] = self.relation
        if self.status:
            out["status"] = self.status
        if self.sample is not None:
            out["sample"] = self.sample
        return out

    @classmethod
    def from_json(cls, obj: Mapping[str, Any] | None) -> TypeEvidence | None:
        if not obj:
            return None
        return cls(tuple(obj["classes"]), obj["source"], obj.get("relation"), obj.get("status"), obj.get("sample"))


@dataclass(frozen=True)
class PropertySchema:
    pid: str
    label: str
    description: str
    datatype: str | None
    domain: TypeEvidence | None  # None = unknown
    range: TypeEvidence | None  # None = unknown
    aliases: tuple[str, ...] = ()  # English aliases (question-aware ranking; absent in older index files)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"label": self.label}
        if self.description:
            out["description"] = self.description
        if self.aliases:
            out["aliases"] = list(self.aliases)
        if self.datatype:
            out["datatype"] = self.datatype
        if self.domain:
            out["domain"] = self.domain.to_json()
        if self.range:
            out["range"] = self.range.to_json()
        return out

    @classmethod
    def from_json(cls, pid: str, obj: Mapping[str, Any]) -> PropertySchema:
        return cls(
            pid,
            obj.get("label", ""),
            obj.get("description", ""),
            obj.get("datatype"),
            TypeEvidence.from_json(obj.get("domain")),
            TypeEvidence.from_json(obj.get("range")),
            tuple(obj.get("aliases") or ()),
        )


class ClassUsage:
    """Usage evidence from the KG itself: how many instances (P31) each well-populated class has and
    how many of them carry each property (as subject, `wdt:`), and how many typed subjects carry each
    property at all. Only classes with at least `min_instances` instances are recorded: the absence of
    a property from a handful of instances says nothing.

    JSON: {"min_instances": 20, "typed_entities": N, "classes": {"Q5": [60664, {"P19": 12043, …}], …},
    "property_subjects": {"P19": 12050, …}}."""

    def __init__(
        self,
        classes: Mapping[str, tuple[int, Mapping[str, int]]],
        property_subjects: Mapping[str, int],
        min_instances: int,
        typed_entities: int | None = None,
    ):
        self._classes = {c: (int(n), dict(props)) for c, (n, props) in classes.items()}
        self._subjects = dict(property_subjects)
        self.min_instances = int(min_instances)
        self.typed_entities = typed_entities

    def instances(self, cls: str) -> int | None:
        """The class's instance count, or None when it has fewer than `min_instances` (not recorded)."""
        hit = self._classes.get(cls)
        return hit[0] if hit else None

    def carriers(self, cls: str, pid: str) -> int:
        """How many instances of a recorded class carry `pid` (0 for an unrecorded class)."""
        hit = self._classes.get(cls)
        return hit[1].get(pid, 0) if hit else 0

    def property_subjects(self, pid: str) -> int:
        """How many typed entities of the KG carry `pid`."""
        return self._subjects.get(pid, 0)

    def __len__(self) -> int:
        return len(self._classes)

    def __iter__(self) -> Iterator[str]:
        """The recorded classes."""
        return iter(self._classes)

    def __contains__(self, cls: object) -> bool:
        return cls in self._classes

    def to_json(self) -> dict[str, Any]:
        classes = {
            c: [n, dict(sorted(props.items(), key=lambda kv: id_order(kv[0])))]
            for c, (n, props) in sorted(self._classes.items(), key=lambda kv: id_order(kv[0]))
        }
        out: dict[str, Any] = {"min_instances": self.min_instances}
        if self.typed_entities is not None:
            out["typed_entities"] = self.typed_entities
        out["classes"] = classes
        out["property_subjects"] = dict(sorted(self._subjects.items(), key=lambda kv: id_order(kv[0])))
        return out

    @classmethod
    def from_json(cls, obj: Mapping[str, Any] | None) -> ClassUsage | None:
        if not obj:
            return None
        return cls(
            {c: (v[0], v[1]) for c, v in obj.get("classes", {}).items()},
            obj.get("property_subjects", {}),
            obj.get("min_instances", 0),
            obj.get("typed_entities"),
        )


def id_order(ident: str) -> tuple[int, str]:
    """Wikidata ids in numeric order (P31 before P279, Q5 before Q42), other ids after them."""
    return (int(ident[1:]) if ident[1:].isdigit() else 1 << 62, ident)


def normalize_pid(pid: str) -> str:
    """'P19', 'wdt:P19', 'p:P19', a Wikidata IRI, 'ns:people.person.x' or a Freebase IRI → the bare id."""
    text = str(pid).strip().strip("<>")
    if text.startswith(("http://", "https://")):
        if text.startswith(FB):
            return text[len(FB) :]
        return text.rstrip("/").rsplit("/", 1)[-1].rsplit("#", 1)[-1]
    if ":" in text:
        text = text.split(":", 1)[1]
    return text


class SchemaIndex:
    """Per-property domain/range evidence, class labels and (for the sample) P279 edges.

    Properties are materialised lazily from the raw JSON, so loading stays fast."""

    def __init__(
        self,
        properties: Mapping[str, Mapping[str, Any]],
        class_labels: Mapping[str, str] | None = None,
        p279: Mapping[str, Sequence[str]] | None = None,
        meta: Mapping[str, Any] | None = None,
        masked: frozenset[tuple[str, str]] = frozenset(),
        coverage: tuple[int, int] | None = None,
        usage: ClassUsage | None = None,
    ):
        self._raw = dict(properties)
        self.usage = usage  # usage evidence (the bundled sample), None when the index carries none
        self._labels = dict(class_labels or {})
        self._p279 = p279
        self.meta: dict[str, Any] = dict(meta or {})
        self._masked = masked
        self.coverage = coverage  # (percent, seed) when a coverage mask is applied
        self._cache: dict[str, PropertySchema] = {}
        self._by_label: dict[str, str] | None = None  # lower-cased label -> class, built on first use

    # --- lookups ------------------------------------------------------------------------------------
    def get(self, pid: str) -> PropertySchema | None:
        key = normalize_pid(pid)
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        raw = self._raw.get(key)
        if raw is None:
            return None
        schema = PropertySchema.from_json(key, raw)
        if self._masked:
            if (key, "domain") in self._masked:
                schema = dataclasses.replace(schema, domain=None)
            if (key, "range") in self._masked:
                schema = dataclasses.replace(schema, range=None)
        self._cache[key] = schema
        return schema

    def __contains__(self, pid: object) -> bool:
        return isinstance(pid, str) and normalize_pid(pid) in self._raw

    def __len__(self) -> int:
        return len(self._raw)

    def __iter__(self) -> Iterator[PropertySchema]:
        for pid in self._raw:
            yield self.get(pid)  # type: ignore[misc]

    def pids(self) -> list[str]:
        return list(self._raw)

    def class_label(self, qid: str) -> str:
        """The English label of a class (or any labelled entity the index knows), else the id itself."""
        key = normalize_pid(qid)
        return self._labels.get(key) or key

    @property
    def class_labels(self) -> Mapping[str, str]:
        return self._labels

    def class_named(self, name: str) -> str:
        """The class whose English label is `name` (any case); of several, the one with the most instances in the
        graph (its usage evidence: "language" the languages, not the faculty), then the lowest Q-id; "" for none."""
        if not name:
            return ""
        if self._by_label is None:
            self._by_label = self._label_table()
        return self._by_label.get(name.lower(), "")

    def _label_table(self) -> dict[str, str]:
        def rank(qid: str) -> tuple[int, tuple[int, str]]:
            instances = self.usage.instances(qid) if self.usage is not None else None
            return -(instances or 0), id_order(qid)

        table: dict[str, str] = {}
        for qid, label in self._labels.items():
            low = label.lower()
            if low not in table or rank(qid) < rank(table[low]):
                table[low] = qid
        return table

    @property
    def kg(self) -> str:
        return self.meta.get("kg", DEFAULT_KG)

    @property
    def p279_edges(self) -> Mapping[str, Sequence[str]] | None:
        """child → direct superclasses, when the index carries the hierarchy (the bundled sample)."""
        return self._p279

    @property
    def counts(self) -> dict[str, Any]:
        return compute_counts(self)

    # --- coverage masks (paper Table 6) ----------------------------------------------------------------
    def formal_constraints(self) -> list[tuple[str, str]]:
        """Every (pid, 'domain'|'range') carrying formal evidence, in index order."""
        out = []
        for pid, raw in self._raw.items():
            for role in ("domain", "range"):
                ev = raw.get(role)
                if ev and ev.get("source") in FORMAL_SOURCES:
                    out.append((pid, role))
        return out

    def with_coverage(self, percent: int, seed: int = 0) -> SchemaIndex:
        """A view keeping a seeded random `percent` % of the formal constraints (the others become
        unknown). Deterministic per seed and nested: the 25 % set is inside the 50 % set."""
        if not 0 <= percent <= 100:
            raise ValueError(f"coverage must be within 0..100, not {percent}")
        units = [u for u in self.formal_constraints() if u not in self._masked]
        order = sorted(units, key=lambda u: hashlib.sha256(f"{seed}:{u[0]}:{u[1]}".encode()).hexdigest())
        keep = round(len(order) * percent / 100)
        dropped = frozenset(order[keep:])
        view = SchemaIndex(
            self._raw, self._labels, self._p279, self.meta, self._masked | dropped, (percent, seed), self.usage
        )
        return view

    # --- persistence --------------------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        props = {s.pid: s.to_json() for s in self} if self._masked else self._raw
        meta = {k: v for k, v in self.meta.items() if k not in ("format", "format_version", "counts")}
        out: dict[str, Any] = {"format": FORMAT, "format_version": FORMAT_VERSION, **meta, "counts": self.counts}
        if self.coverage:
            out["coverage"] = {"percent": self.coverage[0], "seed": self.coverage[1]}
        out["properties"] = props
        out["class_labels"] = self._labels
        if self._p279 is not None:
            if isinstance(self._p279, ParentTable):
                out["p279"] = self._p279.to_json()
            elif ParentTable.encodable(self._p279):
                out["p279"] = ParentTable.from_dict(self._p279).to_json()
            else:  # e.g. Freebase type ids
                out["p279"] = {c: list(ps) for c, ps in self._p279.items()}
        if self.usage is not None:
            out["usage"] = self.usage.to_json()
        return out

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        text = json.dumps(self.to_json(), ensure_ascii=False, separators=(",", ":"), sort_keys=False)
        tmp = path.with_name(path.name + ".tmp")
        if path.suffix == ".gz":
            with gzip.GzipFile(tmp, "wb", compresslevel=6, mtime=0) as handle:
                handle.write(text.encode("utf-8"))
        else:
            tmp.write_text(text, encoding="utf-8")
        tmp.replace(path)
        return path

    @classmethod
    def load(cls, path: str | Path) -> SchemaIndex:
        path = Path(path)
        with reading(path, "schema index"):
            obj = json.loads(read_input_bytes(path, "schema index"))
            return cls.from_json(obj, source=str(path))

    @classmethod
    def from_json(cls, obj: Mapping[str, Any], source: str = "<json>") -> SchemaIndex:
        if obj.get("format") != FORMAT:
            raise ValueError(f"{source}: not a schema index (format {obj.get('format')!r})")
        version = obj.get("format_version")
        if version != FORMAT_VERSION:
            raise ValueError(
                f"{source}: schema index format version {version}, this code reads {FORMAT_VERSION}; rebuild it"
            )
        meta = {k: v for k, v in obj.items() if k not in ("properties", "class_labels", "p279", "coverage", "usage")}
        cov = obj.get("coverage")
        p279 = obj.get("p279")
        if isinstance(p279, Mapping) and "encoding" in p279:
            p279 = ParentTable.from_json(p279)
        return cls(
            obj["properties"],
            obj.get("class_labels"),
            p279,
            meta,
            coverage=(cov["percent"], cov["seed"]) if cov else None,
            usage=ClassUsage.from_json(obj.get("usage")),
        )


def compute_counts(index: SchemaIndex) -> dict[str, Any]:
    """Per property: `formal` (a formal domain or range), else `empirical`, else `unknown`;
    and the same split per role."""
    counts: dict[str, Any] = {
        "properties": 0,
        "formal": 0,
        "empirical": 0,
        "unknown": 0,
        "domain": {"formal": 0, "empirical": 0, "unknown": 0},
        "range": {"formal": 0, "empirical": 0, "unknown": 0},
    }
    for schema in index:
        counts["properties"] += 1
        kinds = []
        for role in ("domain", "range"):
            ev = getattr(schema, role)
            kind = "unknown" if ev is None else ("formal" if ev.is_formal else "empirical")
            counts[role][kind] += 1
            kinds.append(kind)
        counts["formal" if "formal" in kinds else "empirical" if "empirical" in kinds else "unknown"] += 1
    return counts


# --- loading the index for a settings object -------------------------------------------------------------


def bundled_index_path(settings: Settings) -> Path:
    return Path(settings.data_dir) / BUNDLED_SCHEMA_INDEX


def endpoint_slug(endpoint: str, kg: str = DEFAULT_KG) -> str:
    slug = re.sub(r"[^A-Za-z0-9]+", "-", endpoint.split("://", 1)[-1]).strip("-").lower()[:60]
    digest = hashlib.sha256(f"{kg}\n{endpoint}".encode()).hexdigest()[:8]
    return f"{kg}-{slug}-{digest}"


def cached_index_path(settings: Settings) -> Path:
    """Where `python -m saga_dspy.schema build` writes an index for this endpoint by default."""
    return Path(settings.cache_dir) / "schema" / f"{endpoint_slug(settings.endpoint, settings.kg)}.json.gz"


def index_path(settings: Settings) -> Path:
    """The file `load_schema_index` reads: `settings.schema_index`, else the bundled index for the
    embedded sample, else the one built for this endpoint in the cache."""
    if settings.schema_index:
        return Path(settings.schema_index)
    if settings.on_bundled_sample:
        return bundled_index_path(settings)
    return cached_index_path(settings)


_LOADED: dict[tuple, SchemaIndex] = {}
_LOAD_LOCK = threading.Lock()


def load_schema_index(settings: Settings) -> SchemaIndex:
    """The schema index for these settings (with `settings.schema_coverage` applied), cached per process."""
    path = index_path(settings)
    if not path.exists():
        raise FileNotFoundError(
            f"no schema index at {path}; build it with: python -m saga_dspy.schema build "
            f"--endpoint {settings.endpoint} --kg {settings.kg}"
        )
    stat = path.stat()
    base_key = (str(path.resolve()), stat.st_mtime_ns, stat.st_size)
    key = base_key + (settings.schema_coverage, settings.coverage_seed)
    with _LOAD_LOCK:
        hit = _LOADED.get(key)
        if hit is not None:
            return hit
        base = _LOADED.get(base_key + (100, None))
        if base is None:
            base = SchemaIndex.load(path)
            _LOADED[base_key + (100, None)] = base
        index = (
            base
            if settings.schema_coverage >= 100
            else base.with_coverage(settings.schema_coverage, settings.coverage_seed)
        )
        _LOADED[key] = index
        return index
