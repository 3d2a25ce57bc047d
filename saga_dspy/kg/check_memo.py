"""Checked once, not parsed again: a bounded memo of an endpoint's query checks.

Parsing with rdflib's grammar costs ~20 ms a query under one process-wide lock, and most queries
an evaluation sends repeat a shape: the tools' own queries (lookups, labels, types) differ only
in the entity IRIs of one `VALUES` block, and an agent often sends the same query twice. So a check is memoised
by its *shape*: the text with the IRI list of every `VALUES ?v { <iri> ... }` block (IRIs only,
each matching SPARQL's IRIREF production) replaced by a numbered placeholder IRI. A query whose shape
was checked before is sent as the checked shape's text with its own IRI lists put back;
anything else is parsed and checked in full. Putting IRIREFs into a VALUES data block cannot add
an update, a SERVICE or a different query form, so the guarantee ("every text sent was checked")
holds for the shape; an IRI that is not a valid IRIREF is not lifted out and is parsed with the rest.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Callable

from .sparql_parse import IRIREF

PLACEHOLDER = "<urn:saga:values:{}>"
_VALUES_BLOCK = re.compile(r"(\bVALUES\s+\?\w+\s*\{)((?:\s*" + IRIREF + r")+)(\s*\})", re.IGNORECASE)
_IRI = re.compile(IRIREF)

Checked = tuple[str, str]  # (text to send, query form)


def query_shape(query: str) -> tuple[str, list[str]]:
    """(the query with the i-th all-IRI VALUES list replaced by `PLACEHOLDER.format(i)`, the lists)."""
    lists: list[str] = []

    def lift(match: re.Match[str]) -> str:
        lists.append(" ".join(_IRI.findall(match.group(2))))
        return f"{match.group(1)} {PLACEHOLDER.format(len(lists) - 1)}{match.group(3)}"

    return _VALUES_BLOCK.sub(lift, query), lists


class CheckMemo:
    """Up to `capacity` checked shapes, least recently used first out; safe across threads."""

    def __init__(self, capacity: int = 4096):
        self.capacity = capacity
        self._entries: OrderedDict[str, Checked] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def checked(self, query: str, check: Callable[[str], Checked]) -> Checked:
        """`check(query)`, or what a query of the same shape was checked to, with its IRIs put back.
        `check` raises for a refused or malformed query; nothing is remembered then."""
        shape, lists = query_shape(query)
        with self._lock:
            entry = self._entries.get(shape)
            if entry is not None:
                self._entries.move_to_end(shape)
        if entry is None:
            with self._lock:
                self.misses += 1
            try:
                entry = check(shape)
            except Exception:
                return check(query)  # refused or malformed: the error names the query as written
            if not _each_once(entry[0], len(lists)):  # the query named a placeholder itself: no shortcut
                return check(query)
            with self._lock:
                self._entries[shape] = entry
                while len(self._entries) > self.capacity:
                    self._entries.popitem(last=False)
        else:
            with self._lock:
                self.hits += 1
        text, form = entry
        for i, iris in enumerate(lists):
            text = text.replace(PLACEHOLDER.format(i), iris)
        return text, form


def _each_once(text: str, n: int) -> bool:
    """Each of the n placeholders occurs exactly once in `text`, and no other does."""
    return text.count("<urn:saga:values:") == n and all(text.count(PLACEHOLDER.format(i)) == 1 for i in range(n))


__all__ = ["CheckMemo", "PLACEHOLDER", "query_shape"]
