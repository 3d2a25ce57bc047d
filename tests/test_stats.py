"""Grounding statistics and the gold-query conflict check on the bundled benchmarks and sample."""

from __future__ import annotations

import json

import pytest

from saga_dspy.eval.stats.gold_pairs import gold_queries
from saga_dspy.kg.flavours import WIKIDATA
from saga_dspy.stats import conflict_stats, grounding_stats, main


def test_gold_pairs_are_subject_constants_with_their_properties():
    records = [
        {"id": "a", "sparql": "SELECT ?x WHERE { wd:Q11817 wdt:P607 ?x . ?x wdt:P31 wd:Q198 . ?y ^wdt:P26 wd:Q11817 }"},
        {
            "id": "b",
            "sparql": "SELECT ?f WHERE { ?f wdt:P57 wd:Q315087 ; wdt:P161 wd:Q40523 . MINUS { wd:Q1 wdt:P2 ?f } }",
        },
        {"id": "c", "sparql": "ASK { wd:Q1 p:P39 ?s . ?s ps:P39 wd:Q11696 }"},
        {"id": "d", "sparql": "SELECT WHERE {"},
    ]
    queries, unparsable = gold_queries(records, WIKIDATA)
    assert unparsable == 1
    a, b, c = queries
    assert a.pairs == [("Q11817", "P607"), ("Q11817", "P26")]  # ^P26 makes Q11817 the subject
    assert set(a.entities) == {"Q11817", "Q198"}
    assert b.pairs == []  # constants as objects, and negated patterns, are not gold subject pairs
    assert c.pairs == [("Q1", "P39")]


@pytest.fixture(scope="module")
def qald7(settings, endpoint, search):
    return grounding_stats(settings, "qald7", ["bare", "closure"], endpoint=endpoint, search=search)


def test_grounding_stats_closure_keeps_gold_properties(qald7):
    bare, closure = qald7["filters"]["bare"], qald7["filters"]["closure"]
    assert qald7["entities_known"] > 50 and qald7["gold_pairs"] > 20
    assert closure["gold_recall_in_neighbourhood_pct"] >= 99.0
    assert closure["false_conflict_rate_pct"] <= 1.0
    # the paper's bare intersection removes many edges and many gold properties
    assert bare["edge_reduction_pct"] > 20 and bare["gold_recall_in_neighbourhood_pct"] < 80
    assert bare["false_conflicts_on_gold_pairs"] == len(bare["removed_gold_pairs"]) > 0
    assert closure["edge_reduction_pct"] < bare["edge_reduction_pct"]
    assert closure["raw_edges"] == bare["raw_edges"]
    assert sum(closure["decisions"].values()) == sum(bare["decisions"].values())
    assert closure["wrong_candidate_pairs"] > 0
    removed = bare["removed_gold_pairs"][0]
    assert removed["types"] and removed["domain"] and removed["reason"]
    # detection that spares the gold entity is part of detection; bare flags many gold entities too
    for row in (bare, closure):
        assert 0 <= row["wrong_entity_detection_sparing_gold_pct"] <= row["wrong_entity_detection_pct"]
    assert bare["wrong_entity_detection_sparing_gold_pct"] < bare["wrong_entity_detection_pct"]


def test_candidates_carried_properties(settings, endpoint):
    from saga_dspy.schema.carried import carried_properties

    carried = carried_properties(endpoint, WIKIDATA, ["Q761383", "Q42299", "Q999999999"], batch=2)
    assert "P138" in carried["Q761383"] and carried["Q42299"] == {"P101"}  # Riemann: one statement in the sample
    assert carried["Q999999999"] == set() and not any(p.startswith("http") for p in carried["Q761383"])


def test_gold_queries_raise_almost_no_false_conflicts(settings, endpoint, search):
    """Every flag on a gold query is a false conflict. (All six Wikidata benchmarks, 7,869 gold
    queries: `python -m saga_dspy.stats conflicts`; two small ones here to stay fast.)"""
    report = conflict_stats(settings, ["qald7", "qald9plus"], endpoint=endpoint, search=search)
    assert report["overall"]["parsed"] == 186
    assert report["overall"]["false_conflict_rate_pct"] <= 1.0
    for offender in report["worst_offenders"]:
        assert offender["property"] and offender["types"] and offender["domain"]


def test_stats_cli_json(capsys, settings):
    assert (
        main(["conflicts", "--dataset", "qald7", "--limit", "10", "--json", "--cache-dir", str(settings.cache_dir)])
        == 0
    )
    report = json.loads(capsys.readouterr().out)
    assert report["datasets"]["qald7"]["parsed"] == 10


