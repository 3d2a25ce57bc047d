"""The ReAct module: dspy.ReAct's layout (react, extract, tools) with tools bound per question and inputs refreshed per
step."""

from __future__ import annotations

import contextlib
import functools
import inspect
import logging
from typing import Any, Literal

import dspy
from dspy.adapters.chat_adapter import ChatAdapter
from dspy.primitives.module import Module
from dspy.utils.exceptions import AdapterParseError, ContextWindowExceededError, LMError

from saga_dspy.agent.begun_reply import BegunReplyAdapter
from saga_dspy.agent.calls import is_context_overflow
from saga_dspy.agent.decisions import controller_prompt
from saga_dspy.agent.episode import Episode
from saga_dspy.agent.failures import InfrastructureError, is_infrastructure_error
from saga_dspy.agent.final_query import StepOutcome
from saga_dspy.agent.parsing import FENCE, MARKER, normalize_tool_name, parse_tool_args
from saga_dspy.agent.trajectory import Step, one_line
from saga_dspy.kg.flavours.wikidata_ids import DOUGLAS_ADAMS, PLACE_OF_BIRTH
from saga_dspy.tools.specs import TOOL_NAMES, TOOL_SPECS

log = logging.getLogger(__name__)

DYNAMIC_INPUTS = ("type_context", "knowledge_log")  # refreshed at every step
CHARS_PER_TOKEN = 3.0  # conservative for SPARQL, ids and English with the Qwen tokenizer
MIN_TRAJECTORY_CHARS = 1200
MAX_CONSECUTIVE_FAILURES = 3  # unreadable LM turns (or invalid actions) in a row before the loop gives up
MAX_REPEATS = 2  # identical actions in a row before the loop gives up (then the extract call)
REPEAT_TEMPERATURE = 0.7  # the sampling temperature of the step after a repeated action
CHECK_EXTRA_STEPS = 3  # CheckAnswer's bounded second chance
FINAL_STEP = (
    "The steps are over. Write the final SPARQL query that answers the question from what the steps found: "
    'next_tool_name execute_sparql, next_tool_args {"sparql": "..."}.'
)  # the step-mode extract's line
FINAL_REPLY = (
    "[[ ## next_thought ## ]]\nThe steps are over: I write the final query from what they found.\n\n"
    '[[ ## next_tool_name ## ]]\nexecute_sparql\n\n[[ ## next_tool_args ## ]]\n{"sparql": "'
)  # prefill's begun reply


def _plain_format(adapter) -> Any:
    """The adapter class's `format` without dspy's callback decorator(s)."""
    return inspect.unwrap(type(adapter).format)


def final_extract_mode(settings: Any, lm: Any) -> str:
    """`Settings.final_extract` with `auto` resolved: prefill for an LM that says it continues a begun reply
    (`continues_replies`: the local backend), else call (not every server does)."""
    mode = settings.final_extract
    if mode == "auto":
        return "prefill" if getattr(lm, "continues_replies", False) else "call"
    return mode


def _begun_reply(begun: str):
    """The adapter context of a call whose reply is begun for the model (none when `begun` is empty)."""
    if not begun:
        return contextlib.nullcontext()
    adapter = dspy.settings.adapter
    callbacks = list(getattr(adapter, "callbacks", None) or [])
    closing = getattr(adapter, "closing", "dspy")
    return dspy.context(adapter=BegunReplyAdapter(begun, callbacks=callbacks, closing=closing))


def _reads(inputs: list[str], state_in_steps: bool = False) -> str:
    """What the controller reads at each step, as its instructions say it."""
    if state_in_steps:
        inputs = [k for k in inputs if k not in DYNAMIC_INPUTS]
        seen = "thought, action, observation, and what the step added to the type context and knowledge log"
    else:
        seen = "thought, action, observation"
    return f"read {', '.join(f'`{k}`' for k in inputs)} and the trajectory of your earlier steps ({seen})"


@functools.lru_cache(maxsize=32)  # a predictor's signature (and its twin shown no demonstration)
def without_state_fields(signature: Any) -> type[dspy.Signature]:
    """`signature` without the per-step state fields, which the trajectory holds instead
    (`Settings.state_in_trajectory`); its instructions say so where they name what the controller reads."""
    dynamic = [k for k in DYNAMIC_INPUTS if k in signature.input_fields]
    if not dynamic:
        return signature
    for name in dynamic:
        signature = signature.delete(name)
    inputs = [k for k in signature.input_fields if k != "trajectory"] + dynamic
    instructions = signature.instructions.replace(_reads(inputs), _reads(inputs, state_in_steps=True))
    return signature.with_instructions(instructions)


