"""`python -m saga_dspy.eval`: run the SAGA agent over a benchmark split and score it.

    python -m saga_dspy.eval --dataset qald10 --split test --limit 10
    python -m saga_dspy.eval --variant full --variant spinach --variant no-type-filter --limit 20
    python -m saga_dspy.eval --resume --out runs/my-run          # continue an interrupted run
    python -m saga_dspy.eval freeze-gold --dataset qald10 --split test --endpoint URL
    python -m saga_dspy.eval rescore runs/my-run                  # metrics again from predictions.jsonl

Each variant writes into its run directory (`--out`; with several variants, one
sub-directory per variant):

* `predictions.jsonl` — one line per finished question, appended and flushed (under a lock)
  as soon as it finishes: question, gold query and result, predicted SPARQL, answers, F1, EM,
  counters, error, final status and the full trajectory. A killed run loses no finished
  question; `--resume` skips the ids already there (`--retry-failed` re-runs those with an
  error), and a line cut off by the kill is dropped.
* `config.json` — everything needed to reproduce the run: versions, endpoint, LM, variant,
  seeds, the metric rules, the controller's instructions and fields, the question ids.
* `metrics.json` — `metrics.summarize()` over the finished questions (+ counts).

A summary table (variants side by side) is printed at the end, and each variant is an MLflow
run (`saga_dspy.eval.tracking`; `--no-mlflow` turns it off).

Gold answers always come from frozen gold (`gold.freeze_gold`): the bundled files for
the embedded sample (frozen into the cache on first use if a split has none), or, for a live
endpoint, the file written by `freeze-gold` (never queried during a run). By default only the
questions whose gold result is answerable (`answerability`: non-empty, not degenerate) are
evaluated; how many were left out and why is printed and written to config.json and metrics.json.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Sequence

import dspy

from saga_dspy.cli import ArgumentParser, append_help, one_line, run_main
from saga_dspy.config import add_settings_args, apply_offline_env, settings_from_args
from saga_dspy.eval.answerability import describe_subset
from saga_dspy.eval.datasets import catalogue_text
from saga_dspy.eval.evalset import parse_ids
from saga_dspy.eval.gold import freeze
from saga_dspy.eval.rescore import RESCORED, rescore
from saga_dspy.eval.runner import COVERAGES, evaluate, program_has_controller_demos
from saga_dspy.lm import cli_lm
from saga_dspy.variants import VARIANT_NAMES

# Settings fields exposed as flags (flag <-> field through config.add_settings_args).
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
    "program",
    "num_threads",
    "metric_mode",
    "out",
    "mlflow",
    "mlflow_uri",
    "trace",
    "trace_writer",
    "filter_mode",
    "coverage_seed",
    "schema_index",
    "observation_chars",
    "max_steps",
    "demos",
    "check_answer",
    "final_extract",
    "stable_history",
    "demo_observation_chars",
    "demo_anchors",
)


def build_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(
        prog="python -m saga_dspy.eval",
        description="Evaluate the SAGA agent on a benchmark split (sub-commands: freeze-gold, rescore).",
        epilog="Run `python -m saga_dspy.eval freeze-gold -h` for freezing gold answers on a live endpoint, "
        "`python -m saga_dspy.eval rescore -h` for recomputing a run's metrics from its predictions.",
    )
    add_settings_args(parser, SETTINGS_FLAGS)
    append_help(parser, "dataset", catalogue_text())
    parser.add_argument(
        "--variant",
        dest="variants",
        action="append",
        choices=VARIANT_NAMES,
        help="ablation variant; repeat to run several and compare them side by side (default: full)",
    )
    parser.add_argument(
        "--schema-coverage",
        dest="schema_coverage",
        type=int,
        choices=COVERAGES,
        default=argparse.SUPPRESS,
        help="share of formal schema constraints kept (paper Table 6)",
    )
    parser.add_argument("--ids", action="append", help="question ids, comma-separated (repeatable), or @FILE")
    parser.add_argument("--data-file", help="benchmark file in our schema (.jsonl/.json[.gz]) instead of a bundled one")
    parser.add_argument("--gold-file", help="frozen gold file (default: bundled for embedded, else freeze-gold's)")
    parser.add_argument(
        "--all-questions",
        action="store_true",
        help="also evaluate questions whose frozen gold is empty, degenerate or failed (they score 0)",
    )
    parser.add_argument("--resume", action="store_true", help="continue the run in --out (default: the latest run)")
    parser.add_argument(
        "--retry-failed", action="store_true", help="with --resume: re-run questions that ended with an error"
    )
    parser.add_argument("--overwrite", action="store_true", help="start again in an --out that has predictions")
    parser.add_argument("--experiment", help="MLflow experiment name (default: saga-eval-<dataset>-<split>)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.add_argument("-v", "--verbose", action="store_true", help="log at INFO level")
    return parser


def build_freeze_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(
        prog="python -m saga_dspy.eval freeze-gold",
        description="Execute every gold query of a split on an endpoint and freeze the results "
        "(runs on that endpoint then read gold from this file, never from the endpoint).",
    )
    add_settings_args(
        parser,
        ("dataset", "split", "endpoint", "kg", "cache_dir", "query_timeout", "result_cache", "row_cap", "user_agent"),
    )
    parser.add_argument("--data-file", help="benchmark file in our schema instead of a bundled one")
    parser.add_argument(
        "--gold-out", help="output file (default: <cache_dir>/gold/<dataset>/gold-<endpoint>-<split>.jsonl.gz)"
    )
    parser.add_argument("--no-progress", action="store_true")
    return parser


def freeze_main(argv: Sequence[str]) -> int:
    args = build_freeze_parser().parse_args(argv)
    settings = settings_from_args(args)
    try:
        summary = freeze(
            settings,
            settings.dataset,
            settings.split,
            out=args.gold_out,
            data_file=args.data_file,
            progress=not args.no_progress,
        )
    except (ValueError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(summary, indent=2))
    print(f"frozen gold: {summary['file']} ({summary['answerable']} of {summary['total']} answerable)")
    return 0


def build_rescore_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m saga_dspy.eval rescore",
        description="Recompute a run's metrics from its predictions.jsonl (no LM).",
    )
    parser.add_argument("run_dir", help="a run directory (predictions.jsonl, config.json)")
    parser.add_argument("--metric-mode", choices=("answers", "rows"), help="default: the run's own")
    parser.add_argument("--out", help=f"where to write the metrics (default: RUN_DIR/{RESCORED})")
    return parser


def rescore_main(argv: Sequence[str]) -> int:
    args = build_rescore_parser().parse_args(argv)
    try:
        metrics = rescore(args.run_dir, args.metric_mode, out=args.out)
    except (FileNotFoundError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    shown = {k: metrics.get(k) for k in ("n", "f1", "em", "empty_rate", "boolean_f1", "factoid_f1")}
    print(json.dumps(shown, indent=2))
    print(describe_subset(metrics["subset"]))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    apply_offline_env()
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "freeze-gold":
        return freeze_main(argv[1:])
    if argv and argv[0] == "rescore":  # metrics again from predictions.jsonl, no LM
        return rescore_main(argv[1:])
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )
    if args.retry_failed:
        args.resume = True
    if getattr(args, "program", None) and "demos" not in vars(args) and program_has_controller_demos(args.program):
        print(
            f"note: {args.program} carries compiled controller demos; per-question pool demos are off "
            f"(--demos 0) so those are used (pass --demos N to override)",
            file=sys.stderr,
        )
        args.demos = 0
    try:
        settings = settings_from_args(args)
    except Exception as exc:  # a settings validation error: argparse's one-line usage error
        parser.error(one_line(exc))
    lm = cli_lm(settings)
    if lm is None:
        return 2
    dspy.configure(lm=lm)
    results = evaluate(
        settings,
        args.variants or [settings.variant],
        ids=parse_ids(args.ids),
        data_file=args.data_file,
        gold_file=args.gold_file,
        answerable_only=not args.all_questions,
        resume=args.resume,
        retry_failed=args.retry_failed,
        overwrite=args.overwrite,
        lm=lm,
        progress=not args.no_progress,
        experiment=args.experiment,
    )  # EvalError / Interrupted: one line and exit 2 / 130 (cli.run_main)
    if any(r.interrupted for r in results.values()):
        return 130
    return 3 if any(r.stopped for r in results.values()) else 0


if __name__ == "__main__":
    sys.exit(run_main(main))
