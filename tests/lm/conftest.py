"""What every saga_dspy.lm test shares: a memory-only DSPy cache per test."""

from __future__ import annotations

import dspy
import pytest


@pytest.fixture(autouse=True)
def fresh_dspy_cache(monkeypatch):
    """A memory-only DSPy cache per test: nothing leaks between tests or to ~/.dspy_cache."""
    from dspy.clients.cache import Cache

    monkeypatch.setattr(dspy, "cache", Cache(enable_disk_cache=False, enable_memory_cache=True, disk_cache_dir=None))
