"""Unit tests of the agent's pure parts: answer-type validation, query forms, tool-call parsing,
the trajectory budget, BM25 demo selection. No LM, no store."""

from __future__ import annotations

import json

import dspy
import pytest

from saga_dspy.agent.answer_type import AnswerTypeInfo, normalize_answer_label, normalize_answer_qid
from saga_dspy.agent.demos import BM25, DemoPool, record_to_example, tokenize
from saga_dspy.agent.parsing import normalize_tool_name, parse_pids, parse_tool_args
from saga_dspy.agent.query_form import decide_query_form, form_of, form_problem, rewrite_head, to_form
from saga_dspy.agent.trajectory import Step, render_trajectory
from saga_dspy.kg.results import Binding, SelectResult

# --- answer type -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "label, qid, want_label, want_qid",
    [
        ("person", "Q5", "person", "Q5"),
        ("Person (Q5)", "wd:Q5", "person", "Q5"),
        ("Yes/No", "Q5", "boolean", ""),  # scalar types never carry a class
        ("Number", "Q11229", "quantity", ""),
        ("date", "", "date", ""),
        ("the country", "http://www.wikidata.org/entity/Q6256", "country", "Q6256"),
        ("film", "Q11424abc", "film", "Q11424"),  # invalid QID dropped; a well-known class gets its own
        ("person", "Q11800", "person", "Q5"),  # a wrong QID for a well-known class is corrected
        ("films", "", "film", "Q11424"),
        ("castle", "Q23413abc", "castle", ""),  # invalid QID -> ''
        ("castle", "not a qid at all, really not", "castle", ""),
        ("", None, "", ""),
        (None, 42, "", ""),
        ("number of children", "", "quantity", ""),
        ("a very long and rambling type name with many words", "Q5", "very long and rambling", "Q5"),
    ],
)
def test_answer_type_is_normalised_never_raises(label, qid, want_label, want_qid):
    info = AnswerTypeInfo.from_raw(label, qid)
    assert (info.label, info.qid) == (want_label, want_qid)


def test_answer_type_model_validates_without_raising():
    assert AnswerTypeInfo(label="Yes/No", qid="garbage").model_dump() == {"label": "boolean", "qid": ""}
    assert AnswerTypeInfo(label="human", qid="Q5").render() == "human (Q5)"
    assert AnswerTypeInfo().render() == "unknown"


def test_freebase_type_ids():
    assert normalize_answer_qid("people.person", "freebase") == "people.person"
    assert normalize_answer_qid("/people/person", "freebase") == "people.person"
    assert normalize_answer_qid("Q5", "freebase") == ""


def test_scalar_synonyms():
    assert normalize_answer_label("yes or no") == "boolean"
    assert normalize_answer_label("YEAR") == "date"
    assert normalize_answer_label("integer") == "quantity"
    assert normalize_answer_label("text") == "string"


def test_query_form_from_answer_type():
    boolean = AnswerTypeInfo.from_raw("boolean", "")
    quantity = AnswerTypeInfo.from_raw("quantity", "")
    person = AnswerTypeInfo.from_raw("person", "Q5")
    assert decide_query_form(boolean, "Did Joe Cocker play at Woodstock?") == "ASK"
    assert decide_query_form(quantity, "How many children did Bach have?") == "COUNT"
    assert decide_query_form(quantity, "How high is the Cologne Cathedral?") == "SELECT"
    assert decide_query_form(person, "Who founded Tencent?") == "SELECT"
    assert decide_query_form(AnswerTypeInfo.from_raw("", ""), "Is Berlin a city?") == "ASK"
    # without an answer type (the no-answer-type ablation) the form comes from the wording alone
    assert decide_query_form(None, "Is Berlin a city?") == "ASK"
    assert decide_query_form(None, "How many children did Bach have?") == "COUNT"
    assert decide_query_form(None, "Who founded Tencent?") == "SELECT"


