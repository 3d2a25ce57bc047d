"""The edges that point at an entity: `?x wdt:P wd:E`.

Most list questions are asked from the object's side ("What movies does Jesse Eisenberg play
in?" is `?film wdt:P161 wd:Q219512`, "Give me all Danish movies" `?film wdt:P495 wd:Q35`,
"How many airlines are there?" `?x wdt:P31 wd:Q46970`), and a lookup that lists only outgoing
properties hides exactly the property they need. `fetch_incoming` reads, in one grouped query,
which direct-claim properties have the entity as their value, how many subjects each has, and
one subject as an example; `arrange_incoming` ranks them by the question (as the outgoing ones)
and marks those whose subjects fit the expected answer type, which is what makes a proposal.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

from ..kg.flavours.wikidata_ids import OCCUPATION as OCCUPATION  # the lookup candidate reads both here
from ..kg.flavours.wikidata_ids import POSITION as POSITION
from .context import QuestionContext
from .ranking import DESCRIPTION, PropertyScore, rank_properties
from .render import Block, clip, one_hop_query

FETCHED = 30  # incoming properties read (most used first)
TYPE_ROWS = 400  # (property, subject type) counts read to decide which properties fit the answer type
SHOWN = 4  # shown in the lookup


@dataclass
class IncomingEdge:
    pid: str
    count: int  # subjects with this property pointing here
    example: str | None = None  # one subject's id
    example_label: str = ""
    subject_types: tuple[str, ...] = ()  # P31 types of its subjects, most frequent first (when asked for)


@dataclass
class IncomingView:
    edges: dict[str, IncomingEdge]
    scores: list[PropertyScore] = field(default_factory=list)
    shown: list[str] = field(default_factory=list)
    fitting: set[str] = field(default_factory=set)
    proposal: str | None = None
    # pid → the pattern keeping only the items the question names (`items_restriction`), where one narrows
    restrictions: dict[str, str] = field(default_factory=dict)

    def query(self, eid: str, pid: str) -> str:
        """The items query of one of these properties, restricted to the question's items where that narrows."""
        return one_hop_query(eid, pid, incoming=True, restriction=self.restrictions.get(pid, ""))

    @property
    def relevant_shown(self) -> bool:
        """Does a shown property match the question's words? (Decided by relevance alone: the answer-type
        fit only orders properties of equal relevance.)"""
        return any(s.relevance > 0 for s in self.scores[:SHOWN])


def fetch_incoming(ctx: QuestionContext, eid: str, limit: int = FETCHED) -> dict[str, IncomingEdge]:
    """pid → IncomingEdge (count, one example subject), most used first; empty when the flavour has no
    such query or it fails (the lookup goes on without the section). `describe_incoming` adds the rest."""
    edges: dict[str, IncomingEdge] = {}
    for row in ctx.rows(ctx.flavour.incoming_query(eid, limit)):
        ref = ctx.flavour.prop_ref(row["p"].value) if "p" in row else None
        if ref is None or ref.pid in edges:
            continue
        example = ctx.flavour.entity_id(row["ex"].value) if "ex" in row else None
        edges[ref.pid] = IncomingEdge(ref.pid, int(float(row["n"].value)) if "n" in row else 0, example)
    return edges


def describe_incoming(
    ctx: QuestionContext, eid: str, edges: dict[str, IncomingEdge], *, subject_types: bool = False
) -> dict[str, IncomingEdge]:
    """The examples' labels and, when `subject_types`, the subjects' P31 types (what a shown section needs)."""
    if not edges:
        return edges
    examples = [e.example for e in edges.values() if e.example]
    labels = ctx.labels(examples) if examples else {}
    for edge in edges.values():
        edge.example_label = labels.get(edge.example, "") if edge.example else ""
    if subject_types:
        found: dict[str, list[str]] = {}
        for row in ctx.rows(ctx.flavour.incoming_types_query(eid, TYPE_ROWS)):
            ref = ctx.flavour.prop_ref(row["p"].value) if "p" in row else None
            t = ctx.flavour.entity_id(row["t"].value) if "t" in row else None
            if ref is not None and t and ref.pid in edges:
                found.setdefault(ref.pid, []).append(t)
        for pid, types in found.items():
            edges[pid].subject_types = tuple(types)
    return edges


def subjects_fit(ctx: QuestionContext, edge: IncomingEdge, answer_qid: str) -> bool:
    """Are some of the edge's subjects of the expected answer class (a subject type, or the property's
    formal domain, is the class or below it)?"""
    h = ctx.hierarchy
    ps = ctx.schema.get(edge.pid)
    candidates = list(edge.subject_types) + (
        list(ps.domain.classes) if ps and ps.domain and ps.domain.is_formal else []
    )
    try:
        return any(answer_qid in h.ancestors(t) for t in candidates)
    except Exception:  # noqa: BLE001 - ranking is best effort
        return False


def items_restriction(ctx: QuestionContext, eid: str, edge: IncomingEdge, items: str) -> tuple[str, int]:
    """(pattern, items kept): how the subjects of `edge` that are of the class the question names ("films
    produced by Hal Roach", "how many politicians graduated from Columbia") are told apart — `?x wdt:P31 wd:C`,
    else `?x wdt:P106 wd:C` — with how many of them the data has. The pattern is "" when none is of the class,
    or all are (nothing to narrow): an answer set is restricted only on what the data shows. One query for both."""
    order = (ctx.flavour.type_pid, OCCUPATION)
    kept_by = {}
    for row in ctx.rows(
        f"SELECT ?p (COUNT(DISTINCT ?x) AS ?n) WHERE {{ VALUES ?p {{ {' '.join(f'wdt:{p}' for p in order)} }} "
        f"?x wdt:{edge.pid} wd:{eid} . ?x ?p wd:{items} }} GROUP BY ?p"
    ):
        ref = ctx.flavour.prop_ref(row["p"].value) if "p" in row and "n" in row else None
        if ref is not None:
            kept_by[ref.pid] = int(float(row["n"].value))
    pid = next((p for p in order if kept_by.get(p)), None)
    if pid is None:
        return "", 0
    return (f"?x wdt:{pid} wd:{items}" if kept_by[pid] < edge.count else ""), kept_by[pid]