def turn_signature(signature: Any, settings: Any) -> type[dspy.Signature]:
    """The signature a predictor call is made with: without the state fields when the trajectory holds the state."""
    return without_state_fields(signature) if settings.state_in_trajectory else signature


def _tool_spec(name: str) -> dspy.Tool:
    _, arg, desc = TOOL_SPECS[name]

    def _spec(**kwargs):  # never called: the per-question tools are used instead
        raise RuntimeError("tool spec only")

    args = {arg: {"type": "string"}} if arg else {}
    return dspy.Tool(_spec, name=name, desc=desc, args=args, arg_types={arg: str} if arg else {})


class SagaReAct(dspy.ReAct):
    """dspy.ReAct whose tools are bound per question and whose inputs are refreshed per step.

    It keeps ReAct's layout (`react` step predictor, `extract` fallback predictor, `tools`
    specs for instructions and optimisers), so dspy's save/load and optimisers see the
    usual structure; `forward(episode)` runs one question's loop on the episode's tools.
    """

    def __init__(self, signature: type[dspy.Signature], max_iters: int = 15):
        Module.__init__(self)
        self.signature = signature
        self.max_iters = max_iters
        self.tools = {name: _tool_spec(name) for name in TOOL_NAMES}
        instr = [signature.instructions.strip(), ""] if signature.instructions else []
        instr += [
            f"You act in steps. At each step you {_reads(list(signature.input_fields))}, "
            "and you give `next_thought` (your reasoning about what to do next), "
            "`next_tool_name` and `next_tool_args`. "
            "The tool's answer is added to the trajectory as the next observation.",
            "The tools are:",
        ]
        for i, (name, arg, desc) in enumerate(TOOL_SPECS.values(), start=1):
            instr.append(f"({i}) {name}({arg or ''}): {desc}")
        instr.append(
            '`next_tool_args` is a JSON object with the tool\'s argument, e.g. {"query": "Riemannian geometry"}, '
            f'{{"qid": "{DOUGLAS_ADAMS}"}}, '
            f'{{"sparql": "SELECT ?x WHERE {{ wd:{DOUGLAS_ADAMS} wdt:{PLACE_OF_BIRTH} ?x }}"}}; {{}} for stop.'
        )
        # The fields that change at every step come after the trajectory: the prompt's prefix stays the
        # same from step to step (a local model reuses its evaluated prefix) and the freshest state is
        # read last, right before the reply.
        static = {k: v for k, v in signature.input_fields.items() if k not in DYNAMIC_INPUTS}
        react_signature = dspy.Signature(static, "\n".join(instr)).append(
            "trajectory", dspy.InputField(desc="your earlier steps"), type_=str
        )
        for name in DYNAMIC_INPUTS:
            if name in signature.input_fields:
                field_info = signature.input_fields[name]
                react_signature = react_signature.append(name, field_info, type_=field_info.annotation)
        react_signature = (
            react_signature.append(
                "next_thought",
                dspy.OutputField(desc="in one or two short sentences: what you learnt and what to do next"),
                type_=str,
            )
            .append("next_tool_name", dspy.OutputField(), type_=Literal[TOOL_NAMES])
            .append("next_tool_args", dspy.OutputField(desc="JSON object of the tool's arguments"), type_=str)
        )
        fallback_signature = dspy.Signature(
            {**static, **signature.output_fields},
            (signature.instructions or "")
            + "\n\nThe steps are over. From the trajectory, write the final SPARQL query that answers the question.",
        ).insert(len(static), "trajectory", dspy.InputField(desc="your earlier steps"), type_=str)
        for offset, name in enumerate(n for n in DYNAMIC_INPUTS if n in signature.input_fields):
            field_info = signature.input_fields[name]
            fallback_signature = fallback_signature.insert(
                len(static) + 1 + offset, name, field_info, type_=field_info.annotation
            )
        self.react = dspy.Predict(react_signature)
        self.extract = dspy.Predict(fallback_signature)

    # -- one step --------------------------------------------------------------------

    def _prompt(self, episode: Episode, predictor: dspy.Predict, turn: bool) -> tuple[type[dspy.Signature], Any]:
        """(signature, demos) of this call. A controller turn reads the question's demos (else the predictor's own)
        and, shown none, the flavour's one-line example of the tool sequence after its instructions; a turn in the
        state of a compiled decision (`Episode.decision_prompt`) reads that decision's instructions and demos
        (`agent.decisions.controller_prompt`). Another predictor: its own signature, and None (its own demos). With
        the state in the trajectory, no predictor reads the type context and log as input fields."""
        signature = turn_signature(predictor.signature, episode.settings)
        if predictor is not self.react:
            return signature, None
        own = episode.decision_prompt() if turn else None
        pool = episode.demos if episode.demos is not None else predictor.demos
        return controller_prompt(signature, own, pool, episode.ctx.flavour.protocol_example)

    def _budget(
        self, episode: Episode, inputs: dict[str, Any], predictor: dspy.Predict, prompt: tuple[Any, Any], turn: bool
    ) -> int:
        """Characters left for the trajectory in this call's prompt.

        The prompt is formatted only to be measured, once per question and predictor: the adapter's
        undecorated `format`, so that no callback (tracing) sees a format that is never sent. Between
        steps only the input values change (the type context and log grow), each written once into the
        prompt, so a later step's size is the first one's plus the growth of the values (a compiled decision's
        turns are measured apart: their instructions and demos are their own)."""
        size = sum(len(str(v)) for v in inputs.values())
        signature, demos = prompt
        key = (id(predictor), episode.decision() if turn and episode.decision_prompt() is not None else None)
        measured = episode.prompt_sizes.get(key)
        if measured is None:
            adapter = dspy.settings.adapter or ChatAdapter()
            try:
                shown = demos if demos is not None else predictor.demos
                messages = _plain_format(adapter)(adapter, signature, shown, {**inputs, "trajectory": ""})
                measured = (sum(len(str(m.get("content") or "")) for m in messages), size)
            except Exception:  # formatting only measures the prompt: fall back to a safe estimate
                measured = (6000, size)
            episode.prompt_sizes[key] = measured
        fixed = measured[0] + max(0, size - measured[1])
        settings = episode.settings
        total = int((settings.context_window - settings.max_tokens) * CHARS_PER_TOKEN * episode.budget_scale)
        return max(MIN_TRAJECTORY_CHARS, total - fixed)

    def _call(
        self,
        episode: Episode,
        predictor: dspy.Predict,
        *,
        tail: str = "",
        turn: bool = True,
        begun: str = "",
        **extra,
    ):
        """One predictor call with the episode's current inputs; shrinks the trajectory on overflow.
        `tail`: a line after the trajectory (the step and prefill extracts); `turn`: a controller turn (counted as
        one); `begun`: the reply's beginning, which the model continues (`BegunReplyAdapter`)."""
        last: BaseException | None = None
        calls = episode.calls
        if predictor is self.react and turn:
            calls.turn()
        for _attempt in range(4):
            inputs = episode.inputs()
            signature, demos = prompt = self._prompt(episode, predictor, turn)
            budget = self._budget(episode, inputs, predictor, prompt, turn)
            if episode.trajectory_cap is not None:
                budget = min(budget, episode.trajectory_cap)
            trajectory = episode.trajectory_text(budget)
            episode.last_trajectory_chars = len(trajectory)
            if tail:
                trajectory = f"{trajectory}\n\n{tail}" if trajectory else tail
            kwargs = dict(extra)
            if demos is not None:
                kwargs["demos"] = demos
            if signature is not predictor.signature:
                kwargs["signature"] = signature
            try:
                with calls.one_call(), _begun_reply(begun):
                    return predictor(**inputs, trajectory=trajectory, **kwargs)
            except Exception as exc:  # LM clients raise many types for an overflow; anything else is re-raised
                if not is_context_overflow(exc):
                    raise
                last = exc
                episode.overflows += 1
                episode.budget_scale *= 0.5
                # the estimate of the window can be far off (the server's real limit, another tokenizer): the
                # next attempt also sends at most half the trajectory that did not fit
                episode.trajectory_cap = max(MIN_TRAJECTORY_CHARS, episode.last_trajectory_chars // 2)
                if episode.demos:
                    episode.demos = episode.demos[:-1]
                log.warning("context window exceeded; shrinking the trajectory (scale %.2f)", episode.budget_scale)
        raise ContextWindowExceededError(message=f"the prompt does not fit even after shrinking: {last}")

    def forward(self, episode: Episode):
        failures = 0
        limit = episode.max_steps
        index = 0
        while index < limit and not episode.out_of_time():
            index += 1
            # after a repeated action, sample instead of decoding greedily: the same prompt prefix
            # would otherwise give the same reply again
            extra: dict[str, Any] = {"config": {"temperature": REPEAT_TEMPERATURE}} if episode.repeats else {}
            try:
                pred = self._call(episode, self.react, **extra)
            except (AdapterParseError, ValueError) as exc:
                failures += 1
                episode.notes.append(f"unreadable reply at step {index}: {one_line(str(exc), 160)}")
                episode.add_step(
                    Step(
                        "(the reply could not be read)",
                        "none",
                        {},
                        "Your last reply could not be read. Answer with the three fields next_thought, next_tool_name "
                        "(one of " + ", ".join(TOOL_NAMES) + ") and next_tool_args (a JSON object), each after its "
                        "[[ ## field ## ]] header.",
                        note="unparsable",
                    )
                )
                if failures >= MAX_CONSECUTIVE_FAILURES:
                    episode.notes.append("stopped after repeated unreadable replies")
                    break
                continue
            except ContextWindowExceededError as exc:
                episode.notes.append(f"context window exceeded: {one_line(str(exc), 200)}")
                break
            except Exception as exc:  # the LM itself failed (server down, model missing, ...)
                if is_infrastructure_error(exc):  # the LM already retried: the next step would fail the same way
                    raise InfrastructureError(f"LM: {type(exc).__name__}: {one_line(str(exc), 300)}") from exc
                failures += 1
                episode.lm_errors.append(f"{type(exc).__name__}: {one_line(str(exc), 300)}")
                if failures >= 2 or isinstance(exc, LMError) and not getattr(exc, "retryable", False):
                    break
                continue
            failures = 0
            outcome = episode.run_tool(pred)
            if outcome is StepOutcome.DONE:
                break
            if outcome is StepOutcome.EXTEND:
                limit = max(limit, index + CHECK_EXTRA_STEPS)
            if outcome is StepOutcome.REPEAT and episode.repeats >= MAX_REPEATS:
                episode.notes.append(f"stopped after {MAX_REPEATS} repeated actions in a row")
                break
            if outcome is StepOutcome.INVALID and episode.invalid >= MAX_CONSECUTIVE_FAILURES:
                # a model that keeps inventing a tool (or its arguments) would do so to the step limit
                episode.notes.append(f"stopped after {MAX_CONSECUTIVE_FAILURES} invalid actions in a row")
                break
        return dspy.Prediction(trajectory=[s.to_dict() for s in episode.steps])

    def extract_query(self, episode: Episode) -> str | None:
        """The fallback when the steps ended without an answering query (`Settings.final_extract`).

        `call`: DSPy ReAct's extract predictor, which reads the whole trajectory again under its own
        instructions. `step`: one more controller turn whose trajectory ends with FINAL_STEP; its prompt is the
        last turn's plus that line, so a local model evaluates only the line and the fresh state (~650 fewer
        evaluated tokens on such a question; a model may pick another tool there: no query).
        `prefill`: that turn with its reply begun up to the query (FINAL_REPLY), so the model writes the query and
        nothing else. `none`: no LM call. `auto`: prefill with the local model, call with a served one."""
        mode = final_extract_mode(episode.settings, self.react.lm or dspy.settings.lm)
        if mode == "none":
            return None
        if not episode.calls.take("extract"):
            episode.notes.append("extract skipped: no LM call left for this question")
            return None
        try:
            if mode in ("step", "prefill"):
                begun = FINAL_REPLY if mode == "prefill" else ""
                pred = self._call(episode, self.react, tail=FINAL_STEP, turn=False, begun=begun)
                text = self._final_step_query(episode, pred)
            else:
                text = str(getattr(self._call(episode, self.extract), "sparql", "") or "")
        except Exception as exc:  # an LM call: without an extracted query the last execution is used
            episode.notes.append(f"extract failed: {type(exc).__name__}: {one_line(str(exc), 200)}")
            return None
        text = MARKER.sub(" ", text).strip()
        return FENCE.sub("", text).strip() or None

    @staticmethod
    def _final_step_query(episode: Episode, pred) -> str:
        """The query of the final step's reply: an execute_sparql action's argument, else nothing."""
        name = normalize_tool_name(getattr(pred, "next_tool_name", ""), TOOL_NAMES)
        if name != "execute_sparql":
            episode.notes.append(f"extract: the final step chose {name or 'no tool'}, not execute_sparql")
            return ""
        return str(parse_tool_args(getattr(pred, "next_tool_args", {}), ["sparql"]).get("sparql") or "")
