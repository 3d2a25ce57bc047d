"""The SAGA agent as a DSPy program (paper Algorithm 1, with the remedies of issue 4 §2b).

    answer type (once)  ->  query form (ASK / COUNT / SELECT, imposed)
        ->  ReAct over the five grounding tools, the type context and the knowledge log
            refreshed into the controller's inputs at every step
        ->  final query (marked by stop(), else the last non-empty execution) -> re-executed

`SagaProgram(settings, endpoint=None, search=None)` is a `dspy.Module` whose predictors
(`answer_type`, `react.react`, `react.extract`, `prune`, `check`) are what dspy saves,
loads and optimises. Everything that belongs to one question lives in an `Episode`, made
by `forward()` and never stored on the module, so one program serves many threads.
`forward()` never raises: at worst it returns an empty prediction with `error` set.
"""

from __future__ import annotations

import ast
import inspect
import json
import logging
import re
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

import dspy
from dspy.adapters.chat_adapter import ChatAdapter
from dspy.primitives.module import Module
from dspy.utils.callback import BaseCallback
from dspy.utils.exceptions import AdapterParseError, ContextWindowExceededError, LMError

from saga_dspy.config import Settings
from saga_dspy.kg.errors import SparqlError
from saga_dspy.kg.query_text import matching_brace, query_form, tokenize
from saga_dspy.kg.results import AskResult, SelectResult
from saga_dspy.grounding.answer_cues import guard, rule_answer_type
from saga_dspy.signatures import (
    QUERY_FORM_GUIDE,
    AnswerType,
    AnswerTypeInfo,
    CheckAnswer,
    PruneNeighborhood,
    SagaController,
    SpinachController,
    decide_query_form,
    is_yes_no_question,
    kg_signature,
    parse_pids,
)

log = logging.getLogger(__name__)

QUERY_FORMS = ("SELECT", "COUNT", "ASK", "CONSTRUCT", "DESCRIBE")
DYNAMIC_INPUTS = ("type_context", "knowledge_log")  # refreshed at every step
TOOL_NAMES = ("search_wikidata", "get_wikidata_entry", "get_property_examples", "execute_sparql", "stop")
VARIANTS = ("full", "no-type-filter", "no-type-state", "no-answer-type", "spinach")

KEEP_FULL_STEPS = 5  # the most recent steps keep their whole observation (the paper's action history)
SUMMARY_CHARS = 160  # an older step's observation shrinks to one line of this length
CHARS_PER_TOKEN = 3.0  # conservative for SPARQL, ids and English with the Qwen tokenizer
MIN_TRAJECTORY_CHARS = 1200
MAX_FORM_REJECTIONS = 1  # a final query of the wrong form is sent back this many times, then rewritten
MAX_NO_QUERY_REJECTIONS = 1  # stop() before any executed query is sent back this many times
MAX_EMPTY_REJECTIONS = 1  # stop() on an empty / blocked final query is sent back this many times (not in spinach)
MAX_CONSECUTIVE_FAILURES = 3  # unreadable LM turns in a row before the loop gives up
ANSWER_TYPE_MAX_TOKENS = 64  # a type name and a QID
PRUNE_MAX_TOKENS = 160  # a list of property ids; a small model otherwise rambles to the cap (measured: 512 tokens, 70 s)
MAX_REPEATS = 2  # identical actions in a row before the loop gives up (then the extract call)
REPEAT_TEMPERATURE = 0.7  # the sampling temperature of the step after a repeated action
CHECK_EXTRA_STEPS = 3  # CheckAnswer's bounded second chance
NO_TYPE_STATE_TEXT = "(not kept in this configuration)"
RESULT_SAMPLE_ROWS = 5


# --- trajectory ---------------------------------------------------------------------------


@dataclass
class Step:
    """One controller turn: what it thought and did, and what it saw."""

    thought: str
    tool_name: str
    tool_args: dict[str, Any]
    observation: str
    note: str = ""  # e.g. "unparsable", "rejected", "tool-error"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _one_line(text: str, limit: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _clip(text: str, limit: int | None) -> str:
    text = str(text)
    if limit is None or len(text) <= limit:
        return text
    return text[: max(0, limit - 40)].rstrip() + f"\n… [{len(text) - limit + 40} more characters cut]"


def _render_action(step: Step) -> str:
    args = json.dumps(step.tool_args, ensure_ascii=False) if step.tool_args else "{}"
    return f"{step.tool_name}({args})"


def render_trajectory(
    steps: list[Step],
    budget: int | None = None,
    *,
    observation_chars: int | None = 3000,
    keep_full: int = KEEP_FULL_STEPS,
    first_index: int = 0,
) -> str:
    """The trajectory as the controller reads it, within `budget` characters.

    The last `keep_full` steps show their observation (clipped to `observation_chars`);
    older steps show a one-line summary. Over budget, more steps are summarised, then the
    oldest steps are dropped (a note says so), then the remaining observations are clipped.
    """
    if not steps:
        return "(no steps yet)"

    def render(full_from: int, drop: int, obs_limit: int | None) -> str:
        parts = []
        if drop:
            parts.append(f"(steps 1-{first_index + drop} left out to save space; the knowledge log summarises them)")
        for i, step in enumerate(steps[drop:], start=drop):
            number = first_index + i + 1
            obs = _clip(step.observation, obs_limit) if i >= full_from else _one_line(step.observation, SUMMARY_CHARS)
            thought = step.thought if i >= full_from else _one_line(step.thought, SUMMARY_CHARS)
            parts.append(f"Step {number}\nThought: {thought}\nAction: {_render_action(step)}\nObservation: {obs}")
        return "\n\n".join(parts)

    n = len(steps)
    full_from = max(0, n - keep_full)
    text = render(full_from, 0, observation_chars)
    if budget is None or len(text) <= budget:
        return text
    for full_from in range(full_from + 1, n):  # summarise more, keeping the latest step whole
        text = render(full_from, 0, observation_chars)
        if len(text) <= budget:
            return text
    full_from = n - 1
    for drop in range(1, n):  # drop the oldest steps
        text = render(full_from, drop, observation_chars)
        if len(text) <= budget:
            return text
    drop = n - 1
    limit = observation_chars or len(steps[-1].observation)
    while limit > 200:  # finally clip the latest observation
        limit //= 2
        text = render(full_from, drop, limit)
        if len(text) <= budget:
            return text
    return text[-budget:] if budget > 0 else ""


# --- tool calls from LM text ------------------------------------------------------------------

