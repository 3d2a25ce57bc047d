"""The one variant table: every variant's grounding and agent flags, and no variant-name comparisons
anywhere else in the package (they would drift from the table)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import get_args

import pytest

from saga_dspy.config import Variant
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
