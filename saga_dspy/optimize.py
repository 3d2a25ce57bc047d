"""`python -m saga_dspy.optimize`: compile the SAGA program on train/dev questions.

    python -m saga_dspy.optimize --optimizer bootstrap --dataset qald10 --split train --limit 20
    python -m saga_dspy.optimize --optimizer none --teacher gold --gold-demos 3      # gold demos alone
    python -m saga_dspy.optimize --optimizer bootstrap --teacher gold --holdout 8    # gold-seeded, + before/after
    python -m saga_dspy.optimize --optimizer mipro --auto light                     # needs the `mipro` extra

The metric is the answer F1 against frozen gold (`metrics.answer_f1`); while bootstrapping
(`trace` set) it says whether F1 reaches `--threshold`. Gold answers come from frozen gold
only (never re-queried). A test split is refused.

`--teacher gold` builds ReAct demonstrations from the train questions' gold SPARQL by running
our tools (`saga_dspy.teacher`): with `--optimizer none` they are the controller's demos; with
`bootstrap`/`mipro` they seed the teacher program (and top up the student's demos).

Writes to `--out`: `program.json` (load with `eval --program` / `ask --program`), `config.json`,
`metrics.json`, `gold_demos.jsonl` (with `--teacher gold`), and with `--holdout N` a
before/after evaluation on N train questions held back from compiling (`holdout/`).
The compiled program's controller demos replace the per-question demo pool only when the
pool is off (`--demos 0`), which `eval --program` does automatically for such a program.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import importlib.util
import json
import logging
import random
import signal
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from saga_dspy.config import Settings, add_settings_args, apply_offline_env, settings_from_args
from saga_dspy.eval import EvalError, EvalItem, _Interrupted, _raise_interrupt, load_eval_set, write_json

log = logging.getLogger("saga_dspy.optimize")

OPTIMIZERS = ("bootstrap", "mipro", "none")
TEACHERS = ("none", "gold")
MIPRO_MISSING = (
    "MIPROv2 needs optuna, the optional extra `mipro`: pip install -e '.[mipro]' (or pip install optuna); "
    "or use --optimizer bootstrap"
)

SETTINGS_FLAGS = (
    "dataset", "split", "limit", "endpoint", "kg", "search", "cache_dir", "query_timeout", "result_cache",
    "lm", "api_base", "api_key", "temperature", "max_tokens", "seed", "lm_cache", "context_window",
    "variant", "num_threads", "metric_mode", "out", "mlflow", "mlflow_uri", "filter_mode", "schema_coverage",
    "coverage_seed", "schema_index", "observation_chars", "max_steps", "check_answer",
)


class OptimizeError(EvalError):
    pass


# --------------------------------------------------------------------------- split guard


def refuse_test_split(dataset: str, split: str, data_file: str | None = None) -> str:
    """The resolved split, or OptimizeError for a test split (never compile on test questions)."""
    from saga_dspy.datasets import BENCHMARKS

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


def make_metric(mode: str = "answers", threshold: float = 0.5) -> Callable[..., Any]:
    """F1 of the prediction's answers against the example's frozen gold; with `trace` set
    (bootstrapping), whether F1 >= threshold."""
    from saga_dspy.metrics import answer_f1

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


def to_examples(items: Sequence[EvalItem]) -> list[Any]:
    import dspy

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
    held = items[len(items) - holdout:] if holdout > 0 else []
    train = items[: len(items) - len(held)]
    if limit is not None:
        train = train[: max(0, limit)]
    return train, held


def make_student(settings: Settings, endpoint: Any, search: Any) -> Any:
    from saga_dspy.program import SagaProgram

    # The compiled demos live on the predictors; the per-question pool would replace them.
    return SagaProgram(settings.model_copy(update={"demos": 0, "program": None}), endpoint=endpoint, search=search)


def optimize(
    settings: Settings,
    options: OptimizeOptions,
    *,
    out: str | Path | None = None,
    data_file: str | Path | None = None,
    gold_file: str | Path | None = None,
    lm: Any = None,
    endpoint: Any = None,
    search: Any = None,
    progress: bool = True,
    experiment: str | None = None,
    stream=None,
) -> OptimizeResult:
    """Compile the program on `settings.dataset`/`settings.split`; see the module docstring."""
    import dspy

    from saga_dspy.eval import (
        fingerprint, program_record, run_variant, summary_table, markdown_table, versions, lm_record,
        endpoint_record,
    )
    from saga_dspy.tracking import Tracker, comparison_chart

    stream = stream or sys.stdout
    if options.optimizer not in OPTIMIZERS:
        raise OptimizeError(f"--optimizer must be one of {', '.join(OPTIMIZERS)}")
    if options.teacher not in TEACHERS:
        raise OptimizeError(f"--teacher must be one of {', '.join(TEACHERS)}")
    if options.optimizer == "none" and options.teacher != "gold":
        raise OptimizeError("--optimizer none only makes sense with --teacher gold (gold demos alone)")
    if options.optimizer == "mipro" and importlib.util.find_spec("optuna") is None:
        raise OptimizeError(MIPRO_MISSING)
    split = refuse_test_split(settings.dataset, settings.split, str(data_file) if data_file else None)

    all_settings = settings.model_copy(update={"limit": None})
    evalset = load_eval_set(all_settings, data_file=data_file, gold_file=gold_file, answerable_only=True,
                            progress=progress)
    train_items, held_items = split_items(evalset.items, options.holdout, settings.limit, options.shuffle_seed)
    if not train_items:
        raise OptimizeError("no training questions (check --limit / --holdout)")
    out_dir = Path(out) if out is not None else (
        Path(settings.out) if settings.out else
        Path("runs") / f"optimize-{settings.dataset}-{split}-{_dt.datetime.now().strftime('%Y%m%d-%H%M%S')}")
    out_dir.mkdir(parents=True, exist_ok=True)
    print(f"{settings.dataset}/{split}: {len(train_items)} training questions, {len(held_items)} held back "
          f"(of {len(evalset.items)} answerable)", file=stream)

    own_endpoint = endpoint is None
    if own_endpoint:
        from saga_dspy.kg.endpoint import open_endpoint

        endpoint = open_endpoint(settings)
    if search is None:
        from saga_dspy.kg.search import open_search

        search = open_search(settings, endpoint)
    tracker = Tracker(settings, experiment or f"saga-optimize-{settings.dataset}-{split}")
    lm_ctx = dspy.context(lm=lm) if lm is not None else _Null()
    previous_handler = None
    if threading.current_thread() is threading.main_thread():  # SIGTERM ends the run like Ctrl-C
        previous_handler = signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        with lm_ctx, tracker.run(
            f"{options.optimizer}{'+gold' if options.teacher == 'gold' else ''}",
            params={
                "dataset": settings.dataset, "split": split, "variant": settings.variant, "lm": settings.lm,
                "endpoint": settings.endpoint, "schema_coverage": settings.schema_coverage, "program": None,
                "optimizer": options.optimizer, "teacher": options.teacher, "threshold": options.threshold,
                "max_demos": options.max_demos, "max_labeled_demos": options.max_labeled_demos,
                "max_rounds": options.max_rounds, "gold_demos": options.gold_demos, "gold_step": options.gold_step,
                "n_train": len(train_items), "n_holdout": len(held_items), "auto": options.auto,
                "num_trials": options.num_trials, "metric_mode": settings.metric_mode,
            },
            tags={"kind": "optimize", "out_dir": str(out_dir)},
        ) as run_id:
            metric = make_metric(settings.metric_mode, options.threshold)
            student = make_student(settings, endpoint, search)
            trainset = to_examples(train_items)

            # gold-teacher demonstrations
            gold_records: list[dict[str, Any]] = []
            gold_picked: list[dict[str, Any]] = []
            gold_skipped: dict[str, int] = {}
            teacher_program = None
            if options.teacher == "gold":
                from saga_dspy.teacher import apply_gold_demos, gold_traces, pick_records

                pool_items = train_items if options.gold_pool is None else train_items[: options.gold_pool]
                gold_records, gold_skipped = gold_traces(pool_items, settings=settings, endpoint=endpoint,
                                                         search=search, variant=settings.variant, progress=progress)
                gold_picked = pick_records(gold_records, options.gold_demos)
                with open(out_dir / "gold_demos.jsonl", "w", encoding="utf-8") as fh:
                    for rec in gold_records:
                        fh.write(json.dumps(rec, ensure_ascii=False) + "\n")
                print(f"gold teacher: {len(gold_records)} of {len(pool_items)} questions became demos "
                      f"(skipped: {gold_skipped or 'none'}); using {len(gold_picked)}", file=stream)
                if not gold_picked:
                    raise OptimizeError("the gold teacher produced no demonstration")
                teacher_program = apply_gold_demos(student.deepcopy(), gold_picked, which=options.gold_step)

            # compile
            if options.optimizer == "none":
                compiled = teacher_program
            elif options.optimizer == "bootstrap":
                compiled = _bootstrap(student, teacher_program, trainset, metric, options)
            else:
                compiled = _mipro(student, teacher_program, trainset, metric, options, settings)
            if teacher_program is not None and options.optimizer != "none":
                _top_up(compiled, teacher_program, options.max_demos)
            counts = demo_counts(compiled)
            print(f"compiled demos per predictor: {counts}", file=stream)

            program_path = out_dir / "program.json"
            compiled.save(str(program_path))

            # before / after on the held-back questions
            holdout_metrics: dict[str, dict[str, Any]] = {}
            if held_items:
                from saga_dspy.eval import EvalSet

                held = EvalSet(held_items, evalset.dataset, evalset.split, evalset.gold_file, evalset.filter_report,
                               evalset.gold_summary, {"holdout": len(held_items), "seed": options.shuffle_seed})
                for name, prog in (("zero-shot", make_student(settings, endpoint, search)), ("compiled", compiled)):
                    res = run_variant(settings.model_copy(update={"demos": 0}), held, out_dir / "holdout" / name,
                                      program=prog, endpoint=endpoint, lm=lm, overwrite=True, progress=progress,
                                      extra_config={"role": name})
                    holdout_metrics[name] = res.metrics
                    if res.interrupted:
                        raise _Interrupted(f"interrupted during the held-back evaluation ({name}); "
                                           f"{program_path} is saved")
                print("\n" + summary_table(holdout_metrics, f"held-back {settings.dataset}/{split} questions "
                                                            f"({len(held_items)}), percent"), file=stream)
                chart = comparison_chart(holdout_metrics, out_dir / "holdout.png",
                                         title=f"held-back {settings.dataset}/{split}: zero-shot vs {options.optimizer}")
                (out_dir / "holdout.md").write_text(markdown_table(holdout_metrics) + "\n", encoding="utf-8")
                tracker.log_artifacts([chart, out_dir / "holdout.md"])

            metrics: dict[str, Any] = {"n_train": len(train_items), "n_holdout": len(held_items),
                                       "gold_records": len(gold_records), "gold_skipped": gold_skipped,
                                       "demos": counts}
            for name, m in holdout_metrics.items():
                for key in ("f1", "em", "empty_rate", "mean_steps"):
                    metrics[f"holdout_{name.replace('-', '_')}_{key}"] = m.get(key)
            config = {
                "kind": "optimize",
                "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
                "command": [sys.executable, "-m", "saga_dspy.optimize", *sys.argv[1:]],
                "dataset": settings.dataset,
                "split": split,
                "variant": settings.variant,
                "options": {k: v for k, v in vars(options).items()},
                "train_ids": [i.id for i in train_items],
                "holdout_ids": [i.id for i in held_items],
                "gold_demo_ids": [r.get("id") for r in gold_picked],
                "lm": lm_record(settings),
                "endpoint": endpoint_record(settings, endpoint),
                "gold": {"file": evalset.gold_file, "summary": evalset.gold_summary},
                "versions": versions(),
                "prompts": program_record(compiled),
                "fingerprint": fingerprint(settings),
                "program": str(program_path),
                "use": f"python -m saga_dspy.eval --program {program_path} --variant {settings.variant}",
            }
            write_json(out_dir / "config.json", config)
            write_json(out_dir / "metrics.json", metrics)
            tracker.log_metrics({k: v for k, v in metrics.items() if not isinstance(v, dict)})
            tracker.log_metrics(counts, prefix="demos_")
            tracker.log_artifacts([program_path, out_dir / "config.json", out_dir / "metrics.json",
                                   out_dir / "gold_demos.jsonl" if gold_records else None])
    finally:
        if previous_handler is not None:
            signal.signal(signal.SIGTERM, previous_handler)
        tracker.close()
        if own_endpoint:
            endpoint.close()
    print(f"\nprogram: {program_path}\nuse it:  {config['use']}", file=stream)
    return OptimizeResult(compiled, out_dir, program_path, metrics, config)


class _Null:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


def _bootstrap(student, teacher, trainset, metric, options: OptimizeOptions):
    from dspy.teleprompt import BootstrapFewShot

    kwargs: dict[str, Any] = {}
    if options.max_errors is not None:
        kwargs["max_errors"] = options.max_errors
    optimizer = BootstrapFewShot(metric=metric, max_bootstrapped_demos=options.max_demos,
                                 max_labeled_demos=options.max_labeled_demos, max_rounds=options.max_rounds, **kwargs)
    return optimizer.compile(student, teacher=teacher, trainset=trainset)


def _mipro(student, teacher, trainset, metric, options: OptimizeOptions, settings: Settings):
    import dspy

    auto = None if options.auto in (None, "none") else options.auto
    kwargs: dict[str, Any] = {}
    if auto is None:
        kwargs["num_candidates"] = options.num_candidates or 3
    optimizer = dspy.MIPROv2(metric=metric, auto=auto, max_bootstrapped_demos=options.max_demos,
                             max_labeled_demos=options.max_labeled_demos, num_threads=settings.num_threads,
                             seed=options.shuffle_seed, max_errors=options.max_errors, **kwargs)
    compile_kwargs: dict[str, Any] = {"trainset": trainset, "teacher": teacher,
                                      "minibatch_size": min(options.minibatch_size, max(1, len(trainset) // 2))}
    if auto is None:
        compile_kwargs["num_trials"] = options.num_trials or 5
    return optimizer.compile(student, **compile_kwargs)


def _top_up(compiled, teacher_program, max_demos: int) -> None:
    """Fill the controller's demo slots left free by bootstrapping with the gold demos."""
    from saga_dspy.teacher import controller_predictor

    target = controller_predictor(compiled)
    gold = controller_predictor(teacher_program).demos
    have = list(target.demos or [])
    for demo in gold:
        if len(have) >= max(max_demos, 1):
            break
        have.append(demo)
    target.demos = have