_TOOL_ALIASES = {
    "finish": "stop", "done": "stop", "final": "stop", "final_answer": "stop", "answer": "stop", "end": "stop",
    "search": "search_wikidata", "search_entity": "search_wikidata", "wikidata_search": "search_wikidata",
    "search_freebase": "search_wikidata", "entity_search": "search_wikidata",
    "lookup": "get_wikidata_entry", "get_entry": "get_wikidata_entry", "get_wikidata_entity": "get_wikidata_entry",
    "wikidata_entry": "get_wikidata_entry", "get_entity": "get_wikidata_entry", "get_freebase_entry": "get_wikidata_entry",
    "examples": "get_property_examples", "property_examples": "get_property_examples",
    "get_examples": "get_property_examples",
    "execute": "execute_sparql", "run_sparql": "execute_sparql", "sparql": "execute_sparql",
    "query": "execute_sparql", "execute_query": "execute_sparql", "run_query": "execute_sparql",
}
_FENCE = re.compile(r"^```[a-zA-Z]*\s*|\s*```$")
_MARKER = re.compile(r"\[\[ ## \w+ ## \]\]")  # an adapter's field marker the model wrote into a value


def normalize_tool_name(raw: Any, available: Iterable[str]) -> str | None:
    names = list(available)
    text = str(raw or "").strip().strip("`'\"").strip()
    text = re.split(r"[\s(]", text, maxsplit=1)[0].strip().lower() if text else ""
    text = text.rstrip(":.,;")
    if text in names:
        return text
    alias = _TOOL_ALIASES.get(text)
    return alias if alias in names else None


def parse_tool_args(raw: Any, params: list[str]) -> dict[str, Any]:
    """Tool arguments from whatever the LM wrote (a dict, JSON text, a bare value); never raises."""
    value: Any = raw
    if isinstance(raw, str):
        text = _FENCE.sub("", raw.strip()).strip()
        value = text
        if text.startswith(("{", "[")):
            for loader in (json.loads, ast.literal_eval):
                try:
                    value = loader(text)
                    break
                except Exception:
                    continue
            else:
                try:
                    import json_repair

                    value = json_repair.loads(text)
                except Exception:
                    value = text
        elif text in ("", "{}", "None", "null"):
            value = {}
    if value is None:
        value = {}
    if isinstance(value, dict):
        args = {str(k): v for k, v in value.items()}
        if len(params) == 1 and params[0] not in args and len(args) == 1:
            args = {params[0]: next(iter(args.values()))}
        known = {k: v for k, v in args.items() if k in params}
        return known
    if isinstance(value, (list, tuple)) and len(params) == 1 and len(value) == 1:
        value = value[0]
    if not params:
        return {}
    if isinstance(value, str):
        value = _FENCE.sub("", value).strip()
    return {params[0]: value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)}


