"""Question-aware property ranking (labels, inflections, the mined lexicon), the lookup's arrangement (top
properties in full, hints only when relevance and the answer type agree) and two-hop proposals (real store and
index)."""

from __future__ import annotations

import pytest

from saga_dspy.grounding.context import QuestionContext
from saga_dspy.grounding.lexicon import STRONG, Lexicon, load_lexicon
from saga_dspy.grounding.ranking import (
    content_stems,
    rank_properties,
    relevance,
    stem,
    word_groups,
    word_priors,
)
from saga_dspy.tools.lookup import do_lookup


@pytest.fixture(scope="session")
def settings(settings):
    """The lookup view alone: without the proposer's candidate section (`shown_candidates` 0; tests/proposer)."""
    return settings.model_copy(update={"shown_candidates": 0})


@pytest.fixture(scope="module")
def lexicon(settings):
    return load_lexicon(settings)


def test_stemming_and_inflection_meet_property_words():
    assert stem("birthdays") == "birthday" and stem("crosses") == "cross" and stem("actors") == "actor"
    assert "play" in content_stems("Who played Agent Smith?") and "high" in content_stems("higher mountains")


@pytest.mark.parametrize(
    "question,gold,others",
    [
        ("Which river does the bridge cross?", "P177", ["P373", "P17", "P131", "P31"]),
        ("Which actors played in the film?", "P161", ["P57", "P373", "P136", "P577"]),
        # inflections reach the labels: past tense, kinship prefixes, irregular plurals
        ("Who played Agent Smith in it?", "P161", ["P57", "P58", "P86", "P364"]),
        ("Give me the grandchildren of him.", "P40", ["P19", "P21", "P27", "P20"]),
        # the noun the question asks for beats a verb several "located in …" labels share
        ("What continent is it located in?", "P30", ["P706", "P206", "P421", "P36"]),
        # a compound written as one word meets the label's two ("time zone")
        ("Which U.S. states are in the same timezone as Utah?", "P421", ["P17", "P150", "P47", "P361"]),
    ],
)
def test_the_question_ranks_its_property_first(schema, question, gold, others):
    ranked = rank_properties(question, others + [gold], schema)
    assert ranked[0].pid == gold and ranked[0].relevance > 0


@pytest.mark.parametrize(
    "question,gold,others",
    [
        # words whose property no label or alias says: the train questions that used them asked for it
        ("Who wrote it?", "P50", ["P57", "P136", "P495", "P577"]),
        ("What did she do for a living?", "P106", ["P19", "P21", "P27", "P569"]),
        ("Where did she grow up?", "P19", ["P20", "P27", "P551", "P106"]),
        ("Who inspired him?", "P737", ["P22", "P25", "P40", "P26"]),
    ],
)
def test_the_lexicon_ranks_what_train_questions_with_the_word_asked_for(schema, lexicon, question, gold, others):
    alone = {s.pid: s.relevance for s in rank_properties(question, others + [gold], schema)}
    assert alone[gold] == 0  # no label or alias of the property says the word
    ranked = rank_properties(question, others + [gold], schema, lexicon=lexicon)
    assert ranked[0].pid == gold and ranked[0].relevance > 0


def test_a_lexicon_share_is_evidence_only_with_support_and_by_direction():
    lexicon = Lexicon(
        words={"wed": 4, "once": 1},
        properties={"wed": {"P26": {"out/answer": 3.0, "in/answer": 1.0}}, "once": {"P26": {"out/answer": 1.0}}},
    )
    assert lexicon.property_prior("wed", "P26") == 1.0
    assert lexicon.property_prior("wed", "P26", "out") == 0.75 and lexicon.property_prior("wed", "P26", "in") == 0.25
    assert lexicon.property_prior("once", "P26") == 0.0  # one question is an anecdote
    assert relevance([("wed",)], "spouse", prior=[0.75]) == 0.75
    assert relevance([("spouse",)], "spouse", prior=[0.2]) == 1.0  # a word scores its best evidence, once


def test_a_word_many_train_questions_say_without_asking_a_property_does_not_name_it(schema, lexicon):
    """ "located" is said by dozens of train questions and none asked for "located in time zone": its label match
    no longer puts the time zone first for "where is angola located?"; the word's own train share decides."""
    strong = Lexicon(words={"located": STRONG, "zone": 3}, properties={"located": {"P30": {"out/answer": 5.0}}})
    assert word_priors([("located",)], "P421", strong) == [None]  # evidence against
    assert word_priors([("located",)], "P30", strong) == [5 / STRONG]
    few = Lexicon(words={"located": STRONG - 1}, properties={"located": {"P30": {"out/answer": 5.0}}})
    assert word_priors([("located",)], "P421", few) == [0.0]  # not enough questions to say so
    assert relevance([("located",)], "located in time zone", prior=[None]) == 0.0
    question, pids = "where is angola located?", ["P421", "P30", "P17"]
    assert rank_properties(question, pids, schema, entity_label="Angola")[0].pid == "P421"  # the label alone
    ranked = rank_properties(question, pids, schema, entity_label="Angola", lexicon=lexicon, direction="out")
    assert ranked[0].pid == "P30" and lexicon.words["located"] >= STRONG


