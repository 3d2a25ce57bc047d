"""A value in an entity's neighbourhood: the binding, its entity id and label, its qualifiers (Wikidata) or CVT hops
(Freebase), and its types. Read and built by the flavours and the neighbourhood fetch."""

from __future__ import annotations

from dataclasses import dataclass, field

from .results import Binding


@dataclass
class Value:
    binding: Binding
    id: str | None  # entity id when the value is an entity of this KG
    label: str = ""
    qualifiers: list[tuple[str, Value]] = field(default_factory=list)  # (pid, value); CVT hops on Freebase
    types: tuple[str, ...] = ()

    def key(self) -> str:
        return self.binding.value
