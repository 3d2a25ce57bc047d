"""What every command line shares: the parser (no abbreviated flags, defaults in --help) and the
wrapper of `main` that turns any error into one line on stderr and an exit status, never a traceback.

    if __name__ == "__main__":
        sys.exit(run_main(main))

Bad input (a missing file, a bad value, an unknown dataset, a run directory in use: the errors listed
in `KNOWN_ERRORS`) exits 2 with `error: <what>`; anything else exits 1 with the same one line and a
hint: `--debug` (or SAGA_DEBUG=1) shows the traceback. Either names the input being read when it failed
(`input_files.reading`)."""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from saga_dspy.config import apply_offline_env
from saga_dspy.errors import Interrupted, SagaError
from saga_dspy.input_files import reading_context

DEBUG_FLAG = "--debug"
DEBUG_ENV = "SAGA_DEBUG"
MAX_MESSAGE = 500
# OSError: missing / unwritable / wrong-kind paths; ValueError: bad values, pydantic validation, JSON and UTF-8 decoding
KNOWN_ERRORS: tuple[type[BaseException], ...] = (SagaError, OSError, ValueError)
OptionsT = TypeVar("OptionsT")


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """Defaults shown after each flag's help, once: not where the help already says its default, nor where there
    is none to say (None, an off switch); descriptions kept as written."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if "(default" in text or action.default is None or action.default is False:
            return text
        return super()._get_help_string(action)


class ArgumentParser(argparse.ArgumentParser):
    """argparse with `allow_abbrev=False` (`--lm-cach` is an error, not `--lm-cache`) and defaults in --help;
    sub-command parsers are of the same class."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("allow_abbrev", False)
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)


def append_help(parser: argparse.ArgumentParser, dest: str, text: str) -> None:
    """Add `text` to the help of the flag stored in `dest` (e.g. the dataset names to --dataset)."""
    for action in parser._actions:
        if action.dest == dest and action.help:
            action.help = f"{action.help}; {text}".replace("%", "%%").replace("%%(default)s", "%(default)s")


def dispatch(
    argv: Sequence[str] | None,
    subcommands: Mapping[str, Callable[[list[str]], int]],
    main: Callable[[list[str]], int],
) -> int:
    """A command line with sub-commands: the one `argv` names gets the rest of it, else `main` gets all of it (the
    offline environment set first, `argv` None: sys.argv)."""
    apply_offline_env()
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] in subcommands:
        return subcommands[args[0]](args[1:])
    return main(args)


def parse_logged(parser: argparse.ArgumentParser, argv: Sequence[str]) -> argparse.Namespace:
    """`argv` parsed; logging at INFO with --verbose, else at WARNING."""
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )
    return args


def options_from(cls: type[OptionsT], args: argparse.Namespace, **values: Any) -> OptionsT:
    """An options dataclass from parsed flags: each field from the flag of its name where the parser has one (the
    field's default where not), but those given in `values`."""
    flags = vars(args)
    names = [f.name for f in dataclasses.fields(cls) if f.name in flags and f.name not in values]  # type: ignore[arg-type]
    return cls(**{name: flags[name] for name in names}, **values)


def _known_errors() -> tuple[type[BaseException], ...]:
    known = KNOWN_ERRORS
    if "mlflow" in sys.modules:  # a bad --mlflow-uri, an unreachable tracking store
        from mlflow.exceptions import MlflowException

        known = (*known, MlflowException)
    return known


def one_line(exc: BaseException) -> str:
    """The error in one line; a settings validation error as `--flag: what is wrong`."""
    errors = getattr(exc, "errors", None)
    if callable(errors) and type(exc).__name__ == "ValidationError":  # pydantic's
        try:
            text = "; ".join(
                f"--{str(e['loc'][0]).replace('_', '-')}: {e['msg']}" if e.get("loc") else e["msg"] for e in errors()
            )
        except Exception:
            text = str(exc)
    else:
        text = str(exc)
    text = " ".join(text.split()) or type(exc).__name__
    return text if len(text) <= MAX_MESSAGE else text[: MAX_MESSAGE - 1] + "…"


def run_main(main: Callable[[list[str]], int], argv: Sequence[str] | None = None) -> int:
    """`main(argv)` with every error said in one line: exit 2 for bad input, 1 for anything else, 130 on
    Ctrl-C or a run's `Interrupted`."""
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = DEBUG_FLAG in argv or os.environ.get(DEBUG_ENV, "").strip() not in ("", "0")
    argv = [a for a in argv if a != DEBUG_FLAG]
    try:
        return main(argv)
    except (KeyboardInterrupt, Interrupted):
        print("interrupted", file=sys.stderr)
        return 130
    except _known_errors() as exc:
        if debug:
            raise
        text = one_line(exc)
        print(f"error: {text}{reading_context(exc, text)}", file=sys.stderr)
        return 2
    except Exception as exc:
        if debug:
            raise
        text = one_line(exc)
        print(
            f"error: unexpected {type(exc).__name__}: {text}{reading_context(exc, text)} (rerun with {DEBUG_FLAG} "
            f"or {DEBUG_ENV}=1 for the traceback)",
            file=sys.stderr,
        )
        return 1