def test_parse_pids():
    assert parse_pids(["P31", "wdt:p19 x", "P31"]) == ["P31", "P19"]
    assert parse_pids('["P569", "P570"]') == ["P569", "P570"]
    assert parse_pids(None) == []
    assert parse_pids("nothing here") == []


# --- query forms ----------------------------------------------------------------------------


def test_form_of():
    assert form_of("SELECT ?x WHERE { wd:Q1 wdt:P31 ?x }") == "SELECT"
    assert form_of("PREFIX wd: <http://www.wikidata.org/entity/> ask { wd:Q1 ?p ?o }") == "ASK"
    assert form_of("SELECT (COUNT(DISTINCT ?x) AS ?n) WHERE { ?x wdt:P31 wd:Q5 }") == "COUNT"
    assert form_of("") is None
    assert form_of("hello") == "HELLO"


def test_rewrite_head():
    select = "SELECT DISTINCT ?x WHERE { wd:Q164815 wdt:P710 ?x . } LIMIT 5"
    assert rewrite_head(select, "ASK") == "ASK WHERE { wd:Q164815 wdt:P710 ?x . }"  # modifiers dropped
    assert rewrite_head("SELECT ?c ?cLabel WHERE { wd:Q1 wdt:P40 ?c }", "COUNT") == (
        "SELECT (COUNT(DISTINCT ?c) AS ?count) WHERE { wd:Q1 wdt:P40 ?c }"
    )
    assert rewrite_head("ASK { wd:Q1 wdt:P40 ?c }", "SELECT") == "SELECT DISTINCT ?c WHERE { wd:Q1 wdt:P40 ?c }"
    # not safe: two candidate variables, aggregates, grouping
    assert rewrite_head("ASK { ?a wdt:P40 ?c }", "SELECT") is None
    assert rewrite_head("SELECT ?a ?c WHERE { ?a wdt:P40 ?c }", "COUNT") is None
    assert rewrite_head("SELECT ?a WHERE { ?a wdt:P40 ?c } GROUP BY ?a", "ASK") is None
    prologue = "PREFIX wd: <http://www.wikidata.org/entity/>\nSELECT ?x WHERE { wd:Q1 wdt:P1 ?x }"
    assert rewrite_head(prologue, "ASK").startswith("PREFIX wd: <http://www.wikidata.org/entity/>\nASK WHERE {")


def test_form_problem():
    assert form_problem("ASK", "SELECT ?x WHERE { ?x ?p ?o }")
    assert form_problem("ASK", "ASK { ?x ?p ?o }") is None
    assert form_problem("SELECT", "ASK { ?x ?p ?o }")
    assert form_problem("ANY", "ASK { ?x ?p ?o }") is None
    entities = SelectResult(
        ["x"],
        [
            {"x": Binding("uri", "http://www.wikidata.org/entity/Q1")},
            {"x": Binding("uri", "http://www.wikidata.org/entity/Q2")},
        ],
    )
    number = SelectResult(["n"], [{"n": Binding("literal", "1082", "http://www.w3.org/2001/XMLSchema#decimal")}])
    assert form_problem("COUNT", "SELECT ?x WHERE { ?x ?p ?o }", entities)
    assert form_problem("COUNT", "SELECT ?n WHERE { wd:Q1 wdt:P1082 ?n }", number) is None
    assert form_problem("COUNT", "SELECT (COUNT(?x) AS ?n) WHERE { ?x ?p ?o }") is None
    # several stored numbers (an employee count per date) are the answer, not things to count
    dated = SelectResult(
        ["n"], [{"n": Binding("literal", v, "http://www.w3.org/2001/XMLSchema#decimal")} for v in ("47756", "190234")]
    )
    assert form_problem("COUNT", "SELECT ?n WHERE { wd:Q95 wdt:P1128 ?n }", dated) is None
    mixed = SelectResult(
        ["x", "n"],
        [
            {
                "x": Binding("uri", "http://www.wikidata.org/entity/Q1"),
                "n": Binding("literal", "3", "http://www.w3.org/2001/XMLSchema#integer"),
            }
        ],
    )
    assert form_problem("COUNT", "SELECT ?x ?n WHERE { ?x wdt:P1128 ?n }", mixed)


