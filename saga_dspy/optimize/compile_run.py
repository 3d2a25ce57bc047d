"""What a whole-program compile (`optimize`) and a one-decision compile (`decision_compile`, `decision_cli`) share:
the output directory, the LM context, the interrupt handling, the common part of config.json, the extra models."""

from __future__ import annotations

import argparse
import contextlib
import datetime as _dt
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, NamedTuple

import dspy

from saga_dspy.config import Settings, redact_argv
from saga_dspy.errors import Interrupted
from saga_dspy.eval.running.records import endpoint_record, lm_record, versions
from saga_dspy.lm import build_lm, cli_lm, configure_lm_cache


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


def command_record() -> dict[str, Any]:
    """config.json's `created` and `command` (the argv redacted)."""
    return {
        "created": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "command": [sys.executable, "-m", "saga_dspy.optimize", *redact_argv(sys.argv[1:])],
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


def compile_with_lm(
    compile_fn: Callable[..., Any], settings: Settings, options: Any, args: argparse.Namespace, no_lm: bool, **kwargs
) -> int:
    """A command line's compile: the task LM loaded and configured (`no_lm`: the LM cache alone), then `compile_fn`
    with the flags' proposal and reflection models, progress and experiment; 2 when the LM cannot be loaded. Errors
    and Ctrl-C: cli.run_main (one line; 130 after an interrupt, the best so far saved)."""
    lm = None
    if no_lm:
        configure_lm_cache(settings)
    else:
        lm = cli_lm(settings)
        if lm is None:
            return 2
        dspy.configure(lm=lm)
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
    "EstimateWords",
    "command_record",
    "compile_with_lm",
    "estimate_line",
    "lm_context",
    "other_lm",
    "out_dir_of",
    "run_interruptible",
    "sets_record",
]