# --------------------------------------------------------------------------- CLI


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m saga_dspy.optimize",
        description="Compile the SAGA program (BootstrapFewShot / MIPROv2 / gold-teacher demos) on a train or dev split.",
    )
    add_settings_args(parser, SETTINGS_FLAGS)
    parser.add_argument("--optimizer", choices=OPTIMIZERS, default="bootstrap",
                        help="bootstrap (BootstrapFewShot), mipro (MIPROv2, needs the mipro extra), none (only --teacher gold)")
    parser.add_argument("--teacher", choices=TEACHERS, default="none",
                        help="gold: demonstrations from the gold SPARQL run through our tools")
    parser.add_argument("--threshold", type=float, default=0.5, help="F1 a bootstrapped trace must reach")
    parser.add_argument("--max-demos", type=int, default=3, help="bootstrapped demos per predictor")
    parser.add_argument("--max-labeled-demos", type=int, default=0, help="raw labeled demos per predictor")
    parser.add_argument("--max-rounds", type=int, default=1, help="BootstrapFewShot rounds per question")
    parser.add_argument("--max-errors", type=int, default=None, help="errors tolerated while compiling")
    parser.add_argument("--gold-demos", type=int, default=3, help="gold-teacher demos on the controller")
    parser.add_argument("--gold-step", choices=("execute", "last", "all"), default="execute",
                        help="which step of a gold trace is the demo's output")
    parser.add_argument("--gold-pool", type=int, default=None, help="run the gold teacher on the first N train questions")
    parser.add_argument("--holdout", type=int, default=0,
                        help="hold N train questions back and evaluate zero-shot vs compiled on them")
    parser.add_argument("--shuffle-seed", type=int, default=0, help="seed of the train/holdout shuffle")
    parser.add_argument("--auto", choices=("light", "medium", "heavy", "none"), default="light", help="MIPROv2 budget preset")
    parser.add_argument("--num-trials", type=int, default=None, help="MIPROv2 trials (with --auto none)")
    parser.add_argument("--num-candidates", type=int, default=None, help="MIPROv2 candidates (with --auto none)")
    parser.add_argument("--data-file", help="benchmark file in our schema instead of a bundled one")
    parser.add_argument("--gold-file", help="frozen gold file")
    parser.add_argument("--experiment", help="MLflow experiment name")
    parser.add_argument("--no-progress", action="store_true")
    parser.add_argument("-v", "--verbose", action="store_true")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    apply_offline_env()
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    if "split" not in vars(args):
        args.split = "train"  # Settings' default split is 'test', which optimize refuses
    settings = settings_from_args(args)
    options = OptimizeOptions(
        optimizer=args.optimizer, teacher=args.teacher, threshold=args.threshold, max_demos=args.max_demos,
        max_labeled_demos=args.max_labeled_demos, max_rounds=args.max_rounds, max_errors=args.max_errors,
        gold_demos=args.gold_demos, gold_step=args.gold_step, gold_pool=args.gold_pool, holdout=args.holdout,
        shuffle_seed=args.shuffle_seed, auto=args.auto, num_trials=args.num_trials,
        num_candidates=args.num_candidates,
    )
    try:  # refuse bad requests before loading a model
        refuse_test_split(settings.dataset, settings.split, args.data_file)
        if options.optimizer == "mipro" and importlib.util.find_spec("optuna") is None:
            raise OptimizeError(MIPRO_MISSING)
    except OptimizeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    import dspy

    from saga_dspy.lm import cli_lm, configure_lm_cache

    lm = None
    if options.optimizer == "none" and options.holdout <= 0:  # gold demos alone: no LM call
        configure_lm_cache(settings)
    else:
        lm = cli_lm(settings)
        if lm is None:
            return 2
        dspy.configure(lm=lm)
    try:
        optimize(settings, options, data_file=args.data_file, gold_file=args.gold_file, lm=lm,
                 progress=not args.no_progress, experiment=args.experiment)
    except EvalError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except (KeyboardInterrupt, _Interrupted):
        print("interrupted", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
