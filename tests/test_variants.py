"""The one variant table: every variant's grounding and agent flags, and no variant-name comparisons
anywhere else in the package (they would drift from the table)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import get_args

import pytest

from saga_dspy.config import Variant
from saga_dspy.schema.compat import as_mode
from saga_dspy.variants import VARIANT_FLAGS, VARIANT_NAMES, GroundingFlags, variant_of

PACKAGE = Path(__file__).resolve().parents[1] / "saga_dspy"


def test_the_table():
    assert VARIANT_NAMES == (
        "full",
        "no-type-filter",
        "no-type-state",
        "no-answer-type",
        "no-query-form",
        "no-form-rewrite",
        "no-auto-run",
        "no-repeat-assist",
        "no-incoming",
        "paper",
        "paper-no-type-filter",
        "paper-no-type-state",
        "paper-no-answer-type",
        "spinach",
    )
    assert [n for n in VARIANT_NAMES if variant_of(n).is_full] == ["full"]
    assert get_args(Variant) == VARIANT_NAMES  # the settings accept exactly the table's names
    assert variant_of("full").grounding == GroundingFlags() and variant_of("full").agent.answer_type_step
    spinach = variant_of("spinach")
    assert spinach.grounding.prune_all and not spinach.grounding.schema_annotations
    assert not spinach.agent.schema_controller and not spinach.agent.answer_type_step
    assert not spinach.agent.reject_empty_stop
    assert not variant_of("no-answer-type").agent.answer_type_step
    assert not variant_of("no-type-filter").grounding.type_filter
    assert not variant_of("no-type-state").grounding.type_state
    assert not variant_of("no-incoming").grounding.incoming_edges and not spinach.grounding.incoming_edges
    for name, flags in VARIANT_FLAGS.items():
        # the agent-only ablations keep full SAGA's grounding, so their flags read as "full"
        assert flags.variant == (name if flags != GroundingFlags() else "full")
        assert GroundingFlags.for_variant(name) is flags
    with pytest.raises(ValueError, match="unknown variant 'nope'"):
        variant_of("nope")


def test_the_paper_rows():
    """`paper` keeps the paper's mechanisms and none of this implementation's additions; its ablations each
    differ from it in one mechanism (the filter ablation also drops [BLOCKED], as `no-type-filter` does)."""
    paper = variant_of("paper")
    g, a = paper.grounding, paper.agent
    assert g.type_filter and g.conflict_check and g.type_state and g.answer_type_prior and g.schema_annotations
    assert g.filter_mode == "paper" and not g.prune_all  # the LM prunes an untyped entity only
    assert not (g.incoming_edges or g.question_view or g.proposals)
    assert a.answer_type_step and a.schema_controller
    remedies = ("query_form", "form_rewrite", "auto_run", "reject_empty_stop", "assist_repeats", "seen_ids_only")
    assert not any(getattr(a, r) for r in (*remedies, "reject_no_query_stop", "answer_type_cues", "stable_history"))
    assert all(getattr(variant_of("full").agent, r) for r in remedies)  # full keeps them
    differs = {
        "paper-no-type-filter": {"type_filter", "conflict_check"},
        "paper-no-type-state": {"type_state"},
        "paper-no-answer-type": {"answer_type_prior", "answer_type_step"},
    }
    for name, off in differs.items():
        v = variant_of(name)
        changed = {k for k, x in vars(v.grounding).items() if x != getattr(g, k)}
        changed |= {k for k, x in vars(v.agent).items() if x != getattr(a, k)}
        assert changed == off, name
    # `full`'s own ablations and the baseline are unchanged
    assert variant_of("no-type-filter").grounding == GroundingFlags(type_filter=False, conflict_check=False)
    spinach = variant_of("spinach")
    assert spinach.grounding.filter_mode is None and spinach.agent.reject_no_query_stop
    for name in VARIANT_NAMES:  # a variant's own filter mode is one the schema layer knows
        mode = variant_of(name).grounding.filter_mode
        assert mode is None or as_mode(mode) == mode
    with pytest.raises(ValueError, match="filter mode must be one of"):
        as_mode("papers")


def test_no_variant_name_is_compared_outside_the_table():
    names = "|".join(re.escape(n) for n in VARIANT_NAMES)
    compare = re.compile(rf"""[!=]=\s*["']({names})["']|["']({names})["']\s*[!=]=|in \(["']({names})["']""")
    offenders = [
        f"{path.relative_to(PACKAGE)}:{i}"
        for path in PACKAGE.rglob("*.py")
        if path.name != "variants.py"
        for i, line in enumerate(path.read_text().splitlines(), 1)
        if compare.search(line)
    ]
    assert offenders == []
