"""`python -m saga_dspy.optimize`: compile the SAGA program on train/dev questions.

    python -m saga_dspy.optimize --optimizer bootstrap --dataset qald10 --split train --limit 20
    python -m saga_dspy.optimize --optimizer none --teacher gold --gold-demos 3      # gold demos alone
    python -m saga_dspy.optimize --optimizer bootstrap --teacher gold --holdout 8    # gold-seeded, + before/after
    python -m saga_dspy.optimize --optimizer mipro --auto light                     # needs the `mipro` extra

The metric is the answer F1 against frozen gold (`metrics.answer_f1`); while bootstrapping
(`trace` set) it says whether F1 reaches `--threshold`. Gold answers come from frozen gold
only (never re-queried). A test split is refused, and the training questions that collide with
a test/dev question of the benchmark compiled for (`--firewall NAME` for others; `eval.firewall`)
are dropped, with a count.

`--teacher gold` builds ReAct demonstrations from the train questions' gold SPARQL by running
our tools (`saga_dspy.optimize.gold_teacher`): with `--optimizer none` they are the controller's demos; with
`bootstrap`/`mipro` they seed the teacher program (and top up the student's demos).

Writes to `--out`: `program.json` (load with `eval --program` / `ask --program`), `config.json`,
`metrics.json`, `gold_demos.jsonl` (with `--teacher gold`), and with `--holdout N` a
before/after evaluation on N train questions held back from compiling (`holdout/`).
The compiled program's controller demos replace the per-question demo pool only when the
pool is off (`--demos 0`), which `eval --program` does automatically for such a program.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import importlib.util
import json
import logging
import random
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import dspy
from dspy.teleprompt import BootstrapFewShot

from saga_dspy.agent.program import SagaProgram
from saga_dspy.config import Settings, redact_argv
from saga_dspy.errors import Interrupted
from saga_dspy.eval.datasets import BENCHMARKS
from saga_dspy.eval.errors import EvalError
from saga_dspy.eval.evalset import EvalItem, EvalSet, load_eval_set
from saga_dspy.eval.metrics import MetricMode, answer_f1
from saga_dspy.eval.records import endpoint_record, fingerprint, lm_record, program_record, versions, write_json
from saga_dspy.eval.report import markdown_table, summary_table
from saga_dspy.eval.rundir import locked_run_dir, make_private, open_private
from saga_dspy.eval.runner import run_variant, sigterm_as_interrupt
from saga_dspy.eval.splits import benchmark_firewall
from saga_dspy.eval.tracking import Tracker, comparison_chart, run_name
from saga_dspy.kg.endpoint import Endpoint
from saga_dspy.kg.search import Search
from saga_dspy.optimize.gold_teacher import apply_gold_demos, controller_predictor, gold_traces, pick_records
from saga_dspy.services import KgServices

log = logging.getLogger("saga_dspy.optimize")

OPTIMIZERS = ("bootstrap", "mipro", "none")
TEACHERS = ("none", "gold")
MIPRO_MISSING = (
    "MIPROv2 needs optuna, the optional extra `mipro`: pip install -e '.[mipro]' (or pip install optuna); "
    "or use --optimizer bootstrap"
)


class OptimizeError(EvalError):
    pass


# --------------------------------------------------------------------------- split guard


def refuse_test_split(dataset: str, split: str, data_file: str | None = None) -> str:
    """The resolved split, or OptimizeError for a test split (never compile on test questions)."""
    info = BENCHMARKS.get(dataset)
    resolved = split
    if info is not None and data_file is None:
        try:
            resolved = info.resolve_split(split)
        except ValueError as exc:
            raise OptimizeError(str(exc)) from exc
        if resolved == info.test or split == "test":
            usable = [s for s in info.splits if s != info.test]
            raise OptimizeError(
                f"refusing to optimize on {dataset}/{resolved}: it is the test split (compile on "
                f"{' or '.join(usable) if usable else 'another benchmark: this one has only a test split'})"
            )
    elif "test" in split.lower():
        raise OptimizeError(f"refusing to optimize on a split named {split!r}: it looks like a test split")
    return resolved


# --------------------------------------------------------------------------- metric


Metric = Callable[..., Any]  # dspy's metric: (example, prediction, trace=None) -> float | bool


def make_metric(mode: MetricMode = "answers", threshold: float = 0.5) -> Metric:
    """F1 of the prediction's answers against the example's frozen gold; with `trace` set
    (bootstrapping), whether F1 >= threshold."""

    def saga_f1(example, pred, trace=None, *args, **kwargs):
        gold = getattr(example, "gold", None) if not isinstance(example, dict) else example.get("gold")
        answers = getattr(pred, "answers", None)
        try:
            f1 = float(answer_f1(answers, gold, mode=mode)) if gold is not None else 0.0
        except ValueError:
            f1 = 0.0
        if trace is None:
            return f1
        return f1 >= threshold

    saga_f1.__name__ = f"saga_f1_{mode}"
    return saga_f1


def to_examples(items: Sequence[EvalItem]) -> list[dspy.Example]:
    return [
        dspy.Example(question=i.question, id=i.id, gold=i.gold, gold_sparql=i.gold_sparql).with_inputs("question")
        for i in items
    ]


# --------------------------------------------------------------------------- options


@dataclass
class OptimizeOptions:
    optimizer: str = "bootstrap"
    teacher: str = "none"
    threshold: float = 0.5
    max_demos: int = 3  # bootstrapped demos per predictor
    max_labeled_demos: int = 0  # raw question/answer demos (useless for the ReAct controller)
    max_rounds: int = 1
    max_errors: int | None = None
    gold_demos: int = 3  # gold-teacher demos put on the controller
    gold_step: str = "execute"
    gold_pool: int | None = None  # train questions the gold teacher runs on (None: all of the trainset)
    holdout: int = 0
    shuffle_seed: int = 0
    auto: str | None = "light"
    num_trials: int | None = None
    num_candidates: int | None = None
    minibatch_size: int = 35
    firewall: tuple[str, ...] = ()  # benchmarks evaluated with the result (default: the one compiled on)
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class OptimizeResult:
    program: Any
    out_dir: Path
    program_path: Path
    metrics: dict[str, Any]
    config: dict[str, Any]


def demo_counts(program: Any) -> dict[str, int]:
    return {name: len(getattr(p, "demos", []) or []) for name, p in program.named_predictors()}


def split_items(items: Sequence[EvalItem], holdout: int, limit: int | None, seed: int) -> tuple[list, list]:
    """(train, holdout): a seeded shuffle; the last `holdout` questions are held back, then
    `limit` caps the train part."""
    items = list(items)
    random.Random(seed).shuffle(items)
    held = items[len(items) - holdout :] if holdout > 0 else []
    train = items[: len(items) - len(held)]
    if limit is not None:
        train = train[: max(0, limit)]
    return train, held


def apply_firewall(evalset: EvalSet, benchmarks: Sequence[str], settings: Settings, stream) -> dict[str, Any]:
    """Drop the training questions that collide with a test/dev question of `benchmarks`
    (`eval.firewall`); says how many."""
    firewall = benchmark_firewall(benchmarks, settings)
    before = len(evalset)
    evalset.data = evalset.data.filter(lambda row: not firewall.collides(row["question"], row["sparql"]))
    report = {"benchmarks": list(benchmarks), "held_out_questions": len(firewall), "dropped": before - len(evalset)}
    print(
        f"firewall: dropped {report['dropped']} of {before} training questions that collide with a "
        f"test/dev question of {', '.join(benchmarks)}",
        file=stream,
    )
    return report


def make_student(settings: Settings, endpoint: Endpoint, search: Search) -> SagaProgram:
    # The compiled demos live on the predictors; the per-question pool would replace them.
    return SagaProgram(settings.model_copy(update={"demos": 0, "program": None}), endpoint=endpoint, search=search)


def optimize(
    settings: Settings,
    options: OptimizeOptions,
    *,
    out: str | Path | None = None,
    data_file: str | Path | None = None,
    gold_file: str | Path | None = None,
    lm: dspy.BaseLM | None = None,
    endpoint: Endpoint | None = None,
    search: Search | None = None,
    progress: bool = True,
    experiment: str | None = None,
    stream=None,
) -> OptimizeResult:
    """Compile the program on `settings.dataset`/`settings.split`; see the module docstring."""
    stream = stream or sys.stdout
    check_options(options)
    split = refuse_test_split(settings.dataset, settings.split, str(data_file) if data_file else None)
    all_settings = settings.model_copy(update={"limit": None})
    evalset = load_eval_set(
        all_settings, data_file=data_file, gold_file=gold_file, answerable_only=True, progress=progress
    )
    firewall_report = apply_firewall(evalset, options.firewall or (settings.dataset,), settings, stream)
    train_items, held_items = split_items(evalset.items, options.holdout, settings.limit, options.shuffle_seed)
    if not train_items:
        raise OptimizeError("no training questions (check --limit / --holdout)")
    out_dir = (
        Path(out)
        if out is not None
        else (
            Path(settings.out)
            if settings.out
            else Path("runs") / f"optimize-{settings.dataset}-{split}-{_dt.datetime.now().strftime('%Y%m%d-%H%M%S')}"
        )
    )
    print(
        f"{settings.dataset}/{split}: {len(train_items)} training questions, {len(held_items)} held back "
        f"(of {len(evalset)} answerable)",
        file=stream,
    )

    tracker = Tracker(settings, experiment or f"saga-optimize-{settings.dataset}-{split}")
    lm_ctx = dspy.context(lm=lm) if lm is not None else contextlib.nullcontext()
    # one run at a time in out_dir (the lock creates it)
    with locked_run_dir(out_dir), KgServices(settings, endpoint, search) as services, sigterm_as_interrupt():
        try:
            what = f"{options.optimizer}{'+gold' if options.teacher == 'gold' else ''} {settings.variant}"
            with (
                lm_ctx,
                tracker.run(
                    run_name(what, settings.dataset, split, settings.lm),
                    params=_run_params(settings, options, split, train_items, held_items),
                    tags={"kind": "optimize", "out_dir": str(out_dir)},
                ),
            ):
                student = make_student(settings, services.endpoint, services.search)
                gold = _gold_teacher(settings, options, train_items, services, student, out_dir, progress, stream)
                compiled = _compile(
                    student,
                    gold.program,
                    to_examples(train_items),
                    make_metric(settings.metric_mode, options.threshold),
                    options,
                    settings,
                )
                counts = demo_counts(compiled)
                print(f"compiled demos per predictor: {counts}", file=stream)
                program_path = out_dir / "program.json"
                compiled.save(str(program_path))
                make_private(program_path)
                holdout_metrics = _before_after(
                    settings,
                    options,
                    evalset,
                    held_items,
                    compiled,
                    services,
                    lm,
                    out_dir,
                    tracker,
                    progress,
                    stream,
                    split,
                    program_path,
                )
                metrics = _metrics(train_items, held_items, gold, counts, holdout_metrics)
                config = _config(
                    settings,
                    options,
                    split,
                    evalset,
                    train_items,
                    held_items,
                    gold,
                    compiled,
                    services.endpoint,
                    program_path,
                    firewall_report,
                )
                _write_and_track(out_dir, tracker, metrics, config, counts, program_path, gold)
        finally:
            tracker.close()
    print(f"\nprogram: {program_path}\nuse it:  {config['use']}", file=stream)
    return OptimizeResult(compiled, out_dir, program_path, metrics, config)


def check_options(options: OptimizeOptions) -> None:
    """An OptimizeError for options that do not go together (before anything is loaded)."""
    if options.optimizer not in OPTIMIZERS:
        raise OptimizeError(f"--optimizer must be one of {', '.join(OPTIMIZERS)}")
    if options.teacher not in TEACHERS:
        raise OptimizeError(f"--teacher must be one of {', '.join(TEACHERS)}")
    if options.optimizer == "none" and options.teacher != "gold":
        raise OptimizeError("--optimizer none only makes sense with --teacher gold (gold demos alone)")
    if options.optimizer == "mipro" and importlib.util.find_spec("optuna") is None:
        raise OptimizeError(MIPRO_MISSING)


def _run_params(
    settings: Settings,
    options: OptimizeOptions,
    split: str,
    train_items: Sequence[EvalItem],
    held_items: Sequence[EvalItem],
) -> dict[str, Any]:
    return {
        "dataset": settings.dataset,
        "split": split,
        "variant": settings.variant,
        "lm": settings.lm,
        "filter_mode": settings.filter_mode,
        "endpoint": settings.endpoint,
        "schema_coverage": settings.schema_coverage,
        "program": None,
        "optimizer": options.optimizer,
        "teacher": options.teacher,
        "threshold": options.threshold,
        "max_demos": options.max_demos,
        "max_labeled_demos": options.max_labeled_demos,
        "max_rounds": options.max_rounds,
        "gold_demos": options.gold_demos,
        "gold_step": options.gold_step,
        "n_train": len(train_items),
        "n_holdout": len(held_items),
        "auto": options.auto,
        "num_trials": options.num_trials,
        "metric_mode": settings.metric_mode,
    }


@dataclass
class GoldDemos:
    """What the gold teacher produced: all its records, the ones used, the skip counts, the seeded program."""

    records: list[dict[str, Any]] = field(default_factory=list)
    picked: list[dict[str, Any]] = field(default_factory=list)
    skipped: dict[str, int] = field(default_factory=dict)
    program: SagaProgram | None = None


def _gold_teacher(
    settings: Settings,
    options: OptimizeOptions,
    train_items: Sequence[EvalItem],
    services: KgServices,
    student: SagaProgram,
    out_dir: Path,
    progress: bool,
    stream,
) -> GoldDemos:
    """With --teacher gold: demonstrations from the train questions' gold SPARQL (saved to gold_demos.jsonl)."""
    if options.teacher != "gold":
        return GoldDemos()
    pool_items = train_items if options.gold_pool is None else train_items[: options.gold_pool]
    records, skipped = gold_traces(
        pool_items,
        settings=settings,
        endpoint=services.endpoint,
        search=services.search,
        variant=settings.variant,
        progress=progress,
    )
    picked = pick_records(records, options.gold_demos)
    with open_private(out_dir / "gold_demos.jsonl") as fh:
        for rec in records:
            fh.write(json.dumps(rec, ensure_ascii=False) + "\n")
    print(
        f"gold teacher: {len(records)} of {len(pool_items)} questions became demos "
        f"(skipped: {skipped or 'none'}); using {len(picked)}",
        file=stream,
    )
    if not picked:
        raise OptimizeError("the gold teacher produced no demonstration")
    program = apply_gold_demos(student.deepcopy(), picked, which=options.gold_step)
    return GoldDemos(records, picked, skipped, program)


