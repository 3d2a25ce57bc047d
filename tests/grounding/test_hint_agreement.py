"""Issue 12, "hints only when they agree": the lookup stars and proposes a property only when relevance and
the answer type pick the same one, clearly; incoming proposals only when no outgoing property matches better."""

from __future__ import annotations

import pytest

from saga_dspy.grounding.context import QuestionContext
from saga_dspy.grounding.incoming import IncomingEdge, arrange_incoming
from saga_dspy.grounding.lookup_view import agreed
from saga_dspy.grounding.ranking import PropertyScore
from saga_dspy.tools.lookup import do_lookup


@pytest.fixture(scope="session")
def settings(settings):
    """The lookup view alone: without the proposer's candidate section (`shown_candidates` 0; tests/proposer)."""
    return settings.model_copy(update={"shown_candidates": 0})


def _s(pid, relevance, fits):
    return PropertyScore(pid, relevance, fits, False)


def test_agreed_needs_a_fitting_top_with_no_close_rival():
    assert agreed([_s("P38", 1.0, True), _s("P2936", 0.9, False)]).pid == "P38"  # an unfitting runner-up is fine
    assert agreed([_s("P37", 1.9, False), _s("P2936", 1.25, True)]) is None  # the fitting one is not the top
    assert agreed([_s("P122", 1.0, True), _s("P6", 1.0, False)]) is None  # the type alone breaks the tie
    assert agreed([_s("P131", 1.9, True), _s("P159", 1.6, True)]) is None  # two fitting within half a word
    assert agreed([_s("P37", 2.0, True), _s("P2936", 1.0, True)]).pid == "P37"  # a clear margin
    assert agreed([_s("P2341", 0.25, True), _s("P31", 0.0, False)]) is None  # one description word
    assert agreed([_s("P19", 0.0, True)]) is None and agreed([]) is None


def _starred(out):
    """The outgoing property lines with a ★ (the incoming section stars fitting subjects on its own)."""
    return [line for line in out.splitlines() if line.startswith("- ") and "★" in line]


def _ctx(settings, endpoint, search, schema, hierarchy, question, answer_type):
    return QuestionContext(
        settings, endpoint, search, schema, hierarchy, question=question, variant="full", answer_type=answer_type
    )


def test_a_lower_ranked_fitting_property_gets_no_star(settings, endpoint, search, schema, hierarchy):
    ctx = _ctx(
        settings, endpoint, search, schema, hierarchy, "What language do they speak in Brazil?", ("language", "Q315")
    )
    found = do_lookup(ctx, "Q155")
    out = found.text
    assert not _starred(out) and found.proposal is None
    assert out.splitlines()[-1].startswith("Best matches for the question: official language (P37), language used")


def test_tied_fitting_properties_get_no_hint(settings, endpoint, search, schema, hierarchy):
    """Labels alone tie country and the administrative parent on "state"; the lexicon's train questions that say
    "state" never asked for country, and break the tie."""
    question, at = "What state is Chicago in?", ("state", "Q7275")
    bare = settings.model_copy(update={"lexicon": "none"})
    found = do_lookup(_ctx(bare, endpoint, search, schema, hierarchy, question, at), "Q1297")
    out = found.text
    assert not _starred(out) and found.proposal is None
    best = out.splitlines()[-1]
    assert best.startswith("Best matches") and "(P17)" in best and "(P131)" in best
    mined = do_lookup(_ctx(settings, endpoint, search, schema, hierarchy, question, at), "Q1297")
    assert mined.proposal == "SELECT DISTINCT ?x WHERE { wd:Q1297 wdt:P131 ?x }"


def test_a_clear_match_is_starred_and_proposed(settings, endpoint, search, schema, hierarchy):
    ctx = _ctx(settings, endpoint, search, schema, hierarchy, "What currency does Jamaica use?", ("currency", "Q8142"))
    found = do_lookup(ctx, "Q766")
    out = found.text
    assert [line.split(":")[0] for line in _starred(out)] == ["- currency (P38) ★"]
    assert found.proposal == "SELECT DISTINCT ?x WHERE { wd:Q766 wdt:P38 ?x }"


