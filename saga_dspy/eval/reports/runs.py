"""Finished run directories read back (what `eval compare`, `eval export` and `eval report` work on): a variant's
directory holds predictions.jsonl, config.json and metrics.json; an invocation with several variants holds one
such directory per variant (and comparison.json, which gives their order)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from saga_dspy.eval.errors import EvalError
from saga_dspy.eval.running.predictions import PREDICTIONS, PredictionsFile, last_by_id
from saga_dspy.eval.running.records import CONFIG, METRICS
from saga_dspy.eval.scoring.metrics import check_scores, compute_metrics
from saga_dspy.input_files import reading


@dataclass
class Run:
    """One variant's finished run: its directory, config.json, metrics.json (recomputed from the predictions when
    missing) and predictions lines in the order of the run's question ids."""

    path: Path
    config: dict[str, Any]
    metrics: dict[str, Any]
    lines: list[dict[str, Any]]

    @property
    def variant(self) -> str:
        return str(self.config.get("variant") or self.path.name)

    @property
    def benchmark(self) -> str:
        """`dataset/split` as the run's config names them."""
        return f"{self.config.get('dataset', '?')}/{self.config.get('split', '?')}"

    @property
    def lm(self) -> str:
        lm = self.config.get("lm")
        return str(lm.get("model") if isinstance(lm, dict) else lm or "?")


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise EvalError(f"{path}: cannot be read ({exc})") from None
    if not isinstance(data, dict):
        raise EvalError(f"{path}: not a JSON object")
    return data


def read_run(path: str | Path) -> Run:
    """The variant run in `path`; an EvalError when it holds no predictions (any error names the run)."""
    with reading(path, "run"):
        return _read_run(Path(path))


def _read_run(path: Path) -> Run:
    if not (path / PREDICTIONS).is_file():
        raise EvalError(f"{path}: no {PREDICTIONS} (not a run directory)")
    config = _read_json(path / CONFIG)
    latest = last_by_id(PredictionsFile.read(path / PREDICTIONS))
    order = [str(i) for i in config.get("ids") or []]
    ids = [i for i in order if i in latest] + [i for i in latest if i not in set(order)]
    lines = [latest[i] for i in ids]
    metrics = read_metrics(path / METRICS) or compute_metrics(lines)
    return Run(path, config, metrics, lines)


def read_metrics(path: Path) -> dict[str, Any]:
    """A metrics.json (empty when there is none) whose scores are scores (`metrics.check_scores`); an EvalError
    naming the file and the field otherwise."""
    try:
        return check_scores(_read_json(path), str(path))
    except ValueError as exc:
        raise EvalError(str(exc)) from None


def variant_dirs(path: Path) -> list[Path]:
    """The run directories inside a directory, at any depth (an invocation's variants, a folder of such
    invocations, ...): a directory holding predictions.jsonl is a run and is not looked into; sub-directories
    in their comparison's order (an invocation's variants as it ran them), else by name; hidden ones skipped."""
    if not path.is_dir():
        return []
    order = list(_read_json(path / "comparison.json"))
    rank = {name: i for i, name in enumerate(order)}
    subdirs = sorted(
        (p for p in path.iterdir() if p.is_dir() and not p.name.startswith(".")),
        key=lambda p: (rank.get(p.name, len(rank)), p.name),
    )
    found: list[Path] = []
    for sub in subdirs:
        found += [sub] if (sub / PREDICTIONS).is_file() else variant_dirs(sub)
    return found


def expand_runs(paths: Iterable[str | Path]) -> list[Run]:
    """Each path's runs: itself when it is a variant's directory, else every run directory below it (a run
    named twice is read once). The one walker of `eval compare`, `eval export` and `eval report`."""
    found: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if not path.exists():
            raise EvalError(f"{path}: no such run directory")
        inside = [path] if (path / PREDICTIONS).is_file() else variant_dirs(path)
        if not inside:
            raise EvalError(f"{path}: no {PREDICTIONS} in it or in any directory below it (not a run directory)")
        found += [p for p in inside if p.resolve() not in {q.resolve() for q in found}]
    return [read_run(p) for p in found]


def run_labels(runs: Sequence[Run]) -> list[str]:
    """A short unique name per run: its variant, else variant and the directory that tells it apart, else the
    directory path."""
    variants = [r.variant for r in runs]

    def where(run: Run) -> str:
        return run.path.parent.name if run.path.name == run.variant else run.path.name

    labels = [v if variants.count(v) == 1 else f"{v} ({where(r)})" for v, r in zip(variants, runs)]
    return [lab if labels.count(lab) == 1 else str(r.path) for lab, r in zip(labels, runs)]
