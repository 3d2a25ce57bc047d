"""What a whole-program compile (`optimize`) and a one-decision compile (`decision_compile`, `decision_cli`) share:
their keyword arguments, the checks of their options, the state every compile job holds, the output directory, the
run directory's lock and the MLflow run, the interrupt handling, the common part of config.json, the extra models."""

from __future__ import annotations

import argparse
import contextlib
import datetime as _dt
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, NamedTuple, TypedDict, TypeVar

import dspy

from saga_dspy.config import Settings, recorded_command
from saga_dspy.errors import Interrupted
from saga_dspy.eval.running.records import endpoint_record, lm_record, versions
from saga_dspy.eval.running.rundir import locked_run_dir
from saga_dspy.eval.running.runner import sigterm_as_interrupt
from saga_dspy.eval.tracking.tracker import Tracker
from saga_dspy.lm import build_lm, cli_lm, configure_lm_cache
from saga_dspy.optimize.instructions import check_available
from saga_dspy.optimize.sets import OptimizeError
from saga_dspy.services import KgServices

OptionsT = TypeVar("OptionsT")
PROGRAM = "program.json"  # the compiled program in a compile's --out


class CompileArgs(TypedDict, total=False):
    """Every compile's keyword arguments: --out, the task LM and the proposal / reflection models (None: the task
    LM), the KG services (None: from the settings), the progress bars, the MLflow experiment, where it prints."""

    out: str | Path | None
    lm: dspy.BaseLM | None
    prompt_lm: dspy.BaseLM | None
    reflection_lm: dspy.BaseLM | None
    endpoint: Any
    search: Any
    progress: bool
    experiment: str | None
    stream: Any


def check_compile_options(options: Any, choices: Mapping[str, Sequence[str]], counts_ok: bool, counts: str) -> None:
    """An OptimizeError for options that do not go together (before anything is loaded): a flag's value not among its
    `choices`, counts out of range (`counts` says what they must be), an optimizer whose package is missing."""
    for flag, allowed in choices.items():
        if getattr(options, flag) not in allowed:
            raise OptimizeError(f"--{flag} must be one of {', '.join(allowed)}")
    if not counts_ok:
        raise OptimizeError(counts)
    check_available(options.optimizer)


@dataclass(eq=False)
class CompileJob(Generic[OptionsT]):
    """What every compile's state holds: its settings and options, where it writes and logs, its deadline
    (--budget-minutes) and its keyword arguments (the models, where it prints, the progress bars)."""

    settings: Settings
    options: OptionsT
    out_dir: Path
    tracker: Tracker
    deadline: float | None
    kwargs: CompileArgs

    @property
    def lm(self) -> dspy.BaseLM | None:
        return self.kwargs.get("lm")

    @property
    def stream(self) -> Any:
        return self.kwargs.get("stream") or sys.stdout

    @property
    def progress(self) -> bool:
        return self.kwargs.get("progress", True)

    def over_budget(self) -> bool:
        return self.deadline is not None and time.monotonic() > self.deadline

    def reflection_model(self) -> Any:
        """GEPA's reflection model: the one given, else the task LM (the configured one when none was given)."""
        return self.kwargs.get("reflection_lm") or self.lm or dspy.settings.lm


def out_dir_of(out: str | Path | None, settings: Settings, default_name: str) -> Path:
    """--out, else the settings' out, else runs/<default_name>-<timestamp>."""
    if out is not None:
        return Path(out)
    if settings.out:
        return Path(settings.out)
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    return Path("runs") / f"{default_name}-{stamp}"


def lm_context(lm: dspy.BaseLM | None) -> contextlib.AbstractContextManager[Any]:
    """`dspy.context(lm=lm)`, or nothing when no LM is given."""
    return dspy.context(lm=lm) if lm is not None else contextlib.nullcontext()


@contextlib.contextmanager
def compile_services(settings: Settings, out_dir: Path, run: CompileArgs) -> Iterator[KgServices]:
    """The compile's run directory locked, its KG services open (`run`'s, else the settings'), SIGTERM as Ctrl-C."""
    with locked_run_dir(out_dir), KgServices(settings, run.get("endpoint"), run.get("search")) as services:
        with sigterm_as_interrupt():
            yield services


@contextlib.contextmanager
def tracked_compile(
    tracker: Tracker, lm: dspy.BaseLM | None, name: str, params: dict[str, Any], kind: str, out_dir: Path
) -> Iterator[None]:
    """The compile's MLflow run, the task LM in context; the tracker closed after it, whatever happened."""
    try:
        with lm_context(lm), tracker.run(name, params=params, tags={"kind": kind, "out_dir": str(out_dir)}):
            yield
    finally:
        tracker.close()


