"""config.json: everything needed to reproduce a run (versions, endpoint, LM, variant, seeds, metric rules, the
controller's instructions, the question ids)."""

from __future__ import annotations

import datetime as _dt
import json
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

from saga_dspy import lm as lm_module
from saga_dspy.config import PACKAGE_DIR, SECRET_FIELDS, Settings, recorded_command
from saga_dspy.eval.files import write_file
from saga_dspy.eval.loading.evalset import EvalSet
from saga_dspy.eval.scoring.metrics import METRIC_RULES

CONFIG = "config.json"


METRICS = "metrics.json"


# Settings that must agree between a run and its resumption.
FINGERPRINT_FIELDS = (
    "dataset",
    "split",
    "endpoint",
    "kg",
    "lm",
    "api_base",
    "temperature",
    "max_tokens",
    "seed",
    "variant",
    "schema_coverage",
    "coverage_seed",
    "filter_mode",
    "metric_mode",
    "max_steps",
    "demos",
    "demo_pool",
    "demo_picks",
    "demo_pool_exclude",
    "check_answer",
    "observation_chars",
    "context_window",
    "state_in_trajectory",  # the prompt's layout: what the model reads
    "closing_line",
    "compact_observations",
)


def _version(dist: str) -> str | None:
    from importlib import metadata

    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def _git_state() -> dict[str, Any] | None:
    root = PACKAGE_DIR.parent
    if not (root / ".git").exists():
        return None
    try:
        commit = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=5,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return {"commit": commit or None, "dirty": bool(dirty)}


def versions() -> dict[str, Any]:
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "saga_dspy": _version("saga-dspy"),
        "dspy": _version("dspy"),
        "litellm": _version("litellm"),
        "mlflow": _version("mlflow"),
        "pyoxigraph": _version("pyoxigraph"),
        "datasets": _version("datasets"),
        "llama_cpp_python": _version("llama_cpp_python"),
        "git": _git_state(),
    }


def settings_record(settings: Settings) -> dict[str, Any]:
    """The settings as JSON, without secrets."""
    data = json.loads(settings.model_dump_json())
    for name in SECRET_FIELDS:
        if data.get(name):
            data[name] = "***"
    return data


def lm_record(settings: Settings) -> dict[str, Any]:
    out: dict[str, Any] = {
        "model": settings.lm,
        "api_base": settings.api_base,
        "temperature": settings.temperature,
        "max_tokens": settings.max_tokens,
        "seed": settings.seed,
        "cache": settings.lm_cache,
        "context_window": settings.context_window,
        "write_markers": settings.write_markers,
    }
    if settings.lm.strip().lower() == "local":
        out.update(local_model=lm_module.LOCAL_LM_MODEL, sha256=lm_module.LOCAL_MODEL_SHA256)
    return out


def endpoint_record(settings: Settings, endpoint: Any = None) -> dict[str, Any]:
    out: dict[str, Any] = {
        "endpoint": settings.endpoint,
        "kg": settings.kg,
        "search": settings.search,
        "query_timeout": settings.query_timeout,
        "row_cap": settings.row_cap,
    }
    if endpoint is not None:
        out["name"] = getattr(endpoint, "name", None)
        store = getattr(endpoint, "store_path", None)
        if store is not None:
            out["store"] = Path(store).name
    return out


def _field_record(fields: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for name, info in fields.items():
        extra = getattr(info, "json_schema_extra", None) or {}
        out[name] = {"desc": extra.get("desc"), "prefix": extra.get("prefix")}
    return out


def program_record(program: Any) -> dict[str, Any]:
    """The instructions, fields and demo counts of every predictor (the prompts' fixed parts)."""
    out: dict[str, Any] = {}
    try:
        named = program.named_predictors()
    except Exception:  # a program factory's object without predictors: the record says nothing about prompts
        return out
    for name, predictor in named:
        sig = predictor.signature
        out[name] = {
            "signature": getattr(sig, "__name__", None),
            "instructions": sig.instructions,
            "inputs": _field_record(sig.input_fields),
            "outputs": _field_record(sig.output_fields),
            "demos": len(getattr(predictor, "demos", []) or []),
        }
    return out


def demo_pool_record(program: Any) -> dict[str, Any] | None:
    """The program's demo pool (`agent.demos.DemoPool.describe`): name, file, size, sources; None without one."""
    pool = getattr(program, "demo_pool", None)
    try:
        pool = pool() if callable(pool) else None
    except Exception:  # a program factory's object: the record says nothing about demos
        return None
    return pool.describe() if pool is not None and hasattr(pool, "describe") else None


def fingerprint(settings: Settings) -> dict[str, Any]:
    data = settings_record(settings)
    out = {k: data.get(k) for k in FINGERPRINT_FIELDS}
    out["program"] = str(settings.program) if settings.program else None
    return out


def run_config(
    settings: Settings, evalset: EvalSet, program: Any, endpoint: Any, *, extra: dict | None = None
) -> dict[str, Any]:
    cfg = {
        "kind": "eval",
        "created": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "command": recorded_command("saga_dspy.eval") if sys.argv else None,
        "dataset": evalset.dataset,
        "split": evalset.split,
        "variant": settings.variant,
        "schema_coverage": settings.schema_coverage,
        "program": str(settings.program) if settings.program else None,
        "metric_mode": settings.metric_mode,
        "seeds": {"lm": settings.seed, "coverage": settings.coverage_seed},
        "lm": lm_record(settings),
        "endpoint": endpoint_record(settings, endpoint),
        "gold": {"file": evalset.gold_file, "summary": evalset.gold_summary},
        "filter_report": evalset.filter_report,
        "selection": evalset.selection,
        "ids": [item.id for item in evalset.items],
        "versions": versions(),
        "metric_rules": METRIC_RULES,
        "prompts": program_record(program),
        "demo_pool": demo_pool_record(program),
        "settings": settings_record(settings),
        "fingerprint": fingerprint(settings),
    }
    if extra:
        cfg.update(extra)
    return cfg


def write_json(path: str | Path, obj: Any) -> Path:
    """`obj` as indented JSON through `files.write_file`; a NaN or infinity is a ValueError, never invalid JSON."""
    return write_file(path, json.dumps(obj, indent=2, ensure_ascii=False, default=str, allow_nan=False) + "\n")
