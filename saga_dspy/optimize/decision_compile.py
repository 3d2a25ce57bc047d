"""`python -m saga_dspy.optimize decisions`: compile one decision of the program against its own metric.

A decision (`agent.decisions`: the answer type, the entity to look up, the candidate to take) is compiled as a module
of its own (`optimize.decision_modules`) on examples built from gold without an LM (`optimize.decision_sets`), each
scored by whether the reply makes the gold choice (`optimize.decision_metric`): one LM call an example, no agent
loop. The optimizers:

* `random-search`: BootstrapFewShotWithRandomSearch's candidates, scored here one by one: the labelled demos alone
  (every kind of choice shown before any twice), the bootstrapped demos of the train examples in order, then seeded
  shuffles with a seeded number of demos;
* `mipro`: MIPROv2 over the decision's instructions and demos (its `--auto` preset, or `--num-trials`);
* `gepa`: GEPA, reflecting on the feedback that names the gold choice and why;
* `none`: no compile: the accuracy of the program's decision as it is (the default's, or `--program`'s).

Every candidate is scored on the valset (a child MLflow run each, one step of `candidate_accuracy`); one replaces
the program's own decision only when it is clearly better: the lower end of the paired bootstrap interval of its
accuracy minus the default's is above zero (`optimize.candidates.Scorer.better`'s rule). The best so far is saved
at once, so Ctrl-C leaves it. Writes to `--out`: `decision.json` (the compiled decision and its figures),
`program.json` (the program with it, where it was kept), `config.json`, `metrics.json`.
"""

from __future__ import annotations

import random
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Unpack

import dspy

from saga_dspy.agent.decisions import ANSWER_TYPE, CANDIDATE, DECISIONS, ENTITY, CompiledDecisions
from saga_dspy.agent.program import SagaProgram
from saga_dspy.config import Settings
from saga_dspy.errors import Interrupted
from saga_dspy.eval.running.records import write_json
from saga_dspy.eval.running.runner import attr_params
from saga_dspy.eval.scoring.significance import PairedComparison, paired_by_id
from saga_dspy.eval.tracking.tracker import Tracker, run_name
from saga_dspy.optimize import compile_run
from saga_dspy.optimize.candidates import candidate_line, save_program
from saga_dspy.optimize.compile_run import PROGRAM
from saga_dspy.optimize.decision_metric import decision_feedback_metric, make_decision_metric
from saga_dspy.optimize.decision_modules import (
    DecisionScore,
    compiled_decision,
    decision_module,
    module_predictor,
    score_decision,
)
from saga_dspy.optimize.decision_sets import DecisionSets, decision_sets
from saga_dspy.optimize.sets import REST, OptimizeError, OptimizeSets, build_sets

DECISION_OPTIMIZERS = ("random-search", "mipro", "gepa", "none")
# the estimate's seconds per LM call, by decision, with the bundled model on 2 cores: a short answer-type prompt, a
# controller turn with its demos and one or two steps of trajectory (a served model: SECONDS_PER_CALL_SERVED)
SECONDS_PER_CALL = {ANSWER_TYPE: 3.0, ENTITY: 12.0, CANDIDATE: 12.0}
SECONDS_PER_CALL_SERVED = 1.0
ESTIMATE_WORDS = compile_run.EstimateWords("about", "LM calls", "call", "--seconds-per-call")
DECISION_FILE = "decision.json"
EXPERIMENT_NOTE = """Per-decision compiles of saga-dspy: one row per compile of one decision (answer type, entity,
candidate); expand it for a child run per candidate with its valset accuracy (the share of decisions that made the
gold choice) and its paired interval against the default (versus_default_delta / _low): a candidate replaces the
default only when _low is above zero. The compile run: default_accuracy, compiled_accuracy, candidate_accuracy one
step per candidate, the tags `chosen` and `kept`; program.json, decision.json, metrics.json, config.json as artifacts.
"""
VIEW_COLUMNS = (
    *(f"metrics.`{key}`" for key in ("accuracy", "default_accuracy", "compiled_accuracy", "versus_default_low")),
    "params.`decision`",
    "params.`optimizer`",
    "params.`n_valset`",
)


