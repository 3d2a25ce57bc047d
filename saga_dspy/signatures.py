"""DSPy signatures of the SAGA agent (paper Appendix F, in our own words).

* `AnswerType`: the expected answer type, once per question (Appendix F.1).
* `SagaController` / `SpinachController`: the ReAct controller (Appendix F.2); the
  SAGA one carries the schema-guided property selection guidance and reads the
  current type context and knowledge log, refreshed at every step by the program.
* `PruneNeighborhood`: the fallback neighbourhood pruning for an entity without
  types (Appendix F.3; SPINACH prunes every neighbourhood this way).
* `CheckAnswer`: a bounded completeness check of the final query (beyond the
  paper; Appendix E.6's remedies). Off by default.

Signatures and their instructions only: what the LM's output means as data lives in
`agent.answer_type` (AnswerTypeInfo), `agent.query_form` and `agent.parsing` (parse_pids).
"""

from __future__ import annotations

import dspy

from saga_dspy.kg.flavours import FREEBASE, WIKIDATA, flavour_for
from saga_dspy.kg.flavours.wikidata_ids import HUMAN, PLACE_OF_BIRTH, TYPE

# --- answer type ----------------------------------------------------------------


class AnswerType(dspy.Signature):
    """Name the type of the answer a knowledge-graph question expects, before any lookup.

    Use `boolean` for yes/no questions (they start with is, are, was, does, did, has, can, ...),
    `quantity` for numbers and counts ("how many", "how much", "how high"), `date` for dates and
    years ("when", "in which year"), `string` for free text that is no entity; otherwise a short
    English class name of the answer entity such as person, country, city, film, organization,
    award, language, university, sports team. Give the class's Wikidata item when you know it
    (human Q5, country Q6256, city Q515, film Q11424, organization Q43229, award Q618779,
    language Q34770, university Q3918, sports team Q12973014); leave it empty for the scalar
    types and when unsure."""

    question: str = dspy.InputField(desc="the natural-language question")
    answer_type_label: str = dspy.OutputField(
        desc="boolean, quantity, date, string, or a short class name (e.g. person, country, film)"
    )
    answer_type_qid: str = dspy.OutputField(desc=f"Wikidata QID of that class (e.g. {HUMAN}), or empty")


_CLASS_ID_HINT = "Give the class's Wikidata item"
# the answer type's class-id sentence for a knowledge graph that does not use Wikidata's (by `Flavour.name`)
CLASS_ID_HINTS = {
    FREEBASE.name: (
        "Give the class's Freebase type id when you know it (people.person, location.country, location.citytown, "
        "film.film, organization.organization, award.award, language.human_language, education.university, "
        "sports.sports_team); leave it empty for the scalar types and when unsure."
    )
}


def kg_signature(signature: type[dspy.Signature], kg: str) -> type[dspy.Signature]:
    """The signature worded for the knowledge graph in use (Wikidata wording is the default)."""
    flavour = flavour_for(kg)
    instructions = signature.instructions
    if signature is AnswerType and flavour.name in CLASS_ID_HINTS:
        instructions = instructions.split(_CLASS_ID_HINT)[0] + CLASS_ID_HINTS[flavour.name]
    else:
        instructions = instructions.replace(WIKIDATA.kg_label, flavour.kg_label)
    return signature if instructions == signature.instructions else signature.with_instructions(instructions)


# --- query form ---------------------------------------------------------------------


QUERY_FORM_GUIDE: dict[str, str] = {
    "ASK": "ASK WHERE { ... } (yes/no: true or false; not SELECT)",
    "COUNT": (
        "SELECT (COUNT(DISTINCT ?x) AS ?count) WHERE { ... }, or SELECT the number itself where the graph "
        "stores it (population, capacity, ...)"
    ),
    "SELECT": "SELECT DISTINCT ?x WHERE { ... } (the answer entities or values; not ASK)",
    "ANY": "not fixed: use ASK WHERE for a yes/no question, SELECT otherwise.",
}


# --- controller -------------------------------------------------------------------------