def test_a_counting_wording_is_grammar_or_data():
    """ "how many" counts by grammar; any other wording counts where the lexicon's train questions mostly had
    COUNT gold queries (MIN_SUPPORT of them), never by a hand rule."""
    from saga_dspy.grounding.lexicon import Lexicon

    quantity = AnswerTypeInfo.from_raw("quantity", "")
    lexicon = Lexicon(
        patterns={"how often did": {"form": {"COUNT": 3}}, "how often are": {"form": {"SELECT": 2}}},
    )
    assert decide_query_form(quantity, "How often did Jane Fonda marry?", lexicon) == "COUNT"
    assert decide_query_form(quantity, "How often are the Paralympic games held?", lexicon) == "SELECT"
    assert decide_query_form(quantity, "How often did Jane Fonda marry?") == "SELECT"  # no data, no rule
    assert decide_query_form(None, "How often did the Mongols try to invade Japan?", lexicon) == "COUNT"
    one = Lexicon(patterns={"how often did": {"form": {"COUNT": 1}}})
    assert decide_query_form(quantity, "How often did Jane Fonda marry?", one) == "SELECT"  # one question


# --- tool calls from LM text ---------------------------------------------------------------------

TOOLS = ["search_wikidata", "get_wikidata_entry", "get_property_examples", "execute_sparql", "stop"]


def test_normalize_tool_name():
    assert normalize_tool_name("execute_sparql", TOOLS) == "execute_sparql"
    assert normalize_tool_name(" `Execute_SPARQL` ", TOOLS) == "execute_sparql"
    assert normalize_tool_name("finish", TOOLS) is None  # no alias: the controller's field is a Literal of the names
    assert normalize_tool_name('search_wikidata("x")', TOOLS) == "search_wikidata"
    assert normalize_tool_name("fly_to_the_moon", TOOLS) is None


def test_the_tool_name_is_a_literal_of_the_tools_read_as_written():
    """As DSPy's ReAct: the controller's `next_tool_name` is a Literal of the tool names (the prompt says so); the
    program's adapter still reads what the model wrote, so the episode answers an unknown name with a step."""
    from typing import Literal, get_args

    from saga_dspy.agent.formatting import StringFieldsAdapter, read_as_text
    from saga_dspy.agent.react import SagaReAct
    from saga_dspy.signatures import SagaController
    from saga_dspy.tools.specs import TOOL_NAMES

    signature = SagaReAct(SagaController).react.signature
    assert signature.output_fields["next_tool_name"].annotation == Literal[TOOL_NAMES]
    assert get_args(signature.output_fields["next_tool_name"].annotation) == TOOL_NAMES
    assert read_as_text(signature).output_fields["next_tool_name"].annotation is str
    assert read_as_text(read_as_text(signature)) is read_as_text(signature)
    prompt = StringFieldsAdapter().format(signature, [], {k: "x" for k in signature.input_fields})
    assert "must exactly match (no extra characters) one of: " + "; ".join(TOOL_NAMES) in str(prompt)
    reply = "[[ ## next_thought ## ]]\nt\n\n[[ ## next_tool_name ## ]]\nfinish\n\n[[ ## next_tool_args ## ]]\n{}"
    assert StringFieldsAdapter().parse(signature, reply + "\n\n[[ ## completed ## ]]")["next_tool_name"] == "finish"
    with pytest.raises(Exception, match="next_tool_name"):  # DSPy's own reading refuses it
        dspy.ChatAdapter().parse(signature, reply + "\n\n[[ ## completed ## ]]")


