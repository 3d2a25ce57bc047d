"""The gold teacher: ReAct demonstrations built from a train question's gold SPARQL by running
our own tools, so every demonstration carries real observations.

For a question with gold query σ, `gold_trace` runs, on a fresh grounding context, exactly
what a good agent would do:

1. `search_wikidata(label)` for each entity constant of σ (its English label), checking that
   the search really lists the entity (else the question is skipped: a demo must never show
   an id the agent could not have found);
2. `get_wikidata_entry(qid)` for each of them; then `search_wikidata(property label)` for each
   gold property that no observation has shown yet (it must be listed, else skipped);
3. `execute_sparql(σ)` (must come back non-empty / an ASK answer; a COUNT of 0 is skipped);
4. `stop()`.

Each step stores the thought, the tool name and arguments, the real observation (shortened to
what a demo shows, keeping the gold entity / properties), and the type context and knowledge
log the controller would have seen before choosing it (only where they changed). The record is the
demo-pool format of `saga_dspy.agent.demos` (`steps`, `answer_type`, `query_form`, `sparql`, ...),
so `DemoPool` and `scripts/build_demos.py` use it directly, and `gold_demos.trace_examples` turns it into
`dspy.Example`s with the exact controller fields (`question`, `answer_type`, `query_form`,
`type_context`, `knowledge_log`, `trajectory` -> `next_thought`, `next_tool_name`,
`next_tool_args`), which dspy's ReAct needs (a plain question/answer demo lacks them and is
dropped by the adapter).
"""

from __future__ import annotations

import json
import logging
import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, cast

from tqdm import tqdm

from saga_dspy.agent.answer_type import AnswerTypeInfo
from saga_dspy.agent.demos import STATE_KEYS
from saga_dspy.agent.query_form import decide_query_form, to_form
from saga_dspy.config import Settings
from saga_dspy.eval.scoring.metrics import answer_f1
from saga_dspy.grounding.context import Execution, QuestionContext
from saga_dspy.kg.endpoint import Endpoint
from saga_dspy.kg.prefixes import WD, WIKIDATA_PREFIXES
from saga_dspy.kg.results import AskResult, SelectResult, parse_sparql_json
from saga_dspy.kg.search import Search
from saga_dspy.proposer.propose import Candidate
from saga_dspy.schema import ClassHierarchy, SchemaIndex, load_hierarchy, load_schema_index
from saga_dspy.tools import ToolOutput, make_tools, observation_of
from saga_dspy.tools.lookup import CANDIDATES_HEAD
from saga_dspy.tools.results import LookupResult
from saga_dspy.variants import variant_of

log = logging.getLogger(__name__)

_ENTITY = re.compile(r"(?:\bwd:|<http://www\.wikidata\.org/entity/)(Q[1-9]\d*)\b")
_PROPERTY = re.compile(
    r"(?:\b(?:wdt|p|ps|pq|psv|pqv|wdtn|psn|pqn):|<http://www\.wikidata\.org/prop/(?:direct/|statement/|qualifier/)?)"
    r"(P[1-9]\d*)\b"
)
_COMMENT = re.compile(r"(?m)(^|[ \t])#[^\n]*$")
_PREFIX_DECL = re.compile(r"(?i)\bPREFIX\s+([A-Za-z][\w.-]*)?:\s*<([^>]*)>\s*")
POOL_OBSERVATION_CHARS = (
    500  # what a pool record keeps of an observation; a demo shows less (Settings.demo_observation_chars)
)
MAX_ENTITIES = 3
_NUMERIC = ("integer", "decimal", "double", "float", "int", "long", "nonNegativeInteger", "positiveInteger")
_DATES = ("dateTime", "date", "gYear", "gYearMonth")


class TeacherSkip(Exception):
    """The question cannot become a clean demonstration (reason in the message)."""

    def __init__(self, reason: str, detail: str = ""):
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail


# --------------------------------------------------------------------------- constants


