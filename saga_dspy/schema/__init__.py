"""Schema layer: the property schema index, the class hierarchy and the domain check. Imports only from
`saga_dspy.kg`, `saga_dspy.config` and `saga_dspy.errors`."""

from .build import BuildOptions, build_schema_index
from .compat import (
    Decision,
    EntityTypes,
    Outcome,
    check_domain,
    check_range,
    check_types,
    entity_types,
    entity_types_many,
)
from .hierarchy import MAX_DEPTH, ROOT, ClassHierarchy, load_hierarchy
from .index import FORMAT_VERSION, PropertySchema, SchemaIndex, TypeEvidence, load_schema_index

__all__ = [
    "BuildOptions",
    "ClassHierarchy",
    "Decision",
    "EntityTypes",
    "FORMAT_VERSION",
    "MAX_DEPTH",
    "Outcome",
    "PropertySchema",
    "ROOT",
    "SchemaIndex",
    "TypeEvidence",
    "build_schema_index",
    "check_domain",
    "check_range",
    "check_types",
    "entity_types",
    "entity_types_many",
    "load_hierarchy",
    "load_schema_index",
]