def test_parse_tool_args():
    assert parse_tool_args({"query": "Riemann"}, ["query"]) == {"query": "Riemann"}
    assert parse_tool_args('{"sparql": "ASK { ?s ?p ?o }"}', ["sparql"]) == {"sparql": "ASK { ?s ?p ?o }"}
    assert parse_tool_args("{'qid': 'Q42'}", ["qid"]) == {"qid": "Q42"}
    assert parse_tool_args('{"id": "Q42"}', ["qid"]) == {"qid": "Q42"}  # one arg, other name
    assert parse_tool_args("SELECT ?x WHERE { ?x ?p ?o }", ["sparql"]) == {"sparql": "SELECT ?x WHERE { ?x ?p ?o }"}
    assert parse_tool_args("```sparql\nASK { ?s ?p ?o }\n```", ["sparql"]) == {"sparql": "ASK { ?s ?p ?o }"}
    assert parse_tool_args("{}", []) == {}
    assert parse_tool_args('{"query": "x", "junk": 1}', ["query"]) == {"query": "x"}
    assert parse_tool_args('{"query": "broken', ["query"]) == {"query": "broken"}  # repaired JSON


# --- trajectory budget ----------------------------------------------------------------------------------


def _steps(n: int, obs_len: int = 500) -> list[Step]:
    return [Step(f"thought {i}", "search_wikidata", {"query": f"q{i}"}, f"obs{i} " + "x" * obs_len) for i in range(n)]


def test_render_trajectory_keeps_recent_steps_whole():
    text = render_trajectory(_steps(8), None, keep_full=5)
    assert "Step 1\nThought: thought 0" in text
    assert "obs7 " + "x" * 500 in text  # recent: whole
    assert "obs0 " + "x" * 500 not in text  # old: summarised to one line
    assert render_trajectory([], None) == "(no steps yet)"


def test_render_trajectory_fits_the_budget():
    steps = _steps(12, 2000)
    for budget in (20000, 6000, 2500, 800):
        text = render_trajectory(steps, budget, observation_chars=3000)
        assert len(text) <= budget
        assert "Step 12" in text  # the latest step always survives
    small = render_trajectory(steps, 2500, observation_chars=3000)
    assert "left out to save space" in small


def test_a_stable_history_keeps_the_text_of_earlier_steps_from_step_to_step():
    steps = _steps(10)
    budget = 9000  # ~16 whole steps' worth of 550 characters: all ten fit
    window = [render_trajectory(steps[:n], budget) for n in range(6, 11)]
    stable = [render_trajectory(steps[:n], budget, keep_full=None) for n in range(6, 11)]
    # the paper's window of five whole steps re-writes an older step at every step: the prompt's prefix changes
    assert not any(later.startswith(earlier) for earlier, later in zip(window, window[1:]))
    # stable: each step's prompt starts with the previous one's, a local model's prefix cache holds it all
    assert all(later.startswith(earlier) for earlier, later in zip(stable, stable[1:]))
    assert "obs0 " + "x" * 500 in stable[-1]
    # over the budget, the oldest steps are summarised five at a time, and the text stays stable within a block
    tight = [render_trajectory(_steps(n), 4200, keep_full=None) for n in (8, 9)]
    assert all(len(t) <= 4200 and "obs4 " + "x" * 500 not in t and "obs5 " + "x" * 500 in t for t in tight)
    assert tight[1].startswith(tight[0])
    for budget in (2500, 800):  # and it still fits any budget
        text = render_trajectory(_steps(12, 2000), budget, observation_chars=3000, keep_full=None)
        assert len(text) <= budget and "Step 12" in text


# --- demos --------------------------------------------------------------------------------------------------


