"""The per-decision compile on the embedded sample with scripted LMs: each decision's examples built from QALD-10 gold
(cached, firewalled), the choice metrics, the decision modules prompting as the agent does, a compile per optimizer
that changes the module, and the assembled program's save / load, run by eval with its compiled demos."""

from __future__ import annotations

import argparse
import dataclasses
import io
import json
import re
from pathlib import Path

import dspy
import pytest
from conftest import make_settings
from helpers.scripted_lm import PROPOSAL_FIELDS, ScriptedLM

from saga_dspy.eval.loading.firewall import normalise_text

STEP_HEADER = re.compile(r"(?m)^Step \d+$")
NEXT_LOOKUP = re.compile(r'Next: get_wikidata_entry\(\{"qid": "(\w+)"\}\)')
WRONG = "SELECT ?x WHERE { VALUES ?x { wd:Q42 } }"


@pytest.fixture(scope="module")
def dec_settings(store_path):
    return make_settings(dataset="qald10", split="train", demos=0, max_steps=6, mlflow=False, lm="scripted")


@pytest.fixture(scope="module")
def sets(dec_settings):
    from saga_dspy.optimize.sets import build_sets

    return build_sets(dec_settings, valset_size=8, seed=0)


@pytest.fixture(scope="module")
def program(dec_settings, endpoint, search):
    from saga_dspy.agent.program import SagaProgram

    return SagaProgram(dec_settings, endpoint=endpoint, search=search)


@pytest.fixture(scope="module")
def data(program, sets):
    """The examples of every decision of the sets' train and valset questions (the cache, where built before)."""
    from saga_dspy.optimize.decision_data import build_decision_data

    train = build_decision_data(program, sets.train.items, name=sets.train.name)
    val = build_decision_data(program, sets.valset.items, name=f"{sets.valset.name}-valset")
    return train, val


def last_step(trajectory: str) -> str:
    return STEP_HEADER.split(trajectory or "")[-1]


class DecisionLM(ScriptedLM):
    """Makes the gold-looking choice only when the turn is informed (it shows demos, or its instructions hold `cue`):
    after a search it looks up the hit the search's Next line names (else searches again), after a lookup that showed
    candidates it stops with candidate 1 (else executes a wrong query); the answer-type step names `answer_types`'
    type (else `thing`). A fresh question searches `searches[question]`. Each controller turn is recorded as (the
    state, demos shown, instructions)."""

    def __init__(self, *, cue: str | None = None, by_demos: bool = True, answer_types=None, searches=None):
        super().__init__({}, answer_types)
        self.cue, self.by_demos, self.searches, self.turns = cue, by_demos, searches or {}, []

    def informed(self) -> bool:
        return (self.by_demos and self.demos_shown > 0) or (self.cue is not None and self.cue in self.system_prompt)

    def respond(self, outputs, fields):
        if "answer_type_label" in outputs and not self.informed():
            return {"answer_type_label": "thing", "answer_type_qid": ""}
        if "next_tool_name" not in outputs:
            return super().respond(outputs, fields)
        last = last_step(fields.get("trajectory", ""))
        state = "entity" if "Action: search_wikidata" in last else "candidate" if "Candidate queries" in last else "-"
        self.turns.append((state, self.demos_shown, self.system_prompt, layout(self.user_prompt)))
        hit = NEXT_LOOKUP.search(last)
        if state == "entity":
            action = ("get_wikidata_entry", {"qid": hit.group(1)}) if self.informed() and hit else None
            return reply(*(action or ("search_wikidata", {"query": "something else"})))
        if state == "candidate":
            return reply("stop", {"candidate": 1}) if self.informed() else reply("execute_sparql", {"sparql": WRONG})
        if "Action: execute_sparql" in last or "Action: stop" in last:
            return reply("stop", {})
        return reply("search_wikidata", {"query": self.searches.get(fields.get("question", ""), "x")})


def layout(user: str) -> tuple[tuple[str, ...], str]:
    """A prompt's input fields in order and its closing line: how a turn is laid out, whatever its values."""
    return tuple(re.findall(r"\[\[ ## (\w+) ## \]\]", user)), user.strip().splitlines()[-1] if user.strip() else ""


def reply(tool: str, args: dict) -> dict:
    return {"next_thought": f"I call {tool}.", "next_tool_name": tool, "next_tool_args": json.dumps(args)}


