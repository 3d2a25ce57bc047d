"""Per-question demonstrations for the controller: a demo pool and a tiny BM25 over its questions.

A demo pool is a JSONL file (`Settings.demo_pool`, `agent.pools.choose_pool`: by default the dataset's own
`<data_dir>/demos/<dataset>.<variant>.jsonl` where that variant has its own, else `<dataset>.jsonl`;
the shared pool `shared[.<variant>].jsonl` of every bundled train pool for a dataset without one;
built by the evaluation's gold teacher with the variant's own tools), one solved question a line::

    {"id": "qald10-train-12",                      # optional
     "dataset": "qald10",                          # optional: the benchmark it comes from
     "sources": ["qald10", "qald9plus"],           # optional: every benchmark whose train split holds it
     "question": "After whom is the Riemannian geometry named?",
     "answer_type": "person (Q5)",                 # optional (else derived from the final query)
     "query_form": "SELECT",                       # optional: ASK | COUNT | SELECT
     "steps": [                                    # the ReAct trajectory, in order
        {"thought": "...", "tool_name": "search_wikidata", "tool_args": {"query": "Riemannian geometry"},
         "observation": "..."},
        ...,
        {"thought": "...", "tool_name": "stop", "tool_args": {}, "observation": ""}],
     "sparql": "SELECT ?x WHERE { wd:Q761383 wdt:P138 ?x }"}

Each record becomes one demonstration of the controller's step predictor: the trajectory of
all steps but the last as input, the last step (normally `stop`) as output, so one demo shows
a whole solved question. A record that is already a step example (it has `trajectory` and
`next_tool_name`) is used as it is.

`DemoPool.select(question, k, form)` ranks the pool by BM25 over the question words (those of the
question's query form first among the best matches) and returns fresh `dspy.Example` objects: the
caller passes them to the predictor for one call only (`predictor(..., demos=...)`), so nothing shared
is mutated. `select_guarded` does the same
behind a test firewall (`DemoGuard`): a record it refuses is never shown, and counted.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
import math
import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import dspy

from saga_dspy.agent.demo_views import for_variant
from saga_dspy.agent.state_delta import StateLines
from saga_dspy.agent.trajectory import NO_STEPS, Step, render_trajectory
from saga_dspy.config import Settings
from saga_dspy.grounding.state import controller_state
from saga_dspy.input_files import read_input_bytes, reading
from saga_dspy.signatures import QUERY_FORM_GUIDE
from saga_dspy.variants import Variant

log = logging.getLogger(__name__)


STOPWORDS = frozenset(
    """a an the of in on at to for from by with and or is are was were be been does do did has have had
    which what who whom whose when where how that this these those it its as into than then there their
    his her he she they them me give list all name tell show please""".split()
)
_WORD = re.compile(r"[\w]+", re.UNICODE)
DEMO_OBSERVATION_CHARS: int = Settings.model_fields[
    "demo_observation_chars"
].default  # a demo observation is clipped to this
OUTPUT_TOOLS = {"execute": "execute_sparql", "lookup": "get_wikidata_entry"}  # demo outputs besides stop
PROTOCOL = frozenset({"search_wikidata", "get_wikidata_entry", "execute_sparql"})  # what a filler demo must show
PICKED = frozenset({"search_wikidata", "get_wikidata_entry"})  # ... or these, ending by picking a shown candidate
DEMO_STEPS: int = Settings.model_fields["demo_steps"].default  # at most this many steps of a demo trajectory
FORM_WINDOW = 3  # of the k + FORM_WINDOW best matches, those of the question's query form are shown first
FORMS = ("ASK", "COUNT", "SELECT")


def tokenize(text: str) -> list[str]:
    return [w for w in _WORD.findall((text or "").lower()) if w not in STOPWORDS]


class BM25:
    """Okapi BM25 over short documents (k1=1.5, b=0.75)."""

    def __init__(self, documents: Sequence[Sequence[str]], k1: float = 1.5, b: float = 0.75):
        self.k1 = k1
        self.b = b
        self.docs = [Counter(doc) for doc in documents]
        self.lengths = [len(doc) for doc in documents]
        self.avg_len = (sum(self.lengths) / len(self.lengths)) if self.lengths else 0.0
        df: Counter[str] = Counter()
        for doc in self.docs:
            df.update(doc.keys())
        n = len(self.docs)
        self.idf = {term: math.log(1.0 + (n - freq + 0.5) / (freq + 0.5)) for term, freq in df.items()}

    def scores(self, query: Sequence[str]) -> list[float]:
        out = []
        terms = set(query)
        for doc, length in zip(self.docs, self.lengths):
            score = 0.0
            norm = self.k1 * (1.0 - self.b + self.b * (length / self.avg_len if self.avg_len else 0.0))
            for term in terms:
                tf = doc.get(term)
                if tf:
                    score += self.idf.get(term, 0.0) * tf * (self.k1 + 1.0) / (tf + norm)
            out.append(score)
        return out

    def top(self, query: Sequence[str], k: int) -> list[tuple[int, float]]:
        ranked = sorted(enumerate(self.scores(query)), key=lambda pair: (-pair[1], pair[0]))
        return [(i, s) for i, s in ranked[:k] if s > 0.0]


@dataclass(frozen=True)
class DemoRecord:
    question: str
    example: dspy.Example = field(compare=False)  # the whole solved question, ending with stop
    id: str | None = None
    execute: dspy.Example | None = field(default=None, compare=False)  # up to its last execution
    form: str = "SELECT"  # ASK | COUNT | SELECT
    steps: int = 0
    query_chars: int = 0
    complete: bool = False  # shows the whole protocol: search, lookup, execute (or a shown candidate picked), stop
    lookup: dspy.Example | None = field(default=None, compare=False)  # up to its first lookup
    sparql: str = ""  # its gold query (the test firewall compares it with the evaluated question's)
    source: str = ""  # the benchmark it comes from ('' when the record does not say)


Allow = Callable[[str, str], bool]  # (demo question, demo gold SPARQL) -> may it be shown?


class DemoGuard(Protocol):
    """What the program asks of a test firewall handed to it per question (evaluation's
    `eval.loading.firewall.QuestionGuard`; the agent never imports evaluation, it only calls these)."""

    def allows(self, question: str | None, sparql: str | None = None) -> bool: ...

    def filter_demos(self, demos: Sequence[Any]) -> tuple[list[Any], int]: ...


def _norm_question(text: str) -> str:
    return " ".join(_WORD.findall((text or "").lower()))


def _form_of(sparql: str) -> str:
    text = re.sub(r"(?im)^\s*PREFIX\s+\S*\s*<[^>]*>\s*", "", sparql or "").strip()
    if re.match(r"(?i)ASK\b", text):
        return "ASK"
    if re.search(r"(?i)SELECT\s+(DISTINCT\s+)?\(\s*COUNT\s*\(", text):
        return "COUNT"
    return "SELECT"


STATE_KEYS = ("type_context", "knowledge_log")


def state_before(record: dict[str, Any], index: int) -> dict[str, str]:
    """The type context and knowledge log the controller saw before step `index` of a pool record.

    Pools store them on a step only where they changed, so a step without its own carries the nearest
    earlier one's; the record's final state is only the fallback of records without per-step states
    (it would show a step what later steps found)."""
    seen: dict[str, str] = {}
    for step in (record.get("steps") or [])[: index + 1]:
        for key in STATE_KEYS:
            if isinstance(step, dict) and key in step:
                seen[key] = str(step[key])
    return {key: seen.get(key) or str(record.get(key) or "") or "(none yet)" for key in STATE_KEYS}


def _steps_of(record: dict[str, Any]) -> list[tuple[Any, dict[str, Any]]]:
    """(Step, raw step dict) pairs of a record, ending with a stop step; each raw step carries the state
    in force before it (`state_before`), the closing stop (when added) none: the record's final state."""
    steps = []
    for index, raw in enumerate(record.get("steps") or []):
        if not isinstance(raw, dict) or not raw.get("tool_name"):
            continue
        raw = {**raw, **state_before(record, index)}
        args = raw.get("tool_args") or {}
        if isinstance(args, str):
            try:
                args = json.loads(args)
            except ValueError:
                args = {}
        name = "stop" if raw["tool_name"] == "finish" else str(raw["tool_name"])
        steps.append(
            (
                Step(
                    str(raw.get("thought") or ""),
                    name,
                    dict(args) if isinstance(args, dict) else {},
                    str(raw.get("observation") or ""),
                ),
                raw,
            )
        )
    if steps and steps[-1][0].tool_name != "stop":
        steps.append((Step("The last query returns the answer, so it is the final query.", "stop", {}, ""), {}))
    return steps


