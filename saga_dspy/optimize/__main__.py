"""`python -m saga_dspy.optimize`: the command line of `saga_dspy.optimize.optimize`; `decisions`, `assemble` and
`compare` (`optimize.decision_cli`) compile the program's decisions one by one, put them into one program and run it
against the default on the compile's report set."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from saga_dspy.cli import dispatch, options_from, parse_logged, run_main
from saga_dspy.config import run_flags, settings_from_args
from saga_dspy.eval.running.run_inputs import check_file_inputs, run_parser
from saga_dspy.optimize import (
    OPTIMIZERS,
    SECONDS_PER_RUN,
    SECONDS_PER_RUN_SERVED,
    TEACHERS,
    OptimizeOptions,
    optimize,
)
from saga_dspy.optimize.compile_run import compile_with_lm
from saga_dspy.optimize.decision_cli import SUBCOMMANDS
from saga_dspy.optimize.instructions import check_available
from saga_dspy.optimize.sets import REST, parse_set, refuse_test_split

# every run setting but the split and limit (--split names the valset, the sizes bound each set), the program (a
# compile writes one) and the preflight (a compile runs none)
SETTINGS_FLAGS = run_flags(own=("split", "limit", "program", "preflight"))


def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.split(",") if x.strip())


def build_parser() -> argparse.ArgumentParser:
    parser = run_parser(
        prog="python -m saga_dspy.optimize",
        description=(
            "Compile the SAGA program: demonstrations from the train split, candidates scored by answer F1 on a "
            "valset (default: a seeded half of the dev split), compiled vs default on a report set never used "
            "for selection (default: the other half). Test splits are refused."
        ),
        epilog="One decision at a time: `python -m saga_dspy.optimize decisions --help` (compile the answer type, "
        "the entity or the candidate decision on its own examples), `python -m saga_dspy.optimize assemble --help` "
        "(put compiled decisions into one program.json), `python -m saga_dspy.optimize compare --help` (the "
        "compiled program against the default, interleaved, on the report set the compile left unseen).",
        flags=SETTINGS_FLAGS,
    )
    parser.add_argument(
        "--optimizer",
        choices=OPTIMIZERS,
        default="bootstrap",
        help="bootstrap: the model's successful train runs added to the demo pool; random-search: candidate pools "
        "and k scored on the valset; mipro: MIPROv2 over the controller's instructions; gepa: GEPA (reflection on "
        "F1 and feedback); none: the gold records alone, no LM",
    )
    parser.add_argument(
        "--teacher",
        choices=TEACHERS,
        default="pool",
        help="where the gold records come from: the dataset's bundled pool, or the gold teacher run on train",
    )
    _add_set_args(parser)
    _add_search_args(parser)
    _add_budget_args(parser)
    parser.add_argument("--data-file", help="train questions in our schema instead of the bundled train split")
    parser.add_argument("--gold-file", help="frozen gold file of --data-file")
    parser.add_argument("--experiment", help="MLflow experiment name")
    parser.add_argument("--no-progress", action="store_true")
    parser.add_argument("-v", "--verbose", action="store_true")
    return parser


def _add_set_args(parser: argparse.ArgumentParser) -> None:
    """Where the valset, the train questions and the report set come from, and their sizes."""
    parser.add_argument(
        "--split",
        dest="valset",
        metavar="SPLIT",
        default="dev",
        help="the valset: SPLIT of --dataset or BENCHMARK:SPLIT (--valset is the same flag); demonstrations always "
        "come from --train-split",
    )
    parser.add_argument("--valset", dest="valset", help=argparse.SUPPRESS)
    parser.add_argument("--train-split", default="train", help="the split demonstrations come from")
    parser.add_argument(
        "--report-set",
        default=REST,
        help=f"'{REST}' (the valset split's questions not drawn for the valset) or BENCHMARK:SPLIT",
    )
    parser.add_argument("--valset-size", type=int, default=None, help="valset questions (default: half of the split)")
    parser.add_argument("--report-size", type=int, default=None, help="report questions (default: all of them)")
    parser.add_argument("--train-size", type=int, default=None, help="train questions to bootstrap on (default: all)")


def _add_search_args(parser: argparse.ArgumentParser) -> None:
    """The optimizers' own settings: demos kept, random search, MIPROv2 and GEPA."""
    parser.add_argument("--threshold", type=float, default=1.0, help="F1 a bootstrapped run needs to become a demo")
    parser.add_argument("--max-traces", type=int, default=8, help="bootstrapped traces kept")
    parser.add_argument(
        "--k", type=int, default=None, help="demos a question in the compiled program (default: --demos)"
    )
    parser.add_argument("--k-choices", type=_ints, default=(1, 2, 3), help="random-search's k, comma-separated")
    parser.add_argument("--num-candidates", type=int, default=6, help="random-search candidates (the default included)")
    parser.add_argument("--gold-pool", type=int, default=None, help="--teacher gold: on the first N train questions")
    parser.add_argument("--shuffle-seed", type=int, default=0, help="seed of the set draws and random search")
    parser.add_argument(
        "--auto", choices=("light", "medium", "heavy", "none"), default="light", help="MIPROv2 / GEPA budget preset"
    )
    parser.add_argument("--num-trials", type=int, default=None, help="MIPROv2 trials (with --auto none)")
    parser.add_argument("--max-metric-calls", type=int, default=None, help="GEPA's budget in program runs")
    parser.add_argument(
        "--tune", default="react.react", help="predictors MIPROv2 / GEPA rewrite, comma-separated (the controller)"
    )
    parser.add_argument("--prompt-model", help="MIPROv2's proposal model (a dspy/litellm model; default: --lm)")
    parser.add_argument("--reflection-model", help="GEPA's reflection model (a dspy/litellm model; default: --lm)")