def _params_of(func: Callable) -> list[str]:
    try:
        return [p.name for p in inspect.signature(func).parameters.values()
                if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    except (TypeError, ValueError):
        return []


# --- query form -------------------------------------------------------------------------------

def form_of(sparql: str | None) -> str | None:
    """ASK, COUNT (a SELECT projecting COUNT), SELECT, another keyword, or None."""
    if not sparql or not str(sparql).strip():
        return None
    tokens = tokenize(str(sparql))
    form = query_form(tokens)
    if form == "SELECT":
        head = _select_head(tokens)
        if any(t.upper == "COUNT" for t in head):
            return "COUNT"
    return form


def _select_head(tokens) -> list:
    """Tokens between SELECT and the WHERE keyword / first `{` of the main query."""
    start = next((i for i, t in enumerate(tokens) if t.kind == "name" and t.upper == "SELECT"), None)
    if start is None:
        return []
    out = []
    for tok in tokens[start + 1:]:
        if (tok.kind == "name" and tok.upper in ("WHERE", "FROM")) or tok.text == "{":
            break
        out.append(tok)
    return out


def _main_group(sparql: str) -> tuple[int, int, int] | None:
    """(start of the form keyword, index of the main `{`, index of its `}`) as character offsets."""
    tokens = tokenize(sparql)
    form_index = None
    for i, tok in enumerate(tokens):
        if tok.kind == "name" and tok.upper in ("SELECT", "ASK", "CONSTRUCT", "DESCRIBE"):
            form_index = i
            break
    if form_index is None:
        return None
    open_index = next((i for i in range(form_index, len(tokens)) if tokens[i].text == "{"), None)
    if open_index is None:
        return None
    close_index = matching_brace(tokens, open_index)
    if close_index < 0:
        return None
    return tokens[form_index].start, tokens[open_index].start, tokens[close_index].end


def _where_variables(body: str) -> list[str]:
    seen: list[str] = []
    for tok in tokenize(body):
        if tok.kind == "var":
            name = tok.text[1:]
            if name not in seen and not re.search(r"(Label|Description|AltLabel)$", name):
                seen.append(name)
    return seen


def rewrite_head(sparql: str, target: str) -> str | None:
    """The query with its head rewritten to `target` form (ASK / COUNT / SELECT) where that is safe, else None."""
    spans = _main_group(sparql)
    if spans is None:
        return None
    head_start, open_at, close_at = spans
    prologue, head, body, tail = sparql[:head_start], sparql[head_start:open_at], sparql[open_at:close_at], sparql[close_at:]
    head_tokens = tokenize(head)
    tail_words = {t.upper for t in tokenize(tail) if t.kind == "name"}
    if {"GROUP", "HAVING"} & tail_words:
        return None
    inner_select = any(t.kind == "name" and t.upper == "SELECT" for t in tokenize(body))
    current = form_of(sparql)
    if target == "ASK" and current in ("SELECT", "COUNT"):
        if current == "COUNT" or inner_select:
            return None
        return f"{prologue}ASK WHERE {body}"
    if target == "COUNT" and current == "SELECT":
        if inner_select or any(t.text == "(" for t in head_tokens):
            return None
        projected = [t.text[1:] for t in head_tokens if t.kind == "var"]
        projected = [v for v in projected if not re.search(r"(Label|Description|AltLabel)$", v)]
        if not projected and any(t.text == "*" for t in head_tokens):
            projected = _where_variables(body)
        if len(projected) != 1:
            return None
        return f"{prologue}SELECT (COUNT(DISTINCT ?{projected[0]}) AS ?count) WHERE {body}"
    if target == "SELECT" and current == "ASK":
        variables = _where_variables(body)
        if len(variables) != 1:
            return None
        return f"{prologue}SELECT DISTINCT ?{variables[0]} WHERE {body}"
    return None


def _is_numeric_literal(binding) -> bool:
    if binding.type != "literal":
        return False
    if binding.datatype and binding.datatype.startswith("http://www.w3.org/2001/XMLSchema#") and any(
        binding.datatype.endswith(t) for t in ("integer", "decimal", "double", "float", "int", "long", "nonNegativeInteger")
    ):
        return True
    return bool(re.fullmatch(r"[+-]?\d+(\.\d+)?([eE][+-]?\d+)?", binding.value.strip()))


def form_problem(required: str, sparql: str, result: Any = None) -> str | None:
    """Why `sparql` does not have the required form (None when it does)."""
    actual = form_of(sparql)
    if required == "ANY" or actual is None:
        return None
    if required == "ASK" and actual != "ASK":
        return ("This is a yes/no question, so the final query must be an ASK query (`ASK WHERE { ... }`, "
                f"answering true or false), but it is a {actual} query. Write the ASK query, execute it, then stop.")
    if required in ("SELECT", "COUNT") and actual == "ASK":
        what = "how many there are" if required == "COUNT" else "the answer entities or values"
        return (f"The question asks for {what}, not yes/no, so the final query must be a SELECT query, "
                "but it is an ASK query. Write the SELECT query, execute it, then stop.")
    if required == "COUNT" and actual == "SELECT" and isinstance(result, SelectResult) and result.rows:
        values = result.values()
        if not (len(result.rows) == 1 and values and all(_is_numeric_literal(b) for b in values)):
            return ("The question asks how many, so the final query should count the answers: "
                    "`SELECT (COUNT(DISTINCT ?x) AS ?count) WHERE { ... }` (or select the number the graph "
                    "stores). Write it, execute it, then stop.")
    return None


# --- LM bookkeeping ---------------------------------------------------------------------------


class _LMCallCounter(BaseCallback):
    """Counts the LM calls made inside one forward() (installed with dspy.context: per thread)."""

    def __init__(self):
        self.calls = 0
        self._lock = threading.Lock()

    def on_lm_end(self, call_id, outputs, exception):
        with self._lock:
            self.calls += 1


def _token_totals(usage_by_lm: dict[str, dict[str, Any]]) -> tuple[int, int]:
    prompt = completion = 0
    for usage in usage_by_lm.values():
        prompt += int(usage.get("prompt_tokens") or usage.get("input_tokens") or 0)
        completion += int(usage.get("completion_tokens") or usage.get("output_tokens") or 0)
    return prompt, completion


def _is_context_overflow(exc: BaseException) -> bool:
    if isinstance(exc, ContextWindowExceededError):
        return True
    name = type(exc).__name__
    text = str(exc).lower()
    return name in ("ContextLengthError", "ContextWindowExceededError") or (
        "context" in text and ("window" in text or "length" in text) and ("exceed" in text or "too long" in text)
    )


# --- the ReAct module ---------------------------------------------------------------------------

_TOOL_DOCS = {
    "search_wikidata": ("query", "Search the knowledge graph's entities and properties by name. Items come back "
                        "with id, label and description; properties also with their [domain | range]."),
    "get_wikidata_entry": ("qid", "Show an entity: its types and its outgoing properties with example values, "
                           "each property with its [domain | range]; properties whose domain conflicts with the "
                           "entity's types are left out."),
    "get_property_examples": ("pid", "Show a few subject-value pairs that use a property, to see how it is used."),
    "execute_sparql": ("sparql", "Run a SPARQL query (a fragment or the whole query) and see its first results. "
                       "[BLOCKED] or an empty result means a property, direction or entity is wrong."),
    "stop": (None, "Finish: the last executed query becomes the final query. Call it only once that query "
             "returns the answer."),
}


def _tool_spec(name: str) -> dspy.Tool:
    arg, desc = _TOOL_DOCS[name]

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
        inputs = ", ".join(f"`{k}`" for k in signature.input_fields)
        instr = [signature.instructions.strip(), ""] if signature.instructions else []
        instr += [
            f"You act in steps. At each step you read {inputs} and the trajectory of your earlier steps "
            "(thought, action, observation), and you give `next_thought` (your reasoning about what to do next), "
            "`next_tool_name` and `next_tool_args`. The tool's answer is added to the trajectory as the next observation.",
            "The tools are:",
        ]
        for i, (name, (arg, desc)) in enumerate(_TOOL_DOCS.items(), start=1):
            instr.append(f"({i}) {name}({arg or ''}): {desc}")
        instr.append('`next_tool_args` is a JSON object with the tool\'s argument, e.g. {"query": "Riemannian geometry"}, '
                     '{"qid": "Q42"}, {"sparql": "SELECT ?x WHERE { wd:Q42 wdt:P19 ?x }"}; {} for stop.')
        # The fields that change at every step come after the trajectory: the prompt's prefix stays the
        # same from step to step (a local model reuses its evaluated prefix) and the freshest state is
        # read last, right before the reply.
        static = {k: v for k, v in signature.input_fields.items() if k not in DYNAMIC_INPUTS}
        react_signature = dspy.Signature(static, "\n".join(instr)).append(
            "trajectory", dspy.InputField(desc="your earlier steps"), type_=str)
        for name in DYNAMIC_INPUTS:
            if name in signature.input_fields:
                field_info = signature.input_fields[name]
                react_signature = react_signature.append(name, field_info, type_=field_info.annotation)
        react_signature = (
            react_signature
            .append("next_thought", dspy.OutputField(desc="in one or two short sentences: what you learnt and what to do next"), type_=str)
            .append("next_tool_name", dspy.OutputField(desc="one of: " + ", ".join(TOOL_NAMES)), type_=str)
            .append("next_tool_args", dspy.OutputField(desc="JSON object of the tool's arguments"), type_=str)
        )
        fallback_signature = dspy.Signature(
            {**static, **signature.output_fields},
            (signature.instructions or "")
            + "\n\nThe steps are over. From the trajectory, write the final SPARQL query that answers the question.",
        ).insert(len(static), "trajectory", dspy.InputField(desc="your earlier steps"), type_=str)
        for offset, name in enumerate(n for n in DYNAMIC_INPUTS if n in signature.input_fields):
            field_info = signature.input_fields[name]
            fallback_signature = fallback_signature.insert(len(static) + 1 + offset, name, field_info,
                                                           type_=field_info.annotation)
        self.react = dspy.Predict(react_signature)
        self.extract = dspy.Predict(fallback_signature)

    # -- one step --------------------------------------------------------------------

    def _budget(self, episode: "Episode", inputs: dict[str, Any], predictor: dspy.Predict) -> int:
        """Characters left for the trajectory in this call's prompt."""
        adapter = dspy.settings.adapter or ChatAdapter()
        try:
            demos = episode.demos if (predictor is self.react and episode.demos is not None) else predictor.demos
            messages = adapter.format(predictor.signature, demos, {**inputs, "trajectory": ""})
            fixed = sum(len(str(m.get("content") or "")) for m in messages)
        except Exception:
            fixed = 6000
        settings = episode.settings
        total = int((settings.context_window - settings.max_tokens) * CHARS_PER_TOKEN * episode.budget_scale)
        return max(MIN_TRAJECTORY_CHARS, total - fixed)

    def _call(self, episode: "Episode", predictor: dspy.Predict, **extra):
        """One predictor call with the episode's current inputs; shrinks the trajectory on overflow."""
        last: BaseException | None = None
        for _attempt in range(4):
            inputs = episode.inputs()
            budget = self._budget(episode, inputs, predictor)
            trajectory = render_trajectory(episode.steps, budget, observation_chars=episode.settings.observation_chars)
            episode.last_trajectory_chars = len(trajectory)
            try:
                if predictor is self.react and episode.demos is not None:
                    return predictor(**inputs, trajectory=trajectory, demos=episode.demos, **extra)
                return predictor(**inputs, trajectory=trajectory, **extra)
            except Exception as exc:
                if not _is_context_overflow(exc):
                    raise
                last = exc
                episode.overflows += 1
                episode.budget_scale *= 0.5
                if episode.demos:
                    episode.demos = episode.demos[:-1]
                log.warning("context window exceeded; shrinking the trajectory (scale %.2f)", episode.budget_scale)
        raise ContextWindowExceededError(message=f"the prompt does not fit even after shrinking: {last}")

    def forward(self, episode: "Episode"):  # type: ignore[override]
        failures = 0
        limit = episode.max_steps
        index = 0
        while index < limit:
            index += 1
            # after a repeated action, sample instead of decoding greedily: the same prompt prefix
            # would otherwise give the same reply again
            extra = {"config": {"temperature": REPEAT_TEMPERATURE}} if episode.repeats else {}
            try:
                pred = self._call(episode, self.react, **extra)
            except (AdapterParseError, ValueError) as exc:
                failures += 1
                episode.notes.append(f"unreadable reply at step {index}: {_one_line(str(exc), 160)}")
                episode.add_step(Step(
                    "(the reply could not be read)", "none", {},
                    "Your last reply could not be read. Answer with the three fields next_thought, next_tool_name "
                    "(one of " + ", ".join(TOOL_NAMES) + ") and next_tool_args (a JSON object), each after its "
                    "[[ ## field ## ]] header.",
                    note="unparsable"))
                if failures >= MAX_CONSECUTIVE_FAILURES:
                    episode.notes.append("stopped after repeated unreadable replies")
                    break
                continue
            except ContextWindowExceededError as exc:
                episode.notes.append(f"context window exceeded: {_one_line(str(exc), 200)}")
                break
            except Exception as exc:  # the LM itself failed (server down, model missing, ...)
                failures += 1
                episode.lm_errors.append(f"{type(exc).__name__}: {_one_line(str(exc), 300)}")
                if failures >= 2 or isinstance(exc, LMError) and not getattr(exc, "retryable", False):
                    break
                continue
            failures = 0
            accepted = episode.run_tool(pred)
            if accepted is True:
                break
            if accepted == "extend":
                limit = max(limit, index + CHECK_EXTRA_STEPS)
            if accepted == "repeat" and episode.repeats >= MAX_REPEATS:
                episode.notes.append(f"stopped after {MAX_REPEATS} repeated actions in a row")
                break
        return dspy.Prediction(trajectory=[s.to_dict() for s in episode.steps])

    def extract_query(self, episode: "Episode") -> str | None:
        """The fallback: ask the extract predictor for the final query from the trajectory."""
        try:
            pred = self._call(episode, self.extract)
        except Exception as exc:
            episode.notes.append(f"extract failed: {type(exc).__name__}: {_one_line(str(exc), 200)}")
            return None
        text = _MARKER.sub(" ", str(getattr(pred, "sparql", "") or "")).strip()
        return _FENCE.sub("", text).strip() or None


# --- per-question state ------------------------------------------------------------------------


@dataclass
class Episode:
    """Everything that belongs to one question (one forward() call)."""

    program: "SagaProgram"
    settings: Settings
    question: str
    ctx: Any
    tools: dict[str, Callable]
    variant: str
    answer_type: AnswerTypeInfo | None
    form: str
    demos: list | None = None
    on_event: Callable[..., None] | None = None
    max_steps: int = 15
    steps: list[Step] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    lm_errors: list[str] = field(default_factory=list)
    accepted_final: str | None = None
    form_rejections: int = 0
    no_query_rejections: int = 0
    empty_rejections: int = 0
    checked: bool = False
    overflows: int = 0
    budget_scale: float = 1.0
    last_trajectory_chars: int = 0
    extra_executions: int = 0
    done: dict[tuple[str, str], int] = field(default_factory=dict)  # action -> the step that ran it
    repeats: int = 0  # identical actions in a row
    final: str | None = None
    final_source: str | None = None
    rewritten_from: str | None = None

    # -- what the controller reads at each step --------------------------------------------

    def inputs(self) -> dict[str, Any]:
        if self.variant == "spinach":
            return {"question": self.question}
        kept = getattr(getattr(self.ctx, "flags", None), "type_state", self.variant != "no-type-state")
        type_context = _ctx_text(self.ctx, "type_context")
        knowledge_log = _ctx_text(self.ctx, "knowledge_log")
        if not kept:
            type_context = type_context or NO_TYPE_STATE_TEXT
            knowledge_log = knowledge_log or NO_TYPE_STATE_TEXT
        return {
            "question": self.question,
            "answer_type": self.answer_type.render() if self.answer_type is not None else "unknown",
            "query_form": QUERY_FORM_GUIDE[self.form],
            "type_context": type_context or "(none yet)",
            "knowledge_log": knowledge_log or "(none yet)",
        }

    def emit(self, kind: str, **payload) -> None:
        if self.on_event is not None:
            try:
                self.on_event(kind, **payload)
            except Exception:  # a printer must not break the question
                log.debug("on_event failed", exc_info=True)

    def add_step(self, step: Step) -> None:
        self.steps.append(step)
        self.emit("step", index=len(self.steps), step=step)

    # -- acting -------------------------------------------------------------------------------

    def run_tool(self, pred) -> bool | str:
        """Run the chosen tool; True when the episode is finished, 'extend' for CheckAnswer's extra steps."""
        thought = str(getattr(pred, "next_thought", "") or "").strip()
        raw_name = getattr(pred, "next_tool_name", "")
        raw_args = getattr(pred, "next_tool_args", {})
        name = normalize_tool_name(raw_name, self.tools)
        if name is None:
            self.add_step(Step(thought, str(raw_name), _as_dict(raw_args),
                               f"There is no tool {str(raw_name)!r}. Use one of: {', '.join(self.tools)}.",
                               note="unknown-tool"))
            return False
        func = self.tools[name]
        params = _params_of(func)
        args = parse_tool_args(raw_args, params)
        if name == "stop":
            return self._stop(thought, raw_args)
        missing = [p for p in params if p not in args]
        if missing:
            self.add_step(Step(thought, name, args, f"{name} needs the argument {missing[0]!r}, e.g. "
                               f'{{"{missing[0]}": "..."}}.', note="bad-args"))
            return False
        key = _action_key(name, args)
        if key in self.done:  # the same call again: its result would be the same
            self.repeats += 1
            self.add_step(Step(thought, name, args, (
                f"[REPEATED] You already called {name} with these arguments at step {self.done[key]}; the result "
                "is the same (see above). Do something else: use what you found, e.g. write the SPARQL query "
                "with the ids you have and execute it, or stop if the last query answered the question."),
                note="repeated"))
            return "repeat"
        self.repeats = 0
        self.add_step(Step(thought, name, args, self._call_tool(name, func, args)))
        self.done[key] = len(self.steps)
        return False

    def _call_tool(self, name: str, func: Callable, args: dict[str, Any]) -> str:
        try:
            out = func(**args)
        except Exception as exc:
            log.debug("tool %s failed", name, exc_info=True)
            return f"Error in {name}: {type(exc).__name__}: {_one_line(str(exc), 300)}"
        return out if isinstance(out, str) else str(out)

    def suggested_query(self) -> str | None:
        """The query the latest lookup proposed (its ★ property), if any."""
        return self.ctx.suggested_sparql or None

    def _execute_for_stop(self, thought: str, sparql: str, note: str) -> None:
        """Run a query that stop implies, as a step of its own, before stop is judged."""
        observation = self._call_tool("execute_sparql", self.tools["execute_sparql"], {"sparql": sparql})
        self.extra_executions += 1
        self.add_step(Step(thought, "execute_sparql", {"sparql": sparql}, observation, note=note))

    def _stop(self, thought: str, raw_args: Any) -> bool | str:
        # A query given to stop (small models do that) is executed first, so stop marks it.
        given = parse_tool_args(raw_args, ["sparql"]).get("sparql")
        if (isinstance(given, str) and form_of(given) in QUERY_FORMS
                and given.strip() != (self.last_executed() or "").strip()):
            self._execute_for_stop(thought, given, "from-stop")
        suggestion = self.suggested_query() if not self.last_executed() else None
        if suggestion and not self.no_query_rejections:
            # Stop right after a lookup: a small model takes the lookup's proposed query as done.
            self._execute_for_stop(thought, suggestion, "from-suggestion")
        observation = self._call_tool("stop", self.tools["stop"], {})
        final = _ctx_final(self.ctx) or self.last_executed()
        if not final:
            if self.no_query_rejections < MAX_NO_QUERY_REJECTIONS:
                self.no_query_rejections += 1
                suggestion = self.suggested_query()
                example = f' For example: execute_sparql({{"sparql": "{suggestion}"}}).' if suggestion else ""
                self.add_step(Step(thought, "stop", {}, "No query has been executed yet, so there is no final query. "
                                   "Execute the query that answers the question with execute_sparql, then stop."
                                   + example, note="rejected"))
                return False
            self.add_step(Step(thought, "stop", {}, observation))
            return True
        status = self.status_of(final)
        if (status in ("empty", "blocked") and self.variant != "spinach"
                and self.empty_rejections < MAX_EMPTY_REJECTIONS):
            self.empty_rejections += 1
            self.add_step(Step(thought, "stop", {}, (
                f"Not accepted: the final query returns no result ({status}). The question has an answer in the "
                "graph: change the property, its direction or the entity, execute the query again, then stop."),
                note="rejected"))
            return False
        problem = form_problem(self.form, final, self.result_of(final))
        if problem and self.form_rejections < MAX_FORM_REJECTIONS:
            self.form_rejections += 1
            self.add_step(Step(thought, "stop", {}, "Not accepted. " + problem, note="rejected"))
            return False
        if self.program.settings.check_answer and not self.checked:
            self.checked = True
            verdict = self.program._check(self, final)
            if verdict:
                self.add_step(Step(thought, "stop", {}, "Not accepted yet. " + verdict, note="rejected"))
                return "extend"
        self.accepted_final = final
        self.add_step(Step(thought, "stop", {}, observation))
        return True

    # -- executions ---------------------------------------------------------------------------

    def executions(self) -> list[Any]:
        return list(getattr(self.ctx, "executions", []) or [])

    def last_executed(self) -> str | None:
        for ex in reversed(self.executions()):
            if getattr(ex, "sparql", None):
                return ex.sparql
        return None

    def result_of(self, sparql: str) -> Any:
        for ex in reversed(self.executions()):
            if (getattr(ex, "sparql", "") or "").strip() == sparql.strip():
                return getattr(ex, "result", None)
        return None

    def status_of(self, sparql: str) -> str | None:
        for ex in reversed(self.executions()):
            if (getattr(ex, "sparql", "") or "").strip() == sparql.strip():
                return getattr(ex, "status", None)
        return None


def _action_key(name: str, args: dict[str, Any]) -> tuple[str, str]:
    text = json.dumps(args, sort_keys=True, ensure_ascii=False, default=str)
    return name, " ".join(text.split()).lower() if name != "execute_sparql" else " ".join(text.split())


def _as_dict(value: Any) -> dict[str, Any]:
    if isinstance(value, dict):
        return value
    return {"raw": str(value)} if value not in (None, "") else {}


def _ctx_text(ctx: Any, name: str) -> str:
    attr = getattr(ctx, name, None)
    try:
        value = attr() if callable(attr) else attr
    except Exception as exc:
        log.debug("ctx.%s() failed: %s", name, exc)
        return ""
    return str(value or "").strip()


def _ctx_final(ctx: Any) -> str | None:
    value = getattr(ctx, "final_sparql", None)
    return value.strip() if isinstance(value, str) and value.strip() else None


def _nonempty(result: Any) -> bool:
    if isinstance(result, AskResult):
        return True
    if isinstance(result, SelectResult):
        return bool(result.rows)
    return False


# --- shared resources ------------------------------------------------------------------------


class _Resources:
    """Endpoint, search, schema and the default LM: opened lazily, shared by copies of the program.

    `copy.deepcopy` returns the same object, so dspy's deepcopy / reset_copy (optimisers,
    load_state's trial run) never duplicate worker processes or open files.
    """

    def __init__(self, settings: Settings, endpoint=None, search=None, lm=None):
        self.settings = settings
        self._endpoint = endpoint
        self._search = search
        self._lm = lm
        self._schema: Any = None
        self._hierarchy: Any = None
        self._owns_endpoint = False
        self._lock = threading.RLock()

    def __deepcopy__(self, memo):
        return self

    def __copy__(self):
        return self

    @property
    def endpoint(self):
        with self._lock:
            if self._endpoint is None:
                from saga_dspy.kg.endpoint import open_endpoint

                self._endpoint = open_endpoint(self.settings)
                self._owns_endpoint = True
            return self._endpoint

    @property
    def search(self):
        with self._lock:
            if self._search is None:
                from saga_dspy.kg.search import open_search

                self._search = open_search(self.settings, self.endpoint)
            return self._search

    @property
    def schema(self):
        with self._lock:
            if self._schema is None:
                from saga_dspy.schema import load_schema_index

                self._schema = load_schema_index(self.settings)
            return self._schema

    @property
    def hierarchy(self):
        with self._lock:
            if self._hierarchy is None:
                from saga_dspy.schema import load_hierarchy

                self._hierarchy = load_hierarchy(self.settings, self.endpoint, self.schema)
            return self._hierarchy

    def lm(self):
        """The LM of this program: the one given, else dspy's configured LM, else build_lm(settings)."""
        if self._lm is not None:
            return self._lm
        if dspy.settings.lm is not None:
            return None  # use whatever dspy.settings / dspy.context provides
        with self._lock:
            if self._lm is None:
                from saga_dspy.lm import build_lm

                self._lm = build_lm(self.settings)
            return self._lm

    def close(self) -> None:
        with self._lock:
            if self._owns_endpoint and self._endpoint is not None:
                self._endpoint.close()
                self._endpoint = None


# --- the program --------------------------------------------------------------------------------


class _HybridMethod:
    """A method that is a classmethod on the class and a normal method on an instance."""

    def __init__(self, on_class: Callable, on_instance: Callable):
        self.on_class = on_class
        self.on_instance = on_instance

    def __get__(self, instance, owner):
        if instance is None:
            return self.on_class.__get__(owner, type(owner))
        return self.on_instance.__get__(instance, owner)


class SagaProgram(dspy.Module):
    """SAGA: answer type, then a schema-aware ReAct controller over the grounding tools.

    Args:
        settings: the run's Settings (variant, max_steps, demos, check_answer, kg, ...).
        endpoint, search: shared KG endpoint and entity search (opened from settings when None).
        demo_pool: a `DemoPool`, a JSONL file or records (default `<data_dir>/demos/<dataset>.jsonl`).
        lm: an LM for this program (default: dspy's configured LM, else `build_lm(settings)`).
    """

    def __init__(self, settings: Settings | None = None, endpoint=None, search=None, *,
                 demo_pool=None, lm: dspy.BaseLM | None = None):
        super().__init__()
        settings = settings or Settings()
        if settings.variant not in VARIANTS:
            raise ValueError(f"unknown variant {settings.variant!r}; one of {', '.join(VARIANTS)}")
        self.settings = settings
        self.variant = settings.variant
        self.resources = _Resources(settings, endpoint, search, lm)
        spinach = self.variant == "spinach"
        self.answer_type = dspy.Predict(kg_signature(AnswerType, settings.kg))
        self.answer_type.demos = answer_type_demos(settings.kg)
        controller = kg_signature(SpinachController if spinach else SagaController, settings.kg)
        self.react = SagaReAct(controller, max_iters=settings.max_steps)
        self.prune = dspy.Predict(PruneNeighborhood)
        self.check = dspy.Predict(CheckAnswer)
        self._demo_pool_arg = demo_pool
        self._demo_pool = None
        self._pool_lock = _SharedLock()
        if settings.program:  # a compiled program named in the settings
            dspy.Module.load(self, settings.program)

    # -- loading -------------------------------------------------------------------------

    def _load_into(self, path, **kwargs):
        dspy.Module.load(self, path, **kwargs)
        return self

    @classmethod
    def _load_new(cls, path, settings: Settings | None = None, endpoint=None, search=None, **kwargs):
        load_kwargs = {k: kwargs.pop(k) for k in ("allow_pickle", "allow_unsafe_lm_state") if k in kwargs}
        program = cls(settings, endpoint, search, **kwargs)
        dspy.Module.load(program, path, **load_kwargs)
        return program

    load = _HybridMethod(_load_new.__func__, _load_into)

    # -- resources -------------------------------------------------------------------------

    @property
    def endpoint(self):
        return self.resources.endpoint

    def close(self) -> None:
        self.resources.close()

    def demo_pool(self):
        if self.settings.demos <= 0:
            return None
        with self._pool_lock:
            if self._demo_pool is None:
                from saga_dspy.demos import load_demo_pool

                try:
                    self._demo_pool = load_demo_pool(self.settings, self._demo_pool_arg,
                                                     spinach=self.variant == "spinach")
                except Exception as exc:
                    log.warning("demo pool unavailable: %s", exc)
                    from saga_dspy.demos import DemoPool

                    self._demo_pool = DemoPool([])
            return self._demo_pool

    # -- the question ------------------------------------------------------------------------

    def forward(self, question: str, prior_turns: list[str] | str | None = None,
                on_event: Callable[..., None] | None = None) -> dspy.Prediction:
        started = time.monotonic()
        counter = _LMCallCounter()
        episode: Episode | None = None
        error: str | None = None
        usage_totals: dict[str, dict[str, Any]] = {}
        try:
            lm = self.resources.lm()
        except Exception as exc:
            return self._empty(question, f"no language model: {type(exc).__name__}: {exc}", started)
        context_kwargs: dict[str, Any] = {"callbacks": [*(dspy.settings.callbacks or []), counter]}
        if lm is not None:
            context_kwargs["lm"] = lm
        box: list[Episode] = []
        try:
            with dspy.context(**context_kwargs), dspy.track_usage() as usage:
                try:
                    self._run(question, prior_turns, on_event, box)
                except Exception as exc:  # never raise out of forward
                    log.warning("question failed: %s", exc, exc_info=True)
                    error = f"{type(exc).__name__}: {_one_line(str(exc), 500)}"
                    if box and getattr(box[0], "final", None) is None:
                        try:  # keep what the steps found
                            self._finish(box[0], extract=False)
                        except Exception:
                            log.debug("finishing a failed question failed", exc_info=True)
                finally:
                    usage_totals = usage.get_total_tokens()
        except Exception as exc:
            error = error or f"{type(exc).__name__}: {_one_line(str(exc), 500)}"
        episode = box[0] if box else None
        if episode is None:
            pred = self._empty(question, error or "failed", started)
            pred.counters["lm_calls"] = counter.calls
            pred.counters["prompt_tokens"], pred.counters["completion_tokens"] = _token_totals(usage_totals)
            return pred
        return self._prediction(episode, counter, usage_totals, started, error)

    def _run(self, question: str, prior_turns, on_event, box: list) -> Episode:
        settings = self.settings
        text = str(question or "").strip()
        if prior_turns:
            turns = [prior_turns] if isinstance(prior_turns, str) else list(prior_turns)
            text = "Earlier turns:\n" + "\n".join(f"- {t}" for t in turns) + f"\nQuestion: {text}"

        # 1. answer type, once (not in the ablation without it, nor in the SPINACH baseline)
        answer_type: AnswerTypeInfo | None = None
        notes: list[str] = []
        if self.variant not in ("no-answer-type", "spinach"):
            try:
                raw = self.answer_type(question=str(question), config={"max_tokens": ANSWER_TYPE_MAX_TOKENS})
                answer_type = AnswerTypeInfo.from_raw(getattr(raw, "answer_type_label", ""),
                                                      getattr(raw, "answer_type_qid", ""), settings.kg)
            except Exception as exc:
                notes.append(f"answer type failed: {type(exc).__name__}: {_one_line(str(exc), 200)}")
                answer_type = AnswerTypeInfo.from_raw("boolean" if is_yes_no_question(question) else "", "")
            if not answer_type.label and is_yes_no_question(question):
                answer_type = AnswerTypeInfo.from_raw("boolean", "")
            # issue 12: the question's own cues guard the LM's answer type (grounding/answer_cues.py)
            if settings.kg == "wikidata":
                label, qid = guard(rule_answer_type(str(question), self.resources.schema),
                                   answer_type.label, answer_type.qid)
                if (label, qid) != (answer_type.label, answer_type.qid):
                    answer_type = AnswerTypeInfo.from_raw(label, qid, settings.kg)
            # --- end issue 12 ---
        form = decide_query_form(answer_type, str(question))

        # 2. the grounding context and tools of this question
        ctx = self._new_context(str(question), answer_type)
        tools = self._tools(ctx)
        pool = self.demo_pool()
        # per-question demos replace the predictor's own (compiled) demos for this call only
        demos = (pool.select(str(question), settings.demos, form) if pool is not None and len(pool) else None) or None

        episode = Episode(self, settings, text, ctx, tools, self.variant, answer_type, form,
                          demos=demos, on_event=on_event, max_steps=settings.max_steps, notes=notes)
        box.append(episode)
        episode.emit("start", question=text, answer_type=answer_type, form=form, demos=len(demos or []))

        # 3. the ReAct loop
        self.react(episode)

        # 4. the final query
        self._finish(episode)
        return episode

    # -- grounding adapters ----------------------------------------------------------------------

    def _prune_callable(self, question: str) -> Callable[..., list[str]]:
        """The fallback neighbourhood pruning handed to the grounding context: (question, neighbourhood) -> PIDs."""
        kg = self.settings.kg

        def prune(prune_question: str | None = None, neighborhood: str = "", *args, **kwargs) -> list[str]:
            text = neighborhood or kwargs.get("neighbourhood") or kwargs.get("neighborhood") or (args[0] if args else "")
            try:
                out = self.prune(question=str(prune_question or question), neighborhood=str(text),
                                 config={"max_tokens": PRUNE_MAX_TOKENS})
            except Exception as exc:
                log.info("pruning failed (%s): keeping the neighbourhood", exc)
                return []
            return parse_pids(getattr(out, "relevant_pids", None), kg)

        return prune

    def _new_context(self, question: str, answer_type: AnswerTypeInfo | None):
        from saga_dspy.grounding import context as gctx

        return build_question_context(gctx.QuestionContext, self.settings, self.resources, question,
                                      answer_type, self.variant, self._prune_callable(question))

    def _tools(self, ctx) -> dict[str, Callable]:
        from saga_dspy.grounding.tools import make_tools

        tools = {}
        for tool in make_tools(ctx):
            name = getattr(tool, "name", None) or getattr(tool, "__name__", None)
            func = getattr(tool, "func", tool)
            tools[str(name)] = func
        return tools

    # -- the answer check ---------------------------------------------------------------------------

    def _check(self, episode: Episode, final: str) -> str | None:
        """CheckAnswer's verdict: None when complete, else what to fix."""
        result = episode.result_of(final)
        try:
            out = self.check(question=episode.question,
                             answer_type=episode.answer_type.render() if episode.answer_type else "unknown",
                             query_form=QUERY_FORM_GUIDE[episode.form], sparql=final,
                             result_sample=result_sample(result))
        except Exception as exc:
            episode.notes.append(f"check failed: {type(exc).__name__}")
            return None
        complete = getattr(out, "complete", True)
        if isinstance(complete, str):
            complete = complete.strip().lower() not in ("false", "no", "0")
        if complete:
            return None
        problem = str(getattr(out, "problem", "") or "").strip()
        return f"A check found the query incomplete: {problem or 'it does not answer the question as asked'}. Fix it, execute it, then stop."

    # -- the final query ------------------------------------------------------------------------

    def _finish(self, episode: Episode, extract: bool = True) -> None:
        source = None
        final = episode.accepted_final
        if final:
            source = "stop"
        if not final:
            for ex in reversed(episode.executions()):
                if getattr(ex, "status", None) not in ("blocked", "error") and _nonempty(getattr(ex, "result", None)):
                    final, source = ex.sparql, "last-nonempty"
                    break
        acted = any(s.note not in ("unparsable", "unknown-tool", "bad-args", "repeated") for s in episode.steps)
        if not final and acted and extract:
            final = self.react.extract_query(episode)
            source = "extract" if final else None
        if not final:
            final = episode.last_executed()
            source = "last-executed" if final else None
        episode.final = final
        episode.final_source = source
        episode.rewritten_from = None
        if not final:
            return
        problem = form_problem(episode.form, final, episode.result_of(final))
        if problem:
            target = "COUNT" if episode.form == "COUNT" else episode.form
            rewritten = rewrite_head(final, target)
            if rewritten:
                episode.rewritten_from = final
                episode.final = rewritten
                episode.final_source = f"{source}+rewritten"
            else:
                episode.notes.append(f"the final query has the wrong form ({form_of(final)} for {episode.form})")

    def _prediction(self, episode: Episode, counter: _LMCallCounter, usage_totals, started: float,
                    error: str | None) -> dspy.Prediction:
        final = episode.final
        answers = None
        status = "none"
        final_error = None  # the final query's own failure: the agent's mistake, not the program's
        if final:
            if episode.status_of(final) == "blocked":
                status = "blocked"
            else:
                try:
                    answers = self.resources.endpoint.query(final)
                    status = "ok" if _nonempty(answers) else "empty"
                except SparqlError as exc:
                    status = "error"
                    final_error = f"{exc.kind}: {exc}"
                except Exception as exc:
                    status = "error"
                    final_error = f"{type(exc).__name__}: {exc}"
        if error is None and episode.lm_errors and not episode.steps:
            error = episode.lm_errors[-1]
        counters = self._counters(episode, counter, usage_totals, started)
        at = episode.answer_type
        pred = dspy.Prediction(
            question=episode.question,
            sparql=final or "",
            answers=answers,
            answer_type=at.render() if at is not None else "",
            answer_type_label=at.label if at is not None else "",
            answer_type_qid=at.qid if at is not None else "",
            query_form=episode.form,
            trajectory=[s.to_dict() for s in episode.steps],
            counters=counters,
            final_status=status,
            final_error=final_error,
            final_source=episode.final_source,
            rewritten_from=episode.rewritten_from,
            variant=self.variant,
            notes=list(episode.notes) + [f"LM error: {e}" for e in episode.lm_errors],
            error=error,
        )
        episode.emit("final", prediction=pred)
        return pred

    def _counters(self, episode: Episode, counter: _LMCallCounter, usage_totals, started: float) -> dict[str, Any]:
        ctx_counters = dict(getattr(episode.ctx, "counters", {}) or {})
        prompt, completion = _token_totals(usage_totals)
        return {
            "steps": len([s for s in episode.steps]),
            "lookups": int(ctx_counters.get("lookups", 0)),
            "searches": int(ctx_counters.get("searches", 0)),
            "examples": int(ctx_counters.get("examples", 0)),
            "executions": int(ctx_counters.get("executions", 0)),
            "blocked": int(ctx_counters.get("blocked", 0)),
            "empty": int(ctx_counters.get("empty", 0)),
            "prunes": int(ctx_counters.get("prune_calls", 0)),
            "unparsable": sum(1 for s in episode.steps if s.note == "unparsable"),
            "rejected": sum(1 for s in episode.steps if s.note == "rejected"),
            "repeated": sum(1 for s in episode.steps if s.note == "repeated"),
            "overflows": episode.overflows,
            "lm_calls": counter.calls,
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "seconds": round(time.monotonic() - started, 3),
        }

    def _empty(self, question: str, error: str, started: float) -> dspy.Prediction:
        return dspy.Prediction(
            question=question, sparql="", answers=None, answer_type="", answer_type_label="",
            answer_type_qid="", query_form="", trajectory=[], final_status="error" if error else "none",
            final_error=None,
            final_source=None, rewritten_from=None, variant=self.variant, notes=[], error=error,
            counters={"steps": 0, "lookups": 0, "searches": 0, "examples": 0, "executions": 0, "blocked": 0,
                      "empty": 0, "prunes": 0, "unparsable": 0, "rejected": 0, "repeated": 0, "overflows": 0, "lm_calls": 0,
                      "prompt_tokens": 0, "completion_tokens": 0,
                      "seconds": round(time.monotonic() - started, 3)},
        )


def answer_type_demos(kg: str = "wikidata") -> list[dspy.Example]:
    """The answer-type step's built-in examples (one per kind of answer; replaced by a compiled program's)."""
    freebase = kg == "freebase"
    rows = [
        ("Who is the mayor of Paris?", "person", "people.person" if freebase else "Q5"),
        ("In which country is the Matterhorn?", "country", "location.country" if freebase else "Q6256"),
        ("Is the Rhine longer than the Danube?", "boolean", ""),
        ("How many moons does Mars have?", "quantity", ""),
        ("When did the Berlin Wall fall?", "date", ""),
    ]
    return [dspy.Example(question=q, answer_type_label=label, answer_type_qid=qid).with_inputs("question")
            for q, label, qid in rows]


class _SharedLock:
    """A lock that copies of the module share (deepcopy returns itself)."""

    def __init__(self):
        self._lock = threading.Lock()

    def __enter__(self):
        self._lock.acquire()
        return self

    def __exit__(self, *exc):
        self._lock.release()

    def __deepcopy__(self, memo):
        return self

    def __copy__(self):
        return self


def build_question_context(cls, settings: Settings, resources: "_Resources", question: str,
                           answer_type: AnswerTypeInfo | None, variant: str, prune: Callable):
    """A grounding QuestionContext for one question (thin adapter: passes what its constructor accepts)."""
    available = {
        "settings": settings,
        "endpoint": resources.endpoint,
        "search": resources.search,
        "schema": resources.schema,
        "hierarchy": resources.hierarchy,
        "question": question,
        "variant": variant,
        "prune": prune,
        "answer_type": (answer_type.label, answer_type.qid) if answer_type is not None and answer_type.label else None,
        "kg": settings.kg,
    }
    params = inspect.signature(cls).parameters
    kwargs = {name: value for name, value in available.items() if name in params and value is not None}
    return cls(**kwargs)


def result_sample(result: Any, rows: int = RESULT_SAMPLE_ROWS) -> str:
    if result is None:
        return "(not executed)"
    if isinstance(result, AskResult):
        return f"ASK -> {str(result.value).lower()}"
    if isinstance(result, SelectResult):
        if not result.rows:
            return "(no rows)"
        lines = []
        for row in result.rows[:rows]:
            lines.append(", ".join(f"?{k}={b.value}" for k, b in row.items()))
        more = f"\n… {len(result.rows) - rows} more rows" if len(result.rows) > rows else ""
        return "\n".join(lines) + more
    return str(result)[:500]


# --- labels for printing ----------------------------------------------------------------------------

WD_ENTITY = "http://www.wikidata.org/entity/"


def answer_labels(endpoint, result: Any, limit: int = 50) -> dict[str, str]:
    """English labels of the Wikidata entities in a result (IRI -> label); {} on any failure."""
    if not isinstance(result, SelectResult):
        return {}
    iris = []
    for binding in result.values():
        if binding.type == "uri" and binding.value.startswith(WD_ENTITY) and binding.value not in iris:
            iris.append(binding.value)
    iris = iris[:limit]
    if not iris:
        return {}
    values = " ".join(f"<{iri}>" for iri in iris)
    query = (f"SELECT ?e ?l WHERE {{ VALUES ?e {{ {values} }} ?e <http://www.w3.org/2000/01/rdf-schema#label> ?l . "
             f"FILTER(LANGMATCHES(LANG(?l), \"en\")) }}")
    try:
        labels = endpoint.query(query)
    except Exception:
        return {}
    out: dict[str, str] = {}
    if isinstance(labels, SelectResult):
        for row in labels.rows:
            if "e" in row and "l" in row:
                out.setdefault(row["e"].value, row["l"].value)
    return out


__all__ = [
    "Episode",
    "SagaProgram",
    "SagaReAct",
    "Step",
    "answer_labels",
    "form_of",
    "form_problem",
    "normalize_tool_name",
    "parse_tool_args",
    "render_trajectory",
    "result_sample",
    "rewrite_head",
]