def entity_constants(sparql: str) -> list[str]:
    """QIDs in a query, in order of appearance, once each."""
    return list(dict.fromkeys(_ENTITY.findall(_strip_prefixes(sparql))))


def property_constants(sparql: str) -> list[str]:
    return list(dict.fromkeys(_PROPERTY.findall(_strip_prefixes(sparql))))


def _strip_prefixes(sparql: str, keep_unknown: bool = False) -> str:
    """The query without PREFIX declarations; with `keep_unknown`, the ones our endpoints do not
    predeclare come back first, one a line, if the query uses them."""
    kept: list[tuple[str, str]] = []

    def drop(m: re.Match) -> str:
        if keep_unknown and WIKIDATA_PREFIXES.get(m.group(1) or "") != m.group(2):
            kept.append((m.group(1) or "", m.group(2)))
        return ""

    body = _PREFIX_DECL.sub(drop, sparql or "").strip()
    used = [f"PREFIX {p}: <{iri}>" for p, iri in kept if re.search(rf"(?<![\w-]){re.escape(p)}:", body)]
    return "\n".join([*used, body]) if used else body


def compact_query(sparql: str) -> str:
    """The gold query without comments and without the PREFIX lines our endpoints predeclare
    (the form an agent writes); other PREFIX lines stay."""
    text = _strip_prefixes(sparql, keep_unknown=True)
    text = _COMMENT.sub(lambda m: m.group(1), text)
    lines = [line.rstrip() for line in text.splitlines() if line.strip()]
    return "\n".join(lines).strip()


# --------------------------------------------------------------------------- answer type


def gold_answer_type(result: Any, sparql: str, ctx: Any) -> tuple[str, str]:
    """(label, qid) of the gold answer: boolean / quantity / date / string, or the most common
    class (P31) of the answer entities."""
    if result is None:
        return "", ""
    if not isinstance(result, (AskResult, SelectResult)):
        result = parse_sparql_json(result)
    if isinstance(result, AskResult):
        return "boolean", ""
    if re.search(r"(?is)SELECT\s+(DISTINCT\s+)?\(\s*COUNT\s*\(", sparql or ""):
        return "quantity", ""
    values = [b for b in result.values() if not b.type == "bnode"]
    iris = [b.value[len(WD) :] for b in values if b.type == "uri" and b.value.startswith(WD)]
    literals = [b for b in values if b.type == "literal"]
    if iris and len(iris) >= len(literals):
        types = ctx.entity_types(iris[:10])
        counts: Counter[str] = Counter()
        for et in types.values():
            for t in (getattr(et, "types", None) or ())[:3]:
                counts[t] += 1
        if counts:
            qid = counts.most_common(1)[0][0]
            label = ctx.class_label(qid)
            return (label if label and label != qid else "entity"), qid
        for pid in reversed(property_constants(sparql)):  # untyped answers: the range of the last property
            ps = ctx.schema.get(pid) if getattr(ctx, "schema", None) is not None else None
            classes = tuple(getattr(getattr(ps, "range", None), "classes", None) or ())
            if classes:
                label = ctx.class_label(classes[0])
                return (label if label and label != classes[0] else "entity"), classes[0]
        return "entity", ""
    if literals:
        dt = (literals[0].datatype or "").rsplit("#", 1)[-1]
        if dt in _NUMERIC:
            return "quantity", ""
        if dt in _DATES:
            return "date", ""
        return "string", ""
    return "", ""


# --------------------------------------------------------------------------- the trace


@dataclass
class TeacherConfig:
    max_entities: int = MAX_ENTITIES
    max_property_searches: int = 2  # gold properties no observation showed are searched for by label
    require_search_hit: bool = True
    lookups: bool = True
    observation_chars: int | None = POOL_OBSERVATION_CHARS  # clip stored observations (None: keep all)
    picks: bool = False  # end with stop {"candidate": N} where the last lookup showed one answering as gold does