def test_bm25_prefers_shared_rare_words():
    docs = [
        tokenize(t)
        for t in ("Who is the mayor of Berlin?", "Who directed Titanic?", "Which films did James Cameron direct?")
    ]
    bm = BM25(docs)
    top = bm.top(tokenize("Who was the director of Titanic?"), 2)
    assert top[0][0] == 1
    assert bm.top(tokenize("zzz"), 3) == []


POOL = [
    {
        "id": "a",
        "question": "Who directed Titanic?",
        "sparql": "SELECT ?x WHERE { wd:Q44578 wdt:P57 ?x }",
        "steps": [
            {
                "thought": "find",
                "tool_name": "search_wikidata",
                "tool_args": {"query": "Titanic"},
                "observation": "Q44578 Titanic (1997 film)",
            },
            {
                "thought": "run",
                "tool_name": "execute_sparql",
                "tool_args": {"sparql": "SELECT ?x WHERE { wd:Q44578 wdt:P57 ?x }"},
                "observation": "Q42574",
            },
        ],
    },
    {
        "id": "b",
        "question": "Is Berlin the capital of Germany?",
        "query_form": "ASK",
        "steps": [
            {
                "thought": "ask",
                "tool_name": "execute_sparql",
                "tool_args": '{"sparql": "ASK { wd:Q183 wdt:P36 wd:Q64 }"}',
                "observation": "true",
            },
            {"thought": "done", "tool_name": "stop", "tool_args": {}, "observation": ""},
        ],
    },
    {"id": "c", "question": ""},  # unusable: skipped
]


def test_demo_pool_selects_similar_questions_as_fresh_examples():
    pool = DemoPool(POOL)
    assert len(pool) == 2
    picked = pool.select("Who was the director of the film Titanic?", 1)
    assert [d.question for d in picked] == ["Who directed Titanic?"]
    demo = picked[0]
    assert demo.next_tool_name == "stop"  # a stop step is appended to a trajectory without one
    assert "execute_sparql" in demo.trajectory and "Step 2" in demo.trajectory
    assert demo.query_form.startswith("SELECT")
    picked[0]["question"] = "mutated"
    assert pool.select("Who was the director of the film Titanic?", 1)[0].question == "Who directed Titanic?"
    ask = pool.select("Is Paris the capital of France?", 1)[0]
    assert ask.answer_type == "boolean" and ask.query_form.startswith("ASK")
    assert all(d.question != "Who directed Titanic?" for d in pool.select("Who directed Titanic?", 3))  # never itself


def test_demo_pool_from_file(tmp_path):
    path = tmp_path / "pool.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in POOL) + "\nnot json\n")
    pool = DemoPool.from_file(path, spinach=True)
    assert len(pool) == 2
    demo = pool.select("Who directed Titanic, the film?", 1)[0]
    assert set(demo.inputs().keys()) == {"question", "trajectory"}


def test_ready_step_examples_are_used_as_they_are():
    example = record_to_example(
        {"question": "q", "trajectory": "t", "next_thought": "x", "next_tool_name": "stop", "next_tool_args": {}}
    )
    assert isinstance(example, dspy.Example)
    assert set(example.inputs().keys()) == {"question", "trajectory"}


def test_demo_pool_fills_up_with_short_demos_of_the_same_form():
    pool = DemoPool(POOL)
    assert pool.select("After whom is the Riemannian geometry named?", 1) != []  # no shared word: a filler
    ask = pool.select("Riemannian geometry, eponym?", 1, "ASK")[0]
    assert ask.question == "Is Berlin the capital of Germany?"
    select = pool.select("Riemannian geometry, eponym?", 1, "SELECT")[0]
    assert select.question == "Who directed Titanic?"
    both = pool.select("Who directed Titanic, the film?", 2, "SELECT")  # the related one first, then a filler
    assert [d.question for d in both] == ["Who directed Titanic?", "Is Berlin the capital of Germany?"]
    assert pool.select("Is Berlin the capital of Germany?", 5, "ASK")[0].question == "Who directed Titanic?"
    assert len(pool.select("Is Berlin the capital of Germany?", 5, "ASK")) == 1  # never itself