def searched(example) -> str:
    return json.loads(re.search(r"search_wikidata\((\{.*?\})\)", example.inputs["trajectory"]).group(1))["query"]


# --- the datasets -------------------------------------------------------------------------------------------


def test_each_decision_gets_examples_from_gold(data):
    from saga_dspy.agent.decisions import DECISIONS

    train, val = data
    assert all(train.sizes()[d] > 0 for d in DECISIONS) and val.sizes()["entity"] > 0
    entity = train.of("entity")[0]
    assert entity.choice in entity.options and entity.choice in entity.gold_sparql
    assert "Action: search_wikidata" in last_step(entity.inputs["trajectory"])
    assert entity.output["next_tool_name"] == "get_wikidata_entry"
    assert json.loads(entity.output["next_tool_args"]) == {"qid": entity.choice}
    assert set(entity.inputs) == {
        "question",
        "answer_type",
        "query_form",
        "type_context",
        "knowledge_log",
        "trajectory",
    }
    candidate = next(e for e in train.of("candidate") if e.choice != "none")
    assert "Candidate queries" in last_step(candidate.inputs["trajectory"]) and candidate.choice in candidate.options
    assert json.loads(candidate.output["next_tool_args"]) == {"candidate": int(candidate.choice)}
    assert f"candidate {candidate.choice}'s answers score F1" in candidate.why
    answer_type = train.of("answer-type")[0]
    assert set(answer_type.inputs) == {"question"} and answer_type.choice in answer_type.accepted
    # why a question gave no example of a decision is counted, never silent
    assert train.skipped.get("answer-type: the cue decides", 0) > 0


def test_where_no_shown_candidate_answers_the_gold_choice_is_none_of_them(program, data):
    """Leaving the candidates is a choice the dataset teaches and scores: only once every gold entity was looked up
    (else the gold reply would name an id no search found), its reply executing the gold query."""
    from saga_dspy.optimize.gold_teacher import compact_query, entity_constants

    train, _ = data
    left = [e for e in train.of("candidate") if e.choice == "none"]
    assert left, "no train question whose shown candidates all miss the gold answers"
    for example in left:
        assert example.output["next_tool_name"] == "execute_sparql"
        assert json.loads(example.output["next_tool_args"]) == {"sparql": example.gold_sparql}
        assert example.gold_sparql == compact_query(example.gold_sparql) and example.options
        assert "Candidate queries" in last_step(example.inputs["trajectory"])
        looked_up = re.findall(r'get_wikidata_entry\(\{"qid": "(\w+)"\}\)', example.inputs["trajectory"])
        assert set(entity_constants(example.gold_sparql)) <= set(looked_up)


def test_a_dataset_is_cached_and_read_back_without_building(program, sets, data, monkeypatch):
    from saga_dspy.optimize import decision_data

    train, _ = data
    assert train.cache_file and decision_data.read_cached(Path(train.cache_file)).sizes() == train.sizes()

    def no_build(*args, **kwargs):
        raise AssertionError("the cached dataset was built again")

    monkeypatch.setattr(decision_data, "question_examples", no_build)
    again = decision_data.build_decision_data(program, sets.train.items, name=sets.train.name)
    assert [e.to_dict() for e in again.examples] == [e.to_dict() for e in train.examples]
    other = decision_data.cache_path(program.settings.model_copy(update={"shown_candidates": 1}), "x", [])
    assert other.name != decision_data.cache_path(program.settings, "x", []).name  # the settings are in the key


def test_no_dev_or_test_question_enters_a_dataset(program, sets, data):
    from saga_dspy.optimize.decision_sets import decision_sets

    held = sets.held_out  # every test and dev question of the graph's benchmarks (`eval.splits.held_out_firewall`)
    assert len(held) > len(sets.valset) + len(sets.report)
    train, _ = data
    assert not [e.id for e in train.examples if held.collides(e.question, e.gold_sparql)]
    # dev questions that reached the train items (a stale cache, a data file) are dropped before becoming demos
    polluted = dataclasses.replace(sets, train=sets.valset)
    chosen = decision_sets(program, polluted, "entity")
    assert chosen.train == [] and chosen.firewall_dropped == len(chosen.valset) > 0