def _clip(text: str, limit: int | None) -> str:
    text = str(text)
    if limit is None or len(text) <= limit:
        return text
    return text[: max(0, limit - 30)].rstrip() + f"\n… [{len(text) - limit + 30} more characters]"


def focus_observation(
    text: str, keep: Sequence[str], limit: int | None, head: int = 3, whole: Sequence[str] = ()
) -> str:
    """An observation shortened to `limit` characters that keeps what the demo is about: the first
    `head` blocks (entity header, types, filter note) and every block naming an id in `keep`
    (the gold entity in a search, the gold properties in an entry), then other blocks in order.
    A block is a line and the indented lines under it; the `Next:` blocks and those beginning with a `whole`
    prefix are kept as they are, at the end. Says how much it left out."""
    text = str(text)
    if limit is None or len(text) <= limit:
        return text
    blocks: list[str] = []
    for line in text.splitlines():
        if blocks and line[:1] in (" ", "\t"):
            blocks[-1] += "\n" + line
        else:
            blocks.append(line)
    kept_whole = [b.startswith(("Next:", *whole)) for b in blocks]  # the tool's hint on the next move and `whole`
    nxt = [b for i, b in enumerate(blocks) if kept_whole[i]]
    blocks = [b for i, b in enumerate(blocks) if not kept_whole[i]]
    patterns = [re.compile(rf"\b{re.escape(k)}\b") for k in keep if k]
    wanted = [i < head or any(p.search(b) for p in patterns) for i, b in enumerate(blocks)]
    chosen: set[int] = set()
    used = sum(len(b) + 1 for b in nxt)
    for i in [i for i, w in enumerate(blocks) if wanted[i]] + [i for i in range(len(blocks)) if not wanted[i]]:
        cost = len(blocks[i]) + 1
        if used + cost > limit - 40:
            if wanted[i] and used < limit - 40:  # a wanted block is clipped rather than dropped
                blocks[i] = blocks[i][: max(0, limit - 40 - used - 2)] + "…"
                chosen.add(i)
                used = limit - 40
            continue
        chosen.add(i)
        used += cost
    out = [blocks[i] for i in range(len(blocks)) if i in chosen]
    left = len(blocks) - len(chosen)
    if left:
        out.append(f"… ({left} more line{'s' if left != 1 else ''} not shown)")
    return "\n".join(out + nxt)


def _listed(qid: str, observation: str) -> bool:
    return re.search(rf"\b{re.escape(qid)}\b", observation) is not None


def _tool_map(ctx: QuestionContext) -> dict[str, Callable[..., ToolOutput]]:
    return {tool.__name__: tool for tool in make_tools(ctx)}


def _question_context(
    settings: Settings,
    endpoint: Endpoint,
    search: Search | None,
    question: str,
    variant: str,
    answer_type: tuple[str, str] | None,
    schema: SchemaIndex | None = None,
    hierarchy: ClassHierarchy | None = None,
) -> QuestionContext:
    return QuestionContext(
        settings, endpoint, search, schema, hierarchy, question=question, variant=variant, answer_type=answer_type
    )


