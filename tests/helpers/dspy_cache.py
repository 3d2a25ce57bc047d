"""A memory-only DSPy cache per test, for test modules that import it (`from helpers.dspy_cache import
fresh_dspy_cache  # noqa: F401`): nothing leaks between tests or to ~/.dspy_cache."""

from __future__ import annotations

import dspy
import pytest


@pytest.fixture(autouse=True)
def fresh_dspy_cache(monkeypatch):
    from dspy.clients.cache import Cache

    monkeypatch.setattr(dspy, "cache", Cache(enable_disk_cache=False, enable_memory_cache=True, disk_cache_dir=None))