def test_labelled_demos_show_every_kind_of_choice_before_any_twice(program, sets):
    from collections import Counter

    from saga_dspy.optimize.decision_sets import decision_sets

    data = decision_sets(program, sets, "candidate")
    kinds = Counter(e.kind for e in data.train)
    assert "none" in kinds and len(kinds) >= 2 and max(kinds.values()) > min(kinds.values())
    demos = data.labelled(len(kinds), seed=0)
    assert sorted(d.choice for d in demos) == sorted(kinds)  # each kind once, the rare ones too
    more = data.labelled(len(kinds) + 1, seed=0)
    assert [d.choice for d in more].count(kinds.most_common(1)[0][0]) == 2  # then the most frequent kind again
    assert [d.id for d in data.labelled(3, seed=0)] == [d.id for d in data.labelled(3, seed=0)]  # seeded
    entity = decision_sets(program, sets, "entity").train
    assert {e.kind for e in entity} <= {f"hit {n}" for n in range(1, 20)}  # an entity's kind is its hit's rank


# --- the metric -----------------------------------------------------------------------------------------------


def test_the_metric_reads_each_decisions_choice():
    from saga_dspy.optimize.decision_metric import choice_score, decision_feedback_metric, make_decision_metric

    entity = dspy.Example(choice="Q928", accepted=["Q928"], why="the gold query uses Q928").with_inputs()
    assert choice_score("entity", entity, reply("get_wikidata_entry", {"qid": "wd:Q928"})) == 1.0
    assert choice_score("entity", entity, reply("get_wikidata_entry", {"qid": "Q7546"})) == 0.0
    assert choice_score("entity", entity, reply("search_wikidata", {"query": "Q928"})) == 0.0
    candidate = dspy.Example(choice="2", accepted=["2", "3"], why="best F1").with_inputs()
    for args, score in (({"candidate": 2}, 1.0), ({"candidate": "#3"}, 1.0), ({"sparql": "2"}, 1.0), ({}, 0.0)):
        assert choice_score("candidate", candidate, reply("stop", args)) == score
    left = dspy.Example(choice="none", accepted=[], why="no candidate answers").with_inputs()
    assert choice_score("candidate", left, reply("execute_sparql", {"sparql": WRONG})) == 1.0
    assert choice_score("candidate", left, reply("stop", {"sparql": WRONG})) == 1.0  # its own query, not a candidate
    assert choice_score("candidate", left, reply("stop", {"candidate": 1})) == 0.0
    assert choice_score("candidate", left, reply("stop", {})) == 0.0  # no choice: the program would run candidate 1
    assert choice_score("candidate", left, {"next_tool_name": "", "next_tool_args": "{}"}) == 0.0
    assert (
        "leave the shown candidates"
        in decision_feedback_metric("candidate")(left, reply("stop", {"candidate": 1})).feedback
    )
    typed = dspy.Example(choice="Q515", accepted=["Q515", "Q486972"], why="cities").with_inputs()
    assert choice_score("answer-type", typed, {"answer_type_label": "city", "answer_type_qid": "Q515"}) == 1.0
    assert choice_score("answer-type", typed, {"answer_type_label": "human settlement", "answer_type_qid": "Q486972"})
    assert choice_score("answer-type", typed, {"answer_type_label": "country", "answer_type_qid": "Q6256"}) == 0.0
    assert make_decision_metric("candidate")(candidate, reply("stop", {"candidate": 2}), trace=[]) is True
    out = decision_feedback_metric("entity")(entity, reply("get_wikidata_entry", {"qid": "Q7546"}))
    assert out.score == 0.0 and 'get_wikidata_entry with {"qid": "Q928"}' in out.feedback
    assert "the gold query uses Q928" in out.feedback and "Q7546" in out.feedback


# --- the modules prompt as the agent does -------------------------------------------------------------------


