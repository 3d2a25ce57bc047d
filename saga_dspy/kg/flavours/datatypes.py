"""The datatype names of the flavours' properties (Wikidata's `Time`, `WikibaseItem` …; Freebase's `type.datetime`
…), grouped by what the code asks of them: which kind of scalar a value is, which properties point at items,
which ones are identifiers or media."""

from __future__ import annotations

# the scalar kinds of an answer type, by the datatypes of the properties that give them
DATES = ("Time", "type.datetime")
NUMBERS = ("Quantity", "type.int", "type.float")
STRINGS = ("String", "Monolingualtext", "type.text", "type.rawstring")
QUANTITY = ("Quantity",)  # the datatype a number bounds by value
ORDERED = ("Time", "Quantity")  # datatypes a value orders by

# properties whose values are items (a range is a class); the schema's, and the lookup's (unknown counts as one)
ITEM = "WikibaseItem"  # a property's datatype where the schema index states none
ITEM_DATATYPES = frozenset({ITEM, "WikibaseProperty", "WikibaseLexeme", "WikibaseForm", "WikibaseSense", "entity"})
LOOKUP_ITEM_DATATYPES = (ITEM, "WikibaseProperty", "WikibaseLexeme", "WikibaseForm", "WikibaseSense", "entity", "")
EXTERNAL_DATATYPES = ("ExternalId", "type.key", "type.id")  # identifiers in other databases
NICHE_DATATYPES = frozenset(
    {"ExternalId", "CommonsMedia", "Url", "GeoShape", "TabularData", "Math", "MusicalNotation", "type.key", "type.id"}
)
FREEBASE_LITERAL_TYPES = frozenset(
    {
        "type.int",
        "type.float",
        "type.boolean",
        "type.datetime",
        "type.text",
        "type.rawstring",
        "type.uri",
        "type.enumeration",
        "type.id",
        "type.key",
    }
)
