"""Issue 12: question-aware property ranking, the lookup's arrangement (top properties in full, hints only
when relevance and the answer type agree) and two-hop proposals (real store and index)."""

from __future__ import annotations

import pytest

from saga_dspy.grounding.context import QuestionContext
from saga_dspy.grounding.ranking import content_stems, rank_properties, stem
from saga_dspy.tools.lookup import do_lookup


def test_stemming_meets_property_words():
    assert stem("birthdays") == "birthday" and stem("crosses") == "cross" and stem("actors") == "actor"
    assert "birth" in content_stems("What are the birthdays of the cast?")


@pytest.mark.parametrize("question,gold,others", [
    ("What are the birthdays of the cast?", "P569", ["P373", "P18", "P570", "P161"]),
    ("Which river does the bridge cross?", "P177", ["P373", "P17", "P131", "P31"]),
    ("Which actors played in the film?", "P161", ["P57", "P373", "P136", "P577"]),
    # word forms: what a person does, offices held, neighbours, forms of government
    ("What was her job?", "P106", ["P19", "P21", "P27", "P569"]),
    ("When was he elected senator?", "P39", ["P19", "P26", "P40", "P737"]),
    ("Which countries are near it?", "P47", ["P36", "P530", "P6", "P1082"]),
    ("What kind of political system does it have?", "P122", ["P361", "P530", "P625", "P832"]),
])
def test_the_question_ranks_its_property_first(schema, question, gold, others):
    ranked = rank_properties(question, others + [gold], schema)
    assert ranked[0].pid == gold and ranked[0].relevance > 0


def test_fit_breaks_ties_only_and_commons_never_leads(schema):
    ranked = rank_properties("Tell me about it", ["P373", "P18", "P571", "P17"], schema, fits={"P373": True})
    assert {s.pid for s in ranked[-2:]} == {"P18", "P373"}  # media / Commons last even when they "fit"
    ranked = rank_properties("Which Commons category?", ["P373", "P17"], schema)
    assert ranked[0].pid == "P373"  # unless the question asks for it


def _ctx(settings, endpoint, search, schema, hierarchy, question, answer_type):
    return QuestionContext(settings, endpoint, search, schema, hierarchy, question=question, variant="full",
                           answer_type=answer_type)


def test_lookup_shows_top_properties_in_full_and_proposes_only_when_relevance_and_type_agree(
        settings, endpoint, search, schema, hierarchy):
    ctx = _ctx(settings, endpoint, search, schema, hierarchy, "Which river does the Brooklyn Bridge cross?",
               ("river", "Q4022"))
    out = do_lookup(ctx, "Q125006")
    lines = out.splitlines()
    first = next(line for line in lines if line.startswith("- "))
    assert first.startswith("- crosses (P177)")
    assert any(line.startswith("Other properties: ") and "Commons category (P373)" in line for line in lines)
    assert "wdt:P373" not in out.splitlines()[-1]
    # a generic, unconfident answer type stars nothing and proposes nothing: it names the candidates
    ctx = _ctx(settings, endpoint, search, schema, hierarchy, "Which bridge crossing does the Brooklyn Bridge have?",
               ("entity", ""))
    out = do_lookup(ctx, "Q125006")
    assert "★" not in out and ctx.suggested_sparql is None and out.splitlines()[-1].startswith("Best matches")


def test_two_hop_proposal(settings, endpoint, search, schema, hierarchy):
    q = "What are the birthdays of the actors of George Harrison: Living in the Material World?"
    ctx = _ctx(settings, endpoint, search, schema, hierarchy, q, ("date", ""))
    out = do_lookup(ctx, "Q1139311")
    assert ctx.suggested_sparql == "SELECT DISTINCT ?x WHERE { wd:Q1139311 wdt:P161/wdt:P569 ?x }"
    assert "path wdt:P161/wdt:P569" in out
    assert endpoint.query(ctx.suggested_sparql).rows
