"""LLM-free statistics over whole splits, measured against the gold queries (what `saga-stats` prints).

gold_pairs        the gold entities and (entity, property) pairs of gold SPARQL queries
entity_linking    the search tool's rank of each gold entity for the question's mention of it
candidate_oracle  the answers F1 of the candidates a lookup would show (top-1, oracle@K)
components        the component metrics of a split (`stats components`)
conflicts         the execute tool's conflict check over every gold query (`stats conflicts`)
table9            the paper's Table 9 beside the measured one (`stats grounding`)"""