def _edges():
    return {"P19": IncomingEdge("P19", 40, subject_types=("Q5",)), "P131": IncomingEdge("P131", 30)}


def test_incoming_on_type_fit_alone_only_when_nothing_matches_the_question(
    settings, endpoint, search, schema, hierarchy
):
    ctx = _ctx(settings, endpoint, search, schema, hierarchy, "Who is the mayor of Rotterdam?", ("human", "Q5"))
    view = arrange_incoming(ctx, "Q34370", "Rotterdam", _edges(), "Q5", propose=True, fit_alone=True)
    assert view.proposal == "SELECT DISTINCT ?x WHERE { ?x wdt:P19 wd:Q34370 }"
    # an outgoing property matching the question's words, or one fitting the answer type, keeps the type silent
    for kwargs in ({"fit_alone": True, "outgoing_best": 0.9}, {"fit_alone": False}):
        view = arrange_incoming(ctx, "Q34370", "Rotterdam", _edges(), "Q5", propose=True, **kwargs)
        assert view.proposal is None and "P19" in view.fitting  # still starred in the section


def test_a_relevant_incoming_property_must_beat_the_outgoing_ones(settings, endpoint, search, schema, hierarchy):
    ctx = _ctx(settings, endpoint, search, schema, hierarchy, "Who was born in Rotterdam?", ("human", "Q5"))
    view = arrange_incoming(
        ctx, "Q34370", "Rotterdam", _edges(), "Q5", propose=True, fit_alone=False, outgoing_best=0.5
    )
    assert view.scores[0].relevance > 0.5 and view.proposal == "SELECT DISTINCT ?x WHERE { ?x wdt:P19 wd:Q34370 }"
    view = arrange_incoming(
        ctx,
        "Q34370",
        "Rotterdam",
        _edges(),
        "Q5",
        propose=True,
        fit_alone=False,
        outgoing_best=view.scores[0].relevance,
    )  # an outgoing property as relevant: no proposal
    assert view.proposal is None


def test_the_best_candidate_is_the_proposal_else_the_most_relevant_property():
    from saga_dspy.grounding.incoming import IncomingView
    from saga_dspy.grounding.lookup_view import Arrangement
    from saga_dspy.proposer.candidate import best_candidate

    def view(scores, proposal=None):
        return IncomingView({}, scores=scores, shown=[s.pid for s in scores], proposal=proposal)

    proposed = Arrangement(
        [_s("P38", 1.0, True)], ["P38"], [], proposal="SELECT DISTINCT ?x WHERE { wd:Q1 wdt:P38 ?x }"
    )
    assert best_candidate("Q1", proposed, view([_s("P159", 2.0, True)])) == proposed.proposal
    assert best_candidate("Q1", Arrangement([], [], []), view([], proposal="P")) == "P"
    plain = Arrangement([_s("P421", 1.0, False), _s("P17", 0.25, False)], ["P421", "P17"], [])
    # the most relevant outgoing property, unless an incoming one matches better or as well and fits the answer type
    assert (
        best_candidate("Q1", plain, view([_s("P131", 0.5, True)])) == "SELECT DISTINCT ?x WHERE { wd:Q1 wdt:P421 ?x }"
    )
    assert (
        best_candidate("Q1", plain, view([_s("P131", 1.0, True)])) == "SELECT DISTINCT ?x WHERE { ?x wdt:P131 wd:Q1 }"
    )
    assert (
        best_candidate("Q1", plain, view([_s("P131", 1.0, False)])) == "SELECT DISTINCT ?x WHERE { wd:Q1 wdt:P421 ?x }"
    )
    # no outgoing property matches the question: an incoming one whose subjects fit ("companies in Munich")
    none = Arrangement([_s("P17", 0.0, False)], ["P17"], [])
    assert (
        best_candidate("Q1", none, view([_s("P20", 0.0, False), _s("P159", 0.0, True)]))
        == "SELECT DISTINCT ?x WHERE { ?x wdt:P159 wd:Q1 }"
    )
    assert best_candidate("Q1", none, view([_s("P20", 0.0, False)])) is None
    # nothing relevant, and the entity is a class with instances ("How many states are in Mexico?"): its instances
    assert (
        best_candidate("Q1", none, view([_s("P1889", 0.0, False), _s("P31", 0.0, False)]), "P31")
        == "SELECT DISTINCT ?x WHERE { ?x wdt:P31 wd:Q1 }"
    )
    assert best_candidate("Q1", none, view([_s("P1889", 0.0, False)]), "P31") is None
    assert best_candidate("Q1", plain, view([_s("P31", 0.0, False)]), "P31").endswith("wd:Q1 wdt:P421 ?x }")
    assert best_candidate("Q1", none, None) is None
    niche = Arrangement([PropertyScore("P373", 1.0, False, True)], ["P373"], [])  # a Commons category never leads
    assert best_candidate("Q1", niche, None) is None


