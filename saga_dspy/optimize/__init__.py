"""`python -m saga_dspy.optimize`: compile the SAGA program, choosing by answer F1 on a valset.

    python -m saga_dspy.optimize --optimizer random-search --dataset qald10      # valset: half of dev
    python -m saga_dspy.optimize --optimizer mipro --auto light
    python -m saga_dspy.optimize --optimizer gepa --max-metric-calls 60 --reflection-model openai/...
    python -m saga_dspy.optimize --optimizer none --teacher gold                  # gold-teacher pool, no LM

The sets (`optimize.sets`): demonstrations come from the train split (firewalled against every test and dev
question of the graph's benchmarks), candidates are scored on the valset (default: a seeded half of the dev
split; `--valset`), and the report set (default: the other half) is never used for a choice: on it the
compiled program and the default program run interleaved, and the table gives their F1 with the paired
bootstrap interval of the difference (`optimize.comparison`). Test splits are refused.

What is compiled is what the default program has: a per-question demo pool, k demos a question, the
predictors' instructions (`agent.compiled_pool`). The pool starts from gold-teacher records (the bundled
pool, or `--teacher gold`: the gold teacher run on the train questions) and `bootstrap` adds the model's own
successful train runs (`optimize.bootstrap`). `random-search` scores candidate pools and k on the valset
(`optimize.candidates`); `mipro` and `gepa` search the controller's instructions with DSPy's MIPROv2 / GEPA
over the bootstrapped pool (`optimize.instructions`). Each candidate's valset F1 is printed and logged (a
child MLflow run each, and one step of `candidate_f1`).

Writes to `--out`: `program.json` (the chosen program, best so far while running; `eval --program` /
`ask --program`), `config.json`, `metrics.json`, `pool.jsonl` (the compiled pool, each record's `source`),
`candidates/NN/` (each candidate's valset run), `report/{default,compiled}/` and `report/report.md`.
"""

from __future__ import annotations

import json
import math
import random
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Unpack

import dspy

from saga_dspy.agent.compiled_pool import GOLD, CompiledPool
from saga_dspy.agent.program import SagaProgram
from saga_dspy.config import Settings
from saga_dspy.errors import Interrupted
from saga_dspy.eval.files import write_file
from saga_dspy.eval.loading.firewall import normalise_text
from saga_dspy.eval.running.records import fingerprint, program_record, write_json
from saga_dspy.eval.running.runner import attr_params
from saga_dspy.eval.tracking.tracker import Tracker, run_name
from saga_dspy.optimize.bootstrap import bootstrap_traces
from saga_dspy.optimize.candidates import (
    DEFAULT,
    Candidate,
    Scorer,
    build_program,
    chosen_of,
    default_pool,
    instructions_of,
    merge_pool,
    pool_candidates,
    save_program,
)
from saga_dspy.optimize.comparison import compare_on_report
from saga_dspy.optimize.compile_run import (
    PROGRAM,
    CompileArgs,
    CompileJob,
    EstimateWords,
    check_compile_options,
    command_record,
    compile_services,
    estimate_line,
    eval_command,
    out_dir_of,
    run_interruptible,
    sets_record,
    tracked_compile,
)
from saga_dspy.optimize.gold_teacher import gold_traces
from saga_dspy.optimize.instructions import TunedProgram, run_gepa, run_mipro
from saga_dspy.optimize.metric import feedback_metric, make_metric, to_examples
from saga_dspy.optimize.sets import REST, OptimizeError, OptimizeSets, build_sets, refuse_test_split
from saga_dspy.services import KgServices

