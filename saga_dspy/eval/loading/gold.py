"""Frozen gold: where it lives (bundled with the sample, or frozen into the cache per endpoint), how it is found (only
looked up: loading an eval set writes nothing), and how it is frozen (every gold query executed once, never during a
run: `freeze-gold`, or the one step a run takes before loading, `freeze_missing_gold`)."""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tqdm import tqdm

from saga_dspy.config import Settings
from saga_dspy.eval.errors import EvalError
from saga_dspy.eval.files import write_file
from saga_dspy.eval.loading.answerability import unanswerable_reason
from saga_dspy.eval.loading.datasets import BENCHMARKS, bundled_gold_path, gold_file_name, load_records, write_jsonl_gz
from saga_dspy.eval.preflight import check_endpoint
from saga_dspy.eval.scoring.metrics import answer_f1
from saga_dspy.input_files import check_input_file
from saga_dspy.kg.endpoint import Endpoint
from saga_dspy.kg.errors import SparqlError
from saga_dspy.services import KgServices


def endpoint_tag(settings: Settings) -> str:
    return "embedded" if settings.is_embedded else settings.endpoint


def cached_gold_path(settings: Settings, dataset: str, split: str, data_file: str | Path | None = None) -> Path:
    """Where `freeze-gold` keeps gold frozen on `settings.endpoint` (outside the bundled data); gold of a
    `--data-file` under that file's content hash: another file with the same ids has another gold."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", dataset).strip("-") or "dataset"
    folder = Path(settings.cache_dir) / "gold" / slug
    if data_file is not None:
        folder = folder / f"data-{content_digest(data_file)}"
    return folder / gold_file_name(endpoint_tag(settings), split)


def _data_source(dataset: str, data_file: str | Path | None) -> str | Path | None:
    """The file the questions come from: `data_file`, or a dataset named by its path."""
    if data_file is not None or dataset in BENCHMARKS:
        return data_file
    return dataset if Path(dataset).is_file() else None


def content_digest(path: str | Path) -> str:
    """The first 16 hex digits of the SHA-256 of a file's bytes (a data file, checked before it is read)."""
    digest = hashlib.sha256()
    with open(check_input_file(path, "data file"), "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()[:16]


def resolve_split(dataset: str, split: str) -> str:
    info = BENCHMARKS.get(dataset)
    return info.resolve_split(split) if info is not None else split


def find_gold(
    settings: Settings,
    dataset: str,
    split: str,
    *,
    data_file: str | Path | None = None,
    gold_file: str | Path | None = None,
) -> Path:
    """The frozen gold for this dataset/split/endpoint: `gold_file`, the bundled file (embedded), or the cache
    (`freeze-gold`, `freeze_missing_gold`). Only looks: a missing file is an error that says how to freeze it."""
    found = _frozen_gold(settings, dataset, split, data_file, gold_file)
    if found is not None:
        return found
    raise EvalError(
        f"no frozen gold for {dataset}/{resolve_split(dataset, split)} on {settings.endpoint}: gold answers are "
        f"never queried during a run. Freeze them first:\n    {_freeze_command(settings, dataset, split, data_file)}"
    )


def _frozen_gold(
    settings: Settings, dataset: str, split: str, data_file: str | Path | None, gold_file: str | Path | None
) -> Path | None:
    if gold_file is not None:
        path = Path(gold_file)
        if not path.exists():
            raise EvalError(f"no such gold file: {path}")
        return path
    if data_file is None:
        bundled = bundled_gold_path(dataset, split, settings)
        if bundled is not None:
            return bundled
    cached = cached_gold_path(settings, dataset, resolve_split(dataset, split), _data_source(dataset, data_file))
    return cached if cached.exists() else None


def _freeze_command(settings: Settings, dataset: str, split: str, data_file: str | Path | None) -> str:
    return (
        f"python -m saga_dspy.eval freeze-gold --dataset {dataset} --split {split} "
        f"--endpoint {settings.endpoint}" + (f" --data-file {data_file}" if data_file else "")
    )


def freeze_missing_gold(
    settings: Settings,
    dataset: str,
    split: str,
    *,
    data_file: str | Path | None = None,
    gold_file: str | Path | None = None,
    progress: bool = True,
) -> Path | None:
    """The step a run takes before it loads its questions: on the embedded sample (and with `freeze_on_first_use`,
    on a live endpoint) gold not frozen yet is frozen into the cache now, said on stderr with the `freeze-gold`
    command that does the same; returns the file it wrote (None: nothing to freeze, or not allowed here, when
    loading then names the command)."""
    if not freezes_now(settings, dataset, split, data_file, gold_file):
        return None
    resolved = resolve_split(dataset, split)
    cached = cached_gold_path(settings, dataset, resolved, _data_source(dataset, data_file))
    where = "the embedded sample" if settings.is_embedded else settings.endpoint
    print(
        f"No frozen gold for {dataset}/{resolved} on {where}; freezing it now into {cached} "
        f"(once; same as `{_freeze_command(settings, dataset, split, data_file)}`).",
        file=sys.stderr,
    )
    freeze(settings, dataset, split, out=cached, data_file=data_file, progress=progress)
    return cached


def freezes_now(
    settings: Settings,
    dataset: str,
    split: str,
    data_file: str | Path | None = None,
    gold_file: str | Path | None = None,
) -> bool:
    """Whether `freeze_missing_gold` would freeze the split's gold now: a run checks its LM and endpoint before
    that, so a dead one stops it before any gold is frozen."""
    if not (settings.is_embedded or settings.freeze_on_first_use):
        return False
    if _frozen_gold(settings, dataset, split, data_file, gold_file) is not None:
        return False
    load_records(dataset, split, settings, data_file)  # an unknown dataset or split says so first, as a freeze
    return True


def freeze(
    settings: Settings,
    dataset: str,
    split: str,
    *,
    out: str | Path | None = None,
    data_file: str | Path | None = None,
    endpoint: Endpoint | None = None,
    progress: bool = True,
) -> dict[str, Any]:
    """Execute every gold query of the split on `settings.endpoint` and store the results
    (`gold.freeze_gold`); returns its summary (with the file's path under 'file')."""
    resolved = resolve_split(dataset, split)
    source = _data_source(dataset, data_file)
    path = Path(out) if out is not None else cached_gold_path(settings, dataset, resolved, source)
    with KgServices(settings, endpoint) as services:
        check_endpoint(settings, services)  # a dead endpoint would freeze every gold query as failed
        summary = freeze_gold(
            dataset, split, services.endpoint, path, settings=settings, data_file=data_file, progress=progress
        )
    summary["file"] = str(path)
    return summary


def _summary_path(out_path: Path) -> Path:
    name = out_path.name
    for suffix in (".jsonl.gz", ".jsonl", ".json.gz", ".json"):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
            break
    return out_path.with_name(name + ".summary.json")


def freeze_gold(
    name: str,
    split: str,
    endpoint: Any,
    out_path: str | Path,
    *,
    settings: Settings | None = None,
    data_file: str | Path | None = None,
    timeout: float | None = None,
    date: str | None = None,
    progress: bool = False,
) -> dict[str, Any]:
    """Execute every gold query on `endpoint` and store the results per id.

    Writes `out_path` (gzip JSON lines, benchmark order) with per id: `result` (SPARQL-JSON,
    `result.to_json()`, or null), `error` ({kind, message} or null), `answerable` (no error and
    a non-empty, non-degenerate result: `eval.loading.answerability`), `rows`, `endpoint` (`endpoint.name`), `date` and
    `source_f1` (answer F1 of the frozen result against the dataset's stored answers, where it has them). Writes a
    summary next to it (`<stem>.summary.json`) and returns it: counts of answerable / empty /
    errors by kind, and agreement (F1 == 1) with `source_answers`.
    """
    out_path = Path(out_path)
    records = load_records(name, split, settings, data_file)
    if timeout is None and settings is not None:
        timeout = settings.query_timeout
    date = date or _dt.datetime.now(_dt.UTC).date().isoformat()
    endpoint_name = str(endpoint.name)
    iterator: Iterable[dict[str, Any]] = records
    if progress:
        iterator = tqdm(records, desc=f"{name}/{split}", unit="q")
    frozen = []
    tally = _FreezeTally()
    for rec in iterator:
        result_json, error, n_rows, was_capped = _run_gold_query(endpoint, rec, timeout)
        source_f1, answerable = tally.add(rec, result_json, error, was_capped)
        frozen.append(
            {
                "id": rec["id"],
                "endpoint": endpoint_name,
                "date": date,
                "answerable": answerable,
                "rows": n_rows,
                "error": error,
                "source_f1": source_f1,
                "result": result_json,
            }
        )
    write_jsonl_gz(out_path, frozen)
    summary = {
        "benchmark": name,
        "split": records[0]["split"] if records else split,
        "endpoint": endpoint_name,
        "date": date,
        "timeout": timeout,
        "total": len(frozen),
        "answerable": sum(1 for f in frozen if f["answerable"]),
        **tally.counts(),
    }
    write_file(_summary_path(out_path), json.dumps(summary, indent=2, sort_keys=True) + "\n")
    return summary


@dataclass
class _FreezeTally:
    """The counts a freeze reports: why questions are unanswerable, errors by kind, capped results, and the
    agreement of the frozen results with the dataset's stored answers."""

    errors: dict[str, int] = field(default_factory=dict)
    unanswerable: dict[str | None, int] = field(default_factory=dict)
    capped: int = 0
    with_source: int = 0
    compared: int = 0
    agree: int = 0
    f1_sum: float = 0.0

    def add(
        self, rec: dict[str, Any], result_json: dict | None, error: dict | None, capped: bool
    ) -> tuple[float | None, bool]:
        """Count one frozen gold query; returns (its F1 against the stored answers, whether it is answerable)."""
        self.capped += capped
        source_f1 = None
        if rec["source_answers"] is not None:
            self.with_source += 1
            if result_json is not None:
                source_f1 = answer_f1(result_json, rec["source_answers"], mode="answers")
                self.compared += 1
                self.f1_sum += source_f1
                self.agree += source_f1 >= 1.0 - 1e-9
        if error is not None:
            self.errors[error["kind"]] = self.errors.get(error["kind"], 0) + 1
            return source_f1, False
        # empty, degenerate (COUNT 0) or ASK false unless the dataset confirms it
        why = unanswerable_reason(result_json, rec["sparql"], source_f1)
        self.unanswerable[why] = self.unanswerable.get(why, 0) + (why is not None)
        return source_f1, why is None

    def counts(self) -> dict[str, Any]:
        compared = self.compared
        return {
            "empty": self.unanswerable.get("empty", 0),
            "ask_false_unconfirmed": self.unanswerable.get("ask_false_unconfirmed", 0),
            "degenerate_aggregate": self.unanswerable.get("degenerate_aggregate", 0),
            "errors": dict(sorted(self.errors.items())),
            "capped": self.capped,
            "source_answers": {
                "with": self.with_source,
                "compared": compared,
                "agree": self.agree,
                "agreement": self.agree / compared if compared else None,
                "mean_f1": self.f1_sum / compared if compared else None,
            },
        }


def _run_gold_query(
    endpoint: Endpoint, rec: dict[str, Any], timeout: float | None
) -> tuple[dict | None, dict | None, int | None, bool]:
    """(SPARQL-JSON result, error {kind, message}, rows, capped) of one record's gold query."""
    result_json = None
    error = None
    n_rows = None
    capped = False
    if not rec["sparql"]:
        error = {"kind": "no_query", "message": "the record has no gold SPARQL"}
    else:
        try:
            result = endpoint.query(rec["sparql"], timeout=timeout)
        except SparqlError as exc:
            error = {"kind": exc.kind, "message": exc.message}
        except Exception as exc:  # an endpoint bug must not lose the other questions
            error = {"kind": "internal", "message": f"{type(exc).__name__}: {exc}"[:400]}
        else:
            result_json = result.to_json()
            n_rows = len(result.rows) if hasattr(result, "rows") else None
            capped = bool(getattr(result, "capped", False))
    return result_json, error, n_rows, capped
