"""The one table of variants: each name maps to the grounding mechanisms it keeps and how the agent runs.

`full` is SAGA; `no-type-filter`, `no-type-state` and `no-answer-type` are the paper's ablations (Table 5);
`no-query-form`, `no-form-rewrite`, `no-auto-run` and `no-repeat-assist` switch off, one at a time, this
implementation's remedies around the stop decision and a stuck controller (each ablation isolates one
mechanism); `no-incoming` drops the
lookup's section of the properties that point at the entity;
`spinach` is the baseline without schema annotations, with LLM pruning of every neighbourhood. Nothing
else in the package compares variant names: it asks `variant_of(name).grounding` / `.agent` instead.

A leaf module (no project imports), so that the grounding layer and the agent read the same table."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GroundingFlags:
    """Which SAGA mechanisms are on. `GroundingFlags.for_variant(name)` is the one place variants map to flags."""

    type_filter: bool = True  # Eq. 3 at lookup time
    conflict_check: bool = True  # the execute tool's domain-conflict check ([BLOCKED])
    type_state: bool = True  # Θ persists across steps and is rendered (types, variable types, log)
    answer_type_prior: bool = True  # rank lookups by the expected answer type
    schema_annotations: bool = True  # [domain | range] in search hits and lookups
    prune_all: bool = False  # SPINACH: LM-prune every neighbourhood (via the context's prune callable)
    incoming_edges: bool = True  # the lookup also lists the properties that point at the entity (?x wdt:P wd:E)

    @classmethod
    def for_variant(cls, variant: str) -> GroundingFlags:
        return variant_of(variant).grounding

    @property
    def variant(self) -> str:
        for name, flags in VARIANT_FLAGS.items():
            if flags == self:
                return name
        return "custom"


@dataclass(frozen=True)
class AgentFlags:
    """How the agent runs around the tools."""

    answer_type_step: bool = True  # predict the expected answer type once per question (the prior's LM step)
    query_form: bool = True  # impose the query form (ASK / COUNT / SELECT): shown to the controller, enforced at stop
    form_rewrite: bool = True  # rewrite the head of a final query of the wrong form (ASK <-> SELECT, COUNT); a count's
    # one-variable SELECT is then accepted at stop, not sent back first
    auto_run: bool = True  # a stop with nothing executed (or steps ending without a result) runs the lookup's
    # candidate query first: its proposal, else its best candidate (`candidate.best_candidate`)
    schema_controller: bool = True  # the SAGA controller reading the type context and knowledge log; else SPINACH's
    reject_empty_stop: bool = True  # stop() on an empty / blocked final query is sent back once
    assist_repeats: bool = True  # a repeated action is answered with the step it circles (stop, the named lookup,
    # the proposal); the episode ends on repeats only when nothing is left to suggest
    seen_ids_only: bool = True  # a final query naming an id no observation showed and the KG does not know is
    # replaced by the lookup's candidate query, else dropped


@dataclass(frozen=True)
class Variant:
    name: str
    grounding: GroundingFlags
    agent: AgentFlags

    @property
    def is_full(self) -> bool:
        """Every mechanism on: what the bundled demo pools were recorded with."""
        return self.grounding == GroundingFlags() and self.agent == AgentFlags()


_TABLE = (
    Variant("full", GroundingFlags(), AgentFlags()),
    # the filter ablation removes both type constraints used as filters: lookup filtering and [BLOCKED]
    Variant("no-type-filter", GroundingFlags(type_filter=False, conflict_check=False), AgentFlags()),
    Variant("no-type-state", GroundingFlags(type_state=False), AgentFlags()),
    # the paper's ablation: the answer-type prior only (the query form then comes from the question's wording)
    Variant("no-answer-type", GroundingFlags(answer_type_prior=False), AgentFlags(answer_type_step=False)),
    Variant("no-query-form", GroundingFlags(), AgentFlags(query_form=False)),
    Variant("no-form-rewrite", GroundingFlags(), AgentFlags(form_rewrite=False)),
    Variant("no-auto-run", GroundingFlags(), AgentFlags(auto_run=False)),
    Variant("no-repeat-assist", GroundingFlags(), AgentFlags(assist_repeats=False)),
    Variant("no-incoming", GroundingFlags(incoming_edges=False), AgentFlags()),  # outgoing properties only
    Variant(
        "spinach",
        GroundingFlags(
            type_filter=False,
            conflict_check=False,
            type_state=False,
            answer_type_prior=False,
            schema_annotations=False,
            prune_all=True,
            incoming_edges=False,
        ),
        AgentFlags(
            answer_type_step=False,
            query_form=False,
            form_rewrite=False,
            auto_run=False,
            schema_controller=False,
            reject_empty_stop=False,
            assist_repeats=False,
            seen_ids_only=False,
        ),
    ),
)
VARIANTS: dict[str, Variant] = {v.name: v for v in _TABLE}
VARIANT_NAMES: tuple[str, ...] = tuple(VARIANTS)
VARIANT_FLAGS: dict[str, GroundingFlags] = {v.name: v.grounding for v in _TABLE}


def variant_of(name: str) -> Variant:
    """The variant called `name`; a ValueError naming the known ones otherwise."""
    try:
        return VARIANTS[name]
    except KeyError:
        raise ValueError(f"unknown variant {name!r} (known: {', '.join(VARIANTS)})") from None
