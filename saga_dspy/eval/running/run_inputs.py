"""What a run checks and opens before its first question: the run directory (a fresh one, or a resume with the
same settings), the program file, the graph the benchmark is over, the variants and the schema coverage (each
failure one EvalError line), and the warm-up of the services and the local model."""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import logging
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import dspy

from saga_dspy.agent.failures import is_infrastructure_error
from saga_dspy.cli import ArgumentParser, append_help
from saga_dspy.config import DEFAULT_KG, Settings, add_settings_args
from saga_dspy.eval.errors import EvalError
from saga_dspy.eval.loading.datasets import BENCHMARKS, catalogue_text
from saga_dspy.eval.loading.evalset import EvalSet
from saga_dspy.eval.running.predictions import PREDICTIONS, PredictionsFile, last_by_id
from saga_dspy.eval.running.records import CONFIG, METRICS, fingerprint
from saga_dspy.grounding.lexicon import load_lexicon
from saga_dspy.input_files import MAX_PROGRAM_BYTES, InputFileError, check_input_file
from saga_dspy.services import KgServices
from saga_dspy.variants import VARIANT_NAMES

log = logging.getLogger("saga_dspy.eval")

COVERAGES = (0, 25, 50, 75, 100)


def prepare_out_dir(
    out_dir: Path,
    settings: Settings,
    *,
    resume: bool,
    retry_failed: bool,
    overwrite: bool,
) -> list[dict[str, Any]]:
    """Check/prepare the run directory; returns the finished lines kept (resume) or []."""
    pred_path = out_dir / PREDICTIONS
    check_out_dir(out_dir, settings, resume=resume, overwrite=overwrite)
    if not resume:
        for name in (PREDICTIONS, METRICS):
            (out_dir / name).unlink(missing_ok=True)
        return []
    lines = PredictionsFile.read(pred_path, repair=True)
    latest = last_by_id(lines)
    if len(latest) != len(lines):  # duplicates (should not happen): keep the last line per id
        PredictionsFile.rewrite(pred_path, latest.values())
    if retry_failed:
        keep = [line for line in latest.values() if not line.get("error")]
        if len(keep) != len(latest):
            print(
                f"--retry-failed: re-running {len(latest) - len(keep)} questions that ended with an error",
                file=sys.stderr,
            )
            PredictionsFile.rewrite(pred_path, keep)
        return keep
    return list(latest.values())


def check_out_dir(
    out_dir: Path, settings: Settings, *, resume: bool, overwrite: bool, elsewhere: str | None = "another --out"
) -> None:
    """An EvalError when the run directory cannot take this run: finished predictions there without --resume or
    --overwrite, or (--resume) a config.json that cannot be read or was written with other settings. `elsewhere`:
    the other way out the messages name (None where the command has no --out)."""
    pred_path = out_dir / PREDICTIONS
    cfg_path = out_dir / CONFIG
    if not resume:
        if pred_path.exists() and pred_path.stat().st_size > 0 and not overwrite:
            raise EvalError(
                f"{pred_path} already exists: pass --resume to continue that run, --overwrite to "
                f"start it again" + (f", or {elsewhere}" if elsewhere else "")
            )
        return
    if cfg_path.exists():
        old = read_config(cfg_path).get("fingerprint") or {}
        new = fingerprint(settings)
        diff = {k: (old.get(k), new.get(k)) for k in new if k in old and old.get(k) != new.get(k)}
        if diff:
            what = "; ".join(f"{k}: {a!r} -> {b!r}" for k, a, b in ((k, *v) for k, v in diff.items()))
            other = f"use {elsewhere}" if elsewhere else "start again with --overwrite"
            raise EvalError(f"--resume: {out_dir} was run with other settings ({what}); {other}")


def questions_left(out_dir: Path, evalset: EvalSet, *, resume: bool, retry_failed: bool) -> int:
    """How many of the set's questions a run into `out_dir` will answer (all, unless it resumes)."""
    if not resume:
        return len(evalset)
    done = last_by_id(PredictionsFile.read(out_dir / PREDICTIONS))
    kept = {qid for qid, line in done.items() if not (retry_failed and line.get("error"))}
    return sum(1 for qid in evalset.data["id"] if qid not in kept)