@pytest.mark.parametrize("defaults", [False, True], ids=["dspy-layout", "default-layout"])
def test_a_decision_module_prompts_as_the_agents_turn_does(dec_settings, data, sets, endpoint, search, defaults):
    """The module's call on an entity example and the agent's own turn after that search: the same instructions,
    demos, input fields and closing line, default or compiled; in DSPy's layout and in the program's default one
    (the state in the trajectory, the short closing line)."""
    from saga_dspy.agent.decisions import CompiledDecision, CompiledDecisions
    from saga_dspy.agent.program import SagaProgram
    from saga_dspy.config import Settings
    from saga_dspy.optimize.decision_data import question_examples
    from saga_dspy.optimize.decision_modules import decision_module

    train, val = data
    example = val.of("entity")[0]
    if defaults:
        layout_fields = ("state_in_trajectory", "closing_line", "compact_observations", "shown_candidates")
        dec_settings = dec_settings.model_copy(
            update={k: Settings.model_fields[k].default for k in layout_fields}
        )  # fmt: skip
        assert dec_settings.state_in_trajectory and dec_settings.closing_line == "short"
        walked = SagaProgram(dec_settings, endpoint=endpoint, search=search)
        item = next(i for i in sets.valset.items if i.question == example.question)
        example = next(e for e in question_examples(walked, item)[0] if e.decision == "entity")
        assert "type_context" not in example.inputs
    program = SagaProgram(dec_settings, endpoint=endpoint, search=search)
    compiled = SagaProgram(dec_settings, endpoint=endpoint, search=search)
    demos = tuple({**e.inputs, **e.output} for e in train.of("entity")[:2])
    compiled.use_decisions(CompiledDecisions((CompiledDecision("entity", "ENTITY INSTRUCTIONS", demos),)))
    for prog, shown in ((program, 0), (compiled, 2)):
        lm = DecisionLM(searches={example.question: searched(example)})
        with dspy.context(lm=lm):
            decision_module(prog, "entity")(**example.inputs)
            module_turn = lm.turns[-1]
            prog(question=example.question)
        agent_turn = next(t for t in lm.turns[1:] if t[0] == "entity")
        assert module_turn == agent_turn and module_turn[1] == shown
        assert ("ENTITY INSTRUCTIONS" in agent_turn[2]) is (prog is compiled)
        assert ("type_context" in agent_turn[3][0]) is (not defaults)
        others = [t for t in lm.turns[1:] if t[0] != "entity"]
        assert others and all(t[1] == 0 and "ENTITY INSTRUCTIONS" not in t[2] for t in others)  # only its turns


# --- compiles ---------------------------------------------------------------------------------------------------


@pytest.fixture
def same_sets(sets, monkeypatch):
    """The compiles draw the module's sets (the same flags: valset_size 8, seed 0) instead of loading them again."""
    from saga_dspy.optimize import decision_compile

    def build_sets(settings, **kwargs):
        assert kwargs.get("valset_size") == 8 and not kwargs.get("seed")
        return sets

    monkeypatch.setattr(decision_compile, "build_sets", build_sets)  # `decisions --build-only` draws them there too


def compile_(settings, tmp_path, lm, endpoint, search, *, reflection_lm=None, prompt_lm=None, **options):
    from saga_dspy.optimize.decision_compile import DecisionOptions, compile_decision

    stream = io.StringIO()
    result = compile_decision(
        settings,
        DecisionOptions(**{"valset_size": 8, **options}),
        out=tmp_path / "o",
        lm=lm,
        prompt_lm=prompt_lm,
        reflection_lm=reflection_lm,
        endpoint=endpoint,
        search=search,
        progress=False,
        stream=stream,
    )
    return result, stream.getvalue()


def dev_questions(settings) -> set[str]:
    from saga_dspy.eval.loading.datasets import load_records

    return {normalise_text(r["question"]) for r in load_records("qald10", "dev", settings)}


