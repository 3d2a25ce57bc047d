"""The per-decision datasets: each decision's states and gold choices, built from a split's gold without an LM.

For a question with gold query σ the program's own episode (`SagaProgram.new_episode`, its tools, the variant's
lookup with its shown candidates) is walked as a good agent would walk it, as the gold teacher does
(`optimize.gold_teacher`): for each entity constant of σ, `search_wikidata(its label)`, then its lookup. Three kinds
of example come out (`agent.decisions`):

* `answer-type`: the question -> the gold answer type (`gold_teacher.gold_answer_type`: the gold answers' class or
  kind); left out where the question's own cue decides the type (no LM call is made there) or the gold answers
  have no class. A class or one of its direct superclasses counts as the choice (`accepted`).
* `entity`: the controller's state right after the search -> the gold entity to look up; only where the search
  lists it (else the walk ends: no later state may show an id no search found).
* `candidate`: the state right after a lookup that showed candidates -> the shown candidate whose answers score the
  highest F1 against the gold answers (the first of a tie); where none scores above zero and every gold entity has
  been looked up, none of them (`NO_CANDIDATE`): the gold reply executes the gold query instead. Without these the
  dataset could not teach, nor measure, when a shown candidate is to be left.

The controller's states use the answer type it would see: the cue's where it decides, else the gold one. A dataset
is built once for a set of questions and the settings that shape what the tools show, and cached as JSON under the
cache directory (`decisions/`); the questions are the caller's, behind its firewall (`optimize.decision_sets`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import dspy
from tqdm import tqdm

from saga_dspy.agent.answer_cues import decides
from saga_dspy.agent.answer_type import AnswerTypeInfo
from saga_dspy.agent.decisions import (
    ANSWER_TYPE,
    CANDIDATE,
    DECISIONS,
    ENTITY,
    EXECUTE_TOOL,
    LOOKUP_TOOL,
    NO_CANDIDATE,
    SEARCH_TOOL,
)
from saga_dspy.agent.episode import Episode
from saga_dspy.agent.program import SagaProgram
from saga_dspy.config import Settings
from saga_dspy.eval.loading.evalset import EvalItem
from saga_dspy.eval.running.predictions import score_answers
from saga_dspy.eval.running.records import write_json
from saga_dspy.grounding.context import QuestionContext
from saga_dspy.optimize.gold_teacher import MAX_ENTITIES, compact_query, entity_constants, gold_answer_type

log = logging.getLogger(__name__)

FORMAT = 2
# the settings that shape what the walk's tools show (and so the states), beside the questions themselves
STATE_SETTINGS = (
    "kg",
    "endpoint",
    "search",
    "variant",
    "filter_mode",
    "schema_coverage",
    "coverage_seed",
    "schema_index",
    "lexicon",
    "observation_chars",
    "shown_candidates",
    "stable_history",
    "metric_mode",
)
_HIT = re.compile(r"^- (\S+) ", re.M)


@dataclass(frozen=True)
class DecisionExample:
    """One decision to make: the predictor's `inputs`, the gold `choice` (a type, an entity id, a candidate number),
    what else counts as it (`accepted`), why it is the gold choice, and the gold reply (`output`) a demo shows."""

    decision: str
    id: str
    question: str
    gold_sparql: str
    inputs: dict[str, str]
    choice: str
    why: str
    output: dict[str, str]
    accepted: tuple[str, ...] = ()
    options: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {**self.__dict__, "accepted": list(self.accepted), "options": list(self.options)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> DecisionExample:
        return cls(
            **{**data, "accepted": tuple(data.get("accepted") or ()), "options": tuple(data.get("options") or ())}
        )

    @property
    def kind(self) -> str:
        """What kind of choice it is, for demos that show each kind: an entity's rank among the hits, a candidate's
        number or none of them, the answer type's class."""
        if self.decision == ENTITY and self.choice in self.options:
            return f"hit {self.options.index(self.choice) + 1}"
        return self.choice

    def example(self) -> dspy.Example:
        """The dspy example: the inputs, the gold reply (a labelled demo), the choice and why (for the metric)."""
        fields = {**self.inputs, **self.output}
        extra = {"decision": self.decision, "id": self.id, "choice": self.choice, "why": self.why}
        return dspy.Example(**fields, **extra, accepted=list(self.accepted)).with_inputs(*self.inputs)


@dataclass
class DecisionData:
    """The examples of one set of questions, every decision, and why the others gave none (counts by reason)."""

    name: str
    examples: list[DecisionExample] = field(default_factory=list)
    skipped: dict[str, int] = field(default_factory=dict)
    cache_file: str | None = None

    def of(self, decision: str) -> list[DecisionExample]:
        return [e for e in self.examples if e.decision == decision]

    def sizes(self) -> dict[str, int]:
        return {d: len(self.of(d)) for d in DECISIONS}

    def questions(self) -> set[str]:
        return {e.question for e in self.examples}