def test_a_lookup_without_a_proposal_keeps_its_best_candidate_unshown(settings, endpoint, search, schema, hierarchy):
    ctx = _ctx(
        settings, endpoint, search, schema, hierarchy, "Give me all companies in Munich.", ("company", "Q783794")
    )
    found = do_lookup(ctx, "Q1726")
    out = found.text
    assert found.proposal is None and "SELECT" not in out  # nothing proposed, no query shown
    assert found.candidate == "SELECT DISTINCT ?x WHERE { ?x wdt:P159 wd:Q1726 }"  # headquarters location ★


def test_an_items_query_keeps_only_the_class_the_question_names_where_that_narrows(
    settings, endpoint, search, schema, hierarchy
):
    def proposed(question, answer_type, eid, variant="full"):
        ctx = QuestionContext(
            settings, endpoint, search, schema, hierarchy, question=question, variant=variant, answer_type=answer_type
        )
        return do_lookup(ctx, eid).proposal

    # Hal Roach produced films and other things: the proposal keeps the films (an instance-of pattern)
    films = proposed("Give me all films produced by Hal Roach.", ("film", "Q11424", "Q11424"), "Q72792")
    assert films == "SELECT DISTINCT ?x WHERE { ?x wdt:P162 wd:Q72792 . ?x wdt:P31 wd:Q11424 }"
    unrestricted = endpoint.query("SELECT DISTINCT ?x WHERE { ?x wdt:P162 wd:Q72792 }")
    assert 0 < len(endpoint.query(films).rows) < len(unrestricted.rows)
    # a count question's items are people told apart by occupation; the counted class makes the proposal
    politicians = "How many politicians graduated from Columbia University?"
    assert (
        proposed(politicians, ("quantity", "", "Q82955"), "Q49088")
        == "SELECT DISTINCT ?x WHERE { ?x wdt:P69 wd:Q49088 . ?x wdt:P106 wd:Q82955 }"
    )
    assert proposed(politicians, ("quantity", ""), "Q49088") is None  # no class named: no proposal, as before
    assert proposed(politicians, ("quantity", "", "Q82955"), "Q49088", variant="no-answer-type") is None
    # every subject is a film already: nothing to narrow, the plain query
    assert (
        proposed("What movies does Jesse Eisenberg play in?", ("film", "Q11424", "Q11424"), "Q219512")
        == "SELECT DISTINCT ?x WHERE { ?x wdt:P161 wd:Q219512 }"
    )


def test_a_property_whose_only_value_is_the_entity_itself_is_never_the_candidate(
    settings, endpoint, search, schema, hierarchy
):
    """France's country is France: it answers nothing about France, so the lookup neither ranks nor proposes it
    ("What country is beside France?"), but still lists it."""
    ctx = _ctx(settings, endpoint, search, schema, hierarchy, "What country is beside France?", ("country", "Q6256"))
    found = do_lookup(ctx, "Q142")
    assert "(P17)" in found.text
    assert "wd:Q142 wdt:P17 ?x" not in (found.candidate or "") and "wd:Q142 wdt:P17 ?x" not in (found.proposal or "")
    assert found.candidate  # another relevant property leads instead