def test_random_search_compiles_the_entity_decision_and_eval_runs_the_assembled_program(
    dec_settings, data, endpoint, search, tmp_path, same_sets
):
    from saga_dspy.agent.program import SagaProgram
    from saga_dspy.eval.running.runner import evaluate
    from saga_dspy.optimize.decision_assemble import assemble

    lm = DecisionLM()  # right only when shown demos: the default (no demos) never is
    result, printed = compile_(
        dec_settings, tmp_path, lm, endpoint, search, decision="entity", num_candidates=3, max_labeled=2, max_demos=2
    )
    assert "estimate: about" in printed and "entity decisions: train" in printed
    default, *compiled = result.candidates
    assert default.accuracy == 0.0 and max(c.accuracy for c in compiled) > 0.5 and result.kept
    assert result.metrics["compiled_accuracy"] > result.metrics["default_accuracy"] == 0.0
    saved = json.loads((result.out_dir / "decision.json").read_text())
    assert saved["kept"] and saved["decision"] == "entity" and saved["state"]["demos"]
    config = json.loads((result.out_dir / "config.json").read_text())
    assert set(config["sets"]["report"]["ids"]).isdisjoint(config["sets"]["valset"]["ids"])
    # the assembled program: which decisions are compiled, their demos, as eval --program loads it
    assembled = assemble(dec_settings, [result.out_dir], tmp_path / "assembled", stream=io.StringIO())
    state = json.loads(assembled.program_path.read_text())["saga_decisions"]
    assert state["compiled"] == ["entity"] and state["decisions"]["entity"]["demos"] == saved["state"]["demos"]
    loaded = SagaProgram(dec_settings.model_copy(update={"program": assembled.program_path}), endpoint, search)
    demos = loaded.compiled_decisions.get("entity").demos
    assert list(demos) == saved["state"]["demos"] and not loaded.react.react.demos  # the controller's own: none
    assert not {normalise_text(d["question"]) for d in demos} & dev_questions(dec_settings)  # no dev question
    # eval --program: the turn after each search shows the compiled demos, and the lookup it makes is right
    _, val = data
    examples = [e for e in val.of("entity") if e.id.endswith("#entity-1")][:2]  # two questions, their first
    ids = [e.id.split("#")[0] for e in examples]
    eval_lm = DecisionLM(searches={e.question: searched(e) for e in examples})
    run_settings = dec_settings.model_copy(update={"program": assembled.program_path, "split": "dev"})
    evaluate(run_settings, ["full"], out=tmp_path / "eval", ids=ids, lm=eval_lm, endpoint=endpoint, search=search,
             progress=False, stream=io.StringIO())  # fmt: skip
    entity_turns = [t for t in eval_lm.turns if t[0] == "entity"]
    assert entity_turns and all(t[1] == len(demos) for t in entity_turns)
    assert all(t[1] == 0 for t in eval_lm.turns if t[0] != "entity")
    lines = [json.loads(x) for x in (tmp_path / "eval" / "predictions.jsonl").read_text().splitlines()]
    looked_up = [
        s["tool_args"].get("qid")
        for line in lines
        for s in line["trajectory"]
        if s["tool_name"] == "get_wikidata_entry"
    ]
    assert {e.choice for e in examples} <= set(looked_up)


def test_compare_runs_the_compiled_program_against_the_default_on_the_report_set_and_resumes(
    dec_settings, endpoint, search, tmp_path, same_sets
):
    from saga_dspy.eval.errors import EvalError
    from saga_dspy.optimize.comparison import check_report_dirs, compare_compiled

    result, _ = compile_(
        dec_settings, tmp_path, DecisionLM(), endpoint, search, decision="entity", num_candidates=2, max_labeled=2
    )
    assert result.kept
    report_ids = json.loads((result.out_dir / "config.json").read_text())["sets"]["report"]["ids"][:4]
    config = json.loads((result.out_dir / "config.json").read_text())
    config["sets"]["report"]["ids"] = report_ids  # four report questions keep the test short
    (result.out_dir / "config.json").write_text(json.dumps(config))
    lm = DecisionLM()
    out = compare_compiled(dec_settings, result.out_dir, lm=lm, endpoint=endpoint, search=search)
    assert out["ids"] == report_ids and out["paired"]["n"] == len(report_ids)
    base = result.out_dir / "report"
    lines = {role: [json.loads(x) for x in (base / role / "predictions.jsonl").read_text().splitlines()]
             for role in ("default", "compiled")}  # fmt: skip
    assert all(sorted(line["id"] for line in lines[role]) == sorted(report_ids) for role in lines)

    def lookups(role):  # the lookups the scripted LM chose (not a repeated search the program turned into one)
        return [s for line in lines[role] for s in line["trajectory"] if s["thought"] == "I call get_wikidata_entry."]

    # only the compiled program's turns after a search show the compiled demos: the scripted LM looks up then
    assert lookups("compiled") and not lookups("default")
    assert json.loads((base / "compiled" / "config.json").read_text())["settings"]["program"].endswith("program.json")
    # run again without --resume: refused before anything runs, the answers kept; --overwrite would start again
    before = (base / "default" / "predictions.jsonl").read_bytes()
    with pytest.raises(EvalError, match="--resume"):
        compare_compiled(dec_settings, result.out_dir, lm=DecisionLM(), endpoint=endpoint, search=search)
    assert (base / "default" / "predictions.jsonl").read_bytes() == before
    assert check_report_dirs(dec_settings, result.out_dir, (), resume=False, overwrite=True)[0][2] == report_ids
    # resumed, nothing is run again and the table is the same
    again_lm = DecisionLM()
    again = compare_compiled(
        dec_settings, result.out_dir, lm=again_lm, endpoint=endpoint, search=search, resume=True, stream=io.StringIO()
    )
    assert again_lm.turns == [] and again["metrics"] == out["metrics"]


