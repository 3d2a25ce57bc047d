"""`python -m saga_dspy.optimize`: the command line of `saga_dspy.optimize.optimize`."""

from __future__ import annotations

import argparse
import importlib.util
import logging
import sys
from collections.abc import Sequence

import dspy

from saga_dspy.cli import ArgumentParser, append_help, run_main
from saga_dspy.config import add_settings_args, apply_offline_env, settings_from_args
from saga_dspy.eval.datasets import catalogue_text
from saga_dspy.lm import cli_lm, configure_lm_cache
from saga_dspy.optimize import (
    MIPRO_MISSING,
    OPTIMIZERS,
    TEACHERS,
    OptimizeError,
    OptimizeOptions,
    optimize,
    refuse_test_split,
)

SETTINGS_FLAGS = (
    "dataset",
    "split",
    "limit",
    "endpoint",
    "kg",
    "search",
    "cache_dir",
    "query_timeout",
    "result_cache",
    "lm",
    "api_base",
    "api_key",
    "temperature",
    "max_tokens",
    "seed",
    "lm_cache",
    "context_window",
    "write_markers",
    "lm_timeout",
    "lm_retries",
    "question_budget",
    "max_infra_failures",
    "variant",
    "num_threads",
    "metric_mode",
    "out",
    "mlflow",
    "mlflow_uri",
    "trace",
    "trace_writer",
    "filter_mode",
    "schema_coverage",
    "coverage_seed",
    "schema_index",
    "observation_chars",
    "max_steps",
    "check_answer",
)


def build_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(
        prog="python -m saga_dspy.optimize",
        description="Compile the SAGA program (BootstrapFewShot / MIPROv2 / gold-teacher demos) on a train or dev "
        "split.",
    )
    add_settings_args(parser, SETTINGS_FLAGS, defaults={"split": "train"})  # never the test split
    append_help(parser, "dataset", catalogue_text())
    parser.add_argument(
        "--optimizer",
        choices=OPTIMIZERS,
        default="bootstrap",
        help="bootstrap (BootstrapFewShot), mipro (MIPROv2, needs the mipro extra), none (only --teacher gold)",
    )
    parser.add_argument(
        "--teacher",
        choices=TEACHERS,
        default="none",
        help="gold: demonstrations from the gold SPARQL run through our tools",
    )
    parser.add_argument("--threshold", type=float, default=0.5, help="F1 a bootstrapped trace must reach")
    parser.add_argument("--max-demos", type=int, default=3, help="bootstrapped demos per predictor")
    parser.add_argument("--max-labeled-demos", type=int, default=0, help="raw labeled demos per predictor")
    parser.add_argument("--max-rounds", type=int, default=1, help="BootstrapFewShot rounds per question")
    parser.add_argument("--max-errors", type=int, default=None, help="errors tolerated while compiling")
    parser.add_argument("--gold-demos", type=int, default=3, help="gold-teacher demos on the controller")
    parser.add_argument(
        "--gold-step",
        choices=("execute", "last", "all"),
        default="execute",
        help="which step of a gold trace is the demo's output",
    )
    parser.add_argument(
        "--gold-pool", type=int, default=None, help="run the gold teacher on the first N train questions"
    )
    parser.add_argument(
        "--holdout", type=int, default=0, help="hold N train questions back and evaluate zero-shot vs compiled on them"
    )
    parser.add_argument("--shuffle-seed", type=int, default=0, help="seed of the train/holdout shuffle")
    parser.add_argument(
        "--auto", choices=("light", "medium", "heavy", "none"), default="light", help="MIPROv2 budget preset"
    )
    parser.add_argument("--num-trials", type=int, default=None, help="MIPROv2 trials (with --auto none)")
    parser.add_argument("--num-candidates", type=int, default=None, help="MIPROv2 candidates (with --auto none)")
    parser.add_argument(
        "--firewall",
        action="append",
        metavar="BENCHMARK",
        help="drop train questions colliding with this benchmark's test/dev questions "
        "(repeatable; default: the --dataset compiled on)",
    )
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
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )
    settings = settings_from_args(args)
    options = OptimizeOptions(
        optimizer=args.optimizer,
        teacher=args.teacher,
        threshold=args.threshold,
        max_demos=args.max_demos,
        max_labeled_demos=args.max_labeled_demos,
        max_rounds=args.max_rounds,
        max_errors=args.max_errors,
        gold_demos=args.gold_demos,
        gold_step=args.gold_step,
        gold_pool=args.gold_pool,
        holdout=args.holdout,
        shuffle_seed=args.shuffle_seed,
        auto=args.auto,
        num_trials=args.num_trials,
        num_candidates=args.num_candidates,
        firewall=tuple(args.firewall or ()),
    )
    # refuse bad requests before loading a model (OptimizeError: one line, exit 2, by cli.run_main)
    refuse_test_split(settings.dataset, settings.split, args.data_file)
    if options.optimizer == "mipro" and importlib.util.find_spec("optuna") is None:
        raise OptimizeError(MIPRO_MISSING)
    lm = None
    if options.optimizer == "none" and options.holdout <= 0:  # gold demos alone: no LM call
        configure_lm_cache(settings)
    else:
        lm = cli_lm(settings)
        if lm is None:
            return 2
        dspy.configure(lm=lm)
    optimize(
        settings,
        options,
        data_file=args.data_file,
        gold_file=args.gold_file,
        lm=lm,
        progress=not args.no_progress,
        experiment=args.experiment,
    )  # errors: cli.run_main
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))
