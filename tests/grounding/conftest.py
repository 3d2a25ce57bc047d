"""SAGA's grounding on its own: the lookup view without the proposer's candidate section (`shown_candidates` 0;
tests/proposer covers the section)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def settings(settings):
    return settings.model_copy(update={"shown_candidates": 0})