OPTIMIZERS = ("bootstrap", "random-search", "mipro", "gepa", "none")
TEACHERS = ("pool", "gold")
# the estimate's seconds per program run (one question), by the LM's kind, when --seconds-per-question is not given
SECONDS_PER_RUN = 50.0  # the bundled local model on 2 idle cores (one question at a time, whatever the threads)
SECONDS_PER_RUN_SERVED = 10.0  # a served model: ~6-8 calls of 1-2 s; its threads run questions side by side
EXPERIMENT_NOTE = """Compiles of saga-dspy: one row per compile; expand it for a child run per candidate scored on the
valset, with its f1 / em and its paired interval against the default program (versus_default_delta / _low /
_high): a candidate replaces the default only when _low is above zero (random search). Scores and intervals are
in percent, as the CLI prints them.

* The compile run: the tag `chosen`, valset_f1 of the kept program, candidate_f1 one step per candidate, and the
  report set (never used for selection): report_default_f1, report_compiled_f1, report_delta_f1, report_ci_low /
  _high; program.json, config.json, metrics.json and pool.jsonl as artifacts.
"""
VIEW_COLUMNS = (
    *(f"metrics.`{key}`" for key in ("valset_f1", "f1", "versus_default_low", "report_delta_f1", "report_ci_low")),
    "params.`optimizer`",
    "params.`candidate`",
    "params.`k`",
    "params.`n_valset`",
)


@dataclass
class OptimizeOptions:
    optimizer: str = "bootstrap"
    teacher: str = "pool"  # gold records: the dataset's bundled pool, or the gold teacher run on the train questions
    threshold: float = 1.0  # F1 a bootstrapped run must reach to become a demo
    max_traces: int = 8  # bootstrapped traces kept
    k: int | None = None  # demos a question in the compiled program (None: Settings.demos)
    k_choices: tuple[int, ...] = (1, 2, 3)  # random-search's k
    num_candidates: int = 6  # random-search candidates (the default program included); mipro with --auto none
    train_split: str = "train"
    valset: str = "dev"  # SPLIT of --dataset or BENCHMARK:SPLIT
    report_set: str = REST  # the valset split's other questions, or BENCHMARK:SPLIT
    valset_size: int | None = None  # None: half of the valset split when the report set is the rest, else all
    report_size: int | None = None
    train_size: int | None = None  # train questions bootstrapped on (None: all, until max_traces pass)
    gold_pool: int | None = None  # --teacher gold: the first N train questions
    seed: int = 0
    auto: str | None = "light"
    num_trials: int | None = None
    max_metric_calls: int | None = None
    tune: tuple[str, ...] = ("react.react",)
    budget_minutes: float | None = None
    seconds_per_run: float | None = None  # None: by the LM's kind (`run_seconds`)


@dataclass
class OptimizeResult:
    program: Any
    out_dir: Path
    program_path: Path
    metrics: dict[str, Any]
    config: dict[str, Any]
    candidates: list[Candidate] = field(default_factory=list)


def check_options(options: OptimizeOptions) -> None:
    """An OptimizeError for options that do not go together (before anything is loaded)."""
    counts_ok = options.num_candidates >= 1 and all(k >= 0 for k in options.k_choices) and bool(options.k_choices)
    counts = "--num-candidates must be >= 1 and --k-choices whole numbers >= 0"
    check_compile_options(options, {"optimizer": OPTIMIZERS, "teacher": TEACHERS}, counts_ok, counts)


# --------------------------------------------------------------------------- the estimate


def train_questions(sets: OptimizeSets, pooled: Sequence[dict[str, Any]], options: OptimizeOptions) -> list:
    """The train questions to bootstrap on, in a seeded order with those the pool holds first, at most
    `options.train_size`. A pooled question is one the gold teacher solved, so its entities can be found; the others
    are mostly questions whose entities have no label in the graph, which no run can link (on the bundled sample all
    59 of WWQ train's), so they give no trace. A trace of a pooled question replaces its gold record
    (`candidates.merge_pool`)."""
    pooled_text = {normalise_text(r.get("question")) for r in pooled}
    items = sets.train.items
    random.Random(options.seed).shuffle(items)
    items.sort(key=lambda i: normalise_text(i.question) not in pooled_text)
    return items[: options.train_size] if options.train_size is not None else items


