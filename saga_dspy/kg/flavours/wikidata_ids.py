"""Wikidata's ids that code outside the flavours names: the classes and properties a rule or a prompt example
stands on, the property-constraint vocabulary the schema index is built from, the classes too general to be
evidence of a fit. Everywhere else the package talks about ids it was given (`tests/test_codebase.py` bans id
literals outside `kg/flavours/`)."""

from __future__ import annotations

# properties
TYPE = "P31"  # instance of
SUBCLASS = "P279"  # subclass of
OCCUPATION = "P106"  # how a person is of the class the question names ("politicians"), where the type is human
POSITION = "P39"  # how a person holds the office the question names ("federal chancellors")
PLACE_OF_BIRTH = "P19"
CONSTRAINT = "P2302"  # property constraint
CONSTRAINT_CLASS = "P2308"  # the class of a type constraint
CONSTRAINT_RELATION = "P2309"  # instance / subclass relation of a type constraint
CONSTRAINT_STATUS = "P2316"  # mandatory / suggestion
# properties that apply to anything: a sampled "domain" of theirs would be an artefact of the sample
UNIVERSAL_PROPERTIES = frozenset({TYPE, SUBCLASS})

# classes
ROOT = "Q35120"  # entity: the top of the subclass hierarchy
HUMAN = "Q5"
PERSON = "Q215627"
LOCATION = "Q2221906"  # geographic location
PEOPLE = frozenset({HUMAN, PERSON})  # human, person: a class under either names people
DOUGLAS_ADAMS = "Q42"  # the example entity of prompts and messages

# P2302 values: the type constraints the schema index reads
SUBJECT_TYPE = "Q21503250"  # subject type constraint (domain)
VALUE_TYPE = "Q21510865"  # value type constraint (range)
RELATIONS = {  # P2309 values
    "Q21503252": "instance_of",
    "Q21514624": "subclass_of",
    "Q30208840": "instance_or_subclass_of",
}
STATUSES = {  # P2316 values; absent = a normal constraint (or not stated by the source)
    "Q21502408": "mandatory",
    "Q62026391": "suggestion",
}

HUB_CLASSES = frozenset(
    {  # classes nearly every class reaches through P279*: no evidence of fit (calibrated)
        ROOT,  # entity
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
    }
)
