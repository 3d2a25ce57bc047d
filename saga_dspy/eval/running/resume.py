"""`eval --resume --out DIR`: the recorded run continued, never another one. DIR's config.json (or its variant
folders' ones) records the settings and the invocation (variants, question ids, data and gold files, the
answerable filter, the MLflow experiment); a bare `--resume --out DIR` takes them all from there, and a flag given
beside it that says otherwise is refused with one line. Flags that change how the run goes but not what it
answers (threads, tracking, timeouts, retries) may be given anew; the API key is never recorded (flag or
SAGA_API_KEY). A config.json written before the invocation was recorded gives the variants by its folders, the ids
and the answerable filter by its `selection`, and no data or gold file."""

from __future__ import annotations

import argparse
import json
import os
import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from saga_dspy.config import SECRET_FIELDS, Settings
from saga_dspy.eval.errors import EvalError
from saga_dspy.eval.loading.evalset import parse_ids
from saga_dspy.eval.running.records import CONFIG, settings_record
from saga_dspy.eval.running.run_inputs import read_config
from saga_dspy.eval.running.rundir import check_not_in_use

INVOCATION = "invocation"  # config.json's record of what `evaluate` was asked for besides the settings
EVAL_COMMAND = "python -m saga_dspy.eval"

# settings a resume may change: how the questions are run and tracked, not what they are or how they are answered
FREE_ON_RESUME = frozenset(
    {
        "out",
        "num_threads",
        "mlflow",
        "mlflow_uri",
        "trace",
        "trace_writer",
        "max_infra_failures",
        "preflight",
        "lm_timeout",
        "lm_retries",
        "http_retries",
        "embedded_workers",
        "user_agent",
        "result_cache",
        "lm_cache",
        *SECRET_FIELDS,
    }
)

# the invocation's parts as the eval parser's destinations, each with its value when not given
INVOCATION_ARGS: dict[str, Any] = {
    "variants": None,
    "ids": None,
    "data_file": None,
    "gold_file": None,
    "all_questions": False,
    "experiment": None,
}


def invocation_record(
    variants: list[str],
    ids: Sequence[str] | None,
    data_file: str | Path | None,
    gold_file: str | Path | None,
    answerable_only: bool,
    experiment: str | None,
) -> dict[str, Any]:
    """What `evaluate` was asked for besides the settings, as config.json keeps it (files as absolute paths,
    so a resume from another directory finds them)."""
    return {
        "variants": list(variants),
        "ids": list(ids) if ids else None,
        "data_file": str(Path(data_file).resolve()) if data_file is not None else None,
        "gold_file": str(Path(gold_file).resolve()) if gold_file is not None else None,
        "answerable_only": answerable_only,
        "experiment": experiment,
    }


def resume_command(out_dir: Path, *, retry_failed: bool = False, settings: Settings | None = None) -> str:
    """The command that continues the run in `out_dir` (everything else comes from its config.json); an API key
    given as a flag is not recorded, so it is named when the environment does not give it."""
    flag = "--retry-failed" if retry_failed else "--resume"
    command = f"{EVAL_COMMAND} {flag} --out {shlex.quote(str(out_dir))}"
    if settings is not None and settings.api_key is not None and not os.environ.get("SAGA_API_KEY"):
        command += " --api-key KEY"
    return command


def holds_record(out_dir: Path) -> bool:
    """Whether DIR holds a recorded run (its own config.json or a variant folder's)."""
    return (out_dir / CONFIG).is_file() or any(p.is_file() for p in out_dir.glob(f"*/{CONFIG}"))


def recorded_config(out_dir: Path) -> tuple[dict[str, Any], list[str]]:
    """DIR's recorded run: a config.json (DIR's own, else its first variant folder's) and the variants the run
    directory stands for. An EvalError when DIR holds none (a resume never starts a run)."""
    own = out_dir / CONFIG
    if own.is_file():
        cfg = read_config(own)
        variants = list((cfg.get(INVOCATION) or {}).get("variants") or [])
        # one variant folder of a several-variant invocation: that variant only (its siblings have their own)
        return cfg, variants if len(variants) == 1 else [str(cfg.get("variant") or "full")]
    subs = sorted(p for p in out_dir.glob(f"*/{CONFIG}") if p.is_file())
    if not subs:
        raise EvalError(
            f"--resume: {out_dir} holds no recorded run (no {CONFIG} in it or in its variant folders); "
            f"start the run without --resume"
        )
    configs = [read_config(p) for p in subs]
    cfg = configs[0]
    variants = list((cfg.get(INVOCATION) or {}).get("variants") or [])
    if not variants:  # written before the invocation was recorded: the variant folders there, in the run's order
        order = list(_json_object(out_dir / "comparison.json"))
        names = [str(c.get("variant") or p.parent.name) for c, p in zip(configs, subs)]
        variants = sorted(names, key=lambda v: (order.index(v) if v in order else len(order), v))
    return cfg, variants