def test_components_cli(settings, capsys):
    assert (
        main(
            [
                "components",
                "--dataset",
                "qald7",
                "--split",
                "train",
                "--limit",
                "30",
                "--json",
                "--filters",
                "closure,calibrated",
                "--cache-dir",
                str(settings.cache_dir),
            ]
        )
        == 0
    )
    report = json.loads(capsys.readouterr().out)
    assert report["split"] == "train" and report["questions"] == 30
    assert report["test_twins_left_out"] > 0  # QALD-7 train holds twins of other benchmarks' test questions
    pr = report["property_ranking"]
    assert (
        pr["gold_pairs_known_entity"] > 0
        and pr["recall_at_10_in_neighbourhood_pct"] >= pr["recall_at_1_in_neighbourhood_pct"]
    )
    assert report["observation_tokens"]["median"] > 0 and report["answer_type"]["questions"] > 0
    assert set(report["filters"]) == {"closure", "calibrated"}
    cq = report["candidate_query"]  # the proposal or, where there is none, the best candidate: never worse
    assert cq["candidates"] >= report["proposed_query"]["proposals"] and cq["mean_f1"] >= cq["proposals_only_mean_f1"]
    # as the program returns it: a candidate of another form than the question's is rewritten to it, or kept
    assert 0 <= cq["rewritten_to_form"] <= cq["candidates"] and cq["returned_mean_f1"] is not None
    assert sum(k["n"] for k in cq["by_kind"].values()) == cq["answerable_questions"]
    inc = report["incoming"]  # (property, object entity) gold pairs: ranked in the lookup's incoming section
    assert inc["gold_pairs"] > 0 and inc["recall_at_3_pct"] >= inc["recall_at_1_pct"] > 0
    with pytest.raises(SystemExit):
        main(["components", "--dataset", "qald7", "--answer-type", "llm"])


def test_a_train_split_is_read_without_the_twins_of_test_questions(settings):
    """QALD-10 train holds QALD-7 test's "Give me all cosmonauts.": component figures on train leave it out, so a
    choice made by reading them reads no test question; a dev split is left as it is."""
    from saga_dspy.eval.loading.datasets import load_records
    from saga_dspy.eval.loading.splits import without_test_twins

    train = load_records("qald10", "train", settings)
    kept, twins = without_test_twins(train, "qald10", "train", settings)
    questions = {r["question"] for r in kept}
    assert twins == len(train) - len(kept) > 0
    assert "Give me all cosmonauts." not in questions
    assert "Who is the daughter of Ingrid Bergman married to?" in questions
    dev = load_records("qald10", "dev", settings)
    assert without_test_twins(dev, "qald10", "dev", settings) == (dev, 0)


def test_components_cli_measures_only_the_ids_asked(settings, capsys, tmp_path):
    """`--ids` (a list or @FILE) narrows the split to those questions: what a cross-validation fold runs on."""
    from saga_dspy.eval.loading.datasets import load_records

    ids = [str(r["id"]) for r in load_records("qald7", "dev", settings)[:3]]
    (tmp_path / "ids").write_text("\n".join(ids[1:]), encoding="utf-8")
    common = ["components", "--dataset", "qald7", "--split", "dev", "--json", "--filters", "closure"]
    common += ["--cache-dir", str(settings.cache_dir)]
    assert main([*common, "--ids", ids[0], "--ids", f"@{tmp_path / 'ids'}"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["questions"] == 3 and {r["id"] for r in report["candidate_per_question"]} <= set(ids)
    assert main([*common, "--ids", ids[0]]) == 0
    assert json.loads(capsys.readouterr().out)["questions"] == 1


def test_grounding_cli_prints_table9_beside_the_papers(settings, capsys):
    args = ["grounding", "--dataset", "qald10", "--dataset", "spinach", "--split", "dev", "--limit", "4"]
    assert main([*args, "--filter", "paper", "--details", "0", "--cache-dir", str(settings.cache_dir)]) == 0
    out = capsys.readouterr().out
    assert "paper, Table 9 (test) | 12352 | 28.6% | — | 59.7%" in out  # the paper's row under each of its datasets
    table = out.split("== Table 9")[1]
    assert "qald10 | paper |" in table and "spinach | paper |" in table
    assert "average | paper | — |" in table and "— / 25.8% / 62.1%" in table
