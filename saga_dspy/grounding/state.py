"""The persistent type state Θ of one question (paper: "Persistent type state").

Θ holds
- entity → types, from every lookup and from entities seen in query results;
- SPARQL variable → types, from the partial queries the agent executes: explicit type
  patterns (`?x wdt:P31 wd:Q5`, `?x wdt:P31/wdt:P279* wd:Q5`) and, both ways, the domain
  and range of the properties a variable is used with;
- the expected answer type (label, id), used to rank and never to drop;
- trace-local range evidence: the types of a few entities a property without an indexed
  range returned, for this question only;
- a short knowledge log of recent outcomes.

One TypeState per question; it is never shared between threads. Nothing here queries
the endpoint: the tools feed it."""

from __future__ import annotations

import re
from collections import Counter, OrderedDict, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from ..kg.flavours import CLAIM, DIRECT, STATEMENT, Flavour
from .patterns import NEGATED, ParsedQuery, Term

LOG_SIZE = 6
LOG_LINE = 140


@dataclass(frozen=True)
class AnswerType:
    label: str
    qid: str = ""
    items: str = ""  # the class the question names its answer items by ("politicians": politician), however broad qid

    @property
    def yes_no(self) -> bool:
        """A yes/no question: its answer is true or false, not the values of a pattern."""
        return self.label == "boolean"

    def render(self) -> str:
        return f"{self.label} ({self.qid})" if self.qid else self.label


@dataclass
class EntityInfo:
    id: str
    label: str = ""
    types: tuple[str, ...] = ()
    is_class: bool = False  # a class (has P279 superclasses)
    source: str = "lookup"  # lookup | result | query
    has_p31: bool = True  # False: `types` are the P279 superclasses of a class without P31


@dataclass(frozen=True)
class TypeFact:
    cls: str
    source: str  # "pattern" | "pattern (or subclass)" | "domain of P57" | "range of P19" | "observed"


def _rank(fact: TypeFact) -> int:
    """Strength of a variable type fact: explicit pattern > observed in results > schema (domain/range)."""
    if fact.source.startswith("pattern"):
        return 0
    return 1 if fact.source == "observed" else 2


