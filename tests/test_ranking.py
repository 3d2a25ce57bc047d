"""Issue 12: question-aware property ranking, property aliases, the rule-based answer type,
two-hop proposals, the calibrated filter mode and `stats components` (real store and index)."""

from __future__ import annotations

import json

import pytest

from saga_dspy.grounding.answer_cues import guard, rule_answer_type
from saga_dspy.grounding.context import QuestionContext
from saga_dspy.grounding.ranking import content_stems, rank_properties, stem
from saga_dspy.grounding.tools import do_lookup
from saga_dspy.schema import Outcome, check_domain
from saga_dspy.schema.index import PropertySchema, SchemaIndex, TypeEvidence


@pytest.fixture(scope="module")
def schema(settings):
    from saga_dspy.schema import load_schema_index

    return load_schema_index(settings)


@pytest.fixture(scope="module")
def hierarchy(settings, endpoint, schema):
    from saga_dspy.schema import load_hierarchy

    return load_hierarchy(settings, endpoint, schema)


def test_stemming_meets_property_words():
    assert stem("birthdays") == "birthday" and stem("crosses") == "cross" and stem("actors") == "actor"
    assert "birth" in content_stems("What are the birthdays of the cast?")


def test_aliases_travel_in_the_schema_index_and_old_files_still_load(schema):
    assert "birthdate" in schema.get("P569").aliases and "actor" in schema.get("P161").aliases
    old = SchemaIndex.from_json({"format": "saga-schema-index", "format_version": 1,
                                 "properties": {"P1": {"label": "x", "datatype": "Time"}}})
    assert old.get("P1").aliases == ()
    round_trip = PropertySchema.from_json("P9", PropertySchema("P9", "y", "", None, None, None, ("b", "a")).to_json())
    assert round_trip.aliases == ("b", "a")


@pytest.mark.parametrize("question,gold,others", [
    ("What are the birthdays of the cast?", "P569", ["P373", "P18", "P570", "P161"]),
    ("Which river does the bridge cross?", "P177", ["P373", "P17", "P131", "P31"]),
    ("Which actors played in the film?", "P161", ["P57", "P373", "P136", "P577"]),
])
def test_the_question_ranks_its_property_first(schema, question, gold, others):
    ranked = rank_properties(question, others + [gold], schema)
    assert ranked[0].pid == gold and ranked[0].relevance > 0


def test_fit_breaks_ties_only_and_commons_never_leads(schema):
    ranked = rank_properties("Tell me about it", ["P373", "P18", "P571", "P17"], schema, fits={"P373": True})
    assert {s.pid for s in ranked[-2:]} == {"P18", "P373"}  # media / Commons last even when they "fit"
    ranked = rank_properties("Which Commons category?", ["P373", "P17"], schema)
    assert ranked[0].pid == "P373"  # unless the question asks for it


@pytest.mark.parametrize("question,label", [
    ("When was Barack Obama born?", "date"), ("What are the birthdays of the Friends cast?", "date"),
    ("How many children does Madonna have?", "quantity"), ("Is Berlin the capital of Germany?", "boolean"),
    ("Who killed Caesar?", "person"), ("Where is the Eiffel Tower?", "location"),
])
def test_rule_answer_type(question, label):
    assert rule_answer_type(question).label == label


def test_head_noun_class_and_the_guard(schema):
    cue = rule_answer_type("Which river does the Brooklyn Bridge cross?", schema)
    assert cue.label == "river" and cue.qid == "Q4022" and cue.confident
    assert guard(cue, "string", "") == ("river", "Q4022")  # the LM's string gives way
    assert guard(rule_answer_type("When was X born?"), "person", "Q5") == ("date", "")
    assert guard(rule_answer_type("Who founded Apple?"), "organization", "Q43229") == ("organization", "Q43229")
    assert guard(rule_answer_type("Tell me about Apple."), "company", "Q783794") == ("company", "Q783794")


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


def test_calibrated_mode_ignores_hub_classes(hierarchy):
    hub_only = TypeEvidence(("Q35120",), "p2302", "instance_of")
    assert check_domain(("Q5",), hub_only, hierarchy, "closure").outcome is Outcome.COMPATIBLE
    assert check_domain(("Q5",), hub_only, hierarchy, "calibrated").outcome is Outcome.UNKNOWN
    films = TypeEvidence(("Q11424", "Q35120"), "p2302", "instance_of")
    assert check_domain(("Q5",), films, hierarchy, "closure").outcome is Outcome.COMPATIBLE  # via "entity"
    assert check_domain(("Q5",), films, hierarchy, "calibrated").outcome is Outcome.CONFLICT
    assert check_domain(("Q11424",), films, hierarchy, "calibrated").outcome is Outcome.COMPATIBLE
    with pytest.raises(ValueError):
        check_domain(("Q5",), films, hierarchy, "nonsense")


def test_components_cli(settings, capsys, monkeypatch):
    from saga_dspy.stats import main

    monkeypatch.setenv("SAGA_CACHE_DIR", str(settings.cache_dir))
    assert main(["components", "--dataset", "qald7", "--split", "train", "--limit", "30", "--json",
                 "--filters", "closure,calibrated"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["split"] == "train" and report["questions"] == 30
    pr = report["property_ranking"]
    assert pr["gold_pairs_known_entity"] > 0 and pr["recall_at_10_in_neighbourhood_pct"] >= pr["recall_at_1_in_neighbourhood_pct"]
    assert report["observation_tokens"]["median"] > 0 and report["answer_type"]["questions"] > 0
    assert set(report["filters"]) == {"closure", "calibrated"}
    with pytest.raises(SystemExit):
        main(["components", "--dataset", "qald7", "--answer-type", "llm"])
