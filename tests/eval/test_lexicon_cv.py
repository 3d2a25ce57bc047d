"""The cross-validation script's folds and figures (`benchmarks/lexicon_cv.py`)."""

from __future__ import annotations

import json
from types import SimpleNamespace

from tests.helpers.scripts import load_script

cv = load_script("benchmarks/lexicon_cv.py")


def test_questions_about_the_same_entities_share_a_fold():
    """A paraphrase never sits on both sides of a fold: the fold is the gold constants', whatever the words."""
    a = SimpleNamespace(entities=["Q31", "Q5"], text="where is belgium at?")
    b = SimpleNamespace(entities=["Q5", "Q31"], text="what continent is belgium on?")
    folds = {cv.fold_of(SimpleNamespace(entities=[f"Q{n}"], text=""), 5) for n in range(100)}
    assert cv.fold_of(a, 5) == cv.fold_of(b, 5) and folds == set(range(5))
    assert cv.fold_of(SimpleNamespace(entities=[], text="Give me all cosmonauts."), 5) in range(5)


def test_a_question_without_a_candidate_scores_zero_over_the_answerable():
    rows = {
        "wwq": [
            {"out_of_fold": {"f1": 1.0, "returned_f1": 1.0}, "in_sample": {"f1": 1.0, "returned_f1": 1.0}},
            {
                "out_of_fold": None,
                "in_sample": {"f1": 0.5, "returned_f1": 1.0},
                "no_lexicon": {"f1": 1.0, "returned_f1": 1.0},
            },
        ]
    }
    figures = cv.summarise(rows, {"wwq": 4})["wwq"]
    assert figures["out_of_fold_f1"] == 0.25 and figures["in_sample_f1"] == 0.375
    assert figures["in_sample_returned_f1"] == 0.5 and figures["answerable_questions"] == 4
    assert figures["no_lexicon_f1"] == 0.25  # a side a row lacks scores 0 there


def test_the_split_gap_reads_components_and_fold_reports(tmp_path):
    """`benchmarks/split_gap.py`: a question without a candidate counts 0; the out-of-fold rows are the dataset's."""
    gap = load_script("benchmarks/split_gap.py")
    dev, test, folds = tmp_path / "dev.json", tmp_path / "test.json", tmp_path / "cv.json"
    dev.write_text(json.dumps({"candidate_per_question": [{"f1": 1.0}, {"f1": 1.0, "returned_f1": 0.5}]}))
    test.write_text(json.dumps({"candidate_per_question": [{"f1": 0.0}, {"f1": None}, {"f1": 1.0}, {"f1": 0.0}]}))
    rows = [{"out_of_fold": {"f1": 1.0}}, {"out_of_fold": None}]
    folds.write_text(json.dumps({"per_question": {"wwq": rows, "qald10": [{"out_of_fold": {"f1": 0.0}}]}}))
    assert gap.component_scores(test, "f1") == [0.0, 0.0, 1.0, 0.0]
    assert gap.cv_scores(folds, "wwq", "f1") == [1.0, 0.0]
    out = tmp_path / "gap.json"
    assert (
        gap.main(["--dataset", "wwq", "--dev", str(dev), "--test", str(test), "--cv", str(folds), "--json", str(out)])
        == 0
    )
    gaps = json.loads(out.read_text())["gaps"]
    assert gaps["dev - test"]["delta"] == 0.75 and gaps["dev - train_folds"]["delta"] == 0.5
    assert gaps["train_folds - test"]["n_a"] == 2 and gaps["train_folds - test"]["n_b"] == 4


def test_conventions_are_train_majorities_and_each_split_is_read_against_them():
    """`benchmarks/convention_shift.py`: a word's train majority property, and how often a split's golds agree."""
    shift = load_script("benchmarks/convention_shift.py")

    def q(text: str, *pids: str):
        return SimpleNamespace(text=text, props=[(p, "out", "answer") for p in pids])

    train = [q(f"what language does {c} speak", "P37") for c in "abcd"] + [q("what language does e speak", "P2936")]
    table = shift.conventions(train)
    assert table["speak"] == ("P37", 5, 0.8) and table["language"][0] == "P37"
    other = shift.agreement([q("what language does x speak", "P2936"), q("what language does y speak", "P37")], table)
    assert other["pairs"] == 4 and other["agreement"] == 0.5 and other["per_word"]["speak"] == {"n": 2, "agree": 0.5}
    assert shift.agreement(train, table)["agreement"] == 0.8


def test_paraphrase_twins_compare_the_properties_of_their_gold_queries():
    """The same question annotated twice: official language in one split, language used in the other, is a swap."""
    shift = load_script("benchmarks/convention_shift.py")
    prefixes = "PREFIX wd: <http://www.wikidata.org/entity/> PREFIX wdt: <http://www.wikidata.org/prop/direct/> "

    def rec(rid: str, question: str, pid: str) -> dict:
        return {"id": rid, "question": question, "sparql": f"{prefixes}SELECT ?x WHERE {{ wd:Q189 wdt:{pid} ?x }}"}

    train = [rec("t1", "what language do people speak in iceland?", "P37"), rec("t2", "who founded iceland?", "P112")]
    held = [
        rec("h1", "what language does people in iceland speak?", "P2936"),
        rec("h2", "who is the iceland mayor?", "P6"),
    ]
    found = shift.twins(train, held, "wwq/test")
    assert found == {"pairs": 1, "same_properties": 0, "share": 0.0, "swaps": {"P37 -> P2936": 1}}
    assert shift.twins(train, [rec("h1", "what language do people speak in iceland?", "P37")], "x")["share"] == 1.0


def test_a_kept_fold_lexicon_is_keyed_by_its_questions():
    """`--lexicons DIR` reuses a fold's lexicon only when mined from the same questions (and miner code)."""

    def q(benchmark: str, qid: str):
        return SimpleNamespace(rec={"benchmark": benchmark, "id": qid})

    a = cv.lexicon_key([q("wwq", "1"), q("qald10", "2")])
    assert a == cv.lexicon_key([q("qald10", "2"), q("wwq", "1")]) and len(a) == 12
    assert a != cv.lexicon_key([q("wwq", "1")]) and a != cv.lexicon_key([q("wwq", "1"), q("wwq", "2")])
