"""The test firewall: collisions, the bundled demo pools, the run-time guard and optimize's train set."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import REPO, make_settings, scripted_settings
from helpers.scripted_lm import ScriptedLM

from saga_dspy.eval.loading.firewall import (
    Entry,
    Firewall,
    QuestionGuard,
    collision_reason,
    demo_queries,
    normalise_sparql,
    normalise_text,
    unordered_sparql,
)

WD = "http://www.wikidata.org/entity/"


# --------------------------------------------------------------------------- collisions


def test_sparql_normalisation_ignores_layout_prefixes_case_and_variable_names():
    a = "PREFIX wd: <http://www.wikidata.org/entity/>\nSELECT ?x WHERE { wd:Q42 wdt:P26 ?x . } # spouse"
    b = (
        "select  ?spouse where {<http://www.wikidata.org/entity/Q42> "
        "<http://www.wikidata.org/prop/direct/P26> ?spouse.}"
    )
    assert normalise_sparql(a) == normalise_sparql(b)
    assert normalise_sparql("SELECT ?x { ?x a wd:Q5 }") == normalise_sparql(
        "SELECT ?y { ?y <http://www.w3.org/1999/02/22-rdf-syntax-ns#type> wd:Q5 }"
    )
    # another entity, another property or another variable order is another query
    assert normalise_sparql(a) != normalise_sparql(a.replace("Q42", "Q43"))
    assert normalise_sparql(a) != normalise_sparql(a.replace("P26", "P40"))
    assert normalise_sparql("SELECT ?a ?b { ?a wdt:P1 ?b }") != normalise_sparql("SELECT ?b ?a { ?a wdt:P1 ?b }")
    assert normalise_sparql("") == "" and normalise_sparql(None) == ""


def test_collision_reasons():
    celtics = Entry.of("when did celtics win the championship?", "SELECT ?d { wd:Q131371 wdt:P1346 ?d }")
    assert collision_reason(celtics, Entry.of("When did Celtics win the championship")) == "text"
    assert collision_reason(celtics, Entry.of("when did the celtics win championship?")) == "jaccard"
    assert (
        collision_reason(
            celtics, Entry.of("what titles did boston take?", "select ?year where { wd:Q131371 wdt:P1346 ?year . }")
        )
        == "sparql"
    )
    assert (
        collision_reason(Entry.of("What is the capital of France?"), Entry.of("What is the capital of Germany?"))
        is None
    )
    assert normalise_text("When did the Celtics win?") == "when did the celtics win"


def test_gold_sparql_equal_up_to_pattern_order_collides():
    """WWQ train's "which country has adopted the euro" writes QALD-7 test's query as a `;` list, in
    the other order: the first rule saw two queries."""
    wwq = "SELECT DISTINCT ?x WHERE { ?x wdt:P38 wd:Q4916; wdt:P31 wd:Q6256. }"
    qald7 = (
        "SELECT DISTINCT ?uri WHERE { ?uri <http://www.wikidata.org/prop/direct/P31> "
        "<http://www.wikidata.org/entity/Q6256> . ?uri <http://www.wikidata.org/prop/direct/P38> "
        "<http://www.wikidata.org/entity/Q4916> . }"
    )
    a = Entry.of("which country has adopted the euro as its currency ( 1 point )?", wwq)
    b = Entry.of("Which countries adopted the Euro?", qald7)
    assert normalise_sparql(wwq) != normalise_sparql(qald7) and unordered_sparql(wwq) == unordered_sparql(qald7)
    assert collision_reason(a, b) == "pattern_order" and collision_reason(a, b, near=False) is None
    assert Firewall([b]).collisions(a.text, wwq)[0].reason == "pattern_order"
    assert not Firewall([b], near=False).collides(a.text, wwq)
    # filters, optionals and unions move with their group; a sub-query keeps its clauses
    one = (
        "SELECT ?c WHERE { ?c wdt:P31 wd:Q6256 ; wdt:P1082 ?p . FILTER(?p > 5) "
        "OPTIONAL { ?c rdfs:label ?l . FILTER(LANG(?l) = 'en') } { ?c wdt:P30 wd:Q46 } UNION { ?c wdt:P30 wd:Q48 } }"
    )
    other = (
        "SELECT ?x { { ?x wdt:P30 wd:Q46 } UNION { ?x wdt:P30 wd:Q48 } OPTIONAL { ?x rdfs:label ?n "
        "FILTER(LANG(?n) = 'en') } ?x wdt:P1082 ?q FILTER(?q > 5) ?x wdt:P31 wd:Q6256 }"
    )
    assert unordered_sparql(one) == unordered_sparql(other)
    # another constant, another join or swapped union branches' contents is another query
    assert unordered_sparql(one) != unordered_sparql(one.replace("Q48", "Q49"))
    assert unordered_sparql("SELECT ?a { ?a wdt:P1 ?b . ?b wdt:P2 ?c }") != unordered_sparql(
        "SELECT ?a { ?a wdt:P1 ?b . ?c wdt:P2 ?b }"
    )
    assert unordered_sparql("SELECT ?a ?b { ?a wdt:P1 ?b }") != unordered_sparql("SELECT ?b ?a { ?a wdt:P1 ?b }")
    assert unordered_sparql("") == "" and unordered_sparql(None) == ""


def test_questions_sharing_constants_and_form_collide_at_half_the_words():
    most = "SELECT ?c WHERE { ?c wdt:P31 wd:Q6256 ; wdt:P1082 ?n } ORDER BY DESC(?n) LIMIT 1"
    least = "SELECT ?x WHERE { ?x wdt:P1082 ?p . ?x wdt:P31 wd:Q6256 } ORDER BY ?p LIMIT 1"
    a = Entry.of("Which country has the most inhabitants?", most)
    b = Entry.of("Which country has the least inhabitants?", least)
    assert collision_reason(a, b) == "constants" and collision_reason(a, b, near=False) is None
    held = Firewall([b])
    assert [c.reason for c in held.collisions(a.text, most)] == ["constants"]
    # another form, another literal, another constant or too few shared words: no collision
    count = "SELECT (COUNT(?x) AS ?k) WHERE { ?x wdt:P1082 ?p . ?x wdt:P31 wd:Q6256 }"
    assert not held.collides("How many country inhabitants are there?", count)
    assert held.collides("Which country of Europe has least inhabitants?", least)  # Jaccard 0.75
    assert not held.collides("Which country of Europe has least inhabitants?", least.replace("Q6256", "Q515"))
    assert not held.collides("Which people live in the biggest state?", most)
    twitter = Entry.of(
        "Which items have a website containing twitter?",
        "SELECT ?i { ?i wdt:P856 ?u FILTER(CONTAINS(STR(?u), 'twitter')) }",
    )
    bbc = Entry.of(
        "Which items have a website containing bbc.com?",
        "SELECT ?i { ?i wdt:P856 ?u FILTER(CONTAINS(STR(?u), 'bbc.com')) }",
    )
    assert collision_reason(twitter, bbc) is None
    # language codes and vocabulary IRIs are no constants: a label service does not make another question
    labelled = most.replace("LIMIT 1", "").replace(
        "}", ' SERVICE wikibase:label { bd:serviceParam wikibase:language "[AUTO_LANGUAGE],en". } }'
    )
    assert Entry.of("x", labelled).shape == a.shape


def test_firewall_index_finds_every_collision_and_partitions():
    held = Firewall.of_records(
        [
            {
                "id": "t1",
                "question": "when did the celtics win championship?",
                "sparql": "SELECT ?x { wd:Q1 wdt:P1 ?x }",
            },
            {"id": "t2", "question": "who wrote hamlet?", "sparql": "SELECT ?x { wd:Q41567 wdt:P50 ?x }"},
        ],
        "wwq/test",
    )
    assert [c.id for c in held.collisions("when did celtics win the championship")] == ["t1"]
    assert [c.reason for c in held.collisions("author of hamlet", "SELECT ?w { wd:Q41567 wdt:P50 ?w }")] == ["sparql"]
    kept, dropped = held.partition([{"question": "who wrote hamlet"}, {"question": "who painted guernica"}])
    assert [r["question"] for r in kept] == ["who painted guernica"] and dropped == {"wwq/test": 1}


# --------------------------------------------------------------------------- the bundled pools


def _pool_collisions(path: Path, firewall: Firewall) -> list[tuple[str, str]]:
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        rec = json.loads(line)
        hits = firewall.collisions(rec["question"], rec.get("sparql"))
        if hits:
            out.append((rec["question"], hits[0].source))
    return out


@pytest.fixture(scope="module")
def held_out():
    from saga_dspy.eval.loading.splits import held_out_firewall

    return held_out_firewall(make_settings(), "wikidata")


def test_the_check_finds_a_leaked_pool_record(tmp_path, held_out):
    """The pool check below can fail: a pool holding a WWQ test paraphrase is caught."""
    from saga_dspy.eval.loading.datasets import load_records

    test = load_records("wwq", "test")[0]
    pool = tmp_path / "wwq.jsonl"
    pool.write_text(
        json.dumps({"question": test["question"].upper() + "?", "sparql": "ASK {}", "steps": []})
        + "\n"
        + json.dumps({"question": "a question no benchmark asks about zebras", "sparql": "ASK {}"})
        + "\n"
    )
    assert _pool_collisions(pool, held_out) == [(test["question"].upper() + "?", "wwq/test")]


@pytest.mark.parametrize("pool", sorted((REPO / "data" / "demos").glob("*.jsonl")), ids=lambda p: p.name)
def test_bundled_pools_collide_with_no_held_out_question(pool, held_out):
    """No pool question collides with any test or dev question of a Wikidata benchmark (the pools
    may be used for every one of them). Fails on the pools built before the firewall: 156 WWQ
    test questions were shown a demo with their own gold SPARQL."""
    assert len(held_out) > 8000
    leaks = _pool_collisions(pool, held_out)
    assert not leaks, f"{len(leaks)} pool questions collide with held-out questions, e.g. {leaks[:3]}"


def test_answer_type_demos_pass_the_firewall():
    """The built-in answer-type demos are no benchmark's held-out question (one was QALD-9-plus test
    "How many moons does Mars have?" verbatim)."""
    from saga_dspy.agent.answer_type import answer_type_demos
    from saga_dspy.eval.loading.splits import held_out_firewall

    for kg in ("wikidata", "freebase"):
        firewall = held_out_firewall(None, kg)
        assert len(firewall) > 1000
        assert [d.question for d in answer_type_demos(kg) if firewall.collides(d.question)] == []
    assert held_out_firewall(None, "wikidata").collides("How many moons does Mars have?")  # the check can fail


# --------------------------------------------------------------------------- run time


def test_question_guard_drops_demos_by_question_or_by_query():
    guard = QuestionGuard("when did the celtics win championship?", "SELECT ?d { wd:Q131371 wdt:P1346 ?d }")
    twin_text = {"question": "when did celtics win the championship", "trajectory": "..."}
    twin_query = {
        "question": "what titles has boston won?",
        "trajectory": "Step 1\nAction: execute_sparql("
        + json.dumps({"query": "select ?y where { wd:Q131371 wdt:P1346 ?y }"})
        + ")",
    }
    other = {
        "question": "who founded the celtics?",
        "next_tool_args": json.dumps({"query": "SELECT ?f { wd:Q131371 wdt:P112 ?f }"}),
    }
    assert demo_queries(twin_query) == ["select ?y where { wd:Q131371 wdt:P1346 ?y }"]
    kept, dropped = guard.filter_demos([twin_text, other, twin_query])
    assert kept == [other] and dropped == 2


def test_pool_selection_replaces_a_colliding_demo():
    from saga_dspy.agent.demos import DemoPool

    def rec(q, sparql):
        return {
            "question": q,
            "sparql": sparql,
            "steps": [
                {"thought": "t", "tool_name": "search_wikidata", "tool_args": {"query": "x"}, "observation": "o"},
                {"thought": "t", "tool_name": "execute_sparql", "tool_args": {"sparql": sparql}, "observation": "o"},
            ],
        }

    pool = DemoPool(
        [
            rec("when did the celtics win championship?", "SELECT ?d { wd:Q131371 wdt:P1346 ?d }"),
            rec("when did the lakers win the championship?", "SELECT ?d { wd:Q121783 wdt:P1346 ?d }"),
            rec("who coached the celtics?", "SELECT ?c { wd:Q131371 wdt:P286 ?c }"),
        ]
    )
    question = "when did celtics win the championship"
    unguarded = [d.question for d in pool.select(question, 2)]
    assert unguarded[0] == "when did the celtics win championship?"
    guard = QuestionGuard(question, "SELECT ?x { wd:Q131371 wdt:P1346 ?x }")
    demos, refused = pool.select_guarded(question, 2, allow=guard.allows)
    assert refused == 1 and len(demos) == 2
    assert "when did the celtics win championship?" not in [d.question for d in demos]


def test_eval_records_the_demos_the_firewall_dropped(store_path, endpoint, tmp_path):
    """A pool holding a twin of the evaluated question: the twin is never in a prompt and the
    prediction line counts it."""
    from saga_dspy.agent.program import SagaProgram
    from saga_dspy.eval.loading.evalset import load_eval_set
    from saga_dspy.eval.running.runner import evaluate

    settings = scripted_settings("test").model_copy(update={"demos": 2})
    item = load_eval_set(settings, ids=["0"], progress=False).items[0]
    twin = item.question.replace(" is the ", " was ")  # a paraphrase: content-word Jaccard 1
    steps = [
        {"thought": "t", "tool_name": "search_wikidata", "tool_args": {"query": "Riemann"}, "observation": "o"},
        {"thought": "t", "tool_name": "execute_sparql", "tool_args": {"sparql": item.gold_sparql}, "observation": "o"},
    ]
    pool = [
        {"question": twin, "sparql": item.gold_sparql, "steps": steps},
        {
            "question": "After whom is the Pythagorean theorem named?",
            "sparql": "SELECT ?x { wd:Q11518 wdt:P138 ?x }",
            "steps": steps[:1],
        },
    ]
    plans = {item.question: [("execute_sparql", {"sparql": item.gold_sparql}), ("stop", {})]}
    lm = ScriptedLM(plans, {})
    evaluate(
        settings,
        ["full"],
        out=tmp_path / "run",
        ids=["0"],
        lm=lm,
        endpoint=endpoint,
        progress=False,
        program_factory=lambda s, e, q: SagaProgram(s, endpoint=e, search=q, demo_pool=pool),
    )
    line = json.loads((tmp_path / "run" / "predictions.jsonl").read_text().splitlines()[0])
    assert line["demos_dropped"] == 1
    prompts = json.dumps([h.get("messages") for h in lm.history], default=str)
    assert "Pythagorean" in prompts and twin not in prompts


def test_compiled_demos_are_filtered_too(store_path, endpoint):
    import dspy

    from saga_dspy.agent.program import SagaProgram

    program = SagaProgram(scripted_settings("test"), endpoint=endpoint)
    twin = dspy.Example(question="after whom is riemannian geometry named", trajectory="", next_tool_name="stop")
    other = dspy.Example(question="who wrote hamlet", trajectory="", next_tool_name="stop")
    program.react.react.demos = [twin, other]
    guard = QuestionGuard("After whom is the Riemannian geometry named?")
    demos, dropped = program._guarded_demos(None, "After whom is the Riemannian geometry named?", "SELECT", guard)
    assert demos == [other] and dropped == 1
    assert program._guarded_demos(None, "who painted guernica?", "SELECT", QuestionGuard("who painted guernica?")) == (
        None,
        0,
    )


def test_answer_type_demos_are_filtered_too(store_path, endpoint):
    """A compiled answer-type demo that is a twin of the evaluated question is never in the prompt."""
    import dspy

    from saga_dspy.agent.program import SagaProgram

    question = "Who founded the zebra sanctuary of the Serengeti?"  # "who": the answer-type step runs
    lm = ScriptedLM({question: [("stop", {})]}, {question: ("person", "Q5")})
    program = SagaProgram(scripted_settings("test"), endpoint=endpoint, lm=lm)
    twin = dspy.Example(
        question="who founded zebra sanctuary of serengeti", answer_type_label="person", answer_type_qid="Q5"
    ).with_inputs("question")
    other = dspy.Example(question="Who wrote Hamlet?", answer_type_label="person", answer_type_qid="Q5").with_inputs(
        "question"
    )
    program.answer_type.demos = [twin, other]
    pred = program(question=question, demo_guard=QuestionGuard(question))
    prompts = json.dumps([h.get("messages") for h in lm.history], default=str)
    assert "answer_type_label" in prompts  # the step ran
    assert "Who wrote Hamlet?" in prompts and twin.question not in prompts
    assert pred.demos_dropped == 1
    assert program.answer_type.demos == [twin, other]  # for this call only


def test_optimize_drops_train_questions_colliding_with_the_evaluated_test_split(store_path):
    from datasets import Dataset

    from saga_dspy.eval.loading.datasets import load_questions, load_records
    from saga_dspy.eval.loading.evalset import EvalSet
    from saga_dspy.eval.loading.splits import benchmark_firewall
    from saga_dspy.optimize.sets import drop_colliding

    q9 = load_records("qald9plus", "test")[:2]
    own = {
        **q9[0],
        "id": "own",
        "question": "a question about zebras no benchmark asks",
        "sparql": "ASK { wd:Q32789 ?p ?o }",
    }
    data = Dataset.from_list([*q9, own], features=load_questions("qald9plus", "test").features)
    evalset = EvalSet(data, "qald10", "train", None, None)
    kept, dropped = drop_colliding(evalset, benchmark_firewall(("qald9plus",), make_settings()))
    assert dropped == 2 and [i.id for i in kept.items] == ["own"]
    assert isinstance(kept.data, Dataset)
    assert drop_colliding(evalset, benchmark_firewall(("qald7",), make_settings()))[1] == 0


def test_an_eval_run_on_a_train_split_leaves_out_the_twins_of_test_questions():
    """QALD-10 train holds QALD-7 test's "Give me all cosmonauts.": an eval set of train leaves such twins out and
    counts them among the questions left out; the answerable dev split loses nothing."""
    from saga_dspy.eval.loading.evalset import describe_filter, load_eval_set

    train = load_eval_set(scripted_settings("train"), progress=False)
    questions = {item.question for item in train.items}
    assert "Give me all cosmonauts." not in questions
    assert "Who is the daughter of Ingrid Bergman married to?" in questions
    twins = train.filter_report["reasons"]["test_twin"]
    assert twins > 0 and train.filter_report["kept"] == len(train)
    assert train.filter_report["left_out"] == train.filter_report["total"] - len(train)
    assert f"twins of test questions: {twins}" in describe_filter(train)
    dev = load_eval_set(scripted_settings("dev"), progress=False)
    assert "test_twin" not in dev.filter_report["reasons"]