def _add_budget_args(parser: argparse.ArgumentParser) -> None:
    """The time a compile may take, and the estimate printed before it starts."""
    parser.add_argument(
        "--budget-minutes",
        type=float,
        default=None,
        help="stop bootstrapping / scoring candidates (GEPA: proposing) past this; the best program so far is kept",
    )
    parser.add_argument(
        "--seconds-per-question",
        type=float,
        default=None,
        help=f"for the estimate printed before start (default: {SECONDS_PER_RUN:g} with the bundled local model, "
        f"{SECONDS_PER_RUN_SERVED:g} over --num-threads with a served one)",
    )


def options_from_args(args: argparse.Namespace) -> OptimizeOptions:
    return options_from(
        OptimizeOptions,
        args,
        seed=args.shuffle_seed,
        tune=tuple(t.strip() for t in args.tune.split(",") if t.strip()),
        seconds_per_run=args.seconds_per_question,
    )


def main(argv: Sequence[str] | None = None) -> int:
    return dispatch(argv, SUBCOMMANDS, compile_main)


def compile_main(argv: list[str]) -> int:
    """The whole-program compile's command line (`main` without a sub-command)."""
    args = parse_logged(build_parser(), argv)
    settings = settings_from_args(args, split=args.train_split)
    options = options_from_args(args)
    # refuse bad requests before loading a model (OptimizeError: one line, exit 2, by cli.run_main)
    refuse_test_split(settings.dataset, options.train_split, args.data_file)
    parse_set(options.valset, settings.dataset)
    if options.report_set != REST:
        parse_set(options.report_set, settings.dataset)
    check_available(options.optimizer)
    check_file_inputs(settings, args.data_file)  # the program, the data file and the lexicon: one line each
    no_lm = options.optimizer == "none" and options.report_size == 0  # the gold records alone: no LM call
    return compile_with_lm(optimize, settings, options, args, no_lm, data_file=args.data_file, gold_file=args.gold_file)


def console_main() -> None:
    """The `saga-optimize` console script: `python -m saga_dspy.optimize`, errors as one line."""
    sys.exit(run_main(main))


if __name__ == "__main__":
    console_main()
