"""The `calibrated` domain check (issue 12): `closure` without its two blind spots.

1. Hub classes. Through P279* almost every class reaches a handful of very general classes
   (entity, object, physical object, group of humans, agent …); a domain that lists one of them
   is satisfied by nearly anything, so the check never fires. Here a hub cannot satisfy a
   domain; a domain made only of hubs is unknown.
2. Incomplete closures. `closure` calls a conflict only when every type's closure reaches the
   root; the sample's hierarchy is patchy, so most wrong entities come out unknown. Here a
   formal, non-suggestion domain that no type reaches is a conflict as soon as one of the
   entity's types is known (its closure reaches the root); soft evidence stays unknown.
"""

from __future__ import annotations

from typing import Callable

from .hierarchy import ClassHierarchy

HUB_CLASSES = frozenset({
    "Q35120",  # entity
    "Q488383",  # object
    "Q223557",  # physical object
    "Q4406616",  # concrete object
    "Q7184903",  # abstract object
    "Q151885",  # concept
    "Q16334295",  # group of humans
    "Q16887380",  # group
    "Q24229398",  # agent
    "Q1190554",  # occurrence
    "Q99527517",  # collection entity
    "Q58778",  # system
    "Q937228",  # property
    "Q830077",  # subject
    "Q17553950",  # role
    "Q28813620",  # set
    "Q18336849",  # item with given name property
})


def check_calibrated(et, evidence, wanted: frozenset[str], hierarchy: ClassHierarchy, role: str,
                     closure: Callable):
    from .compat import Decision, Outcome

    specific = frozenset(wanted - HUB_CLASSES)
    if not specific:
        return Decision(Outcome.UNKNOWN, f"the {role} names only hub classes: not decisive")
    decision = closure(et, evidence, specific, hierarchy, role)
    if decision.outcome is not Outcome.UNKNOWN or evidence.is_soft:
        return decision
    probes = list(et.types) + list(et.superclasses)
    if not probes or not any(hierarchy.is_known(p) for p in probes):
        return decision
    if any(not specific.isdisjoint(hierarchy.ancestors(p)) for p in probes):
        return decision
    if evidence.relation == "subclass_of" and not et.is_class:
        return decision
    return Decision(Outcome.CONFLICT, f"no type reaches the {role} (hub classes do not count; "
                                      f"some closures incomplete)")