def estimate_runs(options: OptimizeOptions, sets: OptimizeSets) -> dict[str, int]:
    """Program runs (one question each) the compile will make at most, by phase."""
    n_train, n_val = len(sets.train), len(sets.valset)
    if options.train_size is not None:
        n_train = min(n_train, options.train_size)
    runs = {"bootstrap": 0 if options.optimizer == "none" else n_train}
    if options.optimizer == "random-search":
        runs["candidates"] = options.num_candidates * n_val
    elif options.optimizer == "mipro":
        tuned = max(1, len(options.tune))
        trials = options.num_trials or int(max(2 * tuned * math.log2(6), 1.5 * 6)) if options.auto else 4
        runs["candidates"] = (trials + 2) * n_val + n_train  # its trials, the baseline, its own bootstrap
    elif options.optimizer == "gepa":
        runs["candidates"] = options.max_metric_calls or dspy.GEPA.auto_budget(
            None, len(options.tune), 6, n_val
        )  # what GEPA's auto=light allots
    runs["report"] = 2 * len(sets.report)
    return runs


def run_seconds(options: OptimizeOptions, settings: Settings) -> tuple[float, str]:
    """Seconds per program run for the estimate, and what they assume: the option when given, else the bundled
    model's (its questions run one at a time) or a served model's over its threads."""
    if options.seconds_per_run is not None:
        return options.seconds_per_run, "as given"
    if settings.lm.strip().lower() == "local":
        return SECONDS_PER_RUN, "the bundled model on 2 cores"
    threads = max(1, settings.num_threads)
    plural = "s" if threads > 1 else ""
    return (
        SECONDS_PER_RUN_SERVED / threads,
        f"a served model: {SECONDS_PER_RUN_SERVED:g} s a question, {threads} thread{plural}",
    )


_ESTIMATE_WORDS = EstimateWords("at most", "program runs", "run", "--seconds-per-question")


def estimate_text(options: OptimizeOptions, runs: dict[str, int], settings: Settings) -> str:
    return estimate_line(runs, *run_seconds(options, settings), options.budget_minutes, _ESTIMATE_WORDS)


# --------------------------------------------------------------------------- the compile


