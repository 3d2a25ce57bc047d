"""What differs between knowledge graphs: `wikidata.Flavour` (the interface and the default) and
`freebase.FreebaseFlavour`; `flavour_for(kg)` picks one."""

from __future__ import annotations

from .freebase import FREEBASE, FreebaseFlavour
from .wikidata import CLAIM, DIRECT, QUALIFIER, STATEMENT, WIKIDATA, Flavour, PropRef


def flavour_for(kg: str) -> Flavour:
    if kg == "freebase":
        return FREEBASE
    return WIKIDATA


__all__ = [
    "CLAIM",
    "DIRECT",
    "FREEBASE",
    "Flavour",
    "FreebaseFlavour",
    "PropRef",
    "QUALIFIER",
    "STATEMENT",
    "WIKIDATA",
    "flavour_for",
]
