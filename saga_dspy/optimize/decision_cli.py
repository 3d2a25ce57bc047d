"""The command lines of the per-decision compile: `python -m saga_dspy.optimize decisions ...` (build a decision's
dataset, compile it, or score a program's decision), `python -m saga_dspy.optimize assemble DIR...` and
`python -m saga_dspy.optimize compare DIR` (the compiled program against the default on the compile's report set)."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

from saga_dspy.agent.decisions import DECISIONS
from saga_dspy.agent.program import SagaProgram
from saga_dspy.cli import ArgumentParser, options_from
from saga_dspy.config import Settings, add_settings_args, apply_offline_env, run_flags, settings_from_args
from saga_dspy.eval.running.run_inputs import check_file_inputs, run_parser
from saga_dspy.lm import configure_lm_cache
from saga_dspy.optimize.comparison import check_report_dirs, compare_compiled, report_of
from saga_dspy.optimize.compile_run import compile_with_lm, configured_lm
from saga_dspy.optimize.decision_assemble import assemble
from saga_dspy.optimize.decision_compile import (
    DECISION_OPTIMIZERS,
    SECONDS_PER_CALL,
    DecisionOptions,
    check_decision_options,
    compile_decision,
    decision_build_sets,
)
from saga_dspy.optimize.decision_sets import decision_sets
from saga_dspy.optimize.sets import parse_set, refuse_test_split
from saga_dspy.services import KgServices

# every run setting but the split and limit (--split names the valset) and the preflight (no run is made)
DECISION_FLAGS = run_flags(own=("split", "limit", "preflight"))


def build_decisions_parser() -> argparse.ArgumentParser:
    parser = run_parser(
        prog="python -m saga_dspy.optimize decisions",
        description=(
            "Compile one decision of the program (the answer type, the entity to look up after a search, the "
            "candidate to take after a lookup) on examples built from gold without an LM: train examples from the "
            "train split (firewalled), scored on a valset from the dev split (default: a seeded half; the other half "
            "is left for the whole-program comparison). --build-only builds and caches the examples, no LM."
        ),
        flags=DECISION_FLAGS,
    )
    parser.add_argument("--decision", choices=DECISIONS, required=True, help="the decision to compile")
    parser.add_argument(
        "--optimizer",
        choices=DECISION_OPTIMIZERS,
        default="random-search",
        help="random-search: BootstrapFewShotWithRandomSearch's candidates; mipro: MIPROv2 (instructions and "
        "demos); gepa: GEPA on the gold choice and why; none: score the program's decision as it is",
    )
    parser.add_argument("--build-only", action="store_true", help="build (or read) the examples, print their sizes")
    parser.add_argument("--rebuild", action="store_true", help="build the examples again instead of the cache")
    parser.add_argument("--split", dest="valset", metavar="SPLIT", default="dev", help="the valset: SPLIT or B:SPLIT")
    parser.add_argument("--train-split", default="train", help="the split the train examples come from")
    parser.add_argument("--valset-size", type=int, default=None, help="valset questions (default: half the split)")
    parser.add_argument("--train-size", type=int, default=None, help="train examples (default: all)")
    parser.add_argument("--max-demos", type=int, default=3, help="bootstrapped demos a candidate holds at most")
    parser.add_argument("--max-labeled", type=int, default=3, help="labelled (gold) demos a candidate holds at most")
    parser.add_argument("--num-candidates", type=int, default=4, help="random-search candidates, the default included")
    parser.add_argument("--shuffle-seed", type=int, default=0, help="seed of the draws and the random search")
    parser.add_argument("--auto", choices=("light", "medium", "heavy", "none"), default="light")
    parser.add_argument("--num-trials", type=int, default=None, help="MIPROv2 trials (with --auto none)")
    parser.add_argument("--max-metric-calls", type=int, default=None, help="GEPA's budget in LM calls")
    parser.add_argument("--prompt-model", help="MIPROv2's proposal model (default: --lm)")
    parser.add_argument("--reflection-model", help="GEPA's reflection model (default: --lm)")
    parser.add_argument("--budget-minutes", type=float, default=None, help="stop scoring candidates past this")
    parser.add_argument(
        "--seconds-per-call",
        type=float,
        default=None,
        help=f"for the estimate printed first (default, bundled model: {SECONDS_PER_CALL})",
    )
    parser.add_argument("--experiment", help="MLflow experiment name")
    parser.add_argument("--no-progress", action="store_true")
    parser.add_argument("-v", "--verbose", action="store_true")
    return parser


def decision_options(args: argparse.Namespace) -> DecisionOptions:
    return options_from(DecisionOptions, args, seed=args.shuffle_seed)


def build_only(settings: Settings, options: DecisionOptions, progress: bool, stream=None) -> dict[str, dict[str, int]]:
    """Build (or read from the cache) the examples of the compile's sets, no LM; their sizes, printed."""
    stream = stream or sys.stdout
    sets = decision_build_sets(settings, options, progress, stream)
    with KgServices(settings) as services:
        program = SagaProgram(settings, endpoint=services.endpoint, search=services.search)
        data = decision_sets(program, sets, options.decision, use_cache=not options.rebuild, progress=progress)
    sizes = {"train": data.train_data.sizes(), "valset": data.val_data.sizes()}
    for name, built in (("train", data.train_data), ("valset", data.val_data)):
        print(f"{name}: {built.sizes()} (skipped: {built.skipped}); cached in {built.cache_file}", file=stream)
    print(data.describe(), file=stream)
    return sizes


