"""The shared read-only services of a run: endpoint, entity search, schema index, class hierarchy.

`KgServices` opens each one on first use, from the settings, unless it was given one; `close()`
closes only what it opened (a given endpoint belongs to the caller). Every command and the program
hold one instead of repeating "open the endpoint and the search, close them if we opened them".

It sits above `kg` and `schema` (it imports both) and below `grounding`, so it is neither
`kg.services` (kg would import schema, a higher layer) nor part of the agent."""

from __future__ import annotations

import threading

from saga_dspy.config import Settings
from saga_dspy.kg.endpoint import Endpoint, open_endpoint
from saga_dspy.kg.search import Search, open_search
from saga_dspy.schema.hierarchy import ClassHierarchy, load_hierarchy
from saga_dspy.schema.index import SchemaIndex, load_schema_index


class SharedOnCopy:
    """Copies of the program share this object: `copy.copy` and `copy.deepcopy` return it unchanged."""

    def __deepcopy__(self, memo):
        return self

    def __copy__(self):
        return self


class KgServices(SharedOnCopy):
    """Endpoint, search, schema and hierarchy for one settings object: lazy, shared, thread-safe.

    `copy.deepcopy` returns the same object, so dspy's deepcopy / reset_copy (optimisers, a program's
    load_state) never duplicate worker processes or open files."""

    def __init__(
        self,
        settings: Settings,
        endpoint: Endpoint | None = None,
        search: Search | None = None,
        schema: SchemaIndex | None = None,
        hierarchy: ClassHierarchy | None = None,
    ):
        self.settings = settings
        self._endpoint = endpoint
        self._search = search
        self._schema = schema
        self._hierarchy = hierarchy
        self._owns_endpoint = False
        self._lock = threading.RLock()

    def __enter__(self) -> KgServices:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def endpoint(self) -> Endpoint:
        with self._lock:
            if self._endpoint is None:
                self._endpoint = open_endpoint(self.settings)
                self._owns_endpoint = True
            return self._endpoint

    @property
    def search(self) -> Search:
        with self._lock:
            if self._search is None:
                self._search = open_search(self.settings, self.endpoint)
            return self._search

    @property
    def schema(self) -> SchemaIndex:
        with self._lock:
            if self._schema is None:
                self._schema = load_schema_index(self.settings)
            return self._schema

    @property
    def hierarchy(self) -> ClassHierarchy:
        with self._lock:
            if self._hierarchy is None:
                self._hierarchy = load_hierarchy(self.settings, self.endpoint, self.schema)
            return self._hierarchy

    @property
    def owns_endpoint(self) -> bool:
        """True when the endpoint was opened here (and `close()` will close it)."""
        return self._owns_endpoint

    def close(self) -> None:
        with self._lock:
            if self._owns_endpoint and self._endpoint is not None:
                self._endpoint.close()
                self._endpoint = None
                self._owns_endpoint = False