def _with_state_lines(
    record: dict[str, Any], taken: list[tuple[Step, dict[str, Any]]], compact: bool
) -> list[tuple[Step, Any]]:
    """Each step with the lines it added to the recorded state (`agent.state_delta`), as a live question's
    trajectory shows them where the state is written into it: the state after a step is the one before the next
    (`compact`: without the lines its observation shows)."""
    lines = StateLines(compact=compact)
    out = []
    for index, (step, raw) in enumerate(taken):
        after = taken[index + 1][1] if index + 1 < len(taken) else {}
        types = str(after.get("type_context") or record.get("type_context") or "")
        log = str(after.get("knowledge_log") or record.get("knowledge_log") or "")
        out.append((dataclasses.replace(step, state=lines.added(types, log, step.observation)), raw))
    return out


def record_to_example(
    record: dict[str, Any],
    *,
    spinach: bool = False,
    output: str = "stop",
    observation_chars: int = DEMO_OBSERVATION_CHARS,
    steps: int = DEMO_STEPS,
    state_in_steps: bool = False,
    compact: bool = False,
) -> dspy.Example | None:
    """One pool record as a demonstration of the controller's step predictor (None if unusable).

    `output="stop"`: the whole trajectory as input and the final stop as output (a whole solved
    question); `output="execute"`: the steps before the last execution as input and that
    execution (the query written from the evidence) as output; `output="lookup"`: the steps
    before the first lookup (the search) as input and that lookup as output. `steps`: the trajectory shows at most
    the last this many steps before it (the decisive ones). `state_in_steps`: each step shows the lines it added to
    the type context and knowledge log (`Settings.state_in_trajectory`); `compact`: the observations in their compact
    rendering (`Settings.compact_observations`).
    """
    question = str(record.get("question") or "").strip()
    if not question:
        return None
    if "trajectory" in record and "next_tool_name" in record:  # already a step example
        return dspy.Example(**record).with_inputs(*[k for k in record if not k.startswith("next_")])
    taken = _steps_of(record)
    if not taken:
        return None
    if state_in_steps and not spinach:
        taken = _with_state_lines(record, taken, compact)
    at = len(taken) - 1
    if output in OUTPUT_TOOLS:
        hits = [i for i, (st, _) in enumerate(taken) if st.tool_name == OUTPUT_TOOLS[output]]
        if not hits:
            return None
        at = hits[-1] if output == "execute" else hits[0]
    target, raw = taken[at]
    shown = [st for st, _ in taken[:at]][-max(1, steps) :]
    form = str(record.get("query_form") or _form_of(str(record.get("sparql") or ""))).upper()
    answer_type = record.get("answer_type") or {"ASK": "boolean", "COUNT": "quantity"}.get(form, "unknown")
    # the state the controller saw when it chose this step (per step in the teacher's records)
    type_context = raw.get("type_context") or record.get("type_context") or "(none yet)"
    knowledge_log = raw.get("knowledge_log") or record.get("knowledge_log") or "(none yet)"
    shown_form = str(record.get("shown_form") or form).upper()  # a variant's view may hold the controller to no form
    return controller_example(
        question,
        shown,
        at - len(shown),
        target,
        spinach=spinach,
        answer_type=str(answer_type),
        form=shown_form,
        type_context=str(type_context),
        knowledge_log=str(knowledge_log),
        observation_chars=observation_chars,
        empty="" if state_in_steps else NO_STEPS,
        compact=compact,
    )


