"""The five tools' names, arguments and descriptions, in one place.

`make_tools` names and documents the per-question functions from these specs, and the ReAct
module lists them in the controller's instructions: the LM and the code read the same copy."""

from __future__ import annotations

from typing import NamedTuple


class ToolSpec(NamedTuple):
    name: str
    argument: str | None  # the one argument's name; None for stop()
    description: str


TOOL_SPECS: dict[str, ToolSpec] = {
    spec.name: spec
    for spec in (
        ToolSpec(
            "search_wikidata",
            "query",
            "Search the knowledge graph's entities and properties by name. Items come "
            "back with id, label and description; properties also with their [domain | range].",
        ),
        ToolSpec(
            "get_wikidata_entry",
            "qid",
            "Show an entity: its types and its outgoing properties with example values, "
            "each property with its [domain | range]; properties whose domain conflicts with the "
            "entity's types are left out.",
        ),
        ToolSpec(
            "get_property_examples", "pid", "Show a few subject-value pairs that use a property, to see how it is used."
        ),
        ToolSpec(
            "execute_sparql",
            "sparql",
            "Run a SPARQL query (a fragment or the whole query) and see its first "
            "results. [BLOCKED] or an empty result means a property, direction or entity is wrong.",
        ),
        ToolSpec(
            "stop",
            None,
            "Finish: the last executed query becomes the final query. Call it only once that query returns the answer.",
        ),
    )
}
TOOL_NAMES: tuple[str, ...] = tuple(TOOL_SPECS)