def decisions_main(argv: Sequence[str]) -> int:
    apply_offline_env()
    args = build_decisions_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING)
    settings = settings_from_args(args, split=args.train_split)
    options = decision_options(args)
    refuse_test_split(settings.dataset, options.train_split)
    parse_set(options.valset, settings.dataset)
    check_decision_options(options)
    check_file_inputs(settings, None)
    if args.build_only:
        configure_lm_cache(settings)
        build_only(settings, options, progress=not args.no_progress)
        return 0
    return compile_with_lm(compile_decision, settings, options, args, no_lm=False)


def build_assemble_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(
        prog="python -m saga_dspy.optimize assemble",
        description="One program.json from compiled decisions (each DIR a `decisions` compile's --out): the ones "
        "that beat the default on their valset, on top of --program (default: the default program).",
    )
    parser.add_argument("sources", nargs="+", metavar="DIR", help="a decisions compile's output directory")
    parser.add_argument("--out", required=True, help="where program.json and config.json are written")
    parser.add_argument("--all", action="store_true", help="take every decision, kept by its compile or not")
    add_settings_args(parser, ("variant", "dataset", "kg", "program", "cache_dir"))
    return parser


def assemble_main(argv: Sequence[str]) -> int:
    apply_offline_env()
    args = build_assemble_parser().parse_args(argv)
    settings = settings_from_args(args)
    check_file_inputs(settings, None)
    assemble(settings, args.sources, args.out, include_all=args.all)
    return 0


def build_compare_parser() -> argparse.ArgumentParser:
    parser = run_parser(
        prog="python -m saga_dspy.optimize compare",
        description="The compiled program (--program, default DIR/program.json: a `decisions` compile's or an "
        "`assemble`d one) against the default program, whole runs, interleaved question by question, on the report "
        "set DIR's compile recorded (its questions no choice saw); writes DIR/report/{default,compiled} (re-scorable "
        "with `eval rescore`) and the paired interval. The run flags must be the compile's.",
        flags=DECISION_FLAGS,
    )
    parser.add_argument("compile_dir", metavar="DIR", help="a compile's --out (its config.json names the report set)")
    parser.add_argument(
        "--also",
        action="append",
        default=[],
        type=bench_split,
        metavar="BENCHMARK/SPLIT",
        help="another split no choice saw, on the same graph (e.g. qald10/dev); repeatable: each is compared in "
        "DIR/report-BENCHMARK-SPLIT, and DIR/report-pooled.{md,json} holds the interval over all the questions",
    )
    parser.add_argument("--resume", action="store_true", help="keep the answers DIR/report holds, run the rest")
    parser.add_argument("--overwrite", action="store_true", help="start again where DIR/report holds answers")
    parser.add_argument("--experiment", help="MLflow experiment name (default: saga-decisions-<dataset>)")
    parser.add_argument("--no-progress", action="store_true")
    return parser


def bench_split(value: str) -> tuple[str, str]:
    """`BENCHMARK/SPLIT` as a pair (argparse type)."""
    bench, sep, split = value.partition("/")
    if not (bench and sep and split):
        raise argparse.ArgumentTypeError(f"{value!r}: expected BENCHMARK/SPLIT, e.g. qald10/dev")
    return bench, split


def compare_main(argv: Sequence[str]) -> int:
    apply_offline_env()
    args = build_compare_parser().parse_args(argv)
    bench, split, _ = report_of(Path(args.compile_dir))
    settings = settings_from_args(args, dataset=bench, split=split)
    check_file_inputs(settings, None)
    check_report_dirs(settings, Path(args.compile_dir), args.also, resume=args.resume, overwrite=args.overwrite)
    if (lm := configured_lm(settings)) is None:
        return 2
    compare_compiled(
        settings,
        args.compile_dir,
        also=args.also,
        lm=lm,
        resume=args.resume,
        overwrite=args.overwrite,
        experiment=args.experiment,
        progress=not args.no_progress,
    )
    return 0


SUBCOMMANDS = {"decisions": decisions_main, "assemble": assemble_main, "compare": compare_main}

__all__ = ["SUBCOMMANDS", "assemble_main", "build_only", "compare_main", "decisions_main"]