def _solved(question, qid, pid):
    return {
        "question": question,
        "steps": [
            {"thought": "search", "tool_name": "search_wikidata", "tool_args": {"query": question}, "observation": qid},
            {"thought": "look", "tool_name": "get_wikidata_entry", "tool_args": {"qid": qid}, "observation": pid},
            {
                "thought": "run",
                "tool_name": "execute_sparql",
                "tool_args": {"sparql": f"SELECT ?x WHERE {{ wd:{qid} wdt:{pid} ?x }}"},
                "observation": "[OK]",
            },
            {"thought": "done", "tool_name": "stop", "tool_args": {}, "observation": ""},
        ],
    }


def test_the_demos_show_stop_then_the_query_then_the_lookup():
    pool = DemoPool(
        [
            _solved("Who directed Titanic?", "Q44578", "P57"),
            _solved("Who directed Alien?", "Q103569", "P57"),
            _solved("Who directed Heat?", "Q1051", "P57"),
        ]
    )
    demos = pool.select("Who directed Jaws?", 3)
    assert [d.next_tool_name for d in demos] == ["stop", "execute_sparql", "get_wikidata_entry"]
    assert demos[2].trajectory.count("Step ") == 1 and "search_wikidata" in demos[2].trajectory


# --- per-variant demonstrations (issue 11 §4) -------------------------------------------------------------------


def _bundled_pool_records(name="qald10"):
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "data" / "demos" / f"{name}.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _shown(example) -> str:
    return "\n".join(
        str(example.get(k, "")) for k in ("trajectory", "type_context", "knowledge_log", "answer_type", "query_form")
    )


def test_demos_show_only_what_the_variants_own_tools_produce():
    from saga_dspy.optimize.gold_teacher import POOL_OBSERVATION_CHARS
    from saga_dspy.variants import variant_of

    records = _bundled_pool_records()
    whole = (
        POOL_OBSERVATION_CHARS  # the observations as the pool keeps them (a demo's default clip hides the later lines)
    )
    full = DemoPool(records, variant=variant_of("full"), observation_chars=whole)
    full_text = "\n".join(_shown(r.example) + _shown(r.execute or r.example) for r in full.records)
    assert "Type filter" in full_text and "domain:" in full_text
    # the answer type is its own field; the type context no longer repeats it (grounding.state.controller_state)
    assert any(r.example["answer_type"] != "unknown" for r in full.records) and "Expected answer type" not in full_text

    def text_of(name):
        pool = DemoPool(records, variant=variant_of(name), observation_chars=whole)
        assert len(pool) == len(full)  # nothing dropped: the bundled pools have no [BLOCKED] step
        return "\n".join(_shown(r.example) + _shown(r.execute or r.example) for r in pool.records)

    spinach = text_of("spinach")
    assert "Incoming:" in full_text and "← " in full_text
    for marker in ("Type filter", "domain:", "range:", "★", "e.g. SELECT", "Expected answer type", "Incoming:", "← "):
        assert marker not in spinach, marker
    no_filter = text_of("no-type-filter")
    assert "Type filter" not in no_filter and "domain:" in no_filter
    no_prior = text_of("no-answer-type")
    assert "★" not in no_prior and "Expected answer type" not in no_prior and "domain:" in no_prior
    assert all(
        r.example["answer_type"] == "unknown"
        for r in DemoPool(records[:5], variant=variant_of("no-answer-type")).records
    )
    no_state = DemoPool(records[:5], variant=variant_of("no-type-state")).records
    assert all(r.example["knowledge_log"] == "(not kept in this configuration)" for r in no_state)
    no_form = DemoPool(records[:5], variant=variant_of("no-query-form")).records
    assert all("not fixed" in r.example["query_form"] for r in no_form)