def _compile(
    student: SagaProgram,
    teacher: SagaProgram | None,
    trainset: list[dspy.Example],
    metric: Metric,
    options: OptimizeOptions,
    settings: Settings,
) -> SagaProgram:
    """The compiled program: gold demos alone, BootstrapFewShot or MIPROv2 (then topped up with gold demos)."""
    if options.optimizer == "none":
        assert teacher is not None  # `none` compiles gold demos only (checked with the options)
        return teacher
    if options.optimizer == "bootstrap":
        compiled = _bootstrap(student, teacher, trainset, metric, options)
    else:
        compiled = _mipro(student, teacher, trainset, metric, options, settings)
    if teacher is not None:
        _top_up(compiled, teacher, options.max_demos)
    return compiled


def _before_after(
    settings: Settings,
    options: OptimizeOptions,
    evalset: EvalSet,
    held_items: list[EvalItem],
    compiled: SagaProgram,
    services: KgServices,
    lm: dspy.BaseLM | None,
    out_dir: Path,
    tracker: Tracker,
    progress: bool,
    stream,
    split: str,
    program_path: Path,
) -> dict[str, dict[str, Any]]:
    """Zero-shot vs compiled on the held-back questions ({} without --holdout)."""
    holdout_metrics: dict[str, dict[str, Any]] = {}
    if not held_items:
        return holdout_metrics
    held = replace(
        evalset.select_ids([item.id for item in held_items]),
        selection={"holdout": len(held_items), "seed": options.shuffle_seed},
    )
    zero_shot = make_student(settings, services.endpoint, services.search)
    for name, prog in (("zero-shot", zero_shot), ("compiled", compiled)):
        res = run_variant(
            settings.model_copy(update={"demos": 0}),
            held,
            out_dir / "holdout" / name,
            program=prog,
            endpoint=services.endpoint,
            lm=lm,
            overwrite=True,
            progress=progress,
            extra_config={"role": name},
            desc=f"hold-out {name}",
        )
        holdout_metrics[name] = res.metrics
        if res.interrupted:
            raise Interrupted(f"interrupted during the held-back evaluation ({name}); {program_path} is saved")
    print(
        "\n"
        + summary_table(
            holdout_metrics, f"held-back {settings.dataset}/{split} questions ({len(held_items)}), percent"
        ),
        file=stream,
    )
    chart = comparison_chart(
        holdout_metrics,
        out_dir / "holdout.png",
        title=f"held-back {settings.dataset}/{split}: zero-shot vs {options.optimizer}",
    )
    (out_dir / "holdout.md").write_text(markdown_table(holdout_metrics) + "\n", encoding="utf-8")
    tracker.log_artifacts([chart, out_dir / "holdout.md"])
    return holdout_metrics


