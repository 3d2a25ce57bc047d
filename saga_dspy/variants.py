"""The one table of variants: each name maps to the grounding mechanisms it keeps and how the agent runs.

`paper` is SAGA as the paper describes it: the schema-aware lookup with the paper's reading of Eq. 3
(`schema.compat`'s `paper` mode), LM pruning of an untyped entity's neighbourhood, persistent type state, the
answer-type prior, the SAGA controller, and none of this implementation's additions (no proposed or program-run
query, no remedy at stop, no incoming properties, no question-aware ordering, no rule-decided answer type, the
paper's window of steps);
`paper-no-type-filter`, `paper-no-type-state` and `paper-no-answer-type` are the paper's ablations of it (Table 5).
`full` is this implementation's SAGA; `no-type-filter`, `no-type-state` and `no-answer-type` are the same
ablations of `full`; `no-query-form`, `no-form-rewrite`, `no-auto-run` and `no-repeat-assist` switch off, one
at a time, this implementation's remedies around the stop decision and a stuck controller (each ablation
isolates one mechanism); `no-incoming` drops the lookup's section of the properties that point at the entity;
`spinach` is the baseline without schema annotations, with LLM pruning of every neighbourhood. Nothing
else in the package compares variant names: it asks `variant_of(name).grounding` / `.agent` instead.

A leaf module (no project imports), so that the grounding layer and the agent read the same table."""

from __future__ import annotations

from dataclasses import dataclass, replace


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
    filter_mode: str | None = None  # the variant's own domain check (schema.compat's modes); None: --filter-mode
    question_view: bool = True  # the lookup orders by relevance to the question (lexicon), the top ones in full;
    # else the compact list, answer-type fits first (the paper's CompactFormat)
    proposals: bool = True  # the lookup proposes a next query (shown) and keeps a candidate; search names a next lookup

    @property
    def shows_candidates(self) -> bool:
        """Whether the lookup ends with candidate queries (the question's view, the proposer on, no LM prune)."""
        return self.proposals and self.question_view and not self.prune_all

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
    reject_no_query_stop: bool = True  # stop() with no query executed is sent back once; else the episode ends
    # there with no final query (no extract call)
    answer_type_cues: bool = True  # the question's wording decides or guards the answer type (rule cues)
    stable_history: bool = True  # the trajectory as `Settings.stable_history` says; off: the paper's window (the
    # last five steps whole, whatever the setting)


@dataclass(frozen=True)
class Variant:
    name: str
    grounding: GroundingFlags
    agent: AgentFlags

    @property
    def is_full(self) -> bool:
        """Every mechanism on: what the bundled demo pools were recorded with."""
        return self.grounding == GroundingFlags() and self.agent == AgentFlags()


# the paper's SAGA: its mechanisms, none of this implementation's additions
_PAPER_GROUNDING = GroundingFlags(incoming_edges=False, filter_mode="paper", question_view=False, proposals=False)
_PAPER_AGENT = AgentFlags(
    query_form=False,
    form_rewrite=False,
    auto_run=False,
    reject_empty_stop=False,
    assist_repeats=False,
    seen_ids_only=False,
    reject_no_query_stop=False,
    answer_type_cues=False,
    stable_history=False,
)

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
    Variant("paper", _PAPER_GROUNDING, _PAPER_AGENT),
    # its ablations (Table 5); as for `full`, the filter ablation also drops [BLOCKED]
    Variant("paper-no-type-filter", replace(_PAPER_GROUNDING, type_filter=False, conflict_check=False), _PAPER_AGENT),
    Variant("paper-no-type-state", replace(_PAPER_GROUNDING, type_state=False), _PAPER_AGENT),
    Variant(
        "paper-no-answer-type",
        replace(_PAPER_GROUNDING, answer_type_prior=False),
        replace(_PAPER_AGENT, answer_type_step=False),
    ),
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