def controller_example(
    question: str,
    shown: list[Step],
    first_index: int,
    target: Step,
    *,
    spinach: bool,
    answer_type: str,
    form: str,
    type_context: str,
    knowledge_log: str,
    observation_chars: int = DEMO_OBSERVATION_CHARS,
    empty: str = NO_STEPS,
    compact: bool = False,
) -> dspy.Example:
    """The one builder of a controller demonstration: the steps shown before as the trajectory, the target
    step as the output (used for the agent's pools and for the gold teacher's compiled demos); `empty`: the
    trajectory's text when no step is shown; `compact`: its observations in their compact rendering."""
    trajectory = render_trajectory(
        shown, budget=None, observation_chars=observation_chars, first_index=first_index, empty=empty, compact=compact
    )
    outputs = {
        "next_thought": target.thought,
        "next_tool_name": target.tool_name,
        "next_tool_args": json.dumps(target.tool_args, ensure_ascii=False),
    }
    if spinach:
        inputs = {"question": question, "trajectory": trajectory}
    else:
        type_context, knowledge_log = controller_state(type_context, knowledge_log)
        inputs = {
            "question": question,
            "answer_type": answer_type,
            "query_form": QUERY_FORM_GUIDE.get(form, QUERY_FORM_GUIDE["SELECT"]),
            "trajectory": trajectory,
            "type_context": type_context,
            "knowledge_log": knowledge_log,
        }
    return dspy.Example(**inputs, **outputs).with_inputs(*inputs)


