"""The prompt layout a prefix cache can reuse (`--state-in-trajectory`, `--closing-line short`,
`--compact-observations`): within a question each controller prompt extends the previous one up to its closing
line, and with every demonstration fixed two questions share everything before their own user message."""

from __future__ import annotations

import dspy
import pytest
from conftest import REPO
from helpers.scripted_lm import ScriptedLM

from saga_dspy.agent.compact import compact_observation, restates
from saga_dspy.agent.demos import record_to_example
from saga_dspy.agent.program import SagaProgram
from saga_dspy.agent.state_delta import StateLines
from saga_dspy.config import Settings
from saga_dspy.lm.markers import reply_fields, tool_arguments
from saga_dspy.tools.lookup import next_candidates

POOL = str(REPO / "data" / "demos" / "qald10.jsonl")
RIEMANN_Q = "After whom is the Riemannian geometry named?"
BERLIN_Q = "Who is the mayor of Berlin?"
PLAN = [
    ("search_wikidata", {"query": "Riemannian geometry"}),
    ("get_wikidata_entry", {"qid": "Q761383"}),
    ("execute_sparql", {"sparql": "SELECT ?x WHERE { wd:Q761383 wdt:P138 ?x }"}),
    ("stop", {}),
]
LAYOUT = {"state_in_trajectory": True, "closing_line": "short", "compact_observations": True}


def controller_calls(settings: Settings, endpoint, search, questions=(RIEMANN_Q,)) -> list[list[list[dict]]]:
    """Each question's controller prompts (messages), in order, with its recorded trajectory."""
    program = SagaProgram(settings, endpoint, search, demo_pool=POOL)
    lm = ScriptedLM({RIEMANN_Q: PLAN, BERLIN_Q: PLAN[:1] + [("stop", {})]}, continues_replies=True)
    out = []
    for question in questions:
        lm.history.clear()
        with dspy.context(lm=lm):
            pred = program(question=question)
        assert pred.error is None
        out.append([e["messages"] for e in lm.history if "next_thought" in str(e["messages"][0]["content"])])
    return out


def without_closing(content: str) -> str:
    return content.rsplit("\n\nRespond with ", 1)[0]


def appends(previous: list[dict], current: list[dict]) -> bool:
    """`current` is `previous` up to its closing line, then more: nothing shown before is written again."""
    return current[:-1] == previous[:-1] and current[-1]["content"].startswith(without_closing(previous[-1]["content"]))


@pytest.fixture
def layout_settings(settings):
    return settings.model_copy(update={"demos": 2, "demo_anchors": 2, "demo_steps": 3, "max_steps": 6, **LAYOUT})


def test_a_questions_controller_prompts_only_grow(layout_settings, endpoint, search):
    (calls,) = controller_calls(layout_settings, endpoint, search)
    assert len(calls) == len(PLAN)
    for previous, current in zip(calls, calls[1:]):
        assert appends(previous, current)
        assert current[-1]["content"].endswith("\n\nRespond with next_thought, next_tool_name, next_tool_args.")
        assert reply_fields(current) == ["next_thought", "next_tool_name", "next_tool_args"]
    last = calls[-1][-1]["content"]
    assert "[[ ## type_context ## ]]" not in last and "[[ ## knowledge_log ## ]]" not in last
    # the local engine reads each tool's one argument from the instructions and writes `{"query": "` itself
    assert tool_arguments(calls[-1]) == {
        "search_wikidata": "query",
        "get_wikidata_entry": "qid",
        "get_property_examples": "pid",
        "execute_sparql": "sparql",
    }
    system = calls[-1][0]["content"]  # the instructions say where the state now is
    assert "`type_context`" not in system and "what the step added to the type context and knowledge log" in system
    assert "Type context:\n" in last  # what the lookup and the execution added, after their observations
    assert "Type filter: no property conflicts." not in last and 'Search results for "' not in last
    # the layout as it was: the state after the trajectory is written again at every step
    before = layout_settings.model_copy(update=dict.fromkeys(LAYOUT, False) | {"closing_line": "dspy"})
    (old,) = controller_calls(before, endpoint, search)
    assert not any(appends(previous, current) for previous, current in zip(old, old[1:]))
    assert "Respond with the corresponding output fields" in old[-1][-1]["content"]


def test_with_every_demonstration_fixed_two_questions_share_all_but_their_own_message(
    layout_settings, endpoint, search
):
    first, second = (calls[0] for calls in controller_calls(layout_settings, endpoint, search, (RIEMANN_Q, BERLIN_Q)))
    assert len(first) == 1 + 2 * 2 + 1  # the system message, two fixed demonstrations, the question
    assert first[:-1] == second[:-1]  # byte for byte
    assert RIEMANN_Q in first[-1]["content"] and BERLIN_Q in second[-1]["content"]
    # the demonstrations show the same layout: the state in the trajectory, compact observations
    demos = "\n".join(m["content"] for m in first[1:-1])
    assert "[[ ## type_context ## ]]" not in demos and "Type context:\n" in demos
    assert 'Search results for "' not in demos


