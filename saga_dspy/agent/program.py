"""The SAGA agent as a DSPy program (paper Algorithm 1, with the remedies of `agent.final_query`).

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

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import dspy

from saga_dspy.agent import final_query
from saga_dspy.agent.answer_cues import decides, guard, items_class, rule_answer_type
from saga_dspy.agent.answer_type import AnswerTypeInfo, answer_type_demos
from saga_dspy.agent.calls import QuestionCalls
from saga_dspy.agent.compiled_pool import STATE_KEY, CompiledPool
from saga_dspy.agent.decisions import ANSWER_TYPE, CompiledDecisions
from saga_dspy.agent.decisions import STATE_KEY as DECISIONS_KEY
from saga_dspy.agent.demos import DemoGuard, DemoPool
from saga_dspy.agent.episode import Episode
from saga_dspy.agent.failures import INFRASTRUCTURE, PROGRAM, InfrastructureError, is_infrastructure_error
from saga_dspy.agent.formatting import StringFieldsAdapter
from saga_dspy.agent.parsing import parse_pids
from saga_dspy.agent.pools import load_demo_pool
from saga_dspy.agent.prediction import empty_prediction, prediction, result_sample, token_counters
from saga_dspy.agent.query_form import decide_query_form, is_yes_no_question
from saga_dspy.agent.react import SagaReAct
from saga_dspy.agent.trajectory import one_line
from saga_dspy.config import Settings
from saga_dspy.grounding.context import QuestionContext
from saga_dspy.grounding.lexicon import load_lexicon
from saga_dspy.input_files import MAX_PROGRAM_BYTES, check_input_file, reading
from saga_dspy.kg.endpoint import Endpoint
from saga_dspy.kg.flavours import flavour_for
from saga_dspy.kg.search import Search
from saga_dspy.lm import build_lm
from saga_dspy.services import KgServices, SharedOnCopy
from saga_dspy.signatures import (
    QUERY_FORM_GUIDE,
    AnswerType,
    CheckAnswer,
    PruneNeighborhood,
    SagaController,
    SpinachController,
    kg_signature,
)
from saga_dspy.tools import ToolOutput, make_tools
from saga_dspy.variants import variant_of

log = logging.getLogger(__name__)

ANSWER_TYPE_MAX_TOKENS = 64  # a type name and a QID
PRUNE_MAX_TOKENS = 160  # a list of property ids; a model that rambles is cut off there
# --- the LM ------------------------------------------------------------------------------------


class PruneSkipped(RuntimeError):
    """The neighbourhood prune was not made: the question has no spare LM call left (see agent.calls)."""


class _ProgramLM(SharedOnCopy):
    """The program's LM: the one given, else dspy's configured LM, else build_lm(settings) on first use.

    Shared by copies of the program (deepcopy returns the same object), like the services."""

    def __init__(self, settings: Settings, lm: dspy.BaseLM | None = None):
        self.settings = settings
        self._lm = lm
        self._lock = threading.RLock()

    def __call__(self) -> dspy.BaseLM | None:
        if self._lm is not None:
            return self._lm
        if dspy.settings.lm is not None:
            return None  # use whatever dspy.settings / dspy.context provides
        with self._lock:
            if self._lm is None:
                self._lm = build_lm(self.settings)
            return self._lm


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
        demo_pool: a `DemoPool`, a JSONL file or records (default: the one `Settings.demo_pool` names,
            `agent.pools.choose_pool`).
        lm: an LM for this program (default: dspy's configured LM, else `build_lm(settings)`).
    """

    def __init__(
        self,
        settings: Settings | None = None,
        endpoint: Endpoint | None = None,
        search: Search | None = None,
        *,
        demo_pool=None,
        lm: dspy.BaseLM | None = None,
    ):
        super().__init__()
        settings = settings or Settings()
        self.variant_def = variant_of(settings.variant)  # ValueError for an unknown name
        self.settings = settings
        self.variant = settings.variant
        self.services = KgServices(settings, endpoint, search)
        self.lm_of_program = _ProgramLM(settings, lm)
        spinach = not self.variant_def.agent.schema_controller
        self.answer_type = dspy.Predict(kg_signature(AnswerType, settings.kg))
        self.answer_type.demos = answer_type_demos(settings.kg)
        controller = kg_signature(SpinachController if spinach else SagaController, settings.kg)
        self.react = SagaReAct(controller, max_iters=settings.max_steps)
        self.prune = dspy.Predict(PruneNeighborhood)
        self.check = dspy.Predict(CheckAnswer)
        self._demo_pool_arg = demo_pool
        self._demo_pool: DemoPool | None = None
        self._pool_lock = _SharedLock()
        self.compiled_pool: CompiledPool | None = None  # the pool and k a compiled program carries
        self.compiled_decisions: CompiledDecisions | None = None  # decisions compiled one by one (`agent.decisions`)
        if settings.program:  # a compiled program named in the settings
            self._load_state(settings.program)

    # -- loading -------------------------------------------------------------------------

    def _load_state(self, path, **kwargs) -> None:
        """dspy's load of a saved program (program.json: one entry per predictor), with a clear error."""
        check_input_file(path, "program", MAX_PROGRAM_BYTES)  # a FIFO or /dev/zero: one line, not a hang
        try:
            with reading(path, "program"):
                dspy.Module.load(self, path, **kwargs)
        except KeyError as exc:
            raise ValueError(
                f"{path} is not a saved SagaProgram (the program.json that optimize writes): it has no entry {exc}"
            ) from None
        except ValueError as exc:  # a compiled pool this version cannot read
            raise ValueError(f"{path} cannot be loaded: {exc}") from None

    def dump_state(self, json_mode=True):
        """dspy's per-predictor state, plus the compiled demo pool and k (`agent.compiled_pool`) where there is one."""
        state = super().dump_state(json_mode=json_mode)
        if self.compiled_pool is not None:
            state[STATE_KEY] = self.compiled_pool.to_state()
        if self.compiled_decisions is not None:
            state[DECISIONS_KEY] = self.compiled_decisions.to_state()
        return state

    def load_state(self, state, **kwargs):
        compiled = CompiledPool.from_state(state.get(STATE_KEY))  # checked before anything is loaded
        decisions = CompiledDecisions.from_state(state.get(DECISIONS_KEY))
        super().load_state(state, **kwargs)
        if compiled is not None:
            self.use_pool(compiled)
        if decisions is not None:
            self.use_decisions(decisions)
        return self

    def use_decisions(self, decisions: CompiledDecisions) -> None:
        """Make the compiled decisions this program's: the answer type's instructions and demos go to its
        predictor, the controller decisions' are used in their states (`new_episode`)."""
        self.compiled_decisions = decisions
        answer_type = decisions.get(ANSWER_TYPE)
        if answer_type is not None:
            answer_type.apply(self.answer_type)

    def use_pool(self, compiled: CompiledPool) -> None:
        """Pick the per-question demos from `compiled` (its k a question) instead of the dataset's pool file."""
        self.compiled_pool = compiled
        self.settings = self.settings.model_copy(update={"demos": compiled.k})
        with self._pool_lock:
            self._demo_pool_arg = list(compiled.records)
            self._demo_pool = None

    def _load_into(self, path, **kwargs):
        self._load_state(path, **kwargs)
        return self

    def _load_new(  # bound to the class by `load` below
        cls,
        path,
        settings: Settings | None = None,
        endpoint: Endpoint | None = None,
        search: Search | None = None,
        **kwargs,
    ):
        load_kwargs = {k: kwargs.pop(k) for k in ("allow_pickle", "allow_unsafe_lm_state") if k in kwargs}
        program = cls(settings, endpoint, search, **kwargs)
        program._load_state(path, **load_kwargs)
        return program

    load = _HybridMethod(_load_new, _load_into)

    # -- resources -------------------------------------------------------------------------

    @property
    def endpoint(self) -> Endpoint:
        return self.services.endpoint

    def close(self) -> None:
        self.services.close()

    def demo_pool(self) -> DemoPool | None:
        if self.settings.demos <= 0:
            return None
        with self._pool_lock:
            if self._demo_pool is None:
                try:
                    self._demo_pool = load_demo_pool(self.settings, self._demo_pool_arg, variant=self.variant_def)
                except Exception as exc:  # a missing or broken pool file: run without demos, say why
                    log.warning("demo pool unavailable: %s", exc)
                    self._demo_pool = DemoPool([])
            return self._demo_pool

    # -- the question ------------------------------------------------------------------------

    def forward(
        self,
        question: str,
        prior_turns: list[str] | str | None = None,
        on_event: Callable[..., None] | None = None,
        demo_guard: DemoGuard | None = None,
    ) -> dspy.Prediction:
        """`demo_guard` (evaluation's test firewall for this question): demos it refuses are never shown.

        Never raises: a failure is the prediction's `error`, with the final query the steps found so far."""
        started = time.monotonic()
        deadline = started + self.settings.question_budget if self.settings.question_budget else None
        # SPINACH prunes every neighbourhood by design: its prunes are outside the bound
        calls = QuestionCalls(exempt=frozenset({"prune"}) if self.variant_def.grounding.prune_all else frozenset())
        try:
            lm = self.lm_of_program()
        except Exception as exc:  # boundary: no LM is an empty prediction with the reason
            return empty_prediction(question, f"no language model: {type(exc).__name__}: {exc}", started, self.variant)
        context: dict[str, Any] = {"callbacks": [*(dspy.settings.callbacks or []), calls]}
        if lm is not None:
            context["lm"] = lm
        if dspy.settings.adapter is None:  # DSPy's default, with plain strings written as they are
            context["adapter"] = StringFieldsAdapter(closing=self.settings.closing_line)
        run = _Run()
        try:
            with dspy.context(**context), dspy.track_usage() as usage, run.catching(self._settle_failed):
                run.episode = self._start(question, prior_turns, on_event, calls, demo_guard, deadline)
                self.react(run.episode)
                # out of time: no extract call, the steps' own queries only
                self._settle(run.episode, extract=not run.episode.budget_exceeded)
            run.usage = usage.get_total_tokens()
        except Exception as exc:  # boundary: dspy.context / usage tracking failed
            run.error = run.error or f"{type(exc).__name__}: {one_line(str(exc), 500)}"
            run.error_kind = run.error_kind or PROGRAM
        if run.episode is None:
            pred = empty_prediction(question, run.error or "failed", started, self.variant)
            pred.error_kind = run.error_kind or PROGRAM
            pred.counters.update(calls.counters())
            pred.counters.update(token_counters(run.usage))
            return pred
        endpoint = self.services.endpoint
        return prediction(run.episode, endpoint, self.variant, calls, run.usage, started, run.error, run.error_kind)

    def _start(
        self,
        question: str,
        prior_turns: list[str] | str | None,
        on_event: Callable[..., None] | None,
        calls: QuestionCalls,
        demo_guard: DemoGuard | None = None,
        deadline: float | None = None,
    ) -> Episode:
        """The question's episode, ready for its first step: the answer type (one LM call at most), then
        `new_episode`."""
        text = str(question or "").strip()
        if prior_turns:
            turns = [prior_turns] if isinstance(prior_turns, str) else list(prior_turns)
            text = "Earlier turns:\n" + "\n".join(f"- {t}" for t in turns) + f"\nQuestion: {text}"
        cue = self.answer_type_cue(str(question))
        answer_type, notes, type_dropped = self._answer_type(str(question), cue, calls, demo_guard)
        return self.new_episode(
            str(question),
            answer_type,
            cue,
            text=text,
            calls=calls,
            demo_guard=demo_guard,
            notes=notes,
            on_event=on_event,
            deadline=deadline,
            dropped=type_dropped,
        )

    def answer_type_cue(self, question: str) -> Any:
        """The question's own answer-type cue (`answer_cues.rule_answer_type`) where the variant reads cues, else
        None."""
        flags = self.variant_def.agent
        if not (flags.answer_type_step and flags.answer_type_cues and flavour_for(self.settings.kg).rule_answer_types):
            return None
        return rule_answer_type(question, self.services.schema, load_lexicon(self.settings))

    def _answer_type(
        self, question: str, cue: Any, calls: QuestionCalls, demo_guard: DemoGuard | None
    ) -> tuple[AnswerTypeInfo | None, list[str], int]:
        """(the answer type, notes, the answer-type demos the test firewall refused): the question's cue where it
        decides, else one LM call guarded by the cue (not in the ablation without it, nor in the SPINACH baseline)."""
        notes: list[str] = []
        type_dropped = 0
        if cue is not None and decides(cue):
            return AnswerTypeInfo.from_raw(cue.label, cue.qid, self.settings.kg), notes, 0  # the LM could not change it
        if not (self.variant_def.agent.answer_type_step and calls.take("answer_type")):
            return None, notes, 0
        type_demos, type_dropped = (
            demo_guard.filter_demos(self.answer_type.demos) if demo_guard else (self.answer_type.demos, 0)
        )
        try:
            with calls.one_call():
                raw = self.answer_type(
                    question=question, demos=type_demos, config={"max_tokens": ANSWER_TYPE_MAX_TOKENS}
                )
            answer_type = self.typed_answer(raw, cue, question)
        except Exception as exc:  # an LM call: the question goes on with the yes/no heuristic
            if is_infrastructure_error(exc):
                raise InfrastructureError(f"LM: {type(exc).__name__}: {one_line(str(exc), 300)}") from exc
            notes.append(f"answer type failed: {type(exc).__name__}: {one_line(str(exc), 200)}")
            answer_type = self.typed_answer(None, cue, question)
        return answer_type, notes, type_dropped

    def typed_answer(self, raw: Any, cue: Any, question: str) -> AnswerTypeInfo:
        """The answer-type step's reply (None: the call failed) as the program keeps it: normalised, `boolean` for a
        yes/no question it left untyped, guarded by the question's cue (None: no cue)."""
        kg = self.settings.kg
        answer_type = AnswerTypeInfo.from_raw(
            getattr(raw, "answer_type_label", ""), getattr(raw, "answer_type_qid", ""), kg
        )
        if not answer_type.label and is_yes_no_question(question):
            answer_type = AnswerTypeInfo.from_raw("boolean", "")
        if cue is not None:  # the question's own cues guard the LM's answer type
            label, qid = guard(cue, answer_type.label, answer_type.qid)
            if (label, qid) != (answer_type.label, answer_type.qid):
                answer_type = AnswerTypeInfo.from_raw(label, qid, kg)
        return answer_type

    def new_episode(
        self,
        question: str,
        answer_type: AnswerTypeInfo | None,
        cue: Any,
        *,
        text: str | None = None,
        calls: QuestionCalls | None = None,
        demo_guard: DemoGuard | None = None,
        notes: list[str] | None = None,
        on_event: Callable[..., None] | None = None,
        deadline: float | None = None,
        dropped: int = 0,
    ) -> Episode:
        """The episode of `question` with its answer type decided (no LM call): the query form, the grounding
        context and tools, the demos (the question's and the compiled decisions', behind `demo_guard`). `cue`: the
        question's answer-type cue (`answer_type_cue`); `text`: what the controller reads as the question (default:
        the question)."""
        settings, agent_flags = self.settings, self.variant_def.agent
        calls = calls or QuestionCalls()
        lexicon = load_lexicon(settings)
        # the form is decided where it is imposed or used to rewrite the final query; 'ANY' leaves it open
        form = (
            decide_query_form(answer_type, question, lexicon)
            if agent_flags.query_form or agent_flags.form_rewrite
            else "ANY"
        )
        items = items_class(question, self.services.schema, lexicon) if cue is not None else ""
        ctx = self._new_context(question, answer_type, calls, items=items)
        # per-question demos replace the predictor's own (compiled) demos for this call only
        demos, demos_dropped = self.question_demos(question, form, demo_guard)
        compiled = self.compiled_decisions or CompiledDecisions()
        decisions, decisions_dropped = compiled.prompts(list(self.react.react.signature.input_fields), demo_guard)
        episode = Episode(
            settings,
            question if text is None else text,
            ctx,
            self._tools(ctx),
            self.variant_def,
            answer_type,
            form,
            demos=demos,
            on_event=on_event,
            check=self._check if settings.check_answer else None,
            max_steps=settings.max_steps,
            notes=list(notes or ()),
            calls=calls,
            demos_dropped=demos_dropped + dropped + decisions_dropped,
            deadline=deadline,
            decisions=decisions,
        )
        episode.emit("start", question=episode.question, answer_type=answer_type, form=form, demos=len(demos or []))
        return episode

    def question_demos(self, question: str, form: str, demo_guard: DemoGuard | None = None) -> tuple[list | None, int]:
        """(the controller's demos for this question, how many the test firewall dropped): `_guarded_demos` on the
        program's pool."""
        return self._guarded_demos(self.demo_pool(), question, form, demo_guard)

    def _guarded_demos(
        self, pool: DemoPool | None, question: str, form: str, demo_guard: DemoGuard | None
    ) -> tuple[list | None, int]:
        """(the controller's demos for this question, how many the test firewall dropped): the
        pool's per-question demos, else None (the compiled demos), filtered when they collide."""
        allow = demo_guard.allows if demo_guard is not None else None
        demos, dropped = (
            pool.select_guarded(question, self.settings.demos, form, allow, self.settings.demo_anchors)
            if pool is not None and len(pool)
            else (None, 0)
        )
        if not demos and demo_guard is not None and self.react.react.demos:
            kept, dropped_fixed = demo_guard.filter_demos(self.react.react.demos)
            return (kept if dropped_fixed else None), dropped + dropped_fixed
        return demos or None, dropped

    # -- grounding adapters ----------------------------------------------------------------------

    def _prune_callable(self, question: str, calls: QuestionCalls) -> Callable[..., list[str]]:
        """The fallback neighbourhood pruning handed to the grounding context: (question, neighbourhood) -> PIDs.

        Without a spare LM call left it raises PruneSkipped: the lookup then shows the whole neighbourhood."""
        kg = self.settings.kg

        def prune(prune_question: str | None = None, neighborhood: str = "", *args, **kwargs) -> list[str]:
            text = (
                neighborhood or kwargs.get("neighbourhood") or kwargs.get("neighborhood") or (args[0] if args else "")
            )
            if not calls.take("prune"):
                raise PruneSkipped("no LM call left for this question")
            try:
                with calls.one_call():
                    out = self.prune(
                        question=str(prune_question or question),
                        neighborhood=str(text),
                        config={"max_tokens": PRUNE_MAX_TOKENS},
                    )
            except Exception as exc:  # an LM call: the lookup keeps the whole neighbourhood
                log.info("pruning failed (%s): keeping the neighbourhood", exc)
                return []
            return parse_pids(getattr(out, "relevant_pids", None), kg)

        return prune

    def _new_context(
        self, question: str, answer_type: AnswerTypeInfo | None, calls: QuestionCalls | None = None, items: str = ""
    ) -> QuestionContext:
        """The grounding context of one question, on the program's shared services (`items`: the class the
        question names its answers by, `answer_cues.items_class`)."""
        services = self.services
        return QuestionContext(
            self.settings,
            services.endpoint,
            services.search,
            services.schema,
            services.hierarchy,
            question=question,
            flags=self.variant_def.grounding,
            prune=self._prune_callable(question, calls or QuestionCalls()),
            answer_type=(answer_type.label, answer_type.qid, items)
            if answer_type is not None and answer_type.label
            else None,
            kg=self.settings.kg,
        )

    def _tools(self, ctx: QuestionContext) -> dict[str, Callable[..., ToolOutput]]:
        return {tool.__name__: tool for tool in make_tools(ctx)}

    # -- the answer check ---------------------------------------------------------------------------

    def _check(self, episode: Episode, final: str) -> str | None:
        """CheckAnswer's verdict: None when complete, else what to fix."""
        result = episode.result_of(final)
        if not episode.calls.take("check"):
            episode.notes.append("check skipped: no LM call left for this question")
            return None
        try:
            with episode.calls.one_call():
                out = self.check(
                    question=episode.question,
                    answer_type=episode.answer_type.render() if episode.answer_type else "unknown",
                    query_form=QUERY_FORM_GUIDE[episode.imposed_form],
                    sparql=final,
                    result_sample=result_sample(result),
                )
        except Exception as exc:  # an LM call: no verdict means the final query is accepted
            episode.notes.append(f"check failed: {type(exc).__name__}")
            return None
        complete = getattr(out, "complete", True)
        if isinstance(complete, str):
            complete = complete.strip().lower() not in ("false", "no", "0")
        if complete:
            return None
        problem = str(getattr(out, "problem", "") or "").strip()
        problem = problem or "it does not answer the question as asked"
        return f"A check found the query incomplete: {problem}. Fix it, execute it, then stop."

    # -- the final query ------------------------------------------------------------------------

    def _settle(self, episode: Episode, extract: bool = True, candidate: bool = True) -> None:
        """The episode's final query, by the final-query policy (`extract`: the extract call may be made,
        `candidate`: the lookup's candidate may be run)."""
        fallback = final_query.fallback_at_end(episode) if candidate else None
        if fallback is not None:
            episode.take(final_query.ENDED, fallback)
        ran = fallback.args["sparql"] if fallback is not None else None
        episode.final = final_query.decide(episode, self.react.extract_query if extract else None, ran)
        episode.notes.extend(episode.final.notes)

    def _settle_failed(self, episode: Episode) -> None:
        """A failed question keeps what its steps found: no LM call, no query run."""
        if episode.final is None:
            self._settle(episode, extract=False, candidate=False)