class DemoPool:
    """Solved questions to pick controller demonstrations from, by BM25 similarity of the question."""

    def __init__(
        self,
        records: Iterable[dict[str, Any]] = (),
        *,
        spinach: bool = False,
        variant: Variant | None = None,
        observation_chars: int = DEMO_OBSERVATION_CHARS,
        steps: int = DEMO_STEPS,
        state_in_steps: bool = False,
        compact: bool = False,
        exclude: Iterable[str] = (),
        name: str = "",
        path: str | Path | None = None,
    ):
        """`variant`: render each record as that variant's tools show it (agent.demo_views); `spinach`
        (or a variant without the schema controller) renders the SPINACH controller's inputs;
        `observation_chars`: each observation of a demo trajectory is clipped to this; `steps`: it shows at most its
        last this many steps; `state_in_steps`, `compact`: each step shows what it added to the state, its observation
        is compact (`record_to_example`);
        `exclude`: benchmarks
        whose records (any of their `sources`) are left out; `name`, `path`: what `describe` says it is."""
        self.records: list[DemoRecord] = []
        spinach = spinach or (variant is not None and not variant.agent.schema_controller)
        self.dropped = 0  # records the variant's tools could not have produced
        self.name = name
        self.path = None if path is None else Path(path)
        self.exclude = tuple(sorted(set(exclude)))
        self.excluded = 0  # records left out because they come from an excluded benchmark
        for record in records:
            if self.exclude and isinstance(record, dict) and set(record_sources(record)) & set(self.exclude):
                self.excluded += 1
                continue
            if variant is not None and isinstance(record, dict):
                viewed = for_variant(record, variant)
                if viewed is None:
                    self.dropped += 1
                    continue
                record = viewed
            try:
                render = functools.partial(
                    record_to_example,
                    record,
                    spinach=spinach,
                    observation_chars=observation_chars,
                    steps=steps,
                    state_in_steps=state_in_steps,
                    compact=compact,
                )
                example = render()
                execute = render(output="execute") if example is not None else None
                lookup = render(output="lookup") if example is not None else None
            except Exception as exc:  # a bad line never breaks the program
                log.warning("skipping a demo record: %s", exc)
                continue
            if example is not None:
                form = str(record.get("query_form") or _form_of(str(record.get("sparql") or ""))).upper()
                raw = [st for st in record.get("steps") or [] if isinstance(st, dict)]
                tools = {str(st.get("tool_name")) for st in raw}
                picks = ends_with_pick(record)
                self.records.append(
                    DemoRecord(
                        str(record["question"]),
                        example,
                        record.get("id"),
                        execute,
                        form,
                        len(record.get("steps") or []),
                        len(str(record.get("sparql") or "")),
                        PROTOCOL <= tools or (picks and PICKED <= tools),
                        lookup,
                        str(record.get("sparql") or ""),
                        str(record.get("dataset") or ""),
                    )
                )
        self._index = BM25([tokenize(r.question) for r in self.records])

    @classmethod
    def from_file(cls, path: str | Path, *, name: str = "file", **options: Any) -> DemoPool:
        """The pool of a JSONL file (`options`: those of `DemoPool`); lines that are not JSON are skipped."""
        records = []
        with reading(path, "demo pool"):
            text = read_input_bytes(path, "demo pool").decode("utf-8")
            for number, line in enumerate(text.splitlines(), 1):
                line = line.strip()
                if not line:
                    continue
                try:
                    records.append(json.loads(line))
                except ValueError:
                    log.warning("%s:%d: not JSON, skipped", path, number)
            return cls(records, name=name, path=path, **options)

    def __len__(self) -> int:
        return len(self.records)

    def sources(self) -> dict[str, int]:
        """Records by the benchmark they come from ('?' for records that do not say)."""
        return dict(sorted(Counter(r.source or "?" for r in self.records).items()))

    def describe(self) -> dict[str, Any]:
        """What the pool is: its name (a dataset, 'shared', 'file', 'none'), file, size and sources, and what
        was left out (benchmarks excluded, records a variant's tools could not have produced)."""
        return {
            "pool": self.name or "records",
            "file": str(self.path) if self.path is not None else None,
            "records": len(self),
            "sources": self.sources(),
            "exclude": list(self.exclude),
            "excluded_records": self.excluded,
            "dropped_for_variant": self.dropped,
        }

    def summary(self) -> str:
        """`describe` in one line, for a run's printout."""
        return describe_pool(self.describe())

    def _fillers(self, own: str, n: int, form: str | None, exclude: set[int], allow: Allow | None = None) -> list[int]:
        """The n shortest records that show the whole protocol, of the form where possible."""

        def rank(i: int) -> tuple:
            r = self.records[i]
            return (form is not None and r.form != form.upper(), not r.complete, r.steps, r.query_chars, i)

        usable = [
            i
            for i in range(len(self.records))
            if i not in exclude and _norm_question(self.records[i].question) != own and self._allowed(i, allow)
        ]
        return sorted(usable, key=rank)[:n]

    def _allowed(self, index: int, allow: Allow | None) -> bool:
        record = self.records[index]
        return allow is None or allow(record.question, record.sparql)

    def select_guarded(
        self, question: str, k: int, form: str | None = None, allow: Allow | None = None, anchors: int = 0
    ) -> tuple[list[dspy.Example], int]:
        """`select` with a firewall: `allow(demo_question, demo_sparql)` says whether a record may be
        shown to this question. Returns (demos, how many records the unguarded choice would have
        shown that `allow` refused); the refused ones are replaced by the next best."""
        if allow is None:
            return self.select(question, k, form, anchors), 0
        unguarded, _ = self._choose(question, k, form, anchors=anchors)
        refused = sum(1 for i in unguarded if not self._allowed(i, allow))
        return self._render(*self._choose(question, k, form, allow, anchors)), refused

    def select(self, question: str, k: int, form: str | None = None, anchors: int = 0) -> list[dspy.Example]:
        """The k most similar demos (fresh copies), never the question itself.

        The most similar one shows its whole trajectory ending with stop, the next one ends at
        the query written from the evidence, the third at the lookup that follows a search (a
        short one), and so on (`demo_kind`; two demos are the whole one and the lookup): the
        controller sees each kind of step at the cost of k demos. When fewer than k
        questions share a word with this one, the rest are the shortest solved questions of
        the same query form (`form`: ASK | COUNT | SELECT): short demos of the question's form
        teach the tool protocol without ids and properties to copy (docs/DESIGN.md, demonstrations).

        `anchors`: that many of the k are the same for every question of the form (the pool's shortest
        solved questions of that form showing the whole protocol), shown first, the per-question ones after
        them. A local model's prefix cache then evaluates the anchors once per form in a run instead of once
        per question; a count question is shown how a count is found, not only a list."""
        return self._render(*self._choose(question, k, form, anchors=anchors))

    def _choose(
        self, question: str, k: int, form: str | None, allow: Allow | None = None, anchors: int = 0
    ) -> tuple[list[int], int]:
        """The indices `select` shows, most relevant first (those `allow` refuses passed over): the
        per-question picks, then the anchors; and how many anchors end the list."""
        if k <= 0 or not self.records:
            return [], 0
        own = _norm_question(question)
        # the anchors are the shortest of the question's form: the same for every question of that form
        fixed = self._fillers(own, min(anchors, k), form, exclude=set(), allow=allow) if anchors > 0 else []
        want = k - len(fixed)
        ranked = [
            index
            for index, _score in (self._index.top(tokenize(question), len(self.records)) if want else ())
            if index not in fixed
            and _norm_question(self.records[index].question) != own
            and self._allowed(index, allow)
        ]
        window = ranked[: want + FORM_WINDOW]
        if form in FORMS:  # the question's form first, each part in BM25 order
            window.sort(key=lambda i: self.records[i].form != form)
        chosen = window[:want]
        if len(chosen) < want:
            chosen += self._fillers(own, want - len(chosen), form, exclude=set(chosen) | set(fixed), allow=allow)
        return chosen + fixed, len(fixed)

    def _render(self, chosen: list[int], anchors: int = 0) -> list[dspy.Example]:
        """`chosen` (most relevant first) as demos: each shows another kind of step by its rank
        (`demo_kind`); its last `anchors` (the same for every question) are shown first."""
        views = []
        for rank, index in enumerate(chosen):
            record = self.records[index]
            kind = demo_kind(rank, len(chosen))
            views.append((getattr(record, kind) or record.example).copy())
        split = len(views) - anchors
        return views[split:] + views[:split]