@dataclass(eq=False)
class _Compile(CompileJob[OptimizeOptions]):
    """One compile's state: the services, the sets, the program saved so far (a usable one at every moment)."""

    sets: OptimizeSets
    services: KgServices
    k: int = field(init=False)
    program_path: Path = field(init=False)
    program: SagaProgram | None = field(default=None, init=False)
    chosen: str | None = field(default=None, init=False)
    gold: list[dict[str, Any]] = field(default_factory=list, init=False)
    traces: list[dict[str, Any]] = field(default_factory=list, init=False)
    bootstrap_counts: dict[str, int] = field(default_factory=dict, init=False)
    gold_skipped: dict[str, int] = field(default_factory=dict, init=False)
    scored: list[Candidate] = field(default_factory=list, init=False)

    def __post_init__(self) -> None:
        self.k = self.options.k if self.options.k is not None else self.settings.demos
        self.program_path = self.out_dir / PROGRAM

    @property
    def best(self) -> SagaProgram:
        """The program kept so far (one is kept before any LM call)."""
        if self.program is None:
            raise OptimizeError("no program was compiled")
        return self.program

    def keep(self, program: SagaProgram, name: str) -> None:
        """`program` is the best so far: saved at once, so an interrupted compile leaves it."""
        self.program, self.chosen = program, name
        save_program(program, self.program_path)

    # -- the pool ---------------------------------------------------------------------

    def gold_records(self) -> list[dict[str, Any]]:
        """Gold-teacher records, none of them colliding with a held-out, valset or report question."""
        if self.options.teacher == "gold":
            items = self.sets.train.items[: self.options.gold_pool]
            records, self.gold_skipped = gold_traces(
                items,
                settings=self.settings,
                endpoint=self.services.endpoint,
                search=self.services.search,
                progress=self.progress,
            )
            records = [{**r, "source": GOLD} for r in records]
        else:
            records = list(default_pool(self.settings).records)
        held = self.sets.held_out
        kept = [r for r in records if not held.collides(r.get("question"), r.get("sparql"))]
        where = "the gold teacher on the train questions" if self.options.teacher == "gold" else "the bundled pool"
        print(
            f"gold records: {len(kept)} from {where} ({len(records) - len(kept)} colliding with a held-out, "
            "valset or report question dropped)",
            file=self.stream,
        )
        return kept

    def train_items(self) -> list:
        """The train questions bootstrapped on (and MIPROv2's / GEPA's trainset): `train_questions`."""
        return train_questions(self.sets, self.gold, self.options)

    def bootstrap(self) -> None:
        teacher = build_program(self.settings, self.services, Candidate("gold", CompiledPool.of(self.gold, self.k)))
        self.traces, self.bootstrap_counts = bootstrap_traces(
            teacher,
            self.train_items(),
            threshold=self.options.threshold,
            max_traces=self.options.max_traces,
            mode=self.settings.metric_mode,
            lm=self.lm,
            deadline=self.deadline,
            progress=self.progress,
        )
        print(f"bootstrap: {len(self.traces)} traces kept ({self.bootstrap_counts})", file=self.stream)

    def pool(self, k: int | None = None) -> CompiledPool:
        return CompiledPool.of(merge_pool(self.gold, self.traces), self.k if k is None else k)

    # -- the optimizers ------------------------------------------------------------------

    def run(self) -> None:
        self.gold = self.gold_records()
        if self.options.optimizer == "none":
            self.keep(build_program(self.settings, self.services, Candidate("gold", self.pool())), "gold")
            return
        self.bootstrap()
        seeded = build_program(self.settings, self.services, Candidate("gold+bootstrap", self.pool()))
        self.keep(seeded, "gold+bootstrap")
        if self.options.optimizer == "random-search":
            self.random_search()
        elif self.options.optimizer in ("mipro", "gepa"):
            self.instructions()

    def scorer(self) -> Scorer:
        return Scorer(
            self.settings,
            self.sets.valset,
            self.services,
            self.out_dir,
            self.tracker,
            lm=self.lm,
            progress=self.progress,
            stream=self.stream,
            on_best=lambda cand, program: self.keep(program, cand.name),
        )

    def random_search(self) -> None:
        candidates = pool_candidates(
            default_pool(self.settings),
            self.gold,
            self.traces,
            k=self.k,
            k_choices=self.options.k_choices,
            n=self.options.num_candidates,
            seed=self.options.seed,
        )
        scorer = self.scorer()
        self.scored = scorer.scored
        for candidate in candidates:
            if self.over_budget():
                print(f"budget spent: {len(candidates) - len(scorer.scored)} candidates not scored", file=self.stream)
                break
            scorer.score(candidate)

    def instructions(self) -> None:
        student = build_program(self.settings, self.services, Candidate("gold+bootstrap", self.pool()), TunedProgram)
        student.tuned = tuple(self.options.tune)
        trainset, valset = to_examples(self.train_items()), to_examples(self.sets.valset.items)
        common = {"num_threads": self.settings.num_threads, "seed": self.options.seed}
        if self.options.optimizer == "mipro":
            best, trials = run_mipro(
                student,
                trainset,
                valset,
                make_metric(self.settings.metric_mode),
                auto=self.options.auto,
                num_trials=self.options.num_trials,
                num_candidates=self.options.num_candidates,
                prompt_lm=self.kwargs.get("prompt_lm"),
                task_lm=self.lm,
                **common,
            )
        else:
            best, trials = run_gepa(
                student,
                trainset,
                valset,
                feedback_metric(self.settings.metric_mode),
                reflection_lm=self.reflection_model(),
                auto=self.options.auto,
                max_metric_calls=self.options.max_metric_calls,
                log_dir=str(self.out_dir / "gepa"),
                deadline=self.deadline,
                **common,
            )
        for index, trial in enumerate(trials):
            self.log_trial(index, trial)
        self.scored = trials
        program = build_program(
            self.settings,
            self.services,
            Candidate(self.options.optimizer, self.pool(), instructions_of(best, student)),
        )
        self.keep(program, f"{self.options.optimizer} best")

    def log_trial(self, index: int, trial: Candidate) -> None:
        """A trial DSPy's optimizer scored on the valset: printed, a child run, one step of `candidate_f1`."""
        print(f"candidate {index} {trial.name}: valset F1 {trial.f1:.3f}", file=self.stream)
        with self.tracker.run(f"candidate {index}: {trial.name}", tags={"kind": "optimize-candidate"}, nested=True):
            self.tracker.log_metrics({"f1": trial.f1})
            for name, text in trial.instructions.items():
                path = write_file(self.out_dir / "candidates" / f"{index:02d}" / f"{name}.instructions.txt", text)
                self.tracker.log_artifact(path)
        self.tracker.log_metrics({"candidate_f1": trial.f1}, step=index)