def test_compare_joins_another_benchmarks_split_and_pools_the_interval(
    dec_settings, endpoint, search, tmp_path, same_sets
):
    from saga_dspy.optimize.comparison import compare_compiled

    result, _ = compile_(
        dec_settings, tmp_path, DecisionLM(), endpoint, search, decision="entity", num_candidates=2, max_labeled=2
    )
    config = json.loads((result.out_dir / "config.json").read_text())
    config["sets"]["report"]["ids"] = config["sets"]["report"]["ids"][:2]
    (result.out_dir / "config.json").write_text(json.dumps(config))
    settings = dec_settings.model_copy(update={"limit": 2})
    out = compare_compiled(
        settings, result.out_dir, also=[("qald7", "dev")], lm=DecisionLM(), endpoint=endpoint, search=search,
        stream=io.StringIO(),
    )  # fmt: skip
    extra = result.out_dir / "report-qald7-dev"
    lines = [json.loads(x) for x in (extra / "compiled" / "predictions.jsonl").read_text().splitlines()]
    assert len(lines) == 2 and (extra / "default" / "predictions.jsonl").is_file()
    assert json.loads((extra / "compiled" / "config.json").read_text())["settings"]["dataset"] == "qald7"
    pooled = json.loads((result.out_dir / "report-pooled.json").read_text())
    assert (
        pooled == out["pooled"]
        and pooled["paired"]["n"] == 4
        and set(pooled["sets"])
        == {
            out["set"],
            out["sets"]["report-qald7-dev"]["set"],
        }
    )
    per_set = [out["sets"][name]["paired"] for name in ("report", "report-qald7-dev")]
    assert pooled["paired"]["wins"] == sum(p["wins"] for p in per_set)


@pytest.mark.parametrize(
    ("also", "refused"),
    [(("qald10", "dev"), "chose on"), (("qald10", "train"), "chose on"), (("cwq", "val"), "freebase"),
     (("qald7", "nope"), "no split")],
)  # fmt: skip
def test_compare_refuses_a_split_the_compile_chose_on_or_another_graphs(also, refused):
    from saga_dspy.optimize.comparison import also_checked
    from saga_dspy.optimize.decision_cli import bench_split
    from saga_dspy.optimize.sets import OptimizeError

    with pytest.raises(OptimizeError, match=refused):
        also_checked("qald10", [also])
    with pytest.raises(argparse.ArgumentTypeError, match="BENCHMARK/SPLIT"):
        bench_split("qald7")
    assert bench_split("qald7/dev") == ("qald7", "dev")
    assert also_checked("qald10", [("qald10", "test"), ("qald7", "dev"), ("qald7", "dev")]) == [
        ("qald10", "test"),
        ("qald7", "dev"),
    ]


def test_gepa_rewrites_the_candidate_decisions_instructions_on_its_feedback(
    dec_settings, data, endpoint, search, tmp_path, same_sets
):
    lm = DecisionLM(cue="GEPA TUNED")  # the default stays uninformed: no demos, no cue
    reflection = dspy.utils.DummyLM(
        {"": {"new_instruction": "GEPA TUNED: stop with the candidate whose answers fit."}}, adapter=dspy.JSONAdapter()
    )
    result, _ = compile_(
        dec_settings, tmp_path, lm, endpoint, search, decision="candidate", optimizer="gepa", max_metric_calls=40,
        reflection_lm=reflection,
    )  # fmt: skip
    default, best = result.candidates
    valset = data[1].of("candidate")
    left = sum(e.choice == "none" for e in valset) / len(valset)
    taken = sum(e.choice == "1" or "1" in e.accepted for e in valset) / len(valset)
    # uninformed, the LM leaves every candidate (right only where none answers); tuned, it stops with candidate 1
    assert default.accuracy == pytest.approx(left) and best.accuracy == pytest.approx(taken) and result.kept
    reflected = json.dumps(reflection.history[0]["messages"])
    assert "The gold choice is stop with" in reflected  # the feedback names the gold choice and why
    saved = json.loads((result.out_dir / "decision.json").read_text())
    assert saved["state"]["instructions"].startswith("GEPA TUNED")