def _json_object(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def restore_args(args: argparse.Namespace, out_dir: Path) -> argparse.Namespace:
    """`args` as the run recorded in `out_dir` was started, with the flags given now that a resume may change; an
    EvalError naming each flag given now that says otherwise than the record."""
    check_not_in_use(out_dir)  # a run that holds DIR: said as such, whatever its settings
    cfg, variants = recorded_config(out_dir)
    recorded = {k: v for k, v in (cfg.get("settings") or {}).items() if k in Settings.model_fields}
    invocation = cfg.get(INVOCATION) or {}
    selection = cfg.get("selection") or {}
    recorded_args: dict[str, Any] = {
        "variants": variants,
        "ids": invocation.get("ids", selection.get("ids")),
        "data_file": invocation.get("data_file"),
        "gold_file": invocation.get("gold_file"),
        "all_questions": not invocation.get("answerable_only", selection.get("answerable_only", True)),
        "experiment": invocation.get("experiment"),
    }
    given = vars(args)
    conflicts = [
        *_setting_conflicts(given, recorded),
        *_invocation_conflicts(given, recorded_args, out_dir),
    ]
    if conflicts:
        raise EvalError(
            f"--resume: {out_dir} was run with {'; '.join(conflicts)}; drop the flag to continue that run, "
            f"or pass another --out for a new one"
        )
    restored = dict(given)
    for name, value in recorded.items():  # a free setting given now wins; a secret is never recorded
        if name not in SECRET_FIELDS and not (name in FREE_ON_RESUME and name in given):
            restored[name] = value
    restored.update(recorded_args)
    restored["out"] = str(out_dir)
    return argparse.Namespace(**restored)


def _setting_conflicts(given: dict[str, Any], recorded: dict[str, Any]) -> list[str]:
    out = []
    kept = {k: v for k, v in recorded.items() if k not in SECRET_FIELDS}
    for name, value in given.items():
        if name not in Settings.model_fields or name in FREE_ON_RESUME or name not in recorded:
            continue
        try:
            now = settings_record(Settings(**{**kept, name: value}))[name]
        except ValueError:
            now = value
        if not _same(now, recorded[name]):
            out.append(f"{_flag(name, recorded[name])}, not {_flag(name, now)}")
    return out


def _invocation_conflicts(given: dict[str, Any], recorded: dict[str, Any], out_dir: Path) -> list[str]:
    out = []
    for name, unset in INVOCATION_ARGS.items():
        value = given.get(name, unset)
        if value == unset:
            continue
        if name == "ids":
            value = parse_ids(value)
        if name in ("data_file", "gold_file"):
            value = str(Path(value).resolve())
        if name == "variants":
            value = list(dict.fromkeys(value))
        if not _same(value, recorded[name]):
            out.append(f"{_arg_text(name, recorded[name])}, not {_arg_text(name, value)}")
    return out


def _same(a: Any, b: Any) -> bool:
    if a == b:
        return True
    if isinstance(a, str) and isinstance(b, str) and a and b:  # one file named two ways
        pa, pb = Path(a).expanduser(), Path(b).expanduser()
        return pa.exists() and pb.exists() and pa.resolve() == pb.resolve()
    return False


def _flag(name: str, value: Any) -> str:
    flag = "--" + name.replace("_", "-")
    if isinstance(value, bool):
        return flag if value else f"--no-{name.replace('_', '-')}"
    return f"{flag} {value}" if value is not None else f"{flag} unset"


def _arg_text(name: str, value: Any) -> str:
    if name == "variants":
        return " ".join(f"--variant {v}" for v in value or ["full"])
    if name == "ids":
        return f"--ids {','.join(value)}" if value else "all questions (no --ids)"
    if name == "all_questions":
        return "--all-questions" if value else "the answerable questions only (no --all-questions)"
    flag = "--" + name.replace("_", "-")
    return f"{flag} {value}" if value is not None else f"no {flag}"