def rank_incoming(ctx: QuestionContext, entity_label: str, edges: dict[str, IncomingEdge]) -> list[PropertyScore]:
    """The incoming properties by the question's words (niche ones last), ties to the most used property (not
    the lowest id); `arrange_incoming` then puts those whose subjects fit the answer type first among equals."""
    scores = rank_properties(
        ctx.question,
        list(edges),
        ctx.schema,
        entity_label=entity_label,
        label_of=ctx.property_label,
        header=(),
        lexicon=ctx.lexicon,
        direction="in",
    )
    used = {pid: i for i, pid in enumerate(edges)}
    return sorted(scores, key=lambda s: (s.niche, -s.relevance, used[s.pid]))


def arrange_incoming(
    ctx: QuestionContext,
    eid: str,
    entity_label: str,
    edges: dict[str, IncomingEdge],
    answer_qid: str | None,
    *,
    propose: bool,
    fit_alone: bool = True,
    ranked: list[PropertyScore] | None = None,
    outgoing_best: float = 0.0,
    items: str = "",
) -> IncomingView:
    """Rank the incoming properties by the question (answer-type fit second); propose `?x wdt:P wd:E` with
    the best-ranked one whose subjects fit the expected answer class when it matches the question better
    than any outgoing property (`outgoing_best`: their top relevance) and more than one description word;
    on the type fit alone only when `fit_alone` (no outgoing property fits the answer type) and no property
    on either side matches the question's words. `ranked`: `rank_incoming` of the same edges when the
    caller has it already. `items`: the class the question names its answers by (`AnswerType.items`): the
    most relevant property's subjects fit when some are of it (type or occupation: "politicians"), and its
    query keeps only those where others are there too (`items_restriction`)."""
    view = IncomingView(edges)
    if not edges:
        return view
    fit_class = answer_qid or items  # a count question's answer is a number: its counted items fit
    fitting = {pid for pid, e in edges.items() if fit_class and subjects_fit(ctx, e, fit_class)}
    ranked = ranked if ranked is not None else rank_incoming(ctx, entity_label, edges)
    if items and ctx.flavour.proposes_queries:
        # the edges a proposal or the best candidate may use: the most relevant one and the first fitting one
        for pid in dict.fromkeys(
            s.pid
            for s in (
                next((s for s in ranked if s.relevance > 0 and not s.niche), None),
                next((s for s in ranked if s.pid in fitting), None),
            )
            if s
        ):
            view.restrictions[pid], kept = items_restriction(ctx, eid, edges[pid], items)
            if kept:
                fitting.add(pid)
    # a stable sort: equals keep rank_incoming's most-used-first order
    view.scores = sorted(
        (replace(s, fits=s.pid in fitting) for s in ranked), key=lambda s: (s.niche, -s.relevance, not s.fits)
    )
    view.shown = [s.pid for s in view.scores[:SHOWN]]
    # ★: the subjects fit the expected answer type, whether or not the words match ("companies in Munich":
    # headquarters location); requiring a word match as on the outgoing side lost such a dev question
    view.fitting = fitting & set(view.shown)
    best = next((s for s in view.scores if s.pid in fitting), None)
    if best is not None and not (
        best.relevance > max(outgoing_best, DESCRIPTION) if best.relevance > 0 else fit_alone and outgoing_best == 0
    ):
        best = None
    if propose and best is not None and ctx.flavour.proposes_queries:
        view.proposal = view.query(eid, best.pid)
    return view


def incoming_block(
    ctx: QuestionContext, eid: str, view: IncomingView, *, only_if_relevant: bool = False
) -> Block | None:
    """The section: one line per shown property, ★ where its subjects fit the expected answer type.
    `only_if_relevant` (the outgoing side already proposes a query): shown only when an incoming property
    matches the question's words, so a lookup does not grow for nothing."""
    if not view.shown or (only_if_relevant and not view.relevant_shown):
        return None
    lines = [f"Incoming: ?x wdt:Pid wd:{eid}, most relevant first:"]
    for pid in view.shown:
        e = view.edges[pid]
        star = " ★" if pid in view.fitting else ""
        example = f", e.g. {clip(e.example_label, 30)} ({e.example})" if e.example and e.example_label else ""
        lines.append(
            f"  ← {clip(ctx.property_label(pid), 32)} ({pid}){star}: {e.count} item"
            f"{'s' if e.count != 1 else ''}{example}"
        )
    compact = "Incoming: " + ", ".join(
        f"{clip(ctx.property_label(p), 30)} ({p}) ← {view.edges[p].count}" for p in view.shown
    )
    return Block("\n".join(lines), compact, "incoming properties")


def incoming_order(observation: str) -> list[str]:
    """The incoming properties of a lookup observation, in the order it shows them."""
    return [
        m.group(1)
        for line in observation.splitlines()
        if line.startswith("  ← ")
        for m in [re.search(r"\(([PQ]\d+)\)", line)]
        if m
    ]


__all__ = [
    "FETCHED",
    "SHOWN",
    "IncomingEdge",
    "IncomingView",
    "arrange_incoming",
    "describe_incoming",
    "fetch_incoming",
    "incoming_block",
    "incoming_order",
    "items_restriction",
    "rank_incoming",
    "subjects_fit",
]