def read_config(path: Path) -> dict[str, Any]:
    """A run's config.json; an EvalError when it cannot be read (a resume must never skip the settings check)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise EvalError(
            f"--resume: {path} cannot be read ({exc}); the run's settings cannot be checked: "
            f"restore the file, or start again with --overwrite or another --out"
        ) from None
    if not isinstance(data, dict) or not isinstance(data.get("fingerprint", {}), dict):
        raise EvalError(
            f"--resume: {path} is not a run configuration; restore it, or start again with --overwrite or another --out"
        )
    return data


def check_program_file(path: str | Path | None) -> None:
    """An EvalError unless `path` (--program) is a readable JSON object: said before any work starts."""
    if not path:
        return
    try:
        state = json.loads(check_input_file(path, "--program", MAX_PROGRAM_BYTES).read_text(encoding="utf-8"))
    except OSError as exc:
        raise EvalError(f"--program {path}: {exc.strerror or exc}") from None
    except InputFileError as exc:
        raise EvalError(str(exc)) from None
    except ValueError as exc:
        raise EvalError(f"--program {path} is not a saved program (not JSON: {exc})") from None
    if not isinstance(state, dict):
        raise EvalError(f"--program {path} is not a saved program (a JSON object is expected)")


def check_file_inputs(settings: Settings, data_file: str | Path | None = None) -> None:
    """The run's files (--program, --data-file, the lexicon, bundled or given) checked for type and size before
    anything is loaded, the LM included: a FIFO or a device is one line, not a hang or a load error about something
    else. The lexicon is read and validated whole here, once: its questions reuse it."""
    check_program_file(settings.program)
    try:
        if data_file is not None:
            check_input_file(data_file, "--data-file")
        load_lexicon(settings)
    except (OSError, ValueError) as exc:
        raise EvalError(str(exc)) from None


def out_dir_for(settings: Settings, resume: bool, out: str | Path | None = None) -> Path:
    """The run directory: `out`, else `--out` (`settings.out`), else a new one under runs/ (a resume: the latest
    there)."""
    if out is not None:
        return Path(out)
    return Path(settings.out) if settings.out else default_out_dir(settings, resume)


def default_out_dir(settings: Settings, resume: bool) -> Path:
    base = Path("runs")
    prefix = f"eval-{settings.dataset}-{settings.split}-"
    if resume:
        found = sorted((p for p in base.glob(prefix + "*") if p.is_dir()), key=lambda p: p.stat().st_mtime)
        if not found:
            raise EvalError(f"--resume: no earlier run {base / (prefix + '*')}; pass --out DIR")
        print(f"--resume: continuing the latest run {found[-1]}", file=sys.stderr)
        return found[-1]
    return base / (prefix + _dt.datetime.now().strftime("%Y%m%d-%H%M%S"))


def program_has_controller_demos(path: str | Path) -> bool:
    try:
        state = json.loads(check_input_file(path, "--program", MAX_PROGRAM_BYTES).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    for key, value in state.items():
        if key.startswith("react.react") and isinstance(value, dict) and value.get("demos"):
            return True
    return False


def program_variant_warning(program: str | Path | None, variant: str) -> str | None:
    """A warning when a compiled program (from `optimize`, which writes config.json beside it) was
    compiled for another variant: its instructions and demos fit that variant's controller."""
    if not program:
        return None
    cfg = Path(program).with_name("config.json")
    try:
        meta = json.loads(cfg.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    compiled_for = meta.get("variant") if meta.get("kind") == "optimize" else None
    if compiled_for and compiled_for != variant:
        return (
            f"warning: {program} was compiled for variant {compiled_for!r}; loading it into {variant!r} "
            f"replaces that controller's instructions and demos"
        )
    return None


def check_graph(settings: Settings, dataset: str, data_file: str | Path | None = None) -> None:
    """An EvalError when the benchmark is over another knowledge graph than the endpoint's: its gold
    queries and ids would find nothing there (e.g. Freebase's WebQSP on the Wikidata sample)."""
    info = BENCHMARKS.get(dataset)
    if info is None or data_file is not None:
        return
    graph = DEFAULT_KG if settings.is_embedded else settings.kg  # the bundled sample is Wikidata's
    if info.kg != graph:
        where = (
            "the bundled Wikidata sample (--endpoint embedded)"
            if settings.is_embedded
            else f"a {graph} endpoint (--kg {graph})"
        )
        raise EvalError(
            f"{dataset} is a {info.kg} benchmark; its gold queries find nothing on {where}: "
            f"pass --kg {info.kg} --endpoint URL of a {info.kg} SPARQL endpoint, or a {graph} dataset"
        )


def checked_variants(settings: Settings, variants: Sequence[str]) -> list[str]:
    """The variants asked for, each once; an EvalError for an unknown one or an unknown coverage."""
    variants = list(dict.fromkeys(variants or ["full"]))
    for v in variants:
        if v not in VARIANT_NAMES:
            raise EvalError(f"unknown variant {v!r} (one of {', '.join(VARIANT_NAMES)})")
    if settings.schema_coverage not in COVERAGES:
        raise EvalError(f"--schema-coverage must be one of {', '.join(map(str, COVERAGES))}")
    return variants


def local_engine(lm: Any = None) -> Any:
    """The in-process model's engine of `lm` (else of DSPy's configured LM), or None for any other LM."""
    return getattr(lm if lm is not None else dspy.settings.lm, "llama_engine", None)


def warm_up(program: Any, services: KgServices, lm: Any = None) -> float:
    """Open what the first question would otherwise pay for (store and its workers, search, schema,
    hierarchy, demo pool, a local model); returns the seconds it took. An unreachable endpoint is left
    to the questions, which record it; any other failure (a missing schema index) stops the run."""
    started = time.monotonic()
    kg = getattr(program, "services", None) or services
    try:
        kg.endpoint.query("ASK {}")
        for name in ("search", "schema", "hierarchy"):
            getattr(kg, name)
        pool = getattr(program, "demo_pool", None)
        if callable(pool):
            pool()
        engine = local_engine(lm)
        if engine is not None:
            engine.load()
    except Exception as exc:  # a dead endpoint is recorded by each question; a missing index stops the run here
        if not is_infrastructure_error(exc):
            raise
        log.warning("warm-up failed (%s: %s); the questions will say more", type(exc).__name__, exc)
    return time.monotonic() - started


def run_parser(*, flags: Sequence[str], **kwargs: Any) -> argparse.ArgumentParser:
    """A run's command line (eval, optimize): the settings flags `flags`, --dataset's help naming the datasets."""
    parser = ArgumentParser(**kwargs)
    add_settings_args(parser, flags)
    append_help(parser, "dataset", catalogue_text())
    return parser