def run_interruptible(run: Callable[[], None], nothing_kept: Callable[[], bool], before: str) -> str | None:
    """Run a compile; Ctrl-C (or SIGTERM) stops it and says so (None: it ran to the end). Interrupted with nothing
    kept yet (`nothing_kept()`) is an error: `... before <before>`."""
    try:
        run()
    except (KeyboardInterrupt, Interrupted) as exc:
        interrupted = f"interrupted ({exc or 'Ctrl-C'})"
        if nothing_kept():
            raise Interrupted(f"{interrupted} before {before}") from None
        return interrupted
    return None


def eval_command(program: Path, settings: Settings) -> str:
    """The command that evaluates a compiled program on the dev split (config.json's and metrics.json's `use`)."""
    return (
        f"python -m saga_dspy.eval --program {program} --variant {settings.variant} "
        f"--dataset {settings.dataset} --split dev"
    )


def command_record() -> dict[str, Any]:
    """config.json's `created` and `command` (the argv redacted)."""
    return {
        "created": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "command": recorded_command("saga_dspy.optimize"),
    }


def sets_record(
    settings: Settings, named_sets: Iterable[tuple[str, Any]], firewall: Any, endpoint: Any
) -> dict[str, Any]:
    """config.json's sets (their names and question ids), firewall, LM, endpoint and versions."""
    return {
        "sets": {name: {"name": s.name, "ids": [i.id for i in s.items]} for name, s in named_sets},
        "firewall": firewall,
        "lm": lm_record(settings),
        "endpoint": endpoint_record(settings, endpoint),
        "versions": versions(),
    }


class EstimateWords(NamedTuple):
    """How an estimate names its count: `about` ("at most"), the items ("program runs"), one ("run"), the flag that
    sets the seconds an item takes."""

    about: str
    items: str
    item: str
    flag: str


def estimate_line(
    counts: dict[str, int], seconds: float, assumed: str, budget_minutes: float | None, words: EstimateWords
) -> str:
    """The estimate printed before a compile starts: `counts` (by phase) of an item taking `seconds` each."""
    total = sum(counts.values())
    parts = ", ".join(f"{k} {v}" for k, v in counts.items())
    budget = f"; --budget-minutes {budget_minutes:g} bounds it" if budget_minutes else ""
    return (
        f"estimate: {words.about} {total} {words.items} ({parts}), about {total * seconds / 60:.0f} min at "
        f"{seconds:.3g} s a {words.item} ({assumed}; {words.flag} to set it); LM cache hits are free{budget}"
    )


def other_lm(settings: Settings, model: str | None) -> dspy.BaseLM | None:
    """A served model for proposals / reflection (the task LM's server settings), or None: the task LM."""
    if not model or model == settings.lm:
        return None
    return build_lm(settings.model_copy(update={"lm": model}))


def configured_lm(settings: Settings) -> dspy.BaseLM | None:
    """A command line's task LM, built and made dspy's; None (the error printed) when it cannot be built."""
    lm = cli_lm(settings)
    if lm is not None:
        dspy.configure(lm=lm)
    return lm


def compile_with_lm(
    compile_fn: Callable[..., Any], settings: Settings, options: Any, args: argparse.Namespace, no_lm: bool, **kwargs
) -> int:
    """A command line's compile: the task LM loaded and configured (`no_lm`: the LM cache alone), then `compile_fn`
    with the flags' proposal and reflection models, progress and experiment; 2 when the LM cannot be loaded. Errors
    and Ctrl-C: cli.run_main (one line; 130 after an interrupt, the best so far saved)."""
    lm = None
    if no_lm:
        configure_lm_cache(settings)
    elif (lm := configured_lm(settings)) is None:
        return 2
    compile_fn(
        settings,
        options,
        lm=lm,
        prompt_lm=other_lm(settings, args.prompt_model),
        reflection_lm=other_lm(settings, args.reflection_model),
        progress=not args.no_progress,
        experiment=args.experiment,
        **kwargs,
    )
    return 0


__all__ = [
    "PROGRAM",
    "CompileArgs",
    "CompileJob",
    "EstimateWords",
    "check_compile_options",
    "command_record",
    "compile_services",
    "compile_with_lm",
    "configured_lm",
    "eval_command",
    "estimate_line",
    "lm_context",
    "other_lm",
    "out_dir_of",
    "run_interruptible",
    "sets_record",
    "tracked_compile",
]