def _metrics(
    train_items: Sequence[EvalItem],
    held_items: Sequence[EvalItem],
    gold: GoldDemos,
    counts: dict[str, int],
    holdout_metrics: dict[str, dict[str, Any]],
) -> dict[str, Any]:
    metrics: dict[str, Any] = {
        "n_train": len(train_items),
        "n_holdout": len(held_items),
        "gold_records": len(gold.records),
        "gold_skipped": gold.skipped,
        "demos": counts,
    }
    for name, m in holdout_metrics.items():
        for key in ("f1", "em", "empty_rate", "mean_steps"):
            metrics[f"holdout_{name.replace('-', '_')}_{key}"] = m.get(key)
    return metrics


def _config(
    settings: Settings,
    options: OptimizeOptions,
    split: str,
    evalset: EvalSet,
    train_items: Sequence[EvalItem],
    held_items: Sequence[EvalItem],
    gold: GoldDemos,
    compiled: SagaProgram,
    endpoint: Endpoint,
    program_path: Path,
    firewall: dict[str, Any],
) -> dict[str, Any]:
    """config.json of an optimize run (what `eval --program` reads back: kind, variant)."""
    return {
        "kind": "optimize",
        "created": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "command": [sys.executable, "-m", "saga_dspy.optimize", *redact_argv(sys.argv[1:])],
        "dataset": settings.dataset,
        "split": split,
        "variant": settings.variant,
        "options": {k: v for k, v in vars(options).items()},
        "train_ids": [i.id for i in train_items],
        "holdout_ids": [i.id for i in held_items],
        "gold_demo_ids": [r.get("id") for r in gold.picked],
        "firewall": firewall,
        "lm": lm_record(settings),
        "endpoint": endpoint_record(settings, endpoint),
        "gold": {"file": evalset.gold_file, "summary": evalset.gold_summary},
        "versions": versions(),
        "prompts": program_record(compiled),
        "fingerprint": fingerprint(settings),
        "program": str(program_path),
        "use": f"python -m saga_dspy.eval --program {program_path} --variant {settings.variant}",
    }