def test_mipro_compiles_the_answer_type_decision(dec_settings, data, endpoint, search, tmp_path, same_sets):
    from saga_dspy.agent.program import SagaProgram

    train, val = data
    gold = {
        e.question: (e.output["answer_type_label"], e.output["answer_type_qid"])
        for e in [*train.examples, *val.examples]
        if e.decision == "answer-type"
    }
    lm = DecisionLM(answer_types=gold, cue="tuned by MIPRO", by_demos=False)  # right only with a proposed instruction
    proposals = dspy.utils.DummyLM(
        {"": dict.fromkeys(PROPOSAL_FIELDS, "Name the class of the answer, as tuned by MIPRO.")}
    )
    result, _ = compile_(
        dec_settings, tmp_path, lm, endpoint, search, prompt_lm=proposals, decision="answer-type", optimizer="mipro",
        auto="none", num_trials=3,
    )  # fmt: skip
    default, best = result.candidates
    assert default.accuracy == 0.0 < best.accuracy and result.kept
    saved = json.loads((result.out_dir / "decision.json").read_text())
    assert saved["decision"] == "answer-type" and saved["state"]["instructions"].endswith("as tuned by MIPRO.")
    loaded = SagaProgram(dec_settings.model_copy(update={"program": result.program_path}), endpoint, search)
    assert loaded.answer_type.signature.instructions.endswith("as tuned by MIPRO.")  # the predictor's own now
    assert loaded.compiled_decisions.names() == ["answer-type"]


def test_a_decision_no_better_than_the_default_is_left_out(dec_settings, endpoint, search, tmp_path, same_sets):
    from saga_dspy.optimize.decision_assemble import assemble

    lm = DecisionLM(by_demos=False)  # never informed: every candidate scores what the default does
    result, printed = compile_(dec_settings, tmp_path, lm, endpoint, search, decision="entity", num_candidates=3)
    assert not result.kept and "best so far" not in printed.split("candidate 1")[-1]
    assert "saga_decisions" not in json.loads(result.program_path.read_text())  # the default program, as it was
    assert not json.loads((result.out_dir / "decision.json").read_text())["kept"]
    left = assemble(dec_settings, [result.out_dir], tmp_path / "a", stream=io.StringIO())
    assert left.decisions.names() == [] and left.left_out
    taken = assemble(dec_settings, [result.out_dir], tmp_path / "b", include_all=True, stream=io.StringIO())
    assert taken.decisions.names() == ["entity"]


def test_ctrl_c_keeps_the_best_decision_so_far(dec_settings, endpoint, search, tmp_path, same_sets, monkeypatch):
    from saga_dspy.agent.program import SagaProgram
    from saga_dspy.errors import Interrupted
    from saga_dspy.optimize import decision_compile

    real = decision_compile._DecisionCompile.score

    def score(self, name, module):
        if len(self.scored) == 2:  # the default and the labelled demos scored, then Ctrl-C
            raise KeyboardInterrupt
        return real(self, name, module)

    monkeypatch.setattr(decision_compile._DecisionCompile, "score", score)
    with pytest.raises(Interrupted, match="the best so far is saved"):
        compile_(dec_settings, tmp_path, DecisionLM(), endpoint, search, decision="entity", num_candidates=4)
    saved = json.loads((tmp_path / "o" / "metrics.json").read_text())
    assert saved["interrupted"] and saved["kept"] and saved["chosen"].startswith("labelled")
    loaded = SagaProgram(dec_settings.model_copy(update={"program": tmp_path / "o" / "program.json"}), endpoint, search)
    assert loaded.compiled_decisions.names() == ["entity"]


# --- the command line ---------------------------------------------------------------------------------------------


def test_the_command_line_builds_the_datasets_and_assembles(dec_settings, data, tmp_path, capsys, same_sets):
    from saga_dspy.cli import run_main
    from saga_dspy.optimize.__main__ import main

    common = ["--dataset", "qald10", "--cache-dir", str(dec_settings.cache_dir), "--no-mlflow", "--no-progress"]
    assert main(["decisions", "--decision", "entity", "--build-only", "--valset-size", "8", *common]) == 0
    out = capsys.readouterr().out
    assert "train: {'answer-type':" in out and "cached in" in out
    assert run_main(main, ["decisions", "--decision", "entity", "--split", "test", *common]) == 2
    assert "refusing to optimize on" in capsys.readouterr().err
    assert run_main(main, ["assemble", str(tmp_path / "none"), "--out", str(tmp_path / "a")]) == 2
    assert "is no compiled decision" in capsys.readouterr().err