@dataclass
class DecisionOptions:
    decision: str = "entity"
    optimizer: str = "random-search"
    train_split: str = "train"
    valset: str = "dev"  # SPLIT of --dataset or BENCHMARK:SPLIT
    valset_size: int | None = None  # valset questions (None: half of the valset split)
    train_size: int | None = None  # train examples (None: all)
    max_demos: int = 3  # bootstrapped demos a candidate holds at most
    max_labeled: int = 3  # labelled (gold) demos a candidate holds at most
    num_candidates: int = 4  # random-search candidates, the default included
    auto: str | None = "light"
    num_trials: int | None = None
    max_metric_calls: int | None = None
    seed: int = 0
    budget_minutes: float | None = None
    seconds_per_call: float | None = None
    rebuild: bool = False  # build the datasets again instead of reading the cache


@dataclass
class DecisionCandidate:
    """A compiled (or the default) module and its valset score."""

    name: str
    module: Any
    score: DecisionScore
    versus_default: PairedComparison | None = None  # paired on the valset against the default (None: the default)

    @property
    def accuracy(self) -> float:
        return self.score.accuracy

    def summary(self) -> dict[str, Any]:
        decision = compiled_decision(self.module)
        return {
            "name": self.name,
            "accuracy": self.accuracy,
            "demos": len(decision.demos),
            "instructions_changed": decision.instructions is not None,
            "versus_default": None if self.versus_default is None else self.versus_default.as_dict(),
        }


@dataclass
class DecisionResult:
    decision: str
    out_dir: Path
    program_path: Path
    kept: bool
    metrics: dict[str, Any]
    candidates: list[DecisionCandidate] = field(default_factory=list)


def check_decision_options(options: DecisionOptions) -> None:
    """An OptimizeError for options that do not go together (before anything is loaded)."""
    counts_ok = options.num_candidates >= 1 and options.max_demos >= 0 and options.max_labeled >= 0
    counts = "--num-candidates must be >= 1, --max-demos and --max-labeled >= 0"
    compile_run.check_compile_options(
        options, {"decision": DECISIONS, "optimizer": DECISION_OPTIMIZERS}, counts_ok, counts
    )


# --------------------------------------------------------------------------- the estimate