# --------------------------------------------------------------------------- one question


@dataclass
class _Walk:
    """One question's walk: the program, the question, its gold, what came out."""

    program: SagaProgram
    item: EvalItem
    query: str
    gold: Any
    examples: list[DecisionExample] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # why a decision gave no example, or the walk ended

    def example(self, decision: str, inputs: dict[str, str], choice: str, why: str, output: dict[str, str], **kw):
        n = sum(e.decision == decision for e in self.examples) + 1
        key = f"{self.item.id}#{decision}-{n}"
        self.examples.append(
            DecisionExample(decision, key, self.item.question, self.query, inputs, choice, why, output, **kw)
        )

    def end(self, reason: str) -> tuple[list[DecisionExample], list[str]]:
        return self.examples, [*self.skipped, reason]


def _state(episode: Episode) -> dict[str, str]:
    """The controller's inputs in the episode's current state, as its next turn reads them."""
    return {**{k: str(v) for k, v in episode.inputs().items()}, "trajectory": episode.trajectory_text()}


def _act(episode: Episode, thought: str, tool: str, args: dict[str, Any]) -> str:
    episode.run_tool(dspy.Prediction(next_thought=thought, next_tool_name=tool, next_tool_args=json.dumps(args)))
    return episode.steps[-1].observation


def _reply(thought: str, tool: str, args: dict[str, Any]) -> dict[str, str]:
    return {"next_thought": thought, "next_tool_name": tool, "next_tool_args": json.dumps(args, ensure_ascii=False)}


def _answer_type(walk: _Walk, ctx: QuestionContext, cue: Any) -> AnswerTypeInfo | None:
    """The gold answer type; its example where the answer-type LM call would be made."""
    settings = walk.program.settings
    label, qid = gold_answer_type(walk.gold, walk.query, ctx)
    gold = AnswerTypeInfo.from_raw(label, qid, settings.kg)
    if cue is not None and decides(cue):
        walk.skipped.append(f"{ANSWER_TYPE}: the cue decides")
        return AnswerTypeInfo.from_raw(cue.label, cue.qid, settings.kg)
    if not (gold.label and (gold.qid or gold.is_scalar)):
        walk.skipped.append(f"{ANSWER_TYPE}: no class")
    else:
        parents = walk.program.services.hierarchy.parents(gold.qid) if gold.qid else ()
        why = f"the gold answers are {gold.render()}" + (f" (a kind of {', '.join(parents)})" if parents else "")
        walk.example(
            ANSWER_TYPE,
            {"question": walk.item.question},
            gold.qid or gold.label,
            why,
            {"answer_type_label": gold.label, "answer_type_qid": gold.qid},
            accepted=(gold.qid, *parents) if gold.qid else (gold.label,),
        )
    return gold if gold.label else None


def _candidate_f1s(walk: _Walk, shown: Sequence[tuple[int, str]]) -> list[tuple[int, float]]:
    """(rank, F1 of its answers against the gold answers) of each shown candidate."""
    settings, endpoint = walk.program.settings, walk.program.services.endpoint
    out = []
    for rank, sparql in shown:
        try:
            result = endpoint.query(sparql)
        except Exception as exc:  # a candidate that fails here answers nothing
            log.debug("candidate %s of %s failed: %s", rank, walk.item.id, exc)
            out.append((rank, 0.0))
            continue
        out.append((rank, score_answers(result, walk.gold, settings.metric_mode, walk.item.answerable)[0]))
    return out


def _entity_step(walk: _Walk, episode: Episode, eid: str, name: str, first: bool, last: bool) -> bool:
    """Search the entity's label, then look it up: the entity example (and the candidate one; `last`: every gold
    entity has been looked up, so leaving the candidates for the gold query is a reply the state allows); False
    where the search does not list it (the walk ends)."""
    thought = f'The question is about "{name}". I search for it.' if first else f'I also need "{name}". I search.'
    observation = _act(episode, thought, SEARCH_TOOL, {"query": name})
    hits = tuple(dict.fromkeys(_HIT.findall(observation)))
    if eid not in hits:
        return False
    why = f"the gold query uses {eid} ({name}), hit {hits.index(eid) + 1} of the {len(hits)} the search listed"
    thought = f"{eid} ({name}) is the one the question means. I look at its entry."
    walk.example(ENTITY, _state(episode), eid, why, _reply(thought, LOOKUP_TOOL, {"qid": eid}), options=hits)
    before = len(episode.shown)
    _act(episode, f"{eid} is {name}. I look at its entry.", LOOKUP_TOOL, {"qid": eid})
    shown = episode.shown[before:]
    if not (shown and episode.decision() == CANDIDATE):
        walk.skipped.append(f"{CANDIDATE}: no candidate shown")
        return True
    scores = _candidate_f1s(walk, shown)
    rank, best = max(scores, key=lambda s: (s[1], -s[0]))
    options = tuple(str(r) for r, _ in scores)
    if best <= 0 and not last:
        walk.skipped.append(f"{CANDIDATE}: no shown candidate answers, an entity is still to find")
    elif best <= 0:
        why = "no shown candidate's answers score above zero against the gold answers; the gold query does"
        thought = "No candidate answers the question. I write the query and execute it."
        reply = _reply(thought, EXECUTE_TOOL, {"sparql": walk.query})
        walk.example(CANDIDATE, _state(episode), NO_CANDIDATE, why, reply, options=options)
    else:
        others = ", ".join(f"{r}: {f:.2f}" for r, f in scores if r != rank) or "none"
        why = f"candidate {rank}'s answers score F1 {best:.2f} against the gold answers (the others: {others})"
        thought = f"Candidate {rank} answers the question, so I stop with it."
        reply = _reply(thought, "stop", {"candidate": rank})
        walk.example(CANDIDATE, _state(episode), str(rank), why, reply, options=options)
    return True


