"""The controller's prompt begins with what every question shares (instructions, tool specs, the fixed
demonstrations of the question's query form), byte for byte, and what a question brings (its own demonstrations,
the question, the trajectory) comes after: a local model's prefix cache then evaluates the shared part once per
form in a run."""

from __future__ import annotations

import dspy
from conftest import REPO, make_settings
from helpers.scripted_lm import ScriptedLM

from saga_dspy.agent.program import SagaProgram
from saga_dspy.config import Settings

# two questions of one query form: the fixed demonstrations are that form's
QUESTIONS = ("Who is the mayor of Berlin?", "Which river flows through Vienna?")


def controller_prompts(settings: Settings) -> list[list[dict]]:
    """The messages of each question's first controller call, one question after another in one program."""
    program = SagaProgram(
        settings, endpoint=object(), search=object(), demo_pool=str(REPO / "data" / "demos" / "qald10.jsonl")
    )
    lm = ScriptedLM({q: [("stop", {})] for q in QUESTIONS})
    firsts = []
    for question in QUESTIONS:
        lm.history.clear()
        with dspy.context(lm=lm):
            program(question=question)
        firsts.append(next(e["messages"] for e in lm.history if "next_thought" in str(e["messages"][0]["content"])))
    return firsts


def chat_text(messages: list[dict]) -> str:
    return "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages)


def shared_prefix(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def test_the_fixed_part_of_the_controller_prompt_is_byte_identical_across_questions_and_comes_first():
    settings = make_settings(dataset="qald10", data_dir=REPO / "data", mlflow=False, lm_cache=False, demo_anchors=1)
    anchors, k = settings.demo_anchors, settings.demos
    assert 0 < anchors < k  # some demonstrations fixed, at least one chosen per question
    first, second = controller_prompts(settings)
    fixed = 1 + 2 * anchors  # the system message, then each fixed demonstration's user and assistant turns
    assert first[:fixed] == second[:fixed]
    assert first[fixed] != second[fixed]  # the question's own demonstration comes after them
    assert len(first) == len(second) == 1 + 2 * k + 1
    for messages, question in zip((first, second), QUESTIONS):
        assert question in messages[-1]["content"]
        assert not any(question in m["content"] for m in messages[:fixed])
    # as the model reads it: the rendered prompts share their whole fixed part
    shared = shared_prefix(chat_text(first), chat_text(second))
    assert shared >= len(chat_text(first[:fixed]))
    # before: every demonstration chosen per question, and only the system message shared
    old = settings.model_copy(update={"demo_anchors": 0})
    first, second = controller_prompts(old)
    assert first[0] == second[0] and first[1] != second[1]
    assert shared_prefix(chat_text(first), chat_text(second)) < shared
