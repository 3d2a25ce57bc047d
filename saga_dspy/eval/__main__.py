"""`python -m saga_dspy.eval`: run the SAGA agent over a benchmark split and score it.

    python -m saga_dspy.eval --dataset qald10 --split test --limit 10
    python -m saga_dspy.eval --variant full --variant spinach --variant no-type-filter --limit 20
    python -m saga_dspy.eval --resume --out runs/my-run          # continue an interrupted run, as it was started
    python -m saga_dspy.eval freeze-gold --dataset qald10 --split test --endpoint URL
    python -m saga_dspy.eval rescore runs/my-run                  # metrics again from predictions.jsonl
    python -m saga_dspy.eval compare runs/a runs/b                # question by question, with the paired CI
    python -m saga_dspy.eval export runs/my-run --format qald     # QALD-JSON (GERBIL)
    python -m saga_dspy.eval report runs/qald10 runs/qald7        # one results table across benchmarks

Each variant writes into its run directory (`--out`; with several variants, one
sub-directory per variant):

* `predictions.jsonl` — one line per finished question, appended and flushed (under a lock)
  as soon as it finishes: question, gold query and result, predicted SPARQL, answers, F1, EM,
  counters, error, final status and the full trajectory. A killed run loses no finished
  question; `--resume` skips the ids already there (`--retry-failed` re-runs those with an
  error), and a line cut off by the kill is dropped. `--resume --out DIR` alone restores the whole run from
  DIR's config.json (dataset, split, ids, variants, LM, every setting: `eval.running.resume`); a flag that says
  otherwise is refused.
* `config.json` — everything needed to reproduce the run: versions, endpoint, LM, variant,
  seeds, the metric rules, the controller's instructions and fields, the question ids.
* `metrics.json` — `metrics.summarize()` over the finished questions (+ counts).

A summary table (variants side by side) is printed at the end, and each variant is an MLflow
run (`saga_dspy.eval.tracking.tracker`; `--no-mlflow` turns it off).

Gold answers always come from frozen gold (`gold.freeze_gold`): the bundled files for
the embedded sample (frozen into the cache on first use if a split has none), or, for a live
endpoint, the file written by `freeze-gold` (never queried during a run). By default only the
questions whose gold result is answerable (`answerability`: non-empty, not degenerate) are
evaluated; how many were left out and why is printed and written to config.json and metrics.json.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

import dspy

from saga_dspy.cli import ArgumentParser, dispatch, one_line, parse_logged, run_main
from saga_dspy.config import add_settings_args, run_flags, settings_from_args
from saga_dspy.eval.errors import EvalError
from saga_dspy.eval.files import write_file
from saga_dspy.eval.loading.answerability import describe_subset
from saga_dspy.eval.loading.evalset import parse_ids
from saga_dspy.eval.loading.gold import freeze
from saga_dspy.eval.reports.compare import compare_markdown, compare_runs
from saga_dspy.eval.reports.export import FORMATS, export_run
from saga_dspy.eval.reports.rescore import RESCORED, rescore
from saga_dspy.eval.reports.runs import expand_runs, run_labels
from saga_dspy.eval.running.resume import holds_record, restore_args
from saga_dspy.eval.running.run_inputs import (
    COVERAGES,
    check_file_inputs,
    out_dir_for,
    program_has_controller_demos,
    run_parser,
)
from saga_dspy.eval.running.runner import evaluate
from saga_dspy.eval.scoring.report import (
    ACROSS_NOTE,
    RUN_NAME_COLUMNS,
    md_table,
    rescore_summary,
    results_table,
    runs_rows,
    text_table,
)
from saga_dspy.input_files import reading
from saga_dspy.lm import cli_lm
from saga_dspy.variants import VARIANT_NAMES

# Settings fields exposed as flags (flag <-> field through config.add_settings_args): every run setting but the
# variant and the schema coverage, which --variants and --schema-coverage take as lists
SETTINGS_FLAGS = run_flags(own=("variant", "schema_coverage"))


def build_parser() -> argparse.ArgumentParser:
    parser = run_parser(
        prog="python -m saga_dspy.eval",
        description="Evaluate the SAGA agent on a benchmark split "
        "(sub-commands: freeze-gold, rescore, compare, export, report).",
        epilog="Run `python -m saga_dspy.eval freeze-gold -h` for freezing gold answers on a live endpoint, "
        "`rescore -h` for recomputing a run's metrics from its predictions, `compare -h` for two or more runs "
        "question by question, `export -h` for QALD-JSON, `report -h` for a table across benchmarks.",
        flags=SETTINGS_FLAGS,
    )
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
    parser.add_argument(
        "--resume",
        action="store_true",
        help="continue the run in --out (default: the latest run) as recorded in its config.json: dataset, split, "
        "ids, variants, LM and every setting; a flag that says otherwise is refused",
    )
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
        (
            "kg_preset",
            "dataset",
            "split",
            "endpoint",
            "kg",
            "cache_dir",
            "query_timeout",
            "result_cache",
            "row_cap",
            "user_agent",
        ),
    )
    parser.add_argument("--data-file", help="benchmark file in our schema instead of a bundled one")
    parser.add_argument(
        "--gold-out",
        help="output file (default: <cache_dir>/gold/<dataset>/gold-<endpoint>-<split>.jsonl.gz; for a --data-file "
        "under data-<its content hash>/)",
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
        with reading(args.run_dir, "run"):  # an error in a tampered file names the run
            metrics = rescore(args.run_dir, args.metric_mode, out=args.out)
    except (FileNotFoundError, ValueError, EvalError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    written = Path(args.out) if args.out else Path(args.run_dir) / RESCORED
    partial = "" if metrics.get("complete", True) else f"; {metrics['n']} of them have predictions"
    print(f"{args.run_dir}: {rescore_summary(metrics)} (percent); metrics written to {written}")
    print(describe_subset(metrics["subset"]) + partial)
    return 0


def runs_parser(name: str, description: str, runs_help: str) -> argparse.ArgumentParser:
    """`python -m saga_dspy.eval NAME RUN_DIR...`: a sub-command that reads one or more run directories."""
    parser = ArgumentParser(prog=f"python -m saga_dspy.eval {name}", description=description)
    parser.add_argument("runs", nargs="+", metavar="RUN_DIR", help=runs_help)
    return parser


def build_compare_parser() -> argparse.ArgumentParser:
    parser = runs_parser(
        "compare",
        "Compare runs question by question: each run's F1 and final SPARQL, each later run's change against the "
        "first (rows sorted by the second run's change, losses first) and its paired bootstrap 95% CI. A directory "
        "with several variants stands for its variants.",
        "run directories (at least two runs in all)",
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of markdown")
    parser.add_argument("--out", help="also write the comparison to OUT.md and OUT.json")
    return parser


def compare_main(argv: Sequence[str]) -> int:
    args = build_compare_parser().parse_args(argv)
    result = compare_runs(expand_runs(args.runs))
    text = compare_markdown(result)
    if args.out:
        write_file(f"{args.out}.md", text)
        write_file(f"{args.out}.json", json.dumps(result, indent=1, ensure_ascii=False, allow_nan=False) + "\n")
    print(json.dumps(result, indent=1, ensure_ascii=False) if args.json else text)
    return 0


def build_export_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(
        prog="python -m saga_dspy.eval export",
        description="Write a run's final queries and answers in a benchmark format (qald: QALD-JSON, the format "
        "of QALD-10 and of GERBIL's QA experiments). A directory with several variants exports each.",
    )
    parser.add_argument("run_dir", metavar="RUN_DIR", help="a run directory")
    parser.add_argument("--format", dest="fmt", choices=FORMATS, required=True, help="the output format")
    parser.add_argument("--out", help="output file (default: RUN_DIR/<format>.json; one run only)")
    parser.add_argument("--dataset-id", help="the file's dataset id (default: <dataset>-<split>-<variant>)")
    return parser


def export_main(argv: Sequence[str]) -> int:
    args = build_export_parser().parse_args(argv)
    runs = expand_runs([args.run_dir])
    if args.out and len(runs) > 1:
        raise EvalError(f"--out names one file, but {args.run_dir} holds {len(runs)} runs; leave --out out")
    for run in runs:
        path = export_run(run, args.fmt, args.out, args.dataset_id)
        print(f"{run.variant}: {len(run.lines)} questions -> {path}")
    return 0


def build_report_parser() -> argparse.ArgumentParser:
    parser = runs_parser(
        "report",
        "One results table across benchmarks from run directories: a row per variant (and LM, when the runs used "
        "several), a column per benchmark with F1 and its questions; then a row per run.",
        "run directories",
    )
    parser.add_argument("--markdown", action="store_true", help="markdown instead of text")
    return parser


def report_main(argv: Sequence[str]) -> int:
    args = build_report_parser().parse_args(argv)
    runs = expand_runs(args.runs)
    several_lms = len({r.lm for r in runs}) > 1
    labels = [f"{r.variant} · {r.lm}" if several_lms else r.variant for r in runs]
    across = results_table([(lab, r.benchmark, r.metrics) for lab, r in zip(labels, runs)])
    each = runs_rows([(r.benchmark, lab, r.lm, r.metrics) for lab, r in zip(run_labels(runs), runs)])
    if args.markdown:
        print(md_table(*across) + "\n\n" + md_table(*each))
    else:
        print(text_table(*across) + "\n\n" + text_table(*each, left=RUN_NAME_COLUMNS))
    note = f"; {ACROSS_NOTE}" if len(across[0]) > 2 else ""
    print(f"\nF1, EM and empty in percent; seconds per question{note}; runs: " + ", ".join(str(r.path) for r in runs))
    return 0


def resume_dir(args: argparse.Namespace, parser: argparse.ArgumentParser) -> Path:
    """The run directory a resume continues: --out, else the latest run of the dataset and split given."""
    try:
        settings = settings_from_args(args)
    except Exception as exc:  # a settings validation error: argparse's one-line usage error
        parser.error(one_line(exc))
    return out_dir_for(settings, resume=True)


SUBCOMMANDS = {
    "freeze-gold": freeze_main,
    "rescore": rescore_main,  # metrics again from predictions.jsonl, no LM
    "compare": compare_main,
    "export": export_main,
    "report": report_main,
}


def main(argv: Sequence[str] | None = None) -> int:
    return dispatch(argv, SUBCOMMANDS, evaluate_main)


def evaluate_main(argv: list[str]) -> int:
    """The evaluation's command line (`main` without a sub-command)."""
    parser = build_parser()
    args = parse_logged(parser, argv)
    if args.retry_failed:
        args.resume = True
    if args.resume:  # the recorded run, whole: a bare `--resume --out DIR` continues it, a conflicting flag is refused
        out_dir = resume_dir(args, parser)
        if holds_record(out_dir) or "dataset" not in vars(args):
            args = restore_args(args, out_dir)
        else:  # a script's resumable step: the run its flags name, started where nothing is recorded yet
            print(f"note: {out_dir} holds no recorded run yet: starting the one the flags name", file=sys.stderr)
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
    check_file_inputs(settings, args.data_file)  # before the LM: a bad file is named, whatever the LM's state
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


def console_main() -> None:
    """The `saga-eval` console script: `python -m saga_dspy.eval`, errors as one line."""
    sys.exit(run_main(main))


if __name__ == "__main__":
    console_main()