@dataclass
class TypeState:
    """Θ: what is known about the types of entities and variables in this question."""

    entities: OrderedDict[str, EntityInfo] = field(default_factory=OrderedDict)
    variables: OrderedDict[str, list[TypeFact]] = field(default_factory=OrderedDict)
    answer_type: AnswerType | None = None
    range_evidence: dict[str, Counter] = field(default_factory=dict)
    log: deque = field(default_factory=lambda: deque(maxlen=LOG_SIZE))

    # --- entities --------------------------------------------------------------------------------
    def record_entity(
        self,
        eid: str,
        types: Iterable[str],
        label: str = "",
        *,
        is_class: bool = False,
        source: str = "lookup",
        has_p31: bool = True,
    ) -> bool:
        """Remember an entity's types; True when something new was learnt (new entity or new types)."""
        types = tuple(dict.fromkeys(types))
        old = self.entities.get(eid)
        if old is not None:
            merged = tuple(dict.fromkeys(old.types + types))
            new = merged != old.types
            # a lookup is stronger evidence than a result sighting: it takes the entry over
            old.types = merged
            old.label = old.label or label
            if source == "lookup" or old.source == "result":
                old.source, old.is_class, old.has_p31 = source, is_class, has_p31
            self.entities.move_to_end(eid)
            return new
        self.entities[eid] = EntityInfo(eid, label, types, is_class, source, has_p31)
        return True

    @staticmethod
    def _p279_only(info: EntityInfo) -> bool:
        return info.is_class and not info.has_p31

    def types_of(self, eid: str) -> tuple[str, ...] | None:
        info = self.entities.get(eid)
        return info.types if info is not None else None

    # --- answer type -----------------------------------------------------------------------------
    def set_answer_type(self, label: str, qid: str = "", items: str = "") -> None:
        label, qid, items = (label or "").strip(), (qid or "").strip(), (items or "").strip()
        self.answer_type = AnswerType(label, qid, items) if label or qid else None

    # --- variables from an executed query ---------------------------------------------------------
    def update_from_query(
        self,
        parsed: ParsedQuery | None,
        flavour: Flavour,
        domain_of: Callable[[str], tuple[str, ...]],
        range_of: Callable[[str], tuple[str, ...]],
    ) -> dict[str, list[TypeFact]]:
        """Type the variables of a parsed query; an unparsable query (None) changes nothing.

        Returns the facts found for this query (variable → facts); variables the query
        mentions replace their older facts, as agents reuse names with new meanings."""
        if parsed is None:
            return {}
        found: OrderedDict[str, list[TypeFact]] = OrderedDict()

        def add(term: Term, fact: TypeFact) -> None:
            if term.kind != "var" or not fact.cls:
                return
            facts = found.setdefault(term.value, [])
            for i, f in enumerate(facts):
                if f.cls == fact.cls:
                    if _rank(fact) < _rank(f):
                        facts[i] = fact
                    return
            facts.append(fact)

        for p in parsed.patterns:
            if p.context == NEGATED:
                continue
            if p.type_kind and p.obj.kind == "iri":
                cls = flavour.entity_id(p.obj.value)
                if cls:
                    add(p.subject, TypeFact(cls, "pattern" if p.type_kind == "exact" else "pattern (or subclass)"))
                continue
            if p.predicate is not None and flavour.is_type_property(p.predicate):
                continue  # ?x P31 ?t: nothing to learn about ?x
            for steps, term, is_subject in ((p.subject_steps, p.subject, True), (p.object_steps, p.obj, False)):
                if not steps or term.kind != "var":
                    continue
                for step in steps:
                    ref = flavour.prop_ref(step.iri)
                    if ref is None:
                        continue
                    # which side of the property does this term sit on?
                    as_subject = is_subject != step.inverse
                    if as_subject and ref.role in (DIRECT, CLAIM):
                        for cls in domain_of(ref.pid):
                            add(term, TypeFact(cls, f"domain of {ref.pid}"))
                    elif not as_subject and ref.role in (DIRECT, STATEMENT):
                        for cls in range_of(ref.pid):
                            add(term, TypeFact(cls, f"range of {ref.pid}"))
        for var, facts in found.items():
            # explicit patterns first, then schema-derived facts
            facts.sort(key=_rank)
            self.variables[var] = facts
            self.variables.move_to_end(var)
        return dict(found)

    def observe_variable(self, var: str, classes: Iterable[str]) -> None:
        """Types seen on the entities a variable was bound to (appended, after explicit facts)."""
        facts = self.variables.setdefault(var, [])
        for cls in classes:
            fact = TypeFact(cls, "observed")
            for i, f in enumerate(facts):
                if f.cls == cls:
                    if _rank(fact) < _rank(f):
                        facts[i] = fact
                    break
            else:
                facts.append(fact)
        facts.sort(key=_rank)
        self.variables.move_to_end(var)

    def explicit_types(self, var: str) -> list[TypeFact]:
        return [f for f in self.variables.get(var, []) if f.source.startswith("pattern")]

    # --- trace-local range evidence ---------------------------------------------------------------------
    def add_range_evidence(self, pid: str, classes: Iterable[str]) -> None:
        counter = self.range_evidence.setdefault(pid, Counter())
        counter.update(classes)

    def observed_range(self, pid: str, top: int = 3) -> tuple[str, ...]:
        counter = self.range_evidence.get(pid)
        return tuple(c for c, _ in counter.most_common(top)) if counter else ()

    # --- knowledge log -------------------------------------------------------------------------------
    def note(self, kind: str, text: str) -> None:
        """kind: ok | fail empty | fail blocked | fail error | info
        ([ok] …, [fail] empty: …, [info] type discovered: …)."""
        if kind == "ok":
            tag = "[ok]"
        elif kind == "info":
            tag = "[info] type discovered:"
        elif kind.startswith("fail"):
            tag = "[fail] " + (kind[4:].strip() or "error") + ":"
        else:
            tag = f"[{kind}]"
        line = " ".join(f"{tag} {text}".split())
        if len(line) > LOG_LINE:
            line = line[: LOG_LINE - 1] + "…"
        if self.log and self.log[-1] == line:
            return
        self.log.append(line)

    def render_log(self) -> str:
        return "\n".join(self.log) if self.log else "(nothing yet)"

    # --- rendering --------------------------------------------------------------------------------------
    def render_types(
        self, class_label: Callable[[str], str], *, limit: int = 5, show_answer_type: bool = True, variables: int = 4
    ) -> str:
        lines = []
        if show_answer_type:
            lines.append(f"Expected answer type: {self.answer_type.render() if self.answer_type else 'unknown'}")
        # Entities met only in a result are not listed one by one: the variable they were bound to carries
        # their commonest types ("Variable types" below), and a line per unlabelled result id cost the prompt
        # ~20 tokens at every later step while telling the controller nothing it acts on.
        recent = [i for i in reversed(self.entities.values()) if i.source != "result"][:limit]
        if recent:
            lines.append("Known entity types:")
            for info in recent:
                names = ", ".join(f"{class_label(t)} ({t})" for t in info.types[:3]) or "no types"
                more = f" +{len(info.types) - 3}" if len(info.types) > 3 else ""
                kind = (
                    " [class; superclasses]"
                    if info.is_class and info.source == "lookup" and self._p279_only(info)
                    else ""
                )
                label = f" {info.label}" if info.label else ""
                lines.append(f"- {info.id}{label}: {names}{more}{kind}")
        else:
            lines.append("Known entity types: (none yet)")
        typed = [(v, facts) for v, facts in self.variables.items() if facts][-variables:]
        if typed:
            parts = []
            for var, facts in reversed(typed):
                best = facts[0].source
                group = [f for f in facts if f.source == best]
                names = ", ".join(class_label(f.cls) for f in group[:2])
                more = f" +{len(group) - 2}" if len(group) > 2 else ""
                parts.append(f"?{var}: {names}{more} ({best})")
            lines.append("Variable types: " + "; ".join(parts))
        if self.range_evidence:
            parts = [
                f"{pid} → {', '.join(class_label(c) for c in self.observed_range(pid, 2))}"
                for pid in list(self.range_evidence)[-3:]
            ]
            lines.append("Observed ranges (this question): " + "; ".join(parts))
        return "\n".join(lines)