@dataclass
class _Run:
    """One forward() call so far: its episode once started, the failure that ended it, its LM usage."""

    episode: Episode | None = None
    error: str | None = None
    error_kind: str | None = None
    usage: dict[str, dict[str, Any]] = field(default_factory=dict)

    @contextlib.contextmanager
    def catching(self, settle: Callable[[Episode], None]) -> Iterator[None]:
        """A failure inside becomes `error` (the question is over, forward() goes on), the episode settled."""
        try:
            yield
        except Exception as exc:  # boundary: forward() never raises
            self.error_kind = INFRASTRUCTURE if is_infrastructure_error(exc) else PROGRAM
            if self.error_kind == INFRASTRUCTURE:
                log.warning("question stopped: %s", exc)
                self.error = one_line(str(exc), 500)
            else:
                log.warning("question failed: %s", exc, exc_info=True)
                self.error = f"{type(exc).__name__}: {one_line(str(exc), 500)}"
            if self.episode is not None:
                try:  # keep what the steps found
                    settle(self.episode)
                except Exception:  # best effort on a question that already failed
                    log.debug("finishing a failed question failed", exc_info=True)


class _SharedLock(SharedOnCopy):
    """A lock that copies of the module share (deepcopy returns itself)."""

    def __init__(self):
        self._lock = threading.Lock()

    def __enter__(self):
        self._lock.acquire()
        return self

    def __exit__(self, *exc):
        self._lock.release()


__all__ = ["SagaProgram", "result_sample"]