_BUILD_STEPS = """\
Write one SPARQL query over {kg} that answers the question. Work in small verified steps:
1. Find the entities of the question with search_wikidata and check you have the right one (its
   description and types must fit the question).
2. Inspect an entity with get_wikidata_entry to see which properties it really has.
3. Execute small fragments of the query with execute_sparql before adding the next triple; build the
   final query one pattern at a time.
4. Never repeat an action that already failed: its result will be the same.
5. The question has an answer in the graph; keep going until a query returns it.
6. Project the answer entities themselves (?x), not their labels.
7. When the last executed query returns the answer, call stop to make it the final query.
A typical short path: search_wikidata("name") -> get_wikidata_entry(QID of the right hit) -> pick the
property (PID) that leads to the answer -> execute_sparql("SELECT ?x WHERE {{ wd:QID wdt:PID ?x }}") -> stop.
Use the real ids you found, never the placeholders QID and PID."""

_SCHEMA_GUIDANCE = """\
Schema-aware property selection:
- `[domain | range]` after a property: the type its subject must have | the type of its values.
  Prefer a property whose domain fits your subject's type and whose range fits the expected answer type.
- get_wikidata_entry leaves out the properties whose domain conflicts with the entity's types: if the
  property the question needs is missing, you probably have the wrong entity, so search again.
- `[BLOCKED]` or an empty result from execute_sparql: change the property, direction or entity; the
  knowledge log says what failed, do not retry it.
- The final query must start as the query form field says; one of another form is sent back."""

SAGA_CONTROLLER_INSTRUCTIONS = "\n\n".join([_BUILD_STEPS.format(kg="Wikidata"), _SCHEMA_GUIDANCE])

SPINACH_CONTROLLER_INSTRUCTIONS = "\n\n".join(
    [_BUILD_STEPS.format(kg="Wikidata"), "For a yes/no question, finish with an ASK WHERE query."]
)


class SagaController(dspy.Signature):
    __doc__ = SAGA_CONTROLLER_INSTRUCTIONS

    question: str = dspy.InputField(desc="the question (earlier turns of a conversation first, if any)")
    answer_type: str = dspy.InputField(
        desc=f"expected type of the answer, e.g. 'person ({HUMAN})', 'boolean', 'quantity'"
    )
    query_form: str = dspy.InputField(desc="how the final query must start")
    type_context: str = dspy.InputField(desc="types of the most recently explored entities and variables")
    knowledge_log: str = dspy.InputField(desc="outcomes of the recent steps: [ok], [fail], [info]")
    sparql: str = dspy.OutputField(desc="the final SPARQL query")


class SpinachController(dspy.Signature):
    __doc__ = SPINACH_CONTROLLER_INSTRUCTIONS

    question: str = dspy.InputField(desc="the question (earlier turns of a conversation first, if any)")
    sparql: str = dspy.OutputField(desc="the final SPARQL query")


# --- fallback pruning ---------------------------------------------------------------------


class PruneNeighborhood(dspy.Signature):
    """An entity's outgoing edges are listed, one property per line. Keep only the properties that
    could help write a SPARQL query answering the question (the relation asked about, properties that
    lead towards the answer, and the entity's type); drop the rest."""

    question: str = dspy.InputField()
    neighborhood: str = dspy.InputField(
        desc="the entity (label, id, description) and its properties with example values"
    )
    relevant_pids: list[str] = dspy.OutputField(
        desc=f'ids of the relevant properties, e.g. ["{TYPE}", "{PLACE_OF_BIRTH}"]'
    )


# --- answer check (beyond the paper) --------------------------------------------------------


class CheckAnswer(dspy.Signature):
    """Judge whether a final SPARQL query fully answers the question before it is returned.
    Check the form (ASK for yes/no, COUNT for 'how many', SELECT otherwise), the polarity of a yes/no
    question (e.g. 'still alive' means no death date), that the query reaches the last hop the question
    asks for (e.g. the population of the capital, not the capital), and that the result has the expected
    answer type. Say what is missing when it is not complete."""

    question: str = dspy.InputField()
    answer_type: str = dspy.InputField(desc="expected answer type")
    query_form: str = dspy.InputField(desc="the required form of the final query")
    sparql: str = dspy.InputField(desc="the final query")
    result_sample: str = dspy.InputField(desc="the first rows of its result")
    complete: bool = dspy.OutputField(desc="true when the query answers the question as asked")
    problem: str = dspy.OutputField(desc="what to fix when not complete, else empty")


__all__ = [
    "AnswerType",
    "CheckAnswer",
    "PruneNeighborhood",
    "QUERY_FORM_GUIDE",
    "SAGA_CONTROLLER_INSTRUCTIONS",
    "SPINACH_CONTROLLER_INSTRUCTIONS",
    "SagaController",
    "SpinachController",
    "kg_signature",
]