_EXPECTED_LINE = re.compile(r"^Expected answer type:.*(?:\n|$)", re.M)
_LISTED_ENTITY = re.compile(r"^- (\S+) ", re.M)  # an entity line of the type context: "- Q8338 trumpet: …"
_DISCOVERY = re.compile(r"^\[info\] type discovered: (\S+) ")


def controller_state(type_context: str, knowledge_log: str) -> tuple[str, str]:
    """The type context and knowledge log as a controller with its own `answer_type` field reads them:
    without the expected-answer-type line (that field says it) and without the log's "[info] type discovered"
    lines for entities the type context lists (it lists their types). Each of those lines sits after the
    growing trajectory, so a local model evaluated it again at every step; what the controller learns is
    unchanged. Text in, text out: the live state and the demonstrations' recorded states go through it alike."""
    listed = set(_LISTED_ENTITY.findall(type_context or ""))
    types = _EXPECTED_LINE.sub("", type_context or "").strip()
    log = "\n".join(
        line
        for line in (knowledge_log or "").splitlines()
        if not ((m := _DISCOVERY.match(line)) and m.group(1) in listed)
    ).strip()
    return types, log or ("(nothing yet)" if knowledge_log else "")


__all__ = ["TypeState", "AnswerType", "EntityInfo", "TypeFact", "controller_state"]