def _write_and_track(
    out_dir: Path,
    tracker: Tracker,
    metrics: dict[str, Any],
    config: dict[str, Any],
    counts: dict[str, int],
    program_path: Path,
    gold: GoldDemos,
) -> None:
    write_json(out_dir / "config.json", config)
    write_json(out_dir / "metrics.json", metrics)
    tracker.log_metrics({k: v for k, v in metrics.items() if not isinstance(v, dict)})
    tracker.log_metrics(counts, prefix="demos_")
    tracker.log_artifacts(
        [
            program_path,
            out_dir / "config.json",
            out_dir / "metrics.json",
            out_dir / "gold_demos.jsonl" if gold.records else None,
        ]
    )


def _bootstrap(student, teacher, trainset, metric, options: OptimizeOptions):
    kwargs: dict[str, Any] = {}
    if options.max_errors is not None:
        kwargs["max_errors"] = options.max_errors
    optimizer = BootstrapFewShot(
        metric=metric,
        max_bootstrapped_demos=options.max_demos,
        max_labeled_demos=options.max_labeled_demos,
        max_rounds=options.max_rounds,
        **kwargs,
    )
    return optimizer.compile(student, teacher=teacher, trainset=trainset)


def _mipro(student, teacher, trainset, metric, options: OptimizeOptions, settings: Settings):
    auto = None if options.auto in (None, "none") else options.auto
    kwargs: dict[str, Any] = {}
    if auto is None:
        kwargs["num_candidates"] = options.num_candidates or 3
    optimizer = dspy.MIPROv2(
        metric=metric,
        auto=auto,
        max_bootstrapped_demos=options.max_demos,
        max_labeled_demos=options.max_labeled_demos,
        num_threads=settings.num_threads,
        seed=options.shuffle_seed,
        max_errors=options.max_errors,
        **kwargs,
    )
    compile_kwargs: dict[str, Any] = {
        "trainset": trainset,
        "teacher": teacher,
        "minibatch_size": min(options.minibatch_size, max(1, len(trainset) // 2)),
    }
    if auto is None:
        compile_kwargs["num_trials"] = options.num_trials or 5
    return optimizer.compile(student, **compile_kwargs)


def _top_up(compiled, teacher_program, max_demos: int) -> None:
    """Fill the controller's demo slots left free by bootstrapping with the gold demos."""
    target = controller_predictor(compiled)
    gold = controller_predictor(teacher_program).demos
    have = list(target.demos or [])
    for demo in gold:
        if len(have) >= max(max_demos, 1):
            break
        have.append(demo)
    target.demos = have