def optimize(
    settings: Settings,
    options: OptimizeOptions,
    *,
    data_file: str | Path | None = None,
    gold_file: str | Path | None = None,
    **run: Unpack[CompileArgs],
) -> OptimizeResult:
    """Compile the program (see the module docstring); Ctrl-C leaves the best program so far in `--out`."""
    stream, progress, lm = run.get("stream") or sys.stdout, run.get("progress", True), run.get("lm")
    check_options(options)
    started = time.monotonic()
    deadline = started + 60 * options.budget_minutes if options.budget_minutes else None
    sets = build_sets(
        settings,
        train_split=options.train_split,
        valset=options.valset,
        report_set=options.report_set,
        valset_size=options.valset_size,
        report_size=options.report_size,
        seed=options.seed,
        data_file=str(data_file) if data_file else None,
        gold_file=str(gold_file) if gold_file else None,
        progress=progress,
        stream=stream,
    )
    out_dir = out_dir_of(run.get("out"), settings, f"optimize-{settings.dataset}")
    print(sets.describe(), file=stream)
    runs = estimate_runs(options, sets)
    print(estimate_text(options, runs, settings), file=stream)
    experiment = run.get("experiment") or f"saga-optimize-{settings.dataset}"
    tracker = Tracker(settings, experiment, note=EXPERIMENT_NOTE, columns=VIEW_COLUMNS)
    report: dict[str, Any] | None = None
    name = run_name(f"{options.optimizer} {settings.variant}", settings.dataset, sets.valset.split, settings.lm)
    with (
        compile_services(settings, out_dir, run) as services,
        tracked_compile(tracker, lm, name, _run_params(settings, options, sets), "optimize", out_dir),
    ):
        job = _Compile(settings, options, out_dir, tracker, deadline, run, sets, services)
        interrupted = run_interruptible(job.run, lambda: job.program is None, "any program was compiled")
        print(f"chosen: {job.chosen} (k={job.best.settings.demos})", file=stream)
        compile_minutes = (time.monotonic() - started) / 60
        if not interrupted and len(sets.report):
            report = _report(job, settings, sets, services, lm, tracker, progress, stream)
        metrics = _metrics(job, sets, runs, compile_minutes, report, interrupted)
        config = _config(settings, options, sets, job, services.endpoint)
        _write_and_track(out_dir, tracker, metrics, config, job)
    print(f"\nprogram: {job.program_path}\nuse it:  {config['use']}", file=stream)
    if tracker.enabled:  # where to click through to the compile run and its candidates
        print("\n" + tracker.ui_hint(), file=stream)
    if interrupted:
        raise Interrupted(f"{interrupted}; the best program so far is saved: {job.program_path}")
    return OptimizeResult(job.program, out_dir, job.program_path, metrics, config, job.scored)