def gold_trace(
    question: str,
    sparql: str,
    *,
    settings: Settings,
    endpoint: Endpoint,
    search: Search | None,
    gold: Any = None,
    id: str | None = None,
    variant: str | None = None,
    config: TeacherConfig | None = None,
    schema: SchemaIndex | None = None,
    hierarchy: ClassHierarchy | None = None,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One demo-pool record for a question solved by its gold query (raises `TeacherSkip`)."""
    config = config or TeacherConfig()
    variant = variant or settings.variant
    if not sparql or not sparql.strip():
        raise TeacherSkip("no_gold_query")
    query = compact_query(sparql)
    entities = entity_constants(query)
    if len(entities) > config.max_entities:
        raise TeacherSkip("too_many_entities", f"{len(entities)} > {config.max_entities}")

    # The answer type the answer-type step should have produced, from the gold result.
    probe = _question_context(settings, endpoint, search, question, variant, None, schema, hierarchy)
    if gold is None:
        try:
            gold = endpoint.query(query)
        except Exception as exc:  # any failure of the gold query: the question cannot become a demo
            raise TeacherSkip("gold_error", str(exc)[:200]) from exc
    label, qid = gold_answer_type(gold, query, probe)
    info = AnswerTypeInfo.from_raw(label, qid)
    form = decide_query_form(info, question)
    if form == "ANY":
        form = "SELECT"
    at = (info.label, info.qid) if info.label else None
    ctx = _question_context(settings, endpoint, search, question, variant, at, probe.schema, probe.hierarchy)
    trace = _Trace(ctx, _tool_map(ctx), config)
    labels = ctx.labels(entities) if entities else {}
    props = property_constants(query)
    _find_entities(trace, entities, labels, props)
    after_lookup = bool(trace.steps) and trace.steps[-1]["tool_name"] == "get_wikidata_entry"
    picked = _pick(trace, gold, settings, form, variant) if config.picks and after_lookup else None
    if picked is not None:
        query = picked[0].sparql
        type_context, knowledge_log = _stop_with_pick(trace, *picked)
    else:
        _find_missing_properties(trace, props)
        last = _execute_gold(trace, query, form, entities, labels, props)
        type_context, knowledge_log = _stop(trace, form, last)
    _keep_changed_contexts(trace.steps)
    steps = trace.steps
    record: dict[str, Any] = {
        "id": id,
        "question": question,
        "answer_type": info.render() if info.label or info.qid else "unknown",
        "answer_type_label": info.label,
        "answer_type_qid": info.qid,
        "query_form": form,
        "sparql": query,
        "steps": steps,
        "type_context": type_context,
        "knowledge_log": knowledge_log,
        "teacher": "gold",
        "variant": variant,
        "entities": entities,
        "properties": props,
    }
    if extra:
        record.update(extra)
    return record


class _Trace:
    """The steps of one gold trace: each tool call with the observation and the context the agent saw before it."""

    def __init__(self, ctx: QuestionContext, tools: dict[str, Callable[..., ToolOutput]], config: TeacherConfig):
        self.ctx = ctx
        self.tools = tools
        self.config = config
        self.steps: list[dict[str, Any]] = []
        self.shown: tuple[Candidate, ...] = ()  # the candidates the latest lookup showed
        self.last_raw: tuple[str, tuple[str, ...]] = ("", ())  # the latest step's whole observation, the ids it keeps

    def run(self, thought: str, name: str, args: dict[str, Any], keep: Sequence[str] = ()) -> str:
        ctx, steps, tools, config = self.ctx, self.steps, self.tools, self.config
        before_types = str(ctx.type_context() or "")
        before_log = str(ctx.knowledge_log() or "")
        output = tools[name](**args)
        if isinstance(output, LookupResult):
            self.shown = output.shown
        observation = observation_of(output)
        self.last_raw = (observation, tuple(keep))
        steps.append(
            {
                "thought": thought,
                "tool_name": name,
                "tool_args": args,
                "observation": focus_observation(observation, keep, config.observation_chars),
                "type_context": before_types,
                "knowledge_log": before_log,
            }
        )
        return observation


def _find_entities(trace: _Trace, entities: list[str], labels: dict[str, str], props: list[str]) -> None:
    """1-2. find and inspect each entity (search its label, look it up)."""
    config, run = trace.config, trace.run
    for n, eid in enumerate(entities):
        name = (labels.get(eid) or "").strip()
        if not name:
            raise TeacherSkip("no_label", eid)
        if n == 0:
            thought = f'The question is about "{name}". I search for it to get its Wikidata id.'
        else:
            thought = f'I also need "{name}". I search for it.'
        observation = run(thought, "search_wikidata", {"query": name}, keep=[eid])
        if config.require_search_hit and not _listed(eid, observation):
            raise TeacherSkip("not_found_by_search", f"{eid} ({name})")
        if config.lookups:
            run(
                f"{eid} is {name}. I look at its entry to check its types and see its properties.",
                "get_wikidata_entry",
                {"qid": eid},
                keep=props,
            )


def _find_missing_properties(trace: _Trace, props: list[str]) -> None:
    """2b. a gold property that no observation showed: search it by its label, as an agent would."""
    ctx, steps, config, run = trace.ctx, trace.steps, trace.config, trace.run
    searched = 0
    for pid in props:
        if any(_listed(pid, str(step["observation"])) for step in steps):
            continue
        label = ctx.property_label(pid)
        if not label or label == pid:
            raise TeacherSkip("property_unlabelled", pid)
        searched += 1
        if searched > config.max_property_searches:
            raise TeacherSkip("too_many_property_searches", pid)
        observation = run(
            f'I still need a property for "{label}". I search for it.', "search_wikidata", {"query": label}, keep=[pid]
        )
        if config.require_search_hit and not _listed(pid, observation):
            raise TeacherSkip("property_not_found_by_search", f"{pid} ({label})")


def _execute_gold(
    trace: _Trace, query: str, form: str, entities: list[str], labels: dict[str, str], props: list[str]
) -> Execution:
    """3. the gold query, written from the evidence and executed; it must answer."""
    ctx, run = trace.ctx, trace.run
    named = [f"{ctx.property_label(p)} ({p})" for p in props[:4]]
    where = f"with {', '.join(named)}" if named else "from what I found"
    ids = ", ".join(f"{labels.get(e) or e} ({e})" for e in entities[:4])
    if form == "ASK":
        thought = f"This is a yes/no question, so I write an ASK query {where}" + (f" about {ids}" if ids else "")
    elif form == "COUNT":
        thought = f"The question asks how many, so I count the answers {where}" + (f" for {ids}" if ids else "")
    else:
        thought = f"I can now write the query {where}" + (f" starting from {ids}" if ids else "")
    observation = run(thought + ", and execute it.", "execute_sparql", {"sparql": query})
    last = ctx.executions[-1] if ctx.executions else None
    if last is None or last.status != "ok":
        status = last.status if last is not None else "missing"
        raise TeacherSkip(f"gold_{status}", _clip(observation, 200))
    if form == "COUNT" and _zero_count(last.result):
        raise TeacherSkip("gold_zero_count", "a count of 0 on the sample teaches nothing")
    return last


def _stop(trace: _Trace, form: str, last: Execution) -> tuple[str, str]:
    """4. stop; returns the type context and knowledge log the agent saw before it."""
    ctx, run = trace.ctx, trace.run
    result = last.result
    rows = len(getattr(result, "rows", []) or [])
    if form == "ASK":
        why = "The ASK query answers the question"
    else:
        why = f"The query returns the answer ({rows} row{'s' if rows != 1 else ''})"
    type_context = str(ctx.type_context() or "")
    knowledge_log = str(ctx.knowledge_log() or "")
    run(f"{why}, so it is the final query.", "stop", {})
    return type_context, knowledge_log


def _pick(trace: _Trace, gold: Any, settings: Settings, form: str, variant: str) -> tuple[Candidate, bool] | None:
    """The first candidate the latest lookup showed whose final query answers as gold (F1 1), and whether that
    final query counts its answers; else None. The final query is the one the agent ends with after stop:
    rewritten to a COUNT question's form where the variant rewrites the form (`final_query.rewrite_form`)."""
    rewrites = form == "COUNT" and variant_of(variant).agent.form_rewrite
    for candidate in trace.shown:
        try:
            answers = trace.ctx.endpoint.query(candidate.sparql)
            counted = to_form(form, candidate.sparql, answers) if rewrites else None
            if counted:
                answers = trace.ctx.endpoint.query(counted)
        except Exception as exc:  # a candidate that fails here is no pick
            log.debug("candidate %s failed: %s", candidate.rank, exc)
            continue
        if answer_f1(answers, gold, mode=settings.metric_mode) >= 1.0:
            return candidate, bool(counted)
    return None


def _stop_with_pick(trace: _Trace, picked: Candidate, counted: bool) -> tuple[str, str]:
    """3-4. stop naming the picked candidate (the agent then runs it); returns the type context and knowledge log
    the agent saw before it."""
    ctx, lookup = trace.ctx, trace.steps[-1]
    observation, keep = trace.last_raw  # the lookup that showed it, shortened again keeping the pick in view
    whole = (CANDIDATES_HEAD, *(f"{candidate.rank}. [" for candidate in trace.shown))
    lookup["observation"] = focus_observation(observation, keep, trace.config.observation_chars, whole=whole)
    type_context, knowledge_log = str(ctx.type_context() or ""), str(ctx.knowledge_log() or "")
    says = "lists what the question counts" if counted else "answers the question"
    thought = f"Candidate {picked.rank} {says}, so I stop with it."
    trace.steps.append(
        {
            "thought": thought,
            "tool_name": "stop",
            "tool_args": {"candidate": picked.rank},
            "observation": "",
            "type_context": type_context,
            "knowledge_log": knowledge_log,
        }
    )
    return type_context, knowledge_log


def _keep_changed_contexts(steps: list[dict[str, Any]]) -> None:
    """A step keeps its type context / knowledge log only where they changed (`state_before` carries them on)."""
    previous: dict[str, Any] = {}
    for step in steps:
        for key in STATE_KEYS:
            if key in previous and previous[key] == step[key]:
                del step[key]
            else:
                previous[key] = step[key]


def _zero_count(result: Any) -> bool:
    values = result.values() if hasattr(result, "values") and callable(result.values) else []
    return len(values) == 1 and values[0].type == "literal" and values[0].value.strip() in ("0", "0.0")


def gold_traces(
    items: Iterable[Any],
    *,
    settings: Settings,
    endpoint: Endpoint,
    search: Search | None,
    variant: str | None = None,
    config: TeacherConfig | None = None,
    progress: bool = False,
    extra: dict[str, Any] | None = None,
) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """Records for every item that makes a clean demo (items: `eval.EvalItem`s or dicts with
    id / question / gold_sparql (or sparql) / gold); returns (records, skipped counts by reason)."""
    items = list(items)
    schema = load_schema_index(settings)
    hierarchy = load_hierarchy(settings, endpoint, schema)
    records: list[dict[str, Any]] = []
    skipped: Counter[str] = Counter()
    iterator: Iterable[Any] = items
    if progress:
        iterator = tqdm(items, desc="gold teacher", unit="q")
    for item in iterator:
        get = item.get if isinstance(item, dict) else (lambda k, d=None, _i=item: getattr(_i, k, d))
        sparql = get("gold_sparql") or get("sparql")
        gold = get("gold")
        try:
            records.append(
                gold_trace(
                    cast(str, get("question")),
                    cast(str, sparql),
                    settings=settings,
                    endpoint=endpoint,
                    search=search,
                    gold=json.loads(gold) if isinstance(gold, str) else gold,
                    id=get("id"),
                    variant=variant,
                    config=config,
                    schema=schema,
                    hierarchy=hierarchy,
                    extra=extra,
                )
            )
        except TeacherSkip as exc:
            skipped[exc.reason] += 1
            log.debug("skipped %s: %s", get("id"), exc)
        except Exception as exc:  # a tool bug must not stop a pool build
            skipped["internal"] += 1
            log.warning("gold teacher failed on %s: %s", get("id"), exc, exc_info=True)
    return records, dict(sorted(skipped.items()))


__all__ = [
    "TeacherConfig",
    "TeacherSkip",
    "compact_query",
    "focus_observation",
    "entity_constants",
    "gold_answer_type",
    "gold_trace",
    "gold_traces",
    "property_constants",
]