def test_the_question_frame_is_evidence_by_its_train_share(schema):
    """A question naming only its entity ("What does Jennifer Lopez do?") still has its frame ("what does _ do"):
    what the train questions of that frame asked for most (occupation), with MIN_SUPPORT questions behind it."""
    lexicon = Lexicon(
        frames={"what does _ do": {"n": 4, "P106": {"out/answer": 3.0, "in/answer": 1.0}, "P26": {"out/answer": 1.0}}}
    )
    assert lexicon.frame_prior("what does _ do", "P106") == 4 / 6  # shrunk by MIN_SUPPORT questions
    assert lexicon.frame_prior("what does _ do", "P106", "out") == 3 / 6
    assert lexicon.frame_prior("what does _ do", "P19") == 0.0 and lexicon.frame_prior("", "P106") == 0.0
    assert lexicon.frame_prior("what does _ do", "P26") == 0.0  # not the frame's most asked property
    one = Lexicon(frames={"what does _ do": {"n": 1, "P106": {"out/answer": 1.0}}})
    assert one.frame_prior("what does _ do", "P106") == 0.0  # one question is an anecdote
    question, pids = "What does Jennifer Lopez do?", ["P19", "P26", "P106"]
    assert all(s.relevance == 0 for s in rank_properties(question, pids, schema, entity_label="Jennifer Lopez"))
    ranked = rank_properties(question, pids, schema, entity_label="Jennifer Lopez", lexicon=lexicon, direction="out")
    assert ranked[0].pid == "P106" and ranked[0].relevance == 0.5 and ranked[1].relevance == 0


def test_a_word_is_one_piece_of_evidence():
    assert word_groups("what continent is syria located in", drop=["syria"]) == [
        ("continent",),
        ("located", "locat", "locate"),
    ]
    # a form the question says itself is not counted a second time through another word
    assert word_groups("what language do brazilians speak", drop=["brazil"]) == [("language",), ("speak",)]
    # "brazilians" names the entity Brazil (a shared five-letter start) and is dropped with it
    assert word_groups("Give me the grandchildren") == [("grandchildren", "children", "child")]
    located = relevance(word_groups("located"), "located in or next to body of water")
    assert located == relevance(["located"], "located in or next to body of water")  # the form adds nothing


def test_values_count_when_given_and_only_then(schema):
    party = ["Democratic Party"]
    assert relevance(word_groups("Is Obama a democrat?", ["obama"]), "member of political party", values=party) > 0
    assert relevance(word_groups("Is Obama a democrat?", ["obama"]), "member of political party") == 0


def test_fit_breaks_ties_only_and_commons_never_leads(schema):
    ranked = rank_properties("Tell me about it", ["P373", "P18", "P571", "P17"], schema, fits={"P373": True})
    assert {s.pid for s in ranked[-2:]} == {"P18", "P373"}  # media / Commons last even when they "fit"
    ranked = rank_properties("Which Commons category?", ["P373", "P17"], schema)
    assert ranked[0].pid == "P373"  # unless the question asks for it


def _ctx(settings, endpoint, search, schema, hierarchy, question, answer_type):
    return QuestionContext(
        settings, endpoint, search, schema, hierarchy, question=question, variant="full", answer_type=answer_type
    )


def test_lookup_shows_top_properties_in_full_and_proposes_only_when_relevance_and_type_agree(
    settings, endpoint, search, schema, hierarchy
):
    ctx = _ctx(
        settings, endpoint, search, schema, hierarchy, "Which river does the Brooklyn Bridge cross?", ("river", "Q4022")
    )
    found = do_lookup(ctx, "Q125006")
    out = found.text
    lines = out.splitlines()
    first = next(line for line in lines if line.startswith("- "))
    assert first.startswith("- crosses (P177)")
    assert any(line.startswith("Other properties: ") and "Commons category (P373)" in line for line in lines)
    assert "wdt:P373" not in out.splitlines()[-1]
    # a generic, unconfident answer type stars nothing and proposes nothing: it names the candidates
    ctx = _ctx(
        settings,
        endpoint,
        search,
        schema,
        hierarchy,
        "Which bridge crossing does the Brooklyn Bridge have?",
        ("entity", ""),
    )
    found = do_lookup(ctx, "Q125006")
    out = found.text
    assert "★" not in out and found.proposal is None and out.splitlines()[-1].startswith("Best matches")


def test_two_hop_proposal(settings, endpoint, search, schema, hierarchy):
    q = "What are the birthdays of the actors of George Harrison: Living in the Material World?"
    ctx = _ctx(settings, endpoint, search, schema, hierarchy, q, ("date", ""))
    found = do_lookup(ctx, "Q1139311")
    out = found.text
    assert found.proposal == "SELECT DISTINCT ?x WHERE { wd:Q1139311 wdt:P161/wdt:P569 ?x }"
    assert "path wdt:P161/wdt:P569" in out
    assert endpoint.query(found.proposal).rows


def test_a_yes_no_question_meets_the_entitys_values_a_wh_question_does_not(
    settings, endpoint, search, schema, hierarchy
):
    yes_no = _ctx(settings, endpoint, search, schema, hierarchy, "Is Barack Obama a democrat?", ("boolean", ""))
    first = next(line for line in do_lookup(yes_no, "Q76").text.splitlines() if line.startswith("- "))
    assert first.startswith("- member of political party (P102)")
    wh = _ctx(settings, endpoint, search, schema, hierarchy, "Which democrat is Barack Obama?", ("entity", ""))
    first = next(line for line in do_lookup(wh, "Q76").text.splitlines() if line.startswith("- "))
    assert "(P102)" not in first