def test_the_recorded_trajectory_keeps_the_observations_whole(layout_settings, endpoint, search):
    def trajectory(settings):
        program = SagaProgram(settings, endpoint, search, demo_pool=POOL)
        with dspy.context(lm=ScriptedLM({RIEMANN_Q: PLAN}, continues_replies=True)):
            return program(question=RIEMANN_Q).trajectory

    searched, looked_up, executed, _stop = trajectory(layout_settings)
    assert searched["observation"].startswith('Search results for "Riemannian geometry":')
    assert "state" not in looked_up  # compact: the entity's types are in the lookup's own observation
    assert executed["state"] == "Type context:\nVariable types: ?x: human (range of P138)"  # not its [ok] line
    _searched, looked_up, executed, _stop = trajectory(
        layout_settings.model_copy(update={"compact_observations": False})
    )
    assert looked_up["state"] == "Type context:\n- Q761383 Riemannian geometry: area of mathematics (Q1936384)"
    assert executed["state"].endswith("Knowledge log:\n[ok] 1 rows (Bernhard Riemann): wd:Q761383 wdt:P138 ?x")


def test_state_lines_are_each_shown_once():
    lines = StateLines()
    first = lines.added("Known entity types:\n- Q1 a: b (Q2)", "[ok] 1 rows (x): ?x wdt:P1 ?y")
    assert first == "Type context:\n- Q1 a: b (Q2)\nKnowledge log:\n[ok] 1 rows (x): ?x wdt:P1 ?y"
    again = lines.added("Known entity types:\n- Q1 a: b (Q2)\nVariable types: ?x: c", "[ok] 1 rows (x): ?x wdt:P1 ?y")
    assert again == "Type context:\nVariable types: ?x: c"
    assert lines.added("Known entity types: (none yet)", "(nothing yet)") == ""
    compact = StateLines(compact=True)
    assert compact.added("- Q1 a: b (Q2)", "", "a (Q1): a thing\nTypes: b (Q2)") == ""  # its lookup shows it
    assert restates("[ok] 2 rows (x): ?x", "[OK] 2 rows:\n?x") and not restates("[ok] 2 rows", "Search results")


def test_a_demonstration_shows_what_each_step_added_to_the_state():
    record = {
        "question": "Who?",
        "steps": [
            {
                "thought": "t",
                "tool_name": "search_wikidata",
                "tool_args": {"query": "a"},
                "observation": "o1",
                "type_context": "Known entity types: (none yet)",  # a pool stores the state where it changed
                "knowledge_log": "(nothing yet)",
            },
            {
                "thought": "t",
                "tool_name": "get_wikidata_entry",
                "tool_args": {"qid": "Q1"},
                "observation": "a (Q1): x\nTypes: b (Q2)",
            },
            {
                "thought": "t",
                "tool_name": "execute_sparql",
                "tool_args": {"sparql": "SELECT ?x WHERE { wd:Q1 wdt:P1 ?x }"},
                "observation": "[OK] 1 row:\n?x\nQ3",
                "type_context": "Known entity types:\n- Q1 a: b (Q2)",
            },
        ],
        "type_context": "Known entity types:\n- Q1 a: b (Q2)\nVariable types: ?x: c (observed)",
        "knowledge_log": "[ok] 1 rows (Q3): wd:Q1 wdt:P1 ?x",
        "sparql": "SELECT ?x WHERE { wd:Q1 wdt:P1 ?x }",
    }
    trajectory = record_to_example(record, state_in_steps=True).trajectory
    assert "Observation: a (Q1): x\nTypes: b (Q2)\nType context:\n- Q1 a: b (Q2)\n\nStep 3" in trajectory
    assert trajectory.endswith(
        "Type context:\nVariable types: ?x: c (observed)\nKnowledge log:\n[ok] 1 rows (Q3): wd:Q1 wdt:P1 ?x"
    )
    compact = record_to_example(record, state_in_steps=True, compact=True).trajectory
    assert "- Q1 a: b (Q2)" not in compact and "[ok] 1 rows" not in compact and "Variable types" in compact
    assert "Type context" not in record_to_example(record).trajectory  # the layout as it was


SEARCH = """Search results for "Danish":
Entities:
- Q9035 Danish: language spoken in Denmark [language, modern language +1 more]
- Q204752 Danish Superliga: Danish association football top league [class; subclass of Q3270632]
- Q25417 Danish krone [class; subclass of Q1189842]
- Q131785 Denmark men's national football team: men's national team [national association football t…]
- Q5673 Hans Christian Andersen: Danish author, fairy tale writer, and poet [human]
Properties:
- P2290 Danish parish code (ExternalId): identifier for an parish in Denmark [domain: unknown | range: unknown]
- P509 cause of death (WikibaseItem): underlying cause [domain: organism +5 more | range: violence +8 more]
- P1240 Danish level (String): level [domain: unknown | range: unknown]
Next: get_wikidata_entry({"qid": "Q5673"}) if Q5673 (Hans Christian Andersen) is what the question means; else look \
up another hit or search again."""