def test_a_blocked_step_cannot_be_shown_without_the_conflict_check():
    from saga_dspy.variants import variant_of

    record = {
        "question": "Where was Star Wars born?",
        "sparql": "SELECT ?x WHERE { wd:Q17738 wdt:P57 ?x }",
        "steps": [
            {
                "thought": "t",
                "tool_name": "execute_sparql",
                "tool_args": {"sparql": "SELECT ?x WHERE { wd:Q17738 wdt:P19 ?x }"},
                "observation": "[BLOCKED] place of birth (P19) needs a person",
            },
            {
                "thought": "t",
                "tool_name": "execute_sparql",
                "tool_args": {"sparql": "SELECT ?x WHERE { wd:Q17738 wdt:P57 ?x }"},
                "observation": "?x = Q38222",
            },
        ],
    }
    assert len(DemoPool([record], variant=variant_of("full"))) == 1
    pool = DemoPool([record], variant=variant_of("no-type-filter"))
    assert len(pool) == 0 and pool.dropped == 1


def test_a_variants_own_pool_file_is_preferred(tmp_path):
    from saga_dspy.agent.pools import load_demo_pool
    from saga_dspy.config import Settings
    from saga_dspy.variants import variant_of

    demos = tmp_path / "demos"
    demos.mkdir()
    full = {
        "question": "Who founded Rome?",
        "steps": [
            {
                "thought": "t",
                "tool_name": "execute_sparql",
                "tool_args": {"sparql": "SELECT ?x WHERE { wd:Q220 wdt:P112 ?x }"},
                "observation": "full tools",
            }
        ],
    }
    own = {**full, "question": "Who founded Carthage?", "steps": [{**full["steps"][0], "observation": "spinach tools"}]}
    (demos / "qald10.jsonl").write_text(json.dumps(full) + "\n")
    settings = Settings(data_dir=tmp_path, dataset="qald10", demo_picks=False)
    assert load_demo_pool(settings, variant=variant_of("spinach")).records[0].question == "Who founded Rome?"
    (demos / "qald10.spinach.jsonl").write_text(json.dumps(own) + "\n")
    assert load_demo_pool(settings, variant=variant_of("spinach")).records[0].question == "Who founded Carthage?"
    assert load_demo_pool(settings, variant=variant_of("full")).records[0].question == "Who founded Rome?"
    # the default: full takes the pool recorded with the candidates shown; spinach, which shows none, its own
    picks = {**full, "question": "Who founded Alexandria?"}
    (demos / "qald10.picks.jsonl").write_text(json.dumps(picks) + "\n")
    settings = settings.model_copy(update={"demo_picks": True})
    assert load_demo_pool(settings, variant=variant_of("full")).records[0].question == "Who founded Alexandria?"
    assert load_demo_pool(settings, variant=variant_of("spinach")).records[0].question == "Who founded Carthage?"


def test_to_form_rewrites_only_a_query_of_another_form():
    entities = SelectResult(["x"], [{"x": Binding("uri", "http://www.wikidata.org/entity/Q1")}])
    number = SelectResult(["n"], [{"n": Binding("literal", "3", "http://www.w3.org/2001/XMLSchema#integer")}])
    listing = "SELECT DISTINCT ?x WHERE { wd:Q41142 wdt:P26 ?x }"
    assert to_form("COUNT", listing, entities) == "SELECT (COUNT(DISTINCT ?x) AS ?count) WHERE { wd:Q41142 wdt:P26 ?x }"
    assert to_form("COUNT", "SELECT ?n WHERE { wd:Q1 wdt:P1082 ?n }", number) is None  # the stored number answers
    assert to_form("SELECT", listing, entities) is None
    assert to_form("ASK", listing, entities) == "ASK WHERE { wd:Q41142 wdt:P26 ?x }"
    assert to_form("COUNT", "SELECT ?a ?b WHERE { ?a wdt:P26 ?b }", entities) is None  # no safe rewrite