def question_examples(program: SagaProgram, item: EvalItem) -> tuple[list[DecisionExample], list[str]]:
    """The examples one question gives, and why a decision gave none or the walk ended early."""
    if not item.gold_sparql or item.gold is None:
        return [], ["no gold"]
    query = compact_query(item.gold_sparql)
    walk = _Walk(program, item, query, json.loads(item.gold))
    services, settings = program.services, program.settings
    probe = QuestionContext(
        settings,
        services.endpoint,
        services.search,
        services.schema,
        services.hierarchy,
        question=item.question,
        variant=settings.variant,
        answer_type=None,
    )
    cue = program.answer_type_cue(item.question)
    answer_type = _answer_type(walk, probe, cue)
    entities = entity_constants(query)
    if not entities:
        return walk.end("walk: no entity in the gold query")
    if len(entities) > MAX_ENTITIES:
        return walk.end("walk: too many entities")
    episode = program.new_episode(item.question, answer_type, cue)
    labels = episode.ctx.labels(entities)
    for n, eid in enumerate(entities):
        name = (labels.get(eid) or "").strip()
        if not name:
            return walk.end("walk: an entity has no label")
        if not _entity_step(walk, episode, eid, name, first=n == 0, last=n == len(entities) - 1):
            return walk.end("walk: the search does not list the entity")
    return walk.examples, walk.skipped


# --------------------------------------------------------------------------- a set of questions, cached


def cache_key(settings: Settings, items: Sequence[EvalItem]) -> str:
    """What a dataset depends on: the state settings, the questions (ids and gold queries), the format."""
    data = settings.model_dump(mode="json")
    parts = {
        "format": FORMAT,
        "settings": {k: data.get(k) for k in STATE_SETTINGS},
        "questions": [(i.id, i.question, i.gold_sparql) for i in items],
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:16]


def cache_path(settings: Settings, name: str, items: Sequence[EvalItem]) -> Path:
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip("-") or "set"
    return Path(settings.cache_dir) / "decisions" / f"{safe}-{cache_key(settings, items)}.json"


def read_cached(path: Path) -> DecisionData | None:
    """The dataset cached at `path`, None when there is none or it is unreadable (then it is built again)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if data.get("format") != FORMAT:
            return None
        examples = [DecisionExample.from_dict(e) for e in data["examples"]]
        return DecisionData(data["name"], examples, dict(data.get("skipped") or {}), str(path))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def build_decision_data(
    program: SagaProgram,
    items: Iterable[EvalItem],
    *,
    name: str,
    use_cache: bool = True,
    progress: bool = False,
) -> DecisionData:
    """Every decision's examples of `items` (the caller's questions, already behind its firewall), read from the
    cache when they were built before with the same settings, else built (no LM call) and cached."""
    items = list(items)
    path = cache_path(program.settings, name, items)
    if use_cache and (cached := read_cached(path)) is not None:
        return cached
    examples: list[DecisionExample] = []
    ended: Counter[str] = Counter()
    for item in tqdm(items, desc=f"decisions {name}", unit="q", disable=not progress):
        try:
            found, reasons = question_examples(program, item)
        except Exception as exc:  # a tool bug must not stop a dataset build
            log.warning("decision examples of %s failed: %s", item.id, exc, exc_info=True)
            found, reasons = [], ["internal error"]
        examples.extend(found)
        ended.update(reasons)
    data = DecisionData(name, examples, dict(sorted(ended.items())), str(path))
    record = {"format": FORMAT, "name": name, "questions": len(items), "sizes": data.sizes()}
    write_json(path, {**record, "skipped": data.skipped, "examples": [e.to_dict() for e in examples]})
    return data


__all__ = [
    "FORMAT",
    "DecisionData",
    "DecisionExample",
    "build_decision_data",
    "cache_key",
    "cache_path",
    "question_examples",
    "read_cached",
]
