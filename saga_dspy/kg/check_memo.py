"""Checked once, not parsed again: a bounded memo of an endpoint's query checks, keyed by the exact text.

Parsing with rdflib's grammar costs ~20 ms a query under one process-wide lock, and an agent and the tools
often send the very same query twice. A query is looked up by its exact text, so what is sent is what a
check of that very text decided (`kg.guard`); nothing is lifted out of a query or pasted back into one.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable

Checked = tuple[str, str]  # (text to send, query form)


class CheckMemo:
    """Up to `capacity` checked texts, least recently used first out; safe across threads."""

    def __init__(self, capacity: int = 4096):
        self.capacity = capacity
        self._entries: OrderedDict[str, Checked] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def checked(self, query: str, check: Callable[[str], Checked]) -> Checked:
        """`check(query)`, or what the same text was checked to before. `check` raises for a refused or
        malformed query; nothing is remembered then."""
        with self._lock:
            entry = self._entries.get(query)
            if entry is not None:
                self._entries.move_to_end(query)
                self.hits += 1
                return entry
            self.misses += 1
        entry = check(query)
        with self._lock:
            self._entries[query] = entry
            while len(self._entries) > self.capacity:
                self._entries.popitem(last=False)
        return entry


__all__ = ["CheckMemo"]