def _report(job: _Compile, settings, sets, services, lm, tracker, progress, stream) -> dict[str, Any]:
    """Compiled vs the default program on the report set, interleaved (the programs anew: no shared state)."""
    default = build_program(settings, services, Candidate(DEFAULT))
    compiled = SagaProgram(
        settings.model_copy(update={"program": job.program_path}), endpoint=services.endpoint, search=services.search
    )
    return compare_on_report(
        sets.report,
        {"default": (default, settings), "compiled": (compiled, compiled.settings)},
        job.out_dir,
        endpoint=services.endpoint,
        lm=lm,
        tracker=tracker,
        progress=progress,
        stream=stream,
    )


def _run_params(settings: Settings, options: OptimizeOptions, sets: OptimizeSets) -> dict[str, Any]:
    return {
        "dataset": settings.dataset,
        "split": sets.train.split,
        "valset": sets.valset.name,
        "report_set": sets.report.name,
        **attr_params(settings, "variant", "lm", "endpoint", "filter_mode", "schema_coverage", "metric_mode"),
        **attr_params(options, "optimizer", "teacher", "threshold", "max_traces"),
        "k": options.k if options.k is not None else settings.demos,
        **attr_params(options, "num_candidates", "auto"),
        "n_train": len(sets.train),
        "n_valset": len(sets.valset),
        "n_report": len(sets.report),
        "budget_minutes": options.budget_minutes,
    }


def _metrics(job: _Compile, sets: OptimizeSets, runs, minutes: float, report, interrupted) -> dict[str, Any]:
    program = job.best
    pool = program.compiled_pool
    best = chosen_of(job.scored, job.chosen)
    return {
        "n_train": len(sets.train),
        "n_valset": len(sets.valset),
        "n_report": len(sets.report),
        "firewall": sets.firewall,
        "gold_records": len(job.gold),
        "gold_skipped": job.gold_skipped,
        "bootstrap": job.bootstrap_counts,
        "pool": pool.sources() if pool is not None else {},
        "k": program.settings.demos,
        "chosen": job.chosen,
        "valset_f1": best.f1 if best is not None else None,
        "candidates": [c.summary() for c in job.scored],
        "estimated_runs": runs,
        "compile_minutes": round(minutes, 2),
        "report": report,
        "interrupted": interrupted,
    }


def _config(settings, options, sets: OptimizeSets, job: _Compile, endpoint) -> dict[str, Any]:
    """config.json of an optimize run (`eval --program` reads `kind` and `variant` from it)."""
    return {
        "kind": "optimize",
        **command_record(),
        "dataset": settings.dataset,
        "split": sets.train.split,
        "variant": settings.variant,
        "options": dict(vars(options)),
        **sets_record(settings, _named_sets(sets), sets.firewall, endpoint),
        "prompts": program_record(job.best),
        "fingerprint": fingerprint(settings),
        "program": str(job.program_path),
        "use": eval_command(job.program_path, settings),
    }


def _named_sets(sets: OptimizeSets) -> Sequence[tuple[str, Any]]:
    return (("train", sets.train), ("valset", sets.valset), ("report", sets.report))


def _write_and_track(out_dir: Path, tracker: Tracker, metrics, config, job: _Compile) -> None:
    pool = job.best.compiled_pool
    records = pool.records if pool is not None else ()
    write_file(out_dir / "pool.jsonl", "".join(json.dumps(record, ensure_ascii=False) + "\n" for record in records))
    write_json(out_dir / "config.json", config)
    write_json(out_dir / "metrics.json", metrics)
    tracker.log_metrics({k: v for k, v in metrics.items() if isinstance(v, int | float) and not isinstance(v, bool)})
    tracker.set_tags({"chosen": job.chosen})
    tracker.log_artifacts([job.program_path, out_dir / "config.json", out_dir / "metrics.json", out_dir / "pool.jsonl"])


__all__ = [
    "OPTIMIZERS",
    "TEACHERS",
    "OptimizeError",
    "OptimizeOptions",
    "OptimizeResult",
    "estimate_runs",
    "make_metric",
    "optimize",
    "refuse_test_split",
]
