"""The proposer: executable candidate queries put forward beside a lookup, ranked, each with how it was built, its
answer preview and whether its answers fit the expected answer type (`propose`). The lookup shows the top ones to
the model (`settings.shown_candidates`); the program runs the first only as a fallback, when an episode would end
with no executed query.

Built by rules over the lookup (`candidate`: the best one-hop query, then a relation, a named value, one hop
further, a comparative, a superlative, the ASK of a yes/no question). Imports `saga_dspy.grounding` and below."""

from .candidate import best_candidate, lookup_candidate
from .propose import Candidate, Preview, propose

__all__ = ["Candidate", "Preview", "best_candidate", "lookup_candidate", "propose"]