def ends_with_pick(record: dict[str, Any]) -> bool:
    """Whether a pool record ends by picking a shown candidate (`stop {"candidate": N}`)."""
    steps = [st for st in record.get("steps") or [] if isinstance(st, dict)]
    return bool(steps) and "candidate" in (steps[-1].get("tool_args") or {})


def demo_kind(rank: int, count: int) -> str:
    """Which step the demo of this rank (0: most relevant) among `count` shows: `example` (the whole
    trajectory, ending with stop), `execute` (the query written from the evidence) or `lookup` (the
    lookup after a search), in that order. Two demos (the default) are the whole one and the lookup
    (docs/DESIGN.md, demonstrations)."""
    if count == 2:
        return ("example", "lookup")[rank]
    return ("example", "execute", "lookup")[rank % 3]


def record_sources(record: dict[str, Any]) -> list[str]:
    """The benchmarks a pool record comes from: its `sources`, else its `dataset`."""
    sources = record.get("sources")
    if isinstance(sources, list) and sources:
        return [str(s) for s in sources]
    return [str(record["dataset"])] if record.get("dataset") else []


def describe_pool(record: dict[str, Any] | None) -> str:
    """A `DemoPool.describe()` record in one line: `demo pool: shared (data/demos/shared.jsonl), 575 records
    (qald10 38, wwq 490, ...); left out: qald10 (38 records)`."""
    if not record:
        return "demo pool: none"
    where = f" ({record['file']})" if record.get("file") else ""
    sources = ", ".join(f"{k} {v}" for k, v in (record.get("sources") or {}).items())
    text = f"demo pool: {record.get('pool')}{where}, {record.get('records', 0)} records"
    text += f" ({sources})" if sources else ""
    if record.get("exclude"):
        text += f"; left out: {', '.join(record['exclude'])} ({record.get('excluded_records', 0)} records)"
    return text


__all__ = [
    "BM25",
    "DemoGuard",
    "DemoPool",
    "describe_pool",
    "record_sources",
    "record_to_example",
    "tokenize",
]
