"""The scripted LM: a DummyLM whose answers follow a per-question plan, so that the real SagaProgram
runs its real tools on the real embedded store and the expected result of each question is known."""

from __future__ import annotations

import json
import re
import threading
import time
from typing import Any

from dspy.clients.engines.dummy_engine import AsyncDummyEngine, DummyEngine
from dspy.lm15 import Message, Response, TextPart, Usage
from dspy.utils.dummies import DummyLM

_FIELD = re.compile(r"\[\[ ## (\w+) ## \]\]\n(.*?)(?=\n\n\[\[ ## |\n\nRespond with |\Z)", re.S)


# the output fields of DSPy's instruction proposers (MIPRO's, GEPA's): one scripted reply fills them all
PROPOSAL_FIELDS = (
    "proposed_instruction",
    "new_instruction",
    "observations",
    "summary",
    "program_description",
    "module_description",
)


def prompt_fields(text: str) -> dict[str, str]:
    """The `[[ ## name ## ]]` fields of a ChatAdapter message."""
    return {m.group(1): m.group(2).strip() for m in _FIELD.finditer(text or "")}


def output_fields(system: str) -> list[str]:
    """Output field names announced in the system message."""
    m = re.search(r"Your output fields are:\n(.*?)\n\n", system or "", re.S)
    return re.findall(r"`(\w+)`", m.group(1)) if m else []


def continuation(reply: str, begun: str) -> str:
    """What a model that continues `begun` adds to it to give `reply`: the rest of `reply` after the field
    `begun` ends in (and after the part of its value `begun` already wrote)."""
    header = re.findall(r"\[\[ ## \w+ ## \]\]\n", begun)[-1]
    written = begun[begun.rindex(header) + len(header) :]
    rest = reply[reply.index(header) + len(header) :] if header in reply else reply
    return rest[len(written) :] if rest.startswith(written) else rest


class _ScriptedEngine(DummyEngine):
    def _complete_messages(self, messages):
        owner = self.owner
        system = messages[0]["content"] if messages and messages[0]["role"] == "system" else ""
        begun = messages[-1]["content"] if messages and messages[-1]["role"] == "assistant" else ""
        user = messages[-2 if begun else -1]["content"] if messages else ""
        owner.demos_shown = sum(m["role"] == "assistant" for m in messages) - bool(begun)  # demo turns of this call
        owner.system_prompt = system
        owner.user_prompt = user
        outputs = owner.respond(output_fields(system), prompt_fields(user))
        with owner.lock:
            owner.calls += 1
        if owner.delay:
            time.sleep(owner.delay)
        text = owner._format_answer_fields(outputs)
        if begun and owner.continues_replies:  # else: a fresh reply, as a server that does not continue one
            text = continuation(text, begun)
        return Response(
            id=None,
            model="scripted",
            message=Message.assistant([TextPart(text)]),
            finish_reason="stop",
            usage=Usage(
                input_tokens=len(system + user) // 4,
                output_tokens=len(text) // 4,
                total_tokens=(len(system + user) + len(text)) // 4,
                cache_read_tokens=owner.cached_tokens or None,
            ),
        )


class ScriptedLM(DummyLM):
    """A DummyLM whose answer is computed from the prompt: `plans[question]` is the list of
    controller actions `(tool_name, args)`, taken in order by the number of steps already in
    the trajectory; `answer_types[question]` the (label, qid) of the answer-type step; `cached_tokens` the
    prompt tokens each call's usage reports as reused from a prefix cache; `continues_replies`: a reply begun
    in a final assistant message is continued (as the local backend does), else answered anew."""

    def __init__(
        self,
        plans: dict[str, list[tuple[str, dict]]],
        answer_types: dict[str, tuple[str, str]] | None = None,
        delay: float = 0.0,
        cached_tokens: int = 0,
        continues_replies: bool = False,
    ):
        super().__init__([])
        self.continues_replies = continues_replies
        self.cached_tokens = cached_tokens  # prompt tokens each call reports as read from a cache
        self.plans = plans
        self.answer_types = answer_types or {}
        self.delay = delay
        self.calls = 0
        self.demos_shown = 0  # demonstrations (user/assistant pairs) in the prompt of the latest call
        self.system_prompt = ""  # the system message (the instructions) of the latest call
        self.user_prompt = ""  # the latest call's last user message (its input fields and closing line)
        self.lock = threading.Lock()
        self._engine_spec = _ScriptedEngine(self)
        self._async_engine_spec = AsyncDummyEngine(self._engine_spec)

    def copy(self, **kwargs):
        return self  # BootstrapFewShot's later rounds copy the LM: keep the script

    def respond(self, outputs: list[str], fields: dict[str, str]) -> dict[str, Any]:
        question = fields.get("question", "")
        if "answer_type_label" in outputs:
            label, qid = self.answer_types.get(question, ("thing", ""))
            return {"answer_type_label": label, "answer_type_qid": qid}
        if "next_tool_name" in outputs:
            plan = self.plans.get(question, [("stop", {})])
            done = len(re.findall(r"^Step \d+$", fields.get("trajectory", ""), re.M))
            name, args = plan[min(done, len(plan) - 1)]
            return {
                "next_thought": f"step {done + 1} of the plan",
                "next_tool_name": name,
                "next_tool_args": json.dumps(args),
            }
        if "relevant_pids" in outputs:
            return {"relevant_pids": json.dumps(["P31"])}
        if "complete" in outputs:
            return {"complete": "true", "problem": ""}
        return {name: "" for name in outputs}  # extract / anything else: nothing


def scripted_plans(items) -> dict[str, list[tuple[str, dict]]]:
    """A plan per evaluation item: search the first words, look up the gold query's first entity, run gold, stop."""
    plans = {}
    for item in items:
        qid = re.search(r"wd:(Q\d+)", item.gold_sparql or "")
        plan = [("search_wikidata", {"query": " ".join(item.question.split()[:4])})]
        if qid:
            plan.append(("get_wikidata_entry", {"qid": qid.group(1)}))
        plan += [("execute_sparql", {"sparql": item.gold_sparql}), ("stop", {})]
        plans[item.question] = plan
    return plans


class TwoVariantLM(ScriptedLM):
    """A ScriptedLM under which the spinach controller (the one without an `answer_type` input) follows
    `spinach_plans[question]` where given, so the variants of one run differ on those questions."""

    def __init__(self, plans, spinach_plans, answer_types=None):
        super().__init__(plans, answer_types)
        self.spinach_plans = spinach_plans

    def respond(self, outputs, fields):
        question = fields.get("question", "")
        if "next_tool_name" in outputs and "answer_type" not in fields and question in self.spinach_plans:
            saved = self.plans
            self.plans = {question: self.spinach_plans[question]}
            try:
                return super().respond(outputs, fields)
            finally:
                self.plans = saved
        return super().respond(outputs, fields)


def wrong_plan(question: str) -> list[tuple[str, dict]]:
    """A plan that answers `question` with an item no gold holds (F1 0)."""
    return [
        ("search_wikidata", {"query": question.split()[-1]}),
        ("execute_sparql", {"sparql": "SELECT ?x WHERE { VALUES ?x { wd:Q42 } }"}),
        ("stop", {}),
    ]
