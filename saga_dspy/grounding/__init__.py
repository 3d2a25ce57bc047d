"""Grounding layer: the per-question type state Θ, the question context with its
ablation flags, and what the five schema-aware tools of `saga_dspy.tools` build on (paper:
"Type-Constrained Grounding", Algorithm 1).

    ctx = QuestionContext(settings, endpoint, search, schema, hierarchy, question=q, variant="full", prune=fn)
    ctx.set_answer_type("person", "Q5")
    search_wikidata, get_wikidata_entry, get_property_examples, execute_sparql, stop = saga_dspy.tools.make_tools(ctx)

Imports only `saga_dspy.kg`, `saga_dspy.schema` and `saga_dspy.config`."""

from ..kg.flavours import WIKIDATA, Flavour, flavour_for
from .context import COUNTER_KEYS, VARIANT_FLAGS, Execution, GroundingFlags, QuestionContext
from .state import AnswerType, TypeFact, TypeState

__all__ = [
    "AnswerType",
    "COUNTER_KEYS",
    "Execution",
    "Flavour",
    "GroundingFlags",
    "QuestionContext",
    "TypeFact",
    "TypeState",
    "VARIANT_FLAGS",
    "WIKIDATA",
    "flavour_for",
]
