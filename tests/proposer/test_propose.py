"""The proposer's ranked candidates on the real store: how each was built, its answer preview, the type fit, and
the queries a lookup spends on them."""

from __future__ import annotations

from saga_dspy.proposer.candidate import NARROWED, ONE_HOP
from saga_dspy.tools.lookup import do_lookup

TRUMPET = "SELECT DISTINCT ?x WHERE { ?x wdt:P106 wd:Q806349 . ?x wdt:P1303 wd:Q8338 }"
BANDLEADERS = "SELECT DISTINCT ?x WHERE { ?x wdt:P106 wd:Q806349 }"


def test_the_rules_candidate_first_then_the_query_it_was_built_from(ask):
    ctx = ask("Give me a list of all bandleaders that play trumpet.", None)
    found = do_lookup(ctx, "Q806349")
    first, second = found.shown[:2]
    assert (first.rank, first.sparql, first.built) == (1, TRUMPET, (ONE_HOP, NARROWED))
    assert (second.rank, second.sparql, second.built) == (2, BANDLEADERS, (ONE_HOP,))
    assert first.preview is not None and first.preview.count == 14 and "Miles Davis (Q93341)" in first.preview.answers
    assert found.candidate == TRUMPET  # the program's fallback is the first shown
    assert f"1. [one-hop + narrowed by a named value; occupation (P106), instrument (P1303)] {TRUMPET}" in found.text
    assert "→ 14 answers: " in found.text
    assert found.text.splitlines()[-1].startswith('Next: stop with {"candidate": 1} or {"candidate": 2} if that')


def test_answers_that_fit_the_answer_type_are_marked(ask):
    ctx = ask("Who directed Titanic?", ("person", "Q5"))
    found = do_lookup(ctx, "Q44578")
    first = found.shown[0]
    assert first.sparql == "SELECT DISTINCT ?x WHERE { wd:Q44578 wdt:P57 ?x }" and first.fits
    assert "→ 1 answer: James Cameron (Q42574) (fit the answer type)" in found.text


def test_no_section_with_none_shown_and_the_fallback_kept(ask, settings):
    ctx = ask("Give me a list of all bandleaders that play trumpet.", None)
    ctx.settings = settings.model_copy(update={"shown_candidates": 0})
    found = do_lookup(ctx, "Q806349")
    assert found.shown == () and "Candidate queries" not in found.text and found.candidate == TRUMPET


def test_a_lookup_spends_a_bounded_number_of_queries_on_its_candidates(ask, settings):
    def spent(k: int) -> int:
        ctx = ask("Give me a list of all bandleaders that play trumpet.", None)
        ctx.settings = settings.model_copy(update={"shown_candidates": k})
        before = ctx.counters["sparql_queries"]
        do_lookup(ctx, "Q806349")
        return ctx.counters["sparql_queries"] - before

    assert spent(3) - spent(0) <= 3 + 2 + 2  # each candidate run once (two spare), their labels, their types
