"""`python -m saga_dspy.eval`: run the SAGA agent over a benchmark split and score it.

    python -m saga_dspy.eval --dataset qald10 --split test --limit 10
    python -m saga_dspy.eval --variant full --variant spinach --variant no-type-filter --limit 20
    python -m saga_dspy.eval --resume --out runs/my-run          # continue an interrupted run
    python -m saga_dspy.eval freeze-gold --dataset qald10 --split test --endpoint URL

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
run (`saga_dspy.tracking`; `--no-mlflow` turns it off).

Gold answers always come from frozen gold (`datasets.freeze_gold`): the bundled files for
the embedded sample (frozen into the cache on first use if a split has none), or, for a live
endpoint, the file written by `freeze-gold` (never queried during a run). By default only the
questions whose gold result is non-empty are evaluated; how many were left out and why is
printed and written to config.json.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import logging
import os
import platform
import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from saga_dspy.config import PACKAGE_DIR, Settings, add_settings_args, apply_offline_env, settings_from_args

log = logging.getLogger("saga_dspy.eval")

VARIANTS = ("full", "no-type-filter", "no-type-state", "no-answer-type", "spinach")
COVERAGES = (0, 25, 50, 75, 100)
PREDICTIONS = "predictions.jsonl"
CONFIG = "config.json"
METRICS = "metrics.json"

# Settings fields exposed as flags (flag <-> field through config.add_settings_args).
SETTINGS_FLAGS = (
    "dataset", "split", "limit", "endpoint", "kg", "search", "cache_dir", "query_timeout", "result_cache",
    "lm", "api_base", "api_key", "temperature", "max_tokens", "seed", "lm_cache", "context_window",
    "program", "num_threads", "metric_mode", "out", "mlflow", "mlflow_uri",
    "filter_mode", "coverage_seed", "schema_index", "observation_chars", "max_steps", "demos", "check_answer",
)

# Settings that must agree between a run and its resumption.
FINGERPRINT_FIELDS = (
    "dataset", "split", "endpoint", "kg", "lm", "api_base", "temperature", "max_tokens", "seed", "variant",
    "schema_coverage", "coverage_seed", "filter_mode", "metric_mode", "max_steps", "demos", "check_answer",
    "observation_chars", "context_window",
)

# Counters copied from the prediction into the line and into summarize()'s records.
LINE_COUNTERS = ("steps", "lookups", "searches", "executions", "lm_calls", "prompt_tokens", "completion_tokens",
                 "seconds")

# The agent's final_status values that summarize() knows; 'none' (no final query) counts as empty.
STATUS_FOR_SUMMARY = {"ok": "ok", "empty": "empty", "blocked": "blocked", "error": "error", "none": "empty"}


class EvalError(RuntimeError):
    """A run cannot start (bad flags, no gold, a resume that does not match)."""


# --------------------------------------------------------------------------- questions


@dataclass
class EvalItem:
    """One question to evaluate, with its frozen gold result (SPARQL-JSON text)."""

    id: str
    question: str
    gold: str | None
    gold_sparql: str | None = None
    answer_type: str | None = None
    source_answers: str | None = None

    @property
    def is_boolean(self) -> bool:
        return bool(self.gold) and '"boolean"' in self.gold and '"results"' not in self.gold


@dataclass
class EvalSet:
    items: list[EvalItem]
    dataset: str
    split: str
    gold_file: str | None
    filter_report: dict[str, Any] | None
    gold_summary: dict[str, Any] | None = None
    selection: dict[str, Any] = field(default_factory=dict)


def endpoint_tag(settings: Settings) -> str:
    return "embedded" if settings.is_embedded else settings.endpoint


def cached_gold_path(settings: Settings, dataset: str, split: str) -> Path:
    """Where `freeze-gold` keeps gold frozen on `settings.endpoint` (outside the bundled data)."""
    from saga_dspy.datasets import gold_file_name

    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", dataset).strip("-") or "dataset"
    return Path(settings.cache_dir) / "gold" / slug / gold_file_name(endpoint_tag(settings), split)


def bundled_gold_path(settings: Settings, dataset: str, split: str) -> Path | None:
    from saga_dspy.datasets import BENCHMARKS, benchmarks_dir, gold_file_name

    info = BENCHMARKS.get(dataset)
    if info is None or not info.bundled or not settings.is_embedded:
        return None
    try:
        resolved = info.resolve_split(split)
    except ValueError:
        return None
    path = benchmarks_dir(settings) / dataset / gold_file_name("embedded", resolved)
    return path if path.exists() else None


def resolve_split(dataset: str, split: str) -> str:
    from saga_dspy.datasets import BENCHMARKS

    info = BENCHMARKS.get(dataset)
    return info.resolve_split(split) if info is not None else split


def find_gold(
    settings: Settings,
    dataset: str,
    split: str,
    *,
    data_file: str | Path | None = None,
    gold_file: str | Path | None = None,
    freeze_if_missing: bool = True,
    progress: bool = True,
) -> Path | None:
    """The frozen gold for this dataset/split/endpoint: `gold_file`, the bundled file (embedded),
    or the cache (`freeze-gold`). On the embedded sample a missing file is frozen into the cache
    now; on a live endpoint a missing file is an error that says how to freeze it."""
    if gold_file is not None:
        path = Path(gold_file)
        if not path.exists():
            raise EvalError(f"no such gold file: {path}")
        return path
    if data_file is None:
        bundled = bundled_gold_path(settings, dataset, split)
        if bundled is not None:
            return bundled
    resolved = resolve_split(dataset, split)
    cached = cached_gold_path(settings, dataset, resolved)
    if cached.exists():
        return cached
    command = (f"python -m saga_dspy.eval freeze-gold --dataset {dataset} --split {split} "
               f"--endpoint {settings.endpoint}" + (f" --data-file {data_file}" if data_file else ""))
    if settings.is_embedded and freeze_if_missing:
        print(f"No frozen gold for {dataset}/{resolved} on the embedded sample; freezing it now into {cached} "
              f"(once; same as `{command}`).", file=sys.stderr)
        freeze(settings, dataset, split, out=cached, data_file=data_file, progress=progress)
        return cached
    raise EvalError(
        f"no frozen gold for {dataset}/{resolved} on {settings.endpoint}: gold answers are never queried during "
        f"a run. Freeze them first:\n    {command}"
    )


def freeze(
    settings: Settings,
    dataset: str,
    split: str,
    *,
    out: str | Path | None = None,
    data_file: str | Path | None = None,
    endpoint: Any = None,
    progress: bool = True,
) -> dict[str, Any]:
    """Execute every gold query of the split on `settings.endpoint` and store the results
    (`datasets.freeze_gold`); returns its summary (with the file's path under 'file')."""
    from saga_dspy.datasets import freeze_gold

    resolved = resolve_split(dataset, split)
    path = Path(out) if out is not None else cached_gold_path(settings, dataset, resolved)
    own = endpoint is None
    if own:
        from saga_dspy.kg.endpoint import open_endpoint

        endpoint = open_endpoint(settings)
    try:
        summary = freeze_gold(dataset, split, endpoint, path, settings=settings, data_file=data_file,
                              progress=progress)
    finally:
        if own:
            endpoint.close()
    summary["file"] = str(path)
    return summary


def parse_ids(values: Sequence[str] | None) -> list[str] | None:
    """`--ids 1,2 --ids 3` or `--ids @file` (one id a line) -> ['1', '2', '3']."""
    if not values:
        return None
    out: list[str] = []
    for value in values:
        if value.startswith("@"):
            text = Path(value[1:]).read_text(encoding="utf-8")
            parts = text.split()
        else:
            parts = value.split(",")
        out.extend(p.strip() for p in parts if p.strip())
    return list(dict.fromkeys(out))


def load_eval_set(
    settings: Settings,
    *,
    ids: Sequence[str] | None = None,
    data_file: str | Path | None = None,
    gold_file: str | Path | None = None,
    answerable_only: bool = True,
    progress: bool = True,
) -> EvalSet:
    """The questions of `settings.dataset`/`settings.split` with frozen gold; answerable ones by
    default; then `ids` (in the given order), then `settings.limit`."""
    from saga_dspy.datasets import filter_report, load_benchmark

    dataset, split = settings.dataset, settings.split
    path = find_gold(settings, dataset, split, data_file=data_file, gold_file=gold_file, progress=progress)
    try:
        ds = load_benchmark(dataset, split, settings, data_file, gold_file=path, answerable_only=answerable_only)
    except (ValueError, FileNotFoundError) as exc:
        raise EvalError(str(exc)) from exc
    report = filter_report(ds) if answerable_only else None
    rows = ds.to_list()
    resolved = rows[0]["split"] if rows else resolve_split(dataset, split)
    if not answerable_only:
        missing = [r["id"] for r in rows if r.get("gold") is None]
        if missing:
            log.warning("%d questions have no frozen gold result (gold error or not frozen); they score 0 when "
                        "predicted non-empty", len(missing))
    selection: dict[str, Any] = {"answerable_only": answerable_only, "after_filter": len(rows)}
    if ids:
        by_id = {r["id"]: r for r in rows}
        unknown = [i for i in ids if i not in by_id]
        if unknown:
            from saga_dspy.datasets import load_records

            all_ids = {r["id"] for r in load_records(dataset, split, settings, data_file)}
            not_in_split = [i for i in unknown if i not in all_ids]
            left_out = [i for i in unknown if i in all_ids]
            if not_in_split:
                raise EvalError(f"ids not in {dataset}/{resolved}: {', '.join(not_in_split[:20])}")
            log.warning("ids left out by the answerable filter (pass --all-questions to keep them): %s",
                        ", ".join(left_out[:20]))
        rows = [by_id[i] for i in ids if i in by_id]
        selection["ids"] = list(ids)
    if settings.limit is not None:
        rows = rows[: max(0, settings.limit)]
        selection["limit"] = settings.limit
    gold_summary = None
    summary_path = Path(str(path).replace(".jsonl.gz", ".summary.json")) if path else None
    if summary_path is not None and summary_path.exists():
        try:
            gold_summary = json.loads(summary_path.read_text(encoding="utf-8"))
        except ValueError:
            gold_summary = None
    items = [
        EvalItem(
            id=r["id"], question=r["question"], gold=r.get("gold"), gold_sparql=r.get("sparql"),
            answer_type=r.get("answer_type"), source_answers=r.get("source_answers"),
        )
        for r in rows
    ]
    return EvalSet(items, dataset, resolved, str(path) if path else None, report, gold_summary, selection)


def describe_filter(evalset: EvalSet) -> str:
    report = evalset.filter_report
    if not report:
        return f"{evalset.dataset}/{evalset.split}: all questions kept (no answerable filter)"
    reasons = ", ".join(f"{k}: {v}" for k, v in report.get("reasons", {}).items()) or "none"
    return (f"{evalset.dataset}/{evalset.split}: {report['kept']} of {report['total']} questions answerable on "
            f"this endpoint; left out {report['left_out']} (gold result {reasons}); evaluating "
            f"{len(evalset.items)}")


# --------------------------------------------------------------------------- scoring


def _jsonable(obj: Any) -> Any:
    if obj is None or isinstance(obj, (str, int, float, bool)):
        return obj
    if hasattr(obj, "to_json"):
        try:
            return obj.to_json()
        except Exception:
            pass
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if hasattr(obj, "to_dict"):
        try:
            return _jsonable(obj.to_dict())
        except Exception:
            pass
    if hasattr(obj, "__dataclass_fields__"):
        from dataclasses import asdict

        return _jsonable(asdict(obj))
    if isinstance(obj, Path):
        return str(obj)
    return str(obj)


def _is_empty_answer(answers: Any) -> bool:
    if answers is None:
        return True
    rows = getattr(answers, "rows", None)
    if rows is not None:
        return not rows
    return False


def score_prediction(item: EvalItem, pred: Any, mode: str, *, error: str | None = None,
                     seconds: float | None = None) -> dict[str, Any]:
    """One predictions.jsonl line: the question, gold, prediction, scores, counters and trajectory."""
    from saga_dspy.metrics import answer_f1

    get = (lambda k, d=None: getattr(pred, k, d)) if pred is not None else (lambda k, d=None: d)
    answers = get("answers")
    status = get("final_status") or ("error" if error or pred is None else "none")
    error = error or get("error")
    metric_error = None
    f1 = 0.0
    if item.gold is not None:
        try:
            f1 = float(answer_f1(answers, item.gold, mode=mode))
        except ValueError as exc:
            metric_error = f"metric: {exc}"
    else:
        metric_error = "no frozen gold result for this question"
    counters = dict(get("counters") or {})
    if seconds is not None and counters.get("seconds") is None:
        counters["seconds"] = round(seconds, 3)
    empty = _is_empty_answer(answers) or status in ("empty", "blocked", "error", "none")
    line = {
        "id": item.id,
        "question": item.question,
        "gold_sparql": item.gold_sparql,
        "gold": json.loads(item.gold) if item.gold else None,
        "sparql": get("sparql") or "",
        "answers": _jsonable(answers),
        "f1": f1,
        "em": f1 >= 1.0 - 1e-9,
        "is_boolean": item.is_boolean,
        "empty": bool(empty),
        "final_status": status,
        "final_error": get("final_error"),  # the final query's own failure (syntax, timeout): the agent's mistake
        "error": error,
        "metric_error": metric_error,
        "counters": _jsonable(counters),
        "answer_type": get("answer_type"),
        "query_form": get("query_form"),
        "final_source": get("final_source"),
        "rewritten_from": get("rewritten_from"),
        "notes": _jsonable(get("notes") or []),
        "trajectory": _jsonable(get("trajectory") or []),
        "finished_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    }
    return line


def summary_record(line: dict[str, Any]) -> dict[str, Any]:
    """A predictions line as a `metrics.summarize()` record."""
    counters = line.get("counters") or {}
    rec = {
        "f1": float(line.get("f1") or 0.0),
        "em": bool(line.get("em")),
        "is_boolean": bool(line.get("is_boolean")),
        "empty": bool(line.get("empty")),
        "final_status": STATUS_FOR_SUMMARY.get(str(line.get("final_status")), "error"),
    }
    for key in LINE_COUNTERS:
        value = counters.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            rec[key] = float(value)
    return rec


def compute_metrics(lines: Iterable[dict[str, Any]], *, total: int | None = None) -> dict[str, Any]:
    from saga_dspy.metrics import summarize

    lines = list(lines)
    out = summarize(summary_record(line) for line in lines)
    out["n_failed"] = sum(1 for line in lines if line.get("error"))
    out["n_no_query"] = sum(1 for line in lines if line.get("final_status") == "none")
    out["n_metric_errors"] = sum(1 for line in lines if line.get("metric_error"))
    if total is not None:
        out["n_total"] = total
        out["complete"] = len(lines) >= total
    return out


# --------------------------------------------------------------------------- predictions file


class PredictionsFile:
    """predictions.jsonl: appended one flushed line per finished question, under a lock."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.lock = threading.Lock()
        self._fh = None
        self.closed = False

    @staticmethod
    def read(path: Path, *, repair: bool = False) -> list[dict[str, Any]]:
        """Valid lines (dicts with an id). A last line cut off by a kill is dropped (and with
        `repair`, truncated from the file so appends start on a fresh line)."""
        path = Path(path)
        if not path.exists():
            return []
        data = path.read_bytes()
        lines: list[dict[str, Any]] = []
        good_end = 0
        pos = 0
        while pos < len(data):
            nl = data.find(b"\n", pos)
            if nl < 0:  # no newline: cut off mid-write
                break
            chunk = data[pos:nl]
            pos = nl + 1
            if not chunk.strip():
                good_end = pos
                continue
            try:
                obj = json.loads(chunk)
            except ValueError:
                if pos >= len(data):  # a garbled last line
                    break
                raise EvalError(f"{path}: a line in the middle of the file is not JSON; fix or remove it")
            if isinstance(obj, dict) and "id" in obj:
                lines.append(obj)
            good_end = pos
        if repair and good_end < len(data):
            log.warning("%s: dropping a cut-off last line (%d bytes)", path, len(data) - good_end)
            with open(path, "r+b") as fh:
                fh.truncate(good_end)
        return lines

    @staticmethod
    def rewrite(path: Path, lines: Iterable[dict[str, Any]]) -> None:
        """Replace the file atomically with these lines."""
        path = Path(path)
        tmp = path.with_name(path.name + ".tmp")
        with open(tmp, "w", encoding="utf-8") as fh:
            for line in lines:
                fh.write(json.dumps(line, ensure_ascii=False, default=str) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)

    def append(self, line: dict[str, Any]) -> bool:
        text = json.dumps(line, ensure_ascii=False, default=str) + "\n"
        with self.lock:
            if self.closed:
                return False
            if self._fh is None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._fh = open(self.path, "a", encoding="utf-8")
            self._fh.write(text)
            self._fh.flush()
            os.fsync(self._fh.fileno())
            return True

    def close(self) -> None:
        with self.lock:
            self.closed = True
            if self._fh is not None:
                self._fh.close()
                self._fh = None


def last_by_id(lines: Iterable[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for line in lines:
        out[str(line["id"])] = line
    return out


# --------------------------------------------------------------------------- config


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
        commit = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                                timeout=5).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=5).stdout.strip()
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
    if data.get("api_key"):
        data["api_key"] = "***"
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
    }
    if settings.lm.strip().lower() == "local":
        from saga_dspy import lm as lm_module

        out.update(local_model=lm_module.LOCAL_LM_MODEL, sha256=lm_module.LOCAL_MODEL_SHA256)
    return out


def endpoint_record(settings: Settings, endpoint: Any = None) -> dict[str, Any]:
    out: dict[str, Any] = {"endpoint": settings.endpoint, "kg": settings.kg, "search": settings.search,
                           "query_timeout": settings.query_timeout, "row_cap": settings.row_cap}
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
    except Exception:
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


def fingerprint(settings: Settings) -> dict[str, Any]:
    data = settings_record(settings)
    out = {k: data.get(k) for k in FINGERPRINT_FIELDS}
    out["program"] = str(settings.program) if settings.program else None
    return out


def run_config(settings: Settings, evalset: EvalSet, program: Any, endpoint: Any, *, extra: dict | None = None
               ) -> dict[str, Any]:
    from saga_dspy.metrics import METRIC_RULES

    cfg = {
        "kind": "eval",
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "command": [sys.executable, "-m", "saga_dspy.eval", *sys.argv[1:]] if sys.argv else None,
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
        "settings": settings_record(settings),
        "fingerprint": fingerprint(settings),
    }
    if extra:
        cfg.update(extra)
    return cfg


def write_json(path: Path, obj: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(obj, indent=2, ensure_ascii=False, default=str) + "\n", encoding="utf-8")
    os.replace(tmp, path)


# --------------------------------------------------------------------------- running


class _Interrupted(Exception):
    pass


@dataclass
class VariantResult:
    variant: str
    out_dir: Path
    metrics: dict[str, Any]
    lines: list[dict[str, Any]]
    interrupted: bool = False
    ran: int = 0
    run_id: str | None = None


def _progress_bar(total: int, initial: int, desc: str, enabled: bool):
    from tqdm import tqdm

    return tqdm(total=total, initial=initial, desc=desc, unit="q", disable=not enabled, dynamic_ncols=True,
                mininterval=0.5, smoothing=0.3, file=sys.stderr)


def run_questions(
    program: Any,
    items: Sequence[EvalItem],
    predictions: PredictionsFile,
    *,
    mode: str,
    num_threads: int = 1,
    lm: Any = None,
    progress: bool = True,
    desc: str = "eval",
    done_lines: Sequence[dict[str, Any]] = (),
    total: int | None = None,
    on_line: Callable[[dict[str, Any]], None] | None = None,
) -> tuple[list[dict[str, Any]], bool]:
    """Answer `items` in `num_threads` daemon threads, appending one line per finished question.

    Returns (new lines, interrupted). Ctrl-C / SIGTERM stops taking new questions and returns
    at once (questions still running are not written: they are re-run by --resume)."""
    import dspy

    items = list(items)
    new_lines: list[dict[str, Any]] = []
    todo = list(reversed(items))
    todo_lock = threading.Lock()
    stop = threading.Event()
    f1_sum = [sum(float(line.get("f1") or 0.0) for line in done_lines)]
    n_done = [len(done_lines)]
    bar = _progress_bar(total if total is not None else len(items) + len(done_lines), len(done_lines), desc, progress)
    if n_done[0]:
        bar.set_postfix_str(f"F1={f1_sum[0] / n_done[0]:.3f}")
    errors: list[BaseException] = []

    def answer(item: EvalItem) -> dict[str, Any]:
        started = time.monotonic()
        try:
            if lm is not None:
                with dspy.context(lm=lm):
                    pred = program(question=item.question)
            else:
                pred = program(question=item.question)
        except Exception as exc:  # the program should never raise; record it if it does
            log.warning("question %s raised %s", item.id, exc, exc_info=True)
            return score_prediction(item, None, mode, error=f"{type(exc).__name__}: {exc}",
                                    seconds=time.monotonic() - started)
        return score_prediction(item, pred, mode, seconds=time.monotonic() - started)

    def worker() -> None:
        try:
            while not stop.is_set():
                with todo_lock:
                    if not todo:
                        return
                    item = todo.pop()
                line = answer(item)
                if stop.is_set() or not predictions.append(line):
                    return
                with predictions.lock:
                    new_lines.append(line)
                    n_done[0] += 1
                    f1_sum[0] += line["f1"]
                    bar.update(1)
                    bar.set_postfix_str(f"F1={f1_sum[0] / n_done[0]:.3f}")
                if on_line is not None:
                    on_line(line)
        except BaseException as exc:  # pragma: no cover - a bug in scoring/writing
            errors.append(exc)
            stop.set()

    threads = [threading.Thread(target=worker, name=f"saga-eval-{i}", daemon=True)
               for i in range(max(1, min(num_threads, len(items))) if items else 0)]
    if not threads:
        bar.close()
        return new_lines, False
    for t in threads:
        t.start()
    interrupted = False
    try:
        while any(t.is_alive() for t in threads):
            for t in threads:
                t.join(timeout=0.2)
    except (KeyboardInterrupt, _Interrupted):
        interrupted = True
        stop.set()
        predictions.close()  # waits for a line being written; no line is written after this
    finally:
        bar.close()
    if errors:
        raise errors[0]
    return new_lines, interrupted


def _raise_interrupt(signum, frame):  # SIGTERM -> the same path as Ctrl-C
    raise _Interrupted(f"signal {signum}")


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
    cfg_path = out_dir / CONFIG
    if not resume:
        if pred_path.exists() and pred_path.stat().st_size > 0 and not overwrite:
            raise EvalError(f"{pred_path} already exists: pass --resume to continue that run, --overwrite to "
                            f"start it again, or another --out")
        for name in (PREDICTIONS, METRICS):
            (out_dir / name).unlink(missing_ok=True)
        return []
    if cfg_path.exists():
        try:
            old = json.loads(cfg_path.read_text(encoding="utf-8")).get("fingerprint") or {}
        except ValueError:
            old = {}
        new = fingerprint(settings)
        diff = {k: (old.get(k), new.get(k)) for k in new if k in old and old.get(k) != new.get(k)}
        if diff:
            what = "; ".join(f"{k}: {a!r} -> {b!r}" for k, a, b in ((k, *v) for k, v in diff.items()))
            raise EvalError(f"--resume: {out_dir} was run with other settings ({what}); use another --out")
    lines = PredictionsFile.read(pred_path, repair=True)
    latest = last_by_id(lines)
    if len(latest) != len(lines):  # duplicates (should not happen): keep the last line per id
        PredictionsFile.rewrite(pred_path, latest.values())
    if retry_failed:
        keep = [line for line in latest.values() if not line.get("error")]
        if len(keep) != len(latest):
            print(f"--retry-failed: re-running {len(latest) - len(keep)} questions that ended with an error",
                  file=sys.stderr)
            PredictionsFile.rewrite(pred_path, keep)
        return keep
    return list(latest.values())


def run_variant(
    settings: Settings,
    evalset: EvalSet,
    out_dir: Path,
    *,
    program: Any,
    endpoint: Any = None,
    lm: Any = None,
    resume: bool = False,
    retry_failed: bool = False,
    overwrite: bool = False,
    progress: bool = True,
    tracker: Any = None,
    nested: bool = False,
    extra_config: dict | None = None,
) -> VariantResult:
    """Evaluate one variant into `out_dir`; resumable; tracked when `tracker` is given."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    kept = prepare_out_dir(out_dir, settings, resume=resume, retry_failed=retry_failed, overwrite=overwrite)
    wanted = {item.id for item in evalset.items}
    done = [line for line in kept if line["id"] in wanted]
    done_ids = {line["id"] for line in done}
    todo = [item for item in evalset.items if item.id not in done_ids]
    cfg = run_config(settings, evalset, program, endpoint, extra=extra_config)
    cfg_path = out_dir / CONFIG
    if resume and cfg_path.exists():
        try:
            previous = json.loads(cfg_path.read_text(encoding="utf-8"))
        except ValueError:
            previous = {}
        cfg["created"] = previous.get("created", cfg["created"])
        cfg["resumed"] = [*previous.get("resumed", []), _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")]
    write_json(cfg_path, cfg)
    if resume:
        print(f"[{settings.variant}] resuming {out_dir}: {len(done)} done, {len(todo)} to run", file=sys.stderr)

    predictions = PredictionsFile(out_dir / PREDICTIONS)
    params = run_params(settings, evalset, len(evalset.items))
    run_ctx = tracker.run(f"{settings.variant}", params=params, nested=nested,
                          tags={"kind": "eval", "out_dir": str(out_dir)}) if tracker else _null_context()
    interrupted = False
    with run_ctx as run_id:
        try:
            new, interrupted = run_questions(
                program, todo, predictions, mode=settings.metric_mode, num_threads=settings.num_threads, lm=lm,
                progress=progress, desc=settings.variant, done_lines=done, total=len(evalset.items),
            )
        finally:
            predictions.close()
        latest = last_by_id(PredictionsFile.read(out_dir / PREDICTIONS))
        lines = [latest[item.id] for item in evalset.items if item.id in latest]
        metrics = compute_metrics(lines, total=len(evalset.items))
        metrics["interrupted"] = interrupted
        write_json(out_dir / METRICS, metrics)
        if tracker:
            tracker.log_metrics(metrics)
            tracker.log_artifacts([out_dir / PREDICTIONS, out_dir / CONFIG, out_dir / METRICS])
            if settings.program:
                tracker.log_artifact(settings.program, artifact_path="program")
    return VariantResult(settings.variant, out_dir, metrics, lines, interrupted, ran=len(new), run_id=run_id)


class _null_context:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


def run_params(settings: Settings, evalset: EvalSet, n: int) -> dict[str, Any]:
    return {
        "dataset": evalset.dataset,
        "split": evalset.split,
        "variant": settings.variant,
        "lm": settings.lm,
        "endpoint": settings.endpoint,
        "schema_coverage": settings.schema_coverage,
        "program": str(settings.program) if settings.program else None,
        "metric_mode": settings.metric_mode,
        "n_questions": n,
        "limit": settings.limit,
        "num_threads": settings.num_threads,
        "max_steps": settings.max_steps,
        "demos": settings.demos,
        "filter_mode": settings.filter_mode,
        "temperature": settings.temperature,
        "seed": settings.seed,
        "kg": settings.kg,
    }


# --------------------------------------------------------------------------- table


TABLE_COLUMNS = (
    ("n", "n", "{:d}"),
    ("F1", "f1", "pct"),
    ("EM", "em", "pct"),
    ("empty", "empty_rate", "pct"),
    ("bool F1", "boolean_f1", "pct"),
    ("fact F1", "factoid_f1", "pct"),
    ("steps", "mean_steps", "{:.1f}"),
    ("lookups", "mean_lookups", "{:.1f}"),
    ("LM calls", "mean_lm_calls", "{:.1f}"),
    ("s/q", "mean_seconds", "{:.1f}"),
    ("blocked", "blocked_rate", "pct"),
    ("failed", "n_failed", "{:d}"),
)


def _cell(value: Any, fmt: str) -> str:
    if value is None:
        return "-"
    if fmt == "pct":
        return f"{100.0 * value:.1f}"
    if fmt == "{:d}":
        return str(int(value))
    return fmt.format(value)


def summary_table(results: dict[str, dict[str, Any]], title: str = "") -> str:
    """Variants side by side (rows), metrics in columns; percentages for rates."""
    header = ["variant", *[c[0] for c in TABLE_COLUMNS]]
    rows = [[name, *[_cell(m.get(key), fmt) for _, key, fmt in TABLE_COLUMNS]] for name, m in results.items()]
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    lines = []
    if title:
        lines.append(title)
    lines.append("  ".join(h.ljust(widths[0]) if i == 0 else h.rjust(widths[i]) for i, h in enumerate(header)))
    lines.append("  ".join("-" * w for w in widths))
    for r in rows:
        lines.append("  ".join(str(c).ljust(widths[0]) if i == 0 else str(c).rjust(widths[i]) for i, c in enumerate(r)))
    return "\n".join(lines)


def markdown_table(results: dict[str, dict[str, Any]]) -> str:
    header = ["variant", *[c[0] for c in TABLE_COLUMNS]]
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for name, m in results.items():
        out.append("| " + " | ".join([name, *[_cell(m.get(key), fmt) for _, key, fmt in TABLE_COLUMNS]]) + " |")
    return "\n".join(out)


# --------------------------------------------------------------------------- orchestration


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
        state = json.loads(Path(path).read_text(encoding="utf-8"))
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
        return (f"warning: {program} was compiled for variant {compiled_for!r}; loading it into {variant!r} "
                f"replaces that controller's instructions and demos")
    return None


def make_program(settings: Settings, endpoint: Any, search: Any) -> Any:
    from saga_dspy.program import SagaProgram

    return SagaProgram(settings, endpoint=endpoint, search=search)


def evaluate(
    settings: Settings,
    variants: Sequence[str] = ("full",),
    *,
    out: str | Path | None = None,
    ids: Sequence[str] | None = None,
    data_file: str | Path | None = None,
    gold_file: str | Path | None = None,
    answerable_only: bool = True,
    resume: bool = False,
    retry_failed: bool = False,
    overwrite: bool = False,
    lm: Any = None,
    endpoint: Any = None,
    search: Any = None,
    program_factory: Callable[[Settings, Any, Any], Any] | None = None,
    progress: bool = True,
    experiment: str | None = None,
    stream=None,
) -> dict[str, VariantResult]:
    """Evaluate each variant on the same questions; returns the results by variant.

    `lm` is used through `dspy.context` in every worker thread (default: dspy's configured
    LM, else the program builds `build_lm(settings)`); `endpoint`/`search` are opened from
    settings when not given (and closed at the end)."""
    from saga_dspy.tracking import Tracker, comparison_chart

    stream = stream or sys.stdout
    variants = list(dict.fromkeys(variants or ["full"]))
    for v in variants:
        if v not in VARIANTS:
            raise EvalError(f"unknown variant {v!r} (one of {', '.join(VARIANTS)})")
    if settings.schema_coverage not in COVERAGES:
        raise EvalError(f"--schema-coverage must be one of {', '.join(map(str, COVERAGES))}")
    if retry_failed and not resume:
        resume = True
    out_dir = Path(out) if out is not None else (Path(settings.out) if settings.out else default_out_dir(settings, resume))
    evalset = load_eval_set(settings, ids=ids, data_file=data_file, gold_file=gold_file,
                            answerable_only=answerable_only, progress=progress)
    print(describe_filter(evalset), file=stream)
    if not evalset.items:
        raise EvalError("no questions to evaluate (check --ids / --limit / the answerable filter)")

    own_endpoint = endpoint is None
    if own_endpoint:
        from saga_dspy.kg.endpoint import open_endpoint

        endpoint = open_endpoint(settings)
    if search is None:
        from saga_dspy.kg.search import open_search

        search = open_search(settings, endpoint)
    factory = program_factory or make_program
    tracker = Tracker(settings, experiment or f"saga-eval-{evalset.dataset}-{evalset.split}")
    results: dict[str, VariantResult] = {}
    previous_handler = None
    if threading.current_thread() is threading.main_thread():
        previous_handler = signal.signal(signal.SIGTERM, _raise_interrupt)
    several = len(variants) > 1
    try:
        parent = tracker.run(f"eval {evalset.dataset}/{evalset.split} x{len(variants)}",
                             params={"dataset": evalset.dataset, "split": evalset.split,
                                     "variants": ",".join(variants), "lm": settings.lm,
                                     "endpoint": settings.endpoint, "schema_coverage": settings.schema_coverage,
                                     "program": settings.program, "n_questions": len(evalset.items)},
                             tags={"kind": "eval-invocation", "out_dir": str(out_dir)}) if several else _null_context()
        with parent:
            for variant in variants:
                vs = settings.model_copy(update={"variant": variant})
                warning = program_variant_warning(vs.program, variant)
                if warning:
                    print(warning, file=sys.stderr)
                program = factory(vs, endpoint, search)
                vdir = out_dir / variant if several else out_dir
                try:
                    result = run_variant(vs, evalset, vdir, program=program, endpoint=endpoint, lm=lm,
                                         resume=resume, retry_failed=retry_failed, overwrite=overwrite,
                                         progress=progress, tracker=tracker if tracker.enabled else None,
                                         nested=several)
                finally:
                    close = getattr(program, "close", None)
                    if callable(close):
                        close()  # given the endpoint, the program owns nothing shared
                results[variant] = result
                if result.interrupted:
                    break
            table = {v: r.metrics for v, r in results.items()}
            chart = comparison_chart(table, out_dir / "comparison.png",
                                     title=f"{evalset.dataset}/{evalset.split} ({len(evalset.items)} questions)")
            write_json(out_dir / "comparison.json", table)
            (out_dir / "comparison.md").write_text(markdown_table(table) + "\n", encoding="utf-8")
            if tracker.enabled:
                if several:
                    tracker.log_artifacts([chart, out_dir / "comparison.json", out_dir / "comparison.md"])
                else:  # one variant: its run is closed; attach the chart to it
                    tracker.log_artifact_to(results[variants[0]].run_id, chart)
    finally:
        if previous_handler is not None:
            signal.signal(signal.SIGTERM, previous_handler)
        tracker.close()
        if own_endpoint:
            endpoint.close()
    title = (f"{evalset.dataset}/{evalset.split} on {settings.endpoint}, LM {settings.lm}, "
             f"coverage {settings.schema_coverage}%, metric {settings.metric_mode} (percent)")
    print("\n" + summary_table({v: r.metrics for v, r in results.items()}, title), file=stream)
    print(f"\nrun directory: {out_dir}", file=stream)
    if any(r.interrupted for r in results.values()):
        done = sum(len(r.lines) for r in results.values())
        print(f"interrupted: {done} finished questions are saved; continue with "
              f"`python -m saga_dspy.eval ... --resume --out {out_dir}`", file=stream)
    return results


# --------------------------------------------------------------------------- CLI


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m saga_dspy.eval",
        description="Evaluate the SAGA agent on a benchmark split (sub-command: freeze-gold).",
        epilog="Run `python -m saga_dspy.eval freeze-gold -h` for freezing gold answers on a live endpoint.",
    )
    add_settings_args(parser, SETTINGS_FLAGS)
    parser.add_argument("--variant", dest="variants", action="append", choices=VARIANTS,
                        help="ablation variant; repeat to run several and compare them side by side (default: full)")
    parser.add_argument("--schema-coverage", dest="schema_coverage", type=int, choices=COVERAGES,
                        default=argparse.SUPPRESS, help="share of formal schema constraints kept (paper Table 6)")
    parser.add_argument("--ids", action="append", help="question ids, comma-separated (repeatable), or @FILE")
    parser.add_argument("--data-file", help="benchmark file in our schema (.jsonl/.json[.gz]) instead of a bundled one")
    parser.add_argument("--gold-file", help="frozen gold file (default: bundled for embedded, else freeze-gold's)")
    parser.add_argument("--all-questions", action="store_true",
                        help="also evaluate questions whose frozen gold is empty or failed")
    parser.add_argument("--resume", action="store_true", help="continue the run in --out (default: the latest run)")
    parser.add_argument("--retry-failed", action="store_true", help="with --resume: re-run questions that ended with an error")
    parser.add_argument("--overwrite", action="store_true", help="start again in an --out that has predictions")
    parser.add_argument("--experiment", help="MLflow experiment name (default: saga-eval-<dataset>-<split>)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.add_argument("-v", "--verbose", action="store_true", help="log at INFO level")
    return parser


def build_freeze_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m saga_dspy.eval freeze-gold",
        description="Execute every gold query of a split on an endpoint and freeze the results "
                    "(runs on that endpoint then read gold from this file, never from the endpoint).",
    )
    add_settings_args(parser, ("dataset", "split", "endpoint", "kg", "cache_dir", "query_timeout", "result_cache",
                               "row_cap", "user_agent"))
    parser.add_argument("--data-file", help="benchmark file in our schema instead of a bundled one")
    parser.add_argument("--gold-out", help="output file (default: <cache_dir>/gold/<dataset>/gold-<endpoint>-<split>.jsonl.gz)")
    parser.add_argument("--no-progress", action="store_true")
    return parser


def freeze_main(argv: Sequence[str]) -> int:
    args = build_freeze_parser().parse_args(argv)
    settings = settings_from_args(args)
    try:
        summary = freeze(settings, settings.dataset, settings.split, out=args.gold_out, data_file=args.data_file,
                         progress=not args.no_progress)
    except (ValueError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(summary, indent=2))
    print(f"frozen gold: {summary['file']} ({summary['answerable']} of {summary['total']} answerable)")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    apply_offline_env()
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "freeze-gold":
        return freeze_main(argv[1:])
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    if args.retry_failed:
        args.resume = True
    if getattr(args, "program", None) and "demos" not in vars(args) and program_has_controller_demos(args.program):
        print(f"note: {args.program} carries compiled controller demos; per-question pool demos are off "
              f"(--demos 0) so those are used (pass --demos N to override)", file=sys.stderr)
        args.demos = 0
    try:
        settings = settings_from_args(args)
    except Exception as exc:
        parser.error(str(exc))
    import dspy

    from saga_dspy.lm import cli_lm

    lm = cli_lm(settings)
    if lm is None:
        return 2
    dspy.configure(lm=lm)
    try:
        results = evaluate(
            settings, args.variants or [settings.variant], ids=parse_ids(args.ids), data_file=args.data_file,
            gold_file=args.gold_file, answerable_only=not args.all_questions, resume=args.resume,
            retry_failed=args.retry_failed, overwrite=args.overwrite, lm=lm, progress=not args.no_progress,
            experiment=args.experiment,
        )
    except EvalError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except (KeyboardInterrupt, _Interrupted):
        print("interrupted", file=sys.stderr)
        return 130
    return 130 if any(r.interrupted for r in results.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
