"""The per-question context the five tools work on.

`QuestionContext` carries everything one question needs and nothing shared that is
mutable: the type state Θ, the execution records, the counters, the ablation flags and
the final query. The endpoint, search, schema index and class hierarchy it points to are
shared read-only services (thread-safe on their side). Create one context per question;
never share one between threads."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..config import Settings
from ..kg.errors import SparqlError
from ..kg.flavours import Flavour, flavour_for
from ..kg.results import QueryResult, SelectResult
from ..schema import EntityTypes, entity_types_many, load_hierarchy, load_schema_index
from ..schema.compat import as_mode
from ..variants import VARIANT_FLAGS, GroundingFlags  # noqa: F401  (VARIANT_FLAGS: re-exported)
from .lexicon import load_lexicon
from .state import TypeState

PruneFn = Callable[[str, str], Sequence[str]]
OPTIONAL_SECONDS = 5.0  # the deadline of a query whose answer the lookup can do without (a live endpoint is slow)

# --- execution records ---------------------------------------------------------------------------------------


@dataclass
class Execution:
    """One execute_sparql call. status: ok | empty | blocked | error."""

    sparql: str
    result: QueryResult | None
    error: str | None
    status: str
    conflicts: list[str] = field(default_factory=list)
    rows: int = 0
    seconds: float = 0.0
    error_kind: str | None = None

    @property
    def succeeded(self) -> bool:
        return self.status in ("ok", "empty", "blocked") and self.error is None


COUNTER_KEYS = (
    "searches",
    "lookups",
    "examples",
    "executions",
    "blocked",
    "empty",
    "errors",
    "stops",
    "prune_calls",
    "sparql_queries",
)


class _CountingEndpoint:
    """The endpoint seen through the context: every round trip is counted."""

    def __init__(self, endpoint, counters: Counter):
        self._endpoint = endpoint
        self._counters = counters
        self.settings: Settings | None = getattr(endpoint, "settings", None)
        self.name = getattr(endpoint, "name", "endpoint")

    def query(self, sparql: str, timeout: float | None = None) -> QueryResult:
        self._counters["sparql_queries"] += 1
        return self._endpoint.query(sparql, timeout)

    def __getattr__(self, item):
        return getattr(self._endpoint, item)


# --- the context -----------------------------------------------------------------------------------------------


class QuestionContext:
    """Per-question state and services for the grounding tools.

    settings:  the Settings (filter_mode, observation_chars, variant, kg …)
    endpoint:  a `kg.endpoint.Endpoint`
    search:    a `kg.search.Search` (None: search_wikidata answers that search is unavailable)
    schema:    a `SchemaIndex` (default: `load_schema_index(settings)`, coverage applied)
    hierarchy: a `ClassHierarchy` (default: `load_hierarchy(settings, endpoint, schema)`)
    question:  the question text (given to the fallback prune callable)
    variant:   full | no-type-filter | no-type-state | no-answer-type | spinach (default: settings.variant)
    flags:     explicit `GroundingFlags` (overrides `variant`)
    prune:     callable(question, neighbourhood_text) -> list of PIDs, the fallback pruning for
               entities without types (and for every lookup in spinach mode); None = no pruning
    answer_type: (label, qid) or (label, qid, items) of the expected answer type, if already known
    """

    def __init__(
        self,
        settings: Settings,
        endpoint,
        search=None,
        schema=None,
        hierarchy=None,
        *,
        question: str = "",
        variant: str | None = None,
        flags: GroundingFlags | None = None,
        prune: PruneFn | None = None,
        answer_type: tuple[str, ...] | None = None,
        kg: str | None = None,
    ):
        self.settings = settings
        self.counters: Counter = Counter({k: 0 for k in COUNTER_KEYS})
        self.endpoint = _CountingEndpoint(endpoint, self.counters)
        self.search = search
        if schema is None:
            schema = load_schema_index(settings)
        if hierarchy is None:
            hierarchy = load_hierarchy(settings, endpoint, schema)
        self.schema = schema
        self.hierarchy = hierarchy
        self.lexicon = load_lexicon(settings)
        self.flavour: Flavour = flavour_for(kg or settings.kg)
        self.flags = flags if flags is not None else GroundingFlags.for_variant(variant or settings.variant)
        self.filter_mode = as_mode(self.flags.filter_mode or settings.filter_mode)  # a variant's own mode wins
        self.budget = max(400, int(settings.observation_chars))
        self.question = question
        self.prune = prune
        self.state = TypeState()
        self.executions: list[Execution] = []
        # ids → labels of things the agent has seen (lookups, search hits, results): unknown-IRI hints
        self.seen: dict[str, str] = {}
        self._types_cache: dict[str, Any] = {}  # id → EntityTypes (internal; not the rendered Θ)
        self._label_cache: dict[str, str] = {}
        self._names: dict[str, list[str]] = {}  # id → label and aliases
        self.trace: list[dict[str, Any]] = []  # (tool, argument, seconds, queries) per call
        if answer_type:
            self.set_answer_type(*answer_type)

    # --- configuration ---------------------------------------------------------------------------------
    @property
    def variant(self) -> str:
        return self.flags.variant

    def set_answer_type(self, label: str, qid: str = "", items: str = "") -> None:
        """The expected answer type from the answer-type step (ranks lookups, never drops); `items`: the class
        the question names its answers by (may restrict a proposed items query, `grounding.incoming`)."""
        self.state.set_answer_type(label, qid, items)

    def set_question(self, question: str) -> None:
        self.question = question

    # --- rendering for the controller ----------------------------------------------------------------------
    def type_context(self) -> str:
        """Expected answer type, the five most recent entity → types entries, variable types."""
        if not self.flags.type_state:
            if self.flags.answer_type_prior and self.state.answer_type:
                return f"Expected answer type: {self.state.answer_type.render()}"
            return ""
        return self.state.render_types(self.class_label, show_answer_type=self.flags.answer_type_prior)

    def knowledge_log(self) -> str:
        if not self.flags.type_state:
            return ""
        return self.state.render_log()

    # --- endpoint helpers ---------------------------------------------------------------------------------------
    def query(self, sparql: str, timeout: float | None = None) -> QueryResult:
        return self.endpoint.query(sparql, timeout)

    def class_label(self, qid: str) -> str:
        label = self.schema.class_label(qid)
        if label and label != qid:
            return label
        return self.seen.get(qid) or self._label_cache.get(qid) or qid

    def property_label(self, pid: str) -> str:
        ps = self.schema.get(pid)
        return (ps.label if ps and ps.label else None) or self.seen.get(pid) or pid

    def entity_types(self, ids: Iterable[str]) -> dict[str, EntityTypes | None]:
        """EntityTypes for these ids, one bounded query for those not cached; failures give empty types."""
        ids = [i for i in dict.fromkeys(ids) if i]
        todo = [i for i in ids if i not in self._types_cache]
        if todo:
            try:
                self._types_cache.update(entity_types_many(self.endpoint, todo))
            except SparqlError:
                for i in todo:
                    self._types_cache[i] = EntityTypes((), False, "none", i)
        return {i: self._types_cache.get(i) for i in ids}

    def cache_types(self, eid: str, et) -> None:
        self._types_cache[eid] = et

    def rows(self, sparql: str | None, optional: bool = False) -> list:
        """The rows of one of our own lookup queries; none when the flavour has no such query or it fails
        (what it would have added is left out, the tool goes on). `optional`: a refinement the lookup can do
        without (the candidate's narrowing, its order) gets OPTIONAL_SECONDS at most, not the endpoint's deadline."""
        if sparql is None:
            return []
        try:
            result = self.query(sparql, min(OPTIONAL_SECONDS, self.settings.query_timeout) if optional else None)
        except SparqlError:
            return []
        return result.rows if isinstance(result, SelectResult) else []

    def labels(self, ids: Iterable[str]) -> dict[str, str]:
        """English labels for entity ids (one bounded query for the ones not known yet)."""
        ids = [i for i in dict.fromkeys(ids) if i]
        todo = [i for i in ids if i not in self._label_cache and i not in self.seen][:200]
        if todo:
            for row in self.rows(self.flavour.labels_query(todo)):
                eid = self.flavour.entity_id(row["e"].value)
                if eid and "l" in row:
                    self._label_cache[eid] = row["l"].value
            for i in todo:
                self._label_cache.setdefault(i, "")
        return {i: (self.seen.get(i) or self._label_cache.get(i) or "") for i in ids}

    def names(self, eid: str) -> list[str]:
        """The entity's label and aliases (one query, once a question)."""
        if eid not in self._names:
            self._names[eid] = [row["l"].value for row in self.rows(self.flavour.names_query(eid)) if "l" in row]
        return self._names[eid]

    def remember(self, eid: str, label: str) -> None:
        if eid and label:
            self.seen[eid] = label

    def record_entity_types(self, eid: str, et, label: str = "", source: str = "lookup") -> bool:
        """Put an entity's types into Θ (when the type state is on); logs newly discovered types."""
        self.cache_types(eid, et)
        if not self.flags.type_state or et is None:
            return False
        new = self.state.record_entity(
            eid, et.types, label, is_class=et.is_class, source=source, has_p31=et.source != "p279"
        )
        if new and et.types and source == "lookup":
            names = ", ".join(self.class_label(t) for t in et.types[:3])
            kind = " (a class; these are its superclasses)" if et.source == "p279" else ""
            self.state.note("info", f"{eid}{' ' + label if label else ''} is {names}{kind}")
        return new

    # --- bookkeeping ------------------------------------------------------------------------------------------------
    def record_call(self, tool: str, argument: str, started: float, queries_before: int) -> None:
        self.trace.append(
            {
                "tool": tool,
                "argument": str(argument if argument is not None else "")[:200],
                "seconds": round(time.monotonic() - started, 4),
                "queries": self.counters["sparql_queries"] - queries_before,
            }
        )

    def last_successful(self) -> Execution | None:
        """The last execution that ran without error and had a non-empty result, else the last one without error."""
        for ex in reversed(self.executions):
            if ex.status == "ok":
                return ex
        for ex in reversed(self.executions):
            if ex.error is None:
                return ex
        return None

    def snapshot(self) -> dict[str, Any]:
        """Counters and the execution statuses, as plain data."""
        return {
            "variant": self.variant,
            "counters": dict(self.counters),
            "executions": [
                {"sparql": e.sparql, "status": e.status, "rows": e.rows, "error": e.error, "conflicts": e.conflicts}
                for e in self.executions
            ],
        }


__all__ = ["QuestionContext", "GroundingFlags", "VARIANT_FLAGS", "Execution", "COUNTER_KEYS", "PruneFn"]