def test_a_compact_search_keeps_the_hits_the_model_looks_up_and_every_annotation():
    text = compact_observation(SEARCH, "search_wikidata")
    assert (
        text.split("\n")
        == [
            "Entities:",
            *SEARCH.split("\n")[2:5],
            SEARCH.split("\n")[6],  # the hit the Next: line names
            "(+1 more)",
            "Properties:",
            *SEARCH.split("\n")[8:10],
            "(+1 more)",
            'Next: get_wikidata_entry({"qid": "Q5673"}) if it is what the question means; else another hit or a new '
            "search.",
        ]
    )
    assert compact_observation(text, "search_wikidata") == text  # compacting twice changes nothing
    assert compact_observation(SEARCH, "execute_sparql") == SEARCH  # another tool's text is left as it is


LOOKUP = f"""Bernhard Riemann (Q42299): German mathematician
Types: human (Q5)
Type filter: no property conflicts.
Outgoing properties (15, most relevant first):
- place of birth (P19) [domain: person | range: place]: most specific known
  = Breselenz (Q564795)
Incoming: ?x wdt:Pid wd:Q42299, most relevant first:
  ← named after (P138) ★: 3 items, e.g. Riemannian geometry (Q761383)
Other properties: {", ".join(f"p{i} (P{i})" for i in range(1, 13))}, languages spoken, written o… (P1412) (+2 more)
Candidate queries (executed; run one as it is, edit one, or write your own):
1. [one-hop + one hop further; named after (P138), country (P17)] SELECT DISTINCT ?x WHERE {{ ?y wdt:P138 ?x }}
   → 3 answers: Riemannian geometry (Q761383) (fit the answer type)
2. [one-hop] SELECT DISTINCT ?x WHERE {{ ?x wdt:P138 wd:Q42299 }}
   → 3 answers: a (Q1)
{next_candidates([1, 2])}"""


def test_a_compact_lookup_keeps_its_properties_annotations_and_candidates():
    text = compact_observation(LOOKUP, "get_wikidata_entry")
    assert text.split("\n") == [
        "Bernhard Riemann (Q42299): German mathematician",
        "Types: human (Q5)",
        "Outgoing properties (15):",
        "- place of birth (P19) [domain: person | range: place]: most specific known",
        "  = Breselenz (Q564795)",
        "Incoming (?x wdt:Pid wd:Q42299):",
        "  ← named after (P138) ★: 3 items, e.g. Riemannian geometry (Q761383)",
        "Other properties: " + ", ".join(f"p{i} (P{i})" for i in range(1, 11)) + " (+5 more)",
        "Candidate queries (executed):",
        "1. [named after (P138), country (P17)] SELECT DISTINCT ?x WHERE { ?y wdt:P138 ?x }",
        "   → 3 answers: Riemannian geometry (Q761383) (fit the answer type)",
        "2. SELECT DISTINCT ?x WHERE { ?x wdt:P138 wd:Q42299 }",
        "   → 3 answers: a (Q1)",
        'Next: stop with {"candidate": 1} or {"candidate": 2} if that candidate answers the question; else execute a '
        "query.",
    ]
    assert compact_observation(text, "get_wikidata_entry") == text


def test_a_compact_result_shows_its_first_ten_rows():
    rows = [f"Q{i}" for i in range(1, 31)]
    text = "\n".join(["[OK] 173 rows:", "?x", *rows, "[cut: 143 more rows not shown; 30 of 173 shown]", "Next: stop."])
    compact = compact_observation(text, "execute_sparql").split("\n")
    assert compact == [
        "[OK] 173 rows:",
        "?x",
        *rows[:10],
        "[cut: 163 more rows not shown; 10 of 173 shown]",
        "Next: stop.",
    ]
    short = "\n".join(["[OK] 2 rows:", "?x", "Q1", "Q2", "Next: stop."])
    assert compact_observation(short, "execute_sparql") == short


def test_the_layout_settings_are_flags_of_the_run_commands():
    from saga_dspy.ask import build_parser as ask_parser
    from saga_dspy.config import settings_from_args
    from saga_dspy.eval.__main__ import build_parser
    from saga_dspy.optimize.__main__ import build_parser as optimize_parser

    flags = ["--no-state-in-trajectory", "--closing-line", "dspy", "--no-compact-observations"]
    for parser, more in ((build_parser(), []), (optimize_parser(), []), (ask_parser(), ["Who?"])):
        settings = settings_from_args(parser.parse_args(flags + more))
        assert (settings.state_in_trajectory, settings.closing_line, settings.compact_observations) == (
            False,
            "dspy",
            False,
        )
    defaults = Settings()  # the layout the dev slice measured is the default
    assert (defaults.state_in_trajectory, defaults.closing_line, defaults.compact_observations) == (
        True,
        "short",
        True,
    )


def test_the_layout_settings_are_in_a_runs_fingerprint():
    """A run resumed with another layout would mix prompts the model read differently."""
    from saga_dspy.eval.running.records import fingerprint

    changed = Settings(**LAYOUT)
    assert {k: fingerprint(changed)[k] for k in LAYOUT} == LAYOUT
    dspy_layout = Settings(state_in_trajectory=False, closing_line="dspy", compact_observations=False)
    assert fingerprint(changed) != fingerprint(dspy_layout)
