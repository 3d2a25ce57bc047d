"""What differs between knowledge graphs: `wikidata.Flavour` (the interface and the default) and
`freebase.FreebaseFlavour`; `flavour_for(kg)` picks one by the settings' `kg`."""

from __future__ import annotations

from .freebase import FREEBASE, FreebaseFlavour
from .wikidata import CLAIM, DIRECT, QUALIFIER, STATEMENT, WIKIDATA, Flavour, PropRef

FLAVOURS: dict[str, Flavour] = {flavour.name: flavour for flavour in (WIKIDATA, FREEBASE)}


def flavour_for(kg: str) -> Flavour:
    """The flavour named `kg` (Wikidata for any other name)."""
    return FLAVOURS.get(kg, WIKIDATA)


__all__ = [
    "CLAIM",
    "DIRECT",
    "FLAVOURS",
    "FREEBASE",
    "Flavour",
    "FreebaseFlavour",
    "PropRef",
    "QUALIFIER",
    "STATEMENT",
    "WIKIDATA",
    "flavour_for",
]