def estimate_calls(options: DecisionOptions, n_train: int, n_val: int) -> dict[str, int]:
    """LM calls the compile will make, by phase (bootstrapping assumes half the train examples pass: it stops once it
    holds its demos)."""
    bootstrap = min(n_train, 2 * max(1, options.max_demos))
    calls = {"default": n_val}
    if options.optimizer == "random-search":
        n = max(0, options.num_candidates - 1)
        calls["candidates"] = n * n_val + max(0, n - 1) * bootstrap
    elif options.optimizer == "mipro":
        sets = 6 if options.auto else 3
        trials = options.num_trials or (10 if options.auto else 4)
        batch = min(35, n_val)
        calls["bootstrap"] = sets * bootstrap
        calls["proposals"] = 2 * sets
        calls["candidates"] = trials * batch + (trials // 5 + 1) * n_val
    elif options.optimizer == "gepa":
        calls["candidates"] = options.max_metric_calls or dspy.GEPA.auto_budget(1, 6, n_val)
    return calls


def call_seconds(options: DecisionOptions, settings: Settings) -> tuple[float, str]:
    if options.seconds_per_call is not None:
        return options.seconds_per_call, "as given"
    if settings.lm.strip().lower() == "local":
        return SECONDS_PER_CALL[options.decision], "the bundled model on 2 cores"
    threads = max(1, settings.num_threads)
    return SECONDS_PER_CALL_SERVED / threads, f"a served model, {threads} thread(s)"


# --------------------------------------------------------------------------- the compile


@dataclass(eq=False)
class _DecisionCompile(compile_run.CompileJob[DecisionOptions]):
    """One compile's state: the base program, the examples, the candidates scored, the best kept so far."""

    base: SagaProgram
    data: DecisionSets
    scored: list[DecisionCandidate] = field(default_factory=list, init=False)
    best: DecisionCandidate | None = field(default=None, init=False)

    @property
    def decision(self) -> str:
        return self.options.decision

    def metric(self):
        return make_decision_metric(self.decision, self.settings.kg)

    def student(self):
        """The base program's decision as a module (its compiled one where it has it)."""
        return decision_module(self.base, self.decision)

    def score(self, name: str, module: Any) -> DecisionCandidate:
        """Score a candidate on the valset: printed, a child run, kept (and saved) when it is the best so far."""
        index = len(self.scored)
        with self.tracker.run(f"candidate {index}: {name}", tags={"kind": "decision-candidate"}, nested=True) as child:
            score = score_decision(
                module, self.data.val_examples(), self.metric(), num_threads=self.settings.num_threads
            )
            self.tracker.log_metrics({"accuracy": score.accuracy})
            versus = paired_by_id(self.scored[0].score.per_example, score.per_example) if self.scored else None
            if versus is not None:
                self.tracker.log_metrics_to(
                    child, {"versus_default_delta": versus.delta, "versus_default_low": versus.low}
                )
        candidate = DecisionCandidate(name, module, score, versus)
        self.scored.append(candidate)
        self.tracker.log_metrics({"candidate_accuracy": candidate.accuracy}, step=index)
        better = self.better(candidate)
        shown = candidate.versus_default
        print(
            candidate_line(
                index, name, f"accuracy {score.accuracy:.3f} on {len(score)} decisions", shown, "the default", better
            ),
            file=self.stream,
        )
        if better:
            self.keep(candidate)
        return candidate

    def better(self, candidate: DecisionCandidate) -> bool:
        """The first scored (the default) is kept first; a later one only when above the best so far and clearly
        above the default (the interval's lower end above zero)."""
        if self.best is None:
            return True
        versus = candidate.versus_default
        return candidate.accuracy > self.best.accuracy and versus is not None and versus.low > 0

    def keep(self, candidate: DecisionCandidate) -> None:
        """`candidate` is the best so far: the program with it (the base program for the default) saved at once."""
        self.best = candidate
        program = SagaProgram(self.settings, endpoint=self.base.services.endpoint, search=self.base.services.search)
        if candidate is not self.scored[0]:
            info = {
                "optimizer": self.options.optimizer,
                "candidate": candidate.name,
                "valset_accuracy": candidate.accuracy,
            }
            decisions = self.base.compiled_decisions or CompiledDecisions()
            program.use_decisions(decisions.with_decision(compiled_decision(candidate.module, info)))
        save_program(program, self.out_dir / PROGRAM)

    # -- the optimizers ------------------------------------------------------------------

    def run(self) -> None:
        self.score("default", self.student())
        if self.options.optimizer == "random-search":
            self.random_search()
        elif self.options.optimizer == "mipro":
            self.mipro()
        elif self.options.optimizer == "gepa":
            self.gepa()

    def random_search(self) -> None:
        """BootstrapFewShotWithRandomSearch's candidates after the zero-shot one (the default, scored first)."""
        opts, trainset, metric = self.options, self.data.trainset(), self.metric()
        for seed in range(-2, opts.num_candidates - 3):
            if self.over_budget():
                print(
                    f"budget spent: {opts.num_candidates - 1 - len(self.scored)} candidates not scored",
                    file=self.stream,
                )
                break
            if seed == -2:  # LabeledFewShot's candidate, its demos showing every kind of choice
                module = self.student()
                module_predictor(module).demos = self.data.labelled(opts.max_labeled, opts.seed)
                self.score(f"labelled k={opts.max_labeled}", module)
                continue
            shuffled, size = list(trainset), opts.max_demos
            if seed >= 0:
                random.Random(opts.seed + seed).shuffle(shuffled)
                size = random.Random(opts.seed + seed).randint(1, max(1, opts.max_demos))
            teleprompter = dspy.BootstrapFewShot(
                metric=metric, max_bootstrapped_demos=size, max_labeled_demos=opts.max_labeled
            )
            module = teleprompter.compile(self.student(), trainset=shuffled)
            self.score(f"bootstrap seed {seed} demos={size}", module)

    def mipro(self) -> None:
        opts = self.options
        auto = None if opts.auto in (None, "none") else opts.auto
        optimizer = dspy.MIPROv2(
            metric=self.metric(),
            prompt_model=self.kwargs.get("prompt_lm"),
            task_model=self.lm,
            auto=auto,
            num_candidates=None if auto else 3,
            max_bootstrapped_demos=opts.max_demos,
            max_labeled_demos=opts.max_labeled,
            num_threads=self.settings.num_threads,
            seed=opts.seed,
        )
        kwargs: dict[str, Any] = {} if auto else {"num_trials": opts.num_trials or 4}
        valset = self.data.val_examples()
        module = optimizer.compile(
            self.student(),
            trainset=self.data.trainset(),
            valset=valset,
            minibatch_size=min(35, len(valset)),
            program_aware_proposer=False,  # the program's source is beyond a small local model's context
            view_data_batch_size=3,
            **kwargs,
        )
        self.score("mipro best", module)

    def gepa(self) -> None:
        opts = self.options
        budget: dict[str, Any] = (
            {"max_metric_calls": opts.max_metric_calls}
            if opts.max_metric_calls
            else {"auto": opts.auto if opts.auto not in (None, "none") else "light"}
        )
        gepa_kwargs: dict[str, Any] = {}
        if self.deadline is not None:
            from gepa.utils.stop_condition import TimeoutStopCondition

            gepa_kwargs["stop_callbacks"] = [TimeoutStopCondition(max(1.0, self.deadline - time.monotonic()))]
        optimizer = dspy.GEPA(
            metric=decision_feedback_metric(self.decision, self.settings.kg),
            reflection_lm=self.reflection_model(),
            num_threads=self.settings.num_threads,
            seed=opts.seed,
            track_stats=True,
            log_dir=str(self.out_dir / "gepa"),
            use_merge=False,  # one predictor: nothing to merge
            gepa_kwargs=gepa_kwargs,
            **budget,
        )
        module = optimizer.compile(self.student(), trainset=self.data.trainset(), valset=self.data.val_examples())
        self.score("gepa best", module)


def decision_build_sets(settings: Settings, options: DecisionOptions, progress: bool, stream) -> OptimizeSets:
    """The questions a decision compile draws on: the train split, the valset; the rest of the valset's split is the
    report set, left for the whole-program comparison."""
    return build_sets(
        settings,
        train_split=options.train_split,
        valset=options.valset,
        report_set=REST,
        valset_size=options.valset_size,
        seed=options.seed,
        progress=progress,
        stream=stream,
    )


def compile_decision(
    settings: Settings, options: DecisionOptions, **run: Unpack[compile_run.CompileArgs]
) -> DecisionResult:
    """Compile one decision (see the module docstring); Ctrl-C leaves the best program so far in `--out`."""
    stream, progress = run.get("stream") or sys.stdout, run.get("progress", True)
    check_decision_options(options)
    started = time.monotonic()
    sets = decision_build_sets(settings, options, progress, stream)
    out_dir = compile_run.out_dir_of(run.get("out"), settings, f"decision-{options.decision}-{settings.dataset}")
    experiment = run.get("experiment") or f"saga-decisions-{settings.dataset}"
    tracker = Tracker(settings, experiment, note=EXPERIMENT_NOTE, columns=VIEW_COLUMNS)
    with compile_run.compile_services(settings, out_dir, run) as services:
        base = SagaProgram(settings, endpoint=services.endpoint, search=services.search)
        data = decision_sets(
            base,
            sets,
            options.decision,
            train_size=options.train_size,
            seed=options.seed,
            use_cache=not options.rebuild,
            progress=progress,
        )
        print(data.describe(), file=stream)
        if not data.valset:
            raise OptimizeError(f"the valset {sets.valset.name} gives no {options.decision} decision")
        calls = estimate_calls(options, len(data.train), len(data.valset))
        print(
            compile_run.estimate_line(calls, *call_seconds(options, settings), options.budget_minutes, ESTIMATE_WORDS),
            file=stream,
        )
        deadline = time.monotonic() + 60 * options.budget_minutes if options.budget_minutes else None
        job = _DecisionCompile(settings, options, out_dir, tracker, deadline, run, base, data)
        name = run_name(f"{options.decision} {options.optimizer}", settings.dataset, sets.valset.split, settings.lm)
        params = _params(settings, options, data)
        with compile_run.tracked_compile(tracker, run.get("lm"), name, params, "optimize-decision", out_dir):
            interrupted = compile_run.run_interruptible(job.run, lambda: job.best is None, "the default was scored")
            metrics = _finish(job, calls, (time.monotonic() - started) / 60, interrupted, services.endpoint)
    print(f"\nprogram: {out_dir / PROGRAM}\nuse it:  {metrics['use']}", file=stream)
    if interrupted:
        raise Interrupted(f"{interrupted}; the best so far is saved: {out_dir / PROGRAM}")
    kept = job.best is not None and job.best is not job.scored[0]
    return DecisionResult(options.decision, out_dir, out_dir / PROGRAM, kept, metrics, job.scored)


def _params(settings: Settings, options: DecisionOptions, data: DecisionSets) -> dict[str, Any]:
    return {
        "dataset": settings.dataset,
        **attr_params(options, "decision", "optimizer"),
        **attr_params(settings, "variant", "lm"),
        "valset": data.sets.valset.name,
        "n_train": len(data.train),
        "n_valset": len(data.valset),
        **attr_params(options, "max_demos", "max_labeled", "num_candidates", "auto"),
    }


def _finish(job: _DecisionCompile, calls, minutes: float, interrupted: str | None, endpoint) -> dict[str, Any]:
    """decision.json (the kept compiled decision, else the best compiled candidate, `kept` false), metrics.json and
    config.json; the figures logged to the compile run."""
    settings, options, out_dir = job.settings, job.options, job.out_dir
    default = job.scored[0]
    top = max(job.scored[1:], key=lambda c: c.accuracy, default=default)
    best = job.best if job.best is not None and job.best is not default else top
    kept = best is job.best and best is not default
    program = out_dir / PROGRAM
    metrics = {
        "decision": options.decision,
        "optimizer": options.optimizer,
        "kept": kept,
        "chosen": best.name if kept else default.name,
        "best_compiled": best.name,
        "default_accuracy": default.accuracy,
        "compiled_accuracy": best.accuracy,
        "versus_default": None if best.versus_default is None else best.versus_default.as_dict(),
        "candidates": [c.summary() for c in job.scored],
        "estimated_calls": calls,
        "compile_minutes": round(minutes, 2),
        "interrupted": interrupted,
        **{k: v for k, v in job.data.record().items() if not k.endswith("_ids")},
        "use": compile_run.eval_command(program, settings),
    }
    decision = compiled_decision(best.module, {"optimizer": options.optimizer, "candidate": best.name})
    write_json(
        out_dir / DECISION_FILE,
        {"kept": kept, "decision": decision.name, "state": decision.to_state(), "metrics": metrics},
    )
    write_json(out_dir / "metrics.json", metrics)
    write_json(out_dir / "config.json", _config(job, endpoint))
    job.tracker.log_metrics({"default_accuracy": default.accuracy, "compiled_accuracy": best.accuracy})
    job.tracker.set_tags({"chosen": best.name, "kept": str(kept)})
    job.tracker.log_artifacts([program, out_dir / DECISION_FILE, out_dir / "metrics.json", out_dir / "config.json"])
    return metrics


def _config(job: _DecisionCompile, endpoint) -> dict[str, Any]:
    """config.json: what ran, on which questions (the report set's ids: never used for a choice)."""
    settings, sets = job.settings, job.data.sets
    return {
        "kind": "optimize",
        "compiled": "decision",
        **compile_run.command_record(),
        "dataset": settings.dataset,
        "variant": settings.variant,
        "options": dict(vars(job.options)),
        "examples": job.data.record(),
        **compile_run.sets_record(
            settings, (("train", sets.train), ("valset", sets.valset), ("report", sets.report)), sets.firewall, endpoint
        ),
        "program": str(job.out_dir / PROGRAM),
    }


__all__ = [
    "DECISION_FILE",
    "DECISION_OPTIMIZERS",
    "DecisionCandidate",
    "DecisionOptions",
    "DecisionResult",
    "check_decision_options",
    "compile_decision",
    "decision_build_sets",
    "estimate_calls",
]
