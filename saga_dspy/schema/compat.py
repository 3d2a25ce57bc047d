"""Entity types and the domain check, with three outcomes: COMPATIBLE, CONFLICT, UNKNOWN.

`closure` (default) follows Wikidata's own constraint semantics: an entity satisfies a
subject-type constraint when one of its types is a constraint class or a subclass of
one (P279*). A CONFLICT must be demonstrated: no relevant type reaches a domain class
*and* every relevant type is known (its closure reaches the root "entity"). Missing
types, hierarchy gaps and soft evidence (empirical, or a "suggestion" constraint) give
UNKNOWN. Only a CONFLICT removes a property.

`calibrated` is `closure` with three changes.
1. Hub classes: through P279* almost every class reaches a few very general classes (entity,
   object, group of humans …), so a domain listing one is satisfied by nearly anything; here a hub
   cannot satisfy a domain, and a domain made only of hubs is unknown.
2. Incomplete closures: `closure` calls a conflict only when every type's closure reaches the root,
   and the sample's hierarchy is patchy; here a formal, non-suggestion domain that no type reaches is
   a conflict as soon as one of the entity's types is known.
3. Usage evidence (`ClassUsage`, which the hierarchy carries when the schema index has it: the
   bundled sample's does), for a property `pid` the caller names: "no entity of a well-populated
   class carries the property in the KG". When the type check leaves the pair UNKNOWN (a hierarchy
   gap, soft evidence, a domain of hubs), or COMPATIBLE only through a superclass (P279 path, not a
   P31 type named by the domain), the entity's P31 types are looked up: if every one of them that is
   well-populated (≥ `USAGE_MIN_INSTANCES` instances in the KG; ≥ `USAGE_MIN_INSTANCES_OVER_COMPATIBLE`
   to overrule a COMPATIBLE) has at most `USAGE_MAX_SHARE` of its instances carrying the property, and
   there is at least one such type, it is a CONFLICT. A property that fewer than
   `USAGE_MIN_SUBJECTS` typed entities of the KG carry gives no usage evidence (its absence anywhere is
   no surprise), nor does a property without any domain evidence, an entity without P31 types, or a
   domain asking for subclasses. Without usage evidence (no `pid`, no `ClassUsage`: the pure
   signature) the check is the type check alone. Soft evidence alone stays unknown.
The conflicts of changes 2 and 3 are inferred (from a patchy hierarchy, from class statistics), not
demonstrated; the entity's own statement outweighs them: a caller that knows the entity carries the
property (`carried`: the lookup's properties are all carried) gets UNKNOWN instead. (The lookups of the dev
and train splits' gold entities had lost 187 carried properties on such grounds, e.g. Google's short name.)

`bare` is the paper's Eq. 3: keep p iff δ(p) is empty or δ(p) ∩ τ(e) ≠ ∅, where τ(e)
is the entity's P31 set (no subclass reasoning, no class-level typing); a property
is still never judged against an entity without types.

`paper` is Eq. 3 as read to reproduce the paper's Table 9 on the sample (`PaperReading`, chosen on the
dev and train splits: docs/DESIGN.md): τ(e) is the entity's P31 types and their direct P279 superclasses
(one step), δ(p) the property's domain evidence, formal or soft (the paper's schema index stores sampled
subject types as δ(p) where P2302 declares none); the constraint's relation and status are not read, and an
entity without P31 types is not filtered (the lookup's LM prune instead).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Literal, Protocol

from ..kg.flavours import FLAVOURS, WIKIDATA, Flavour, flavour_for
from ..kg.flavours.wikidata_ids import HUB_CLASSES, TYPE
from ..kg.results import SelectResult
from .hierarchy import ClassHierarchy
from .index import ClassUsage, TypeEvidence, normalize_pid

if TYPE_CHECKING:  # pragma: no cover
    from ..config import Settings
    from ..kg.results import QueryResult

Mode = Literal["closure", "bare", "calibrated", "paper"]
MODES = ("closure", "bare", "calibrated", "paper")
PAPER_MODE: Mode = "paper"  # the paper's reading (also the name of the variant that uses it)


def as_mode(name: str) -> Mode:
    """`name` as a filter mode; a ValueError naming the modes otherwise (a variant's own mode is a plain string)."""
    for mode in MODES:
        if mode == name:
            return mode  # type: ignore[return-value]  # one of MODES, the values of Mode
    raise ValueError(f"filter mode must be one of {', '.join(MODES)}, not {name!r}")


# Usage evidence (calibrated), chosen on the dev and train splits (never on test):
USAGE_MIN_INSTANCES = 20  # a class with fewer instances in the KG says nothing by what they lack
USAGE_MIN_INSTANCES_OVER_COMPATIBLE = 100  # to overrule a COMPATIBLE reached only through a superclass
USAGE_MAX_SHARE = 0.01  # "none or a negligible share" of the class's instances carries the property
USAGE_MIN_SUBJECTS = 20  # a property this rare in the KG is absent almost everywhere: no evidence


@dataclass(frozen=True)
class PaperReading:
    """One reading of "the entity's types against the P2302 domains" (Eq. 3) for the `paper` mode.

    `steps`: P279 steps above the P31 types that also count as τ(e) (0: P31 only; None: the whole P279*).
    `soft`: empirical and suggestion-status domains count as δ(p) (else only formal, normal constraints).
    `classes`: a class without P31 types is typed by its P279 superclasses (else it is not filtered)."""

    steps: int | None = 1
    soft: bool = True
    classes: bool = False


PAPER_READING = PaperReading()  # the reading closest to Table 9 on the dev and train splits (DESIGN.md)


class Outcome(str, Enum):  # noqa: UP042 - str() names the member (stats keys), as StrEnum would not
    COMPATIBLE = "compatible"
    CONFLICT = "conflict"
    UNKNOWN = "unknown"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Decision:
    outcome: Outcome
    reason: str
    matched: str | None = None  # the domain class that made it COMPATIBLE
    inferred: bool = False  # a calibrated CONFLICT from a patchy hierarchy or usage statistics, not demonstrated

    @property
    def keep(self) -> bool:
        """Only a demonstrated conflict removes a property."""
        return self.outcome is not Outcome.CONFLICT


@dataclass(frozen=True)
class EntityTypes:
    """τ(e) and where it came from.

    `types`: the P31 types; for a class without P31 (e.g. Q3624078 "sovereign state"),
    its P279 superclasses, which are then its type evidence (`source == "p279"`).
    `superclasses`: the direct P279 superclasses (empty unless `is_class`).
    `source`: "p31" | "p279" | "given" | "none", or the flavour's `types_source` ("freebase")."""

    types: tuple[str, ...]
    is_class: bool = False
    source: str = "p31"
    qid: str | None = None
    superclasses: tuple[str, ...] = ()

    @property
    def p31(self) -> tuple[str, ...]:
        """The declared instance types only (what the paper's bare filter sees)."""
        return self.types if self.source in DECLARED_SOURCES else ()

    @classmethod
    def of(cls, value: EntityTypes | Iterable[str] | None) -> EntityTypes:
        if isinstance(value, EntityTypes):
            return value
        types = tuple(dict.fromkeys(normalize_pid(t) for t in (value or ())))
        return cls(types, False, "given" if types else "none")


# types declared by the entity itself (what the bare filter reads), by where they came from
DECLARED_SOURCES = frozenset({"given"} | {flavour.types_source for flavour in FLAVOURS.values()})


def typed(key: str, declared: Iterable[str], superclasses: Iterable[str], flavour: Flavour) -> EntityTypes:
    """τ(e) from its declared types and, where the KG has subclass statements, its superclasses (the type
    evidence of a class without declared types)."""
    declared, superclasses = tuple(declared), tuple(superclasses)
    if not flavour.subclass_pid:
        return EntityTypes(declared, False, flavour.types_source if declared else "none", key)
    if declared:
        return EntityTypes(declared, bool(superclasses), flavour.types_source, key, superclasses)
    if superclasses:
        return EntityTypes(superclasses, True, "p279", key, superclasses)
    return EntityTypes((), False, "none", key)


# --- fetching types ----------------------------------------------------------------------------------------


class TypeSource(Protocol):
    """What reading types needs of an endpoint (a `kg.endpoint.Endpoint`, or one seen through a counter)."""

    @property
    def settings(self) -> Settings | None: ...

    def query(self, sparql: str, timeout: float | None = None) -> QueryResult: ...


def _flavour_of(endpoint: TypeSource) -> Flavour:
    settings = endpoint.settings
    return flavour_for(settings.kg) if settings is not None else WIKIDATA  # a stand-in without settings


def entity_types(endpoint: TypeSource, qid: str) -> EntityTypes:
    """τ(e) in one query: the P31 types, and the P279 superclasses when the entity is a class."""
    key = normalize_pid(qid)
    return entity_types_many(endpoint, [key])[key]


def entity_types_many(endpoint: TypeSource, qids: Iterable[str], batch: int = 200) -> dict[str, EntityTypes]:
    """`entity_types` for many entities, one query per `batch` of them."""
    keys = list(dict.fromkeys(normalize_pid(q) for q in qids))
    flavour = _flavour_of(endpoint)
    prefix = flavour.entity_ns
    found: dict[str, tuple[list[str], list[str]]] = {k: ([], []) for k in keys}
    for start in range(0, len(keys), batch):
        chunk = keys[start : start + batch]
        result = endpoint.query(flavour.types_query(chunk))
        if not isinstance(result, SelectResult):
            continue
        for row in result.rows:
            e, t = row.get("e"), row.get("t")
            if e is None or t is None or not t.value.startswith(prefix):
                continue
            entry = found.get(e.value[len(prefix) :])
            if entry is None:
                continue
            bucket = entry[0] if row["k"].value == "i" else entry[1]
            cls = t.value[len(prefix) :]
            if cls not in bucket:
                bucket.append(cls)
    return {key: typed(key, p31, p279, flavour) for key, (p31, p279) in found.items()}


# --- the check ---------------------------------------------------------------------------------------------------


def _fmt(classes: Iterable[str], limit: int = 5) -> str:
    items = list(classes)
    text = ", ".join(items[:limit])
    return text + (f" … (+{len(items) - limit})" if len(items) > limit else "")


def check_types(
    entity_types: EntityTypes | Iterable[str] | None,
    evidence: TypeEvidence | None,
    hierarchy: ClassHierarchy | None,
    mode: Mode = "closure",
    role: str = "domain",
    *,
    reading: PaperReading = PAPER_READING,
) -> Decision:
    """Is an entity with these types compatible with this evidence? The type check alone, on either side
    (`role` only words the reason); `check_domain` adds the subject side's usage evidence."""
    et = EntityTypes.of(entity_types)
    if evidence is None or not evidence.classes:
        return Decision(Outcome.UNKNOWN, f"no {role} known")
    wanted = frozenset(evidence.classes)
    if mode == "bare":
        return _bare(et, evidence, wanted, role)
    if mode == PAPER_MODE:
        return _paper(et, evidence, wanted, hierarchy, role, reading)
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
    if hierarchy is None:
        raise ValueError(f"the {mode} mode needs a ClassHierarchy")
    if mode == "calibrated":
        return _calibrated(et, evidence, wanted, hierarchy, role)
    return _closure(et, evidence, wanted, hierarchy, role)


def check_domain(
    entity_types: EntityTypes | Iterable[str] | None,
    evidence: TypeEvidence | None,
    hierarchy: ClassHierarchy | None,
    mode: Mode = "closure",
    *,
    pid: str | None = None,
    usage: ClassUsage | None = None,
    carried: bool = False,
    reading: PaperReading = PAPER_READING,
) -> Decision:
    """Subject-side check: may an entity with these types be the subject of a property with this domain?
    Name the property (`pid`) for the calibrated mode's usage evidence (`usage`, default: the hierarchy's), and
    say whether the entity carries it (`carried`) where that is known (see the module docstring); `reading`:
    the `paper` mode's reading."""
    decision = check_types(entity_types, evidence, hierarchy, mode, "domain", reading=reading)
    if mode != "calibrated" or evidence is None or not evidence.classes:
        return decision
    if usage is None and hierarchy is not None:
        usage = hierarchy.usage
    if pid is not None and usage is not None:
        decision = _with_usage(decision, EntityTypes.of(entity_types), evidence, normalize_pid(pid), usage)
    if carried and decision.inferred:
        return Decision(
            Outcome.UNKNOWN,
            f"{decision.reason}; but the entity itself carries the property: "
            "its own statement outweighs an inferred conflict",
        )
    return decision


def check_range(
    entity_types: EntityTypes | Iterable[str] | None,
    evidence: TypeEvidence | None,
    hierarchy: ClassHierarchy | None,
    mode: Mode = "closure",
) -> Decision:
    """Object-side check (value-type constraint semantics): same outcomes as `check_domain`."""
    return check_types(entity_types, evidence, hierarchy, mode, "range")


def _calibrated(
    et: EntityTypes, evidence: TypeEvidence, wanted: frozenset[str], hierarchy: ClassHierarchy, role: str
) -> Decision:
    """`closure` where hub classes do not count and one known type suffices to call a formal conflict."""
    specific = frozenset(wanted - HUB_CLASSES)
    if not specific:
        return Decision(Outcome.UNKNOWN, f"the {role} names only hub classes: not decisive")
    decision = _closure(et, evidence, specific, hierarchy, role)
    if decision.outcome is not Outcome.UNKNOWN or evidence.is_soft:
        return decision
    probes = list(et.types) + list(et.superclasses)
    if not probes or not any(hierarchy.is_known(p) for p in probes):
        return decision
    if any(not specific.isdisjoint(hierarchy.ancestors(p)) for p in probes):
        return decision
    if evidence.relation == "subclass_of" and not et.is_class:
        return decision
    return Decision(
        Outcome.CONFLICT,
        f"no type reaches the {role} (hub classes do not count; some closures incomplete)",
        inferred=True,
    )


def usage_evidence(
    et: EntityTypes,
    pid: str,
    usage: ClassUsage,
    min_instances: int = USAGE_MIN_INSTANCES,
    max_share: float = USAGE_MAX_SHARE,
) -> list[tuple[str, int, int]] | None:
    """[(class, instances, carriers)] of the entity's well-populated P31 types when every one of them
    (at least one) has at most `max_share` of its instances carrying `pid`; None when there is no such
    evidence (no P31 types, none well-populated, one that does carry it, or `pid` rare in the KG)."""
    if not et.p31 or usage.property_subjects(pid) < USAGE_MIN_SUBJECTS:
        return None
    found = []
    for cls in et.p31:
        n = usage.instances(cls)
        if n is None or n < min_instances:
            continue
        c = usage.carriers(cls, pid)
        if c > max_share * n:
            return None
        found.append((cls, n, c))
    return found or None


def _with_usage(decision: Decision, et: EntityTypes, evidence: TypeEvidence, pid: str, usage: ClassUsage) -> Decision:
    """The calibrated decision, turned into a CONFLICT where usage evidence demonstrates one."""
    if decision.outcome is Outcome.CONFLICT or evidence.relation == "subclass_of":
        return decision
    if decision.outcome is Outcome.UNKNOWN:
        need = USAGE_MIN_INSTANCES
    elif decision.matched != et.qid and set(et.types).isdisjoint(evidence.classes):
        need = USAGE_MIN_INSTANCES_OVER_COMPATIBLE  # compatible only through a superclass of its types
    else:
        return decision
    found = usage_evidence(et, pid, usage, need)
    if found is None:
        return decision
    what = ", ".join(f"{c}: {k} of {n}" for c, n, k in found[:3])
    return Decision(
        Outcome.CONFLICT,
        f"{decision.reason}; but in the KG (almost) no instance of the entity's "
        f"well-populated types carries {pid} ({what})",
        inferred=True,
    )


def _bare(et: EntityTypes, evidence: TypeEvidence, wanted: frozenset[str], role: str) -> Decision:
    tau = et.p31
    if not tau:
        return Decision(Outcome.UNKNOWN, f"the entity has no {TYPE} types: filter skipped")
    hit = next((t for t in tau if t in wanted), None)
    if hit:
        return Decision(Outcome.COMPATIBLE, f"type {hit} is in the {role}", hit)
    return Decision(Outcome.CONFLICT, f"types {_fmt(tau)} ∩ {role} {{{_fmt(evidence.classes)}}} = ∅")


def filterable(et: EntityTypes, mode: Mode, reading: PaperReading = PAPER_READING) -> bool:
    """Whether the filter can judge this entity in this mode at all (else it is skipped: Eq. 3 would reject
    every property with a domain; the lookup prunes with the LM instead where it can)."""
    if mode == "bare":
        return bool(et.p31)
    if mode == PAPER_MODE:
        return bool(et.p31) or (reading.classes and et.is_class)
    return bool(et.types)


def paper_types(et: EntityTypes, hierarchy: ClassHierarchy | None, reading: PaperReading = PAPER_READING) -> set[str]:
    """τ(e) as the `paper` reading sees it: the P31 types (or a class's superclasses, where the reading types
    classes) and their superclasses up to `reading.steps` P279 steps; empty when the entity is not typed."""
    tau = set(et.p31) or (set(et.superclasses or et.types) if reading.classes and et.is_class else set())
    if not tau or hierarchy is None or reading.steps == 0:
        return tau
    if reading.steps is None:
        return set().union(*(hierarchy.ancestors(t) for t in tau))
    frontier = set(tau)
    for _ in range(reading.steps):
        frontier = {sup for t in frontier for sup in hierarchy.parents(t)} - tau
        tau |= frontier
    return tau


def _paper(
    et: EntityTypes,
    evidence: TypeEvidence,
    wanted: frozenset[str],
    hierarchy: ClassHierarchy | None,
    role: str,
    reading: PaperReading,
) -> Decision:
    if evidence.is_soft and not reading.soft:
        return Decision(Outcome.UNKNOWN, f"soft {role} evidence: not a declared {role}")
    tau = paper_types(et, hierarchy, reading)
    if not tau:
        return Decision(Outcome.UNKNOWN, f"the entity has no {TYPE} types: filter skipped")
    hits = sorted(tau & wanted)
    if hits:
        return Decision(Outcome.COMPATIBLE, f"type {hits[0]} is in the {role}", hits[0])
    return Decision(Outcome.CONFLICT, f"types {_fmt(sorted(tau))} ∩ {role} {{{_fmt(evidence.classes)}}} = ∅")


def _closure(
    et: EntityTypes, evidence: TypeEvidence, wanted: frozenset[str], hierarchy: ClassHierarchy, role: str
) -> Decision:
    relation = evidence.relation
    # The probes whose closures are tested. Instance side: the P31 types (for a class without P31,
    # its superclasses: its type evidence). Subclass side: the class entity itself (P279*).
    instance_side = list(et.types)
    subclass_side: list[str] = []
    if et.is_class:
        subclass_side = list(et.superclasses) if et.superclasses else (list(et.types) if et.source == "p279" else [])
    if relation == "instance_of":
        probes = instance_side
    elif relation == "subclass_of":
        probes = subclass_side
        if not probes:
            return Decision(
                Outcome.UNKNOWN,
                f"the {role} asks for a subclass of {_fmt(evidence.classes)}; the entity is not known as a class",
            )
    else:  # instance_or_subclass_of, or not stated: the permissive reading
        probes = list(dict.fromkeys(instance_side + subclass_side))
    if et.qid and et.qid in wanted and relation != "instance_of" and et.is_class:
        return Decision(Outcome.COMPATIBLE, f"{et.qid} is itself a {role} class", et.qid)
    if not probes:
        return Decision(Outcome.UNKNOWN, "the entity has no types: filter skipped")
    hierarchy.prefetch(probes)
    for probe in probes:
        closure = hierarchy.ancestors(probe)
        if not closure.isdisjoint(wanted):
            hit = probe if probe in wanted else sorted(closure & wanted)[0]
            via = f"type {probe}" if probe == hit else f"type {probe} is a subclass of {hit}, which"
            return Decision(Outcome.COMPATIBLE, f"{via} is in the {role}", hit)
    unknown = [p for p in probes if not hierarchy.is_known(p)]
    if unknown:
        return Decision(Outcome.UNKNOWN, f"no path to the root class for {_fmt(unknown)}: undecidable")
    if evidence.is_soft:
        kind = "empirical" if evidence.source == "empirical" else "suggestion-constraint"
        return Decision(
            Outcome.UNKNOWN,
            f"types {_fmt(probes)} are outside the {kind} {role} {{{_fmt(evidence.classes)}}} (soft evidence: kept)",
        )
    return Decision(
        Outcome.CONFLICT, f"types {_fmt(probes)} are not (subclasses of) the {role} {{{_fmt(evidence.classes)}}}"
    )
