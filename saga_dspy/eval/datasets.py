"""Benchmarks as Hugging Face `datasets`, and frozen gold answers.

Bundled benchmarks live in `<data_dir>/benchmarks/<name>/<split>.jsonl.gz`, one record a
line with the fields `RECORD_FIELDS` (built by `scripts/build_benchmarks.py`, see each
benchmark's PROVENANCE.md). Gold answers are frozen by executing each gold query on an
endpoint (`freeze_gold`); the bundled frozen gold for the embedded sample is
`gold-embedded-<split>.jsonl.gz` next to the split, and `load_benchmark` joins it in as the
columns `gold` (SPARQL-JSON text), `answerable` and `gold_error`.

In a loaded Dataset, `source_answers` and `gold` are SPARQL-JSON *text* (or None), so the
column types stay fixed whatever the result shapes; `saga_dspy.eval.metrics` accepts the text.
"""

from __future__ import annotations

import gzip
import io
import json
import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable

from saga_dspy.config import Settings, default_data_dir
from saga_dspy.eval.answerability import unanswerable_reason

if TYPE_CHECKING:  # pragma: no cover
    import datasets  # heavy (pyarrow, pandas): imported where a Dataset is built, not at module import

log = logging.getLogger(__name__)

RECORD_FIELDS = ("id", "question", "sparql", "kg", "split", "answer_type", "aggregation", "source_answers")
GOLD_FIELDS = ("gold", "answerable", "gold_error")


@dataclass(frozen=True)
class BenchmarkInfo:
    """One benchmark: its graph, its splits and which split plays which role."""

    name: str
    title: str
    kg: str
    splits: tuple[str, ...]
    test: str | None = None
    dev: str | None = None
    train: str | None = None
    metric_mode: str = "answers"  # the benchmark's customary metric
    bundled: bool = True

    def resolve_split(self, split: str) -> str:
        """A split name, or a role ('test', 'dev', 'train') mapped to this benchmark's split."""
        if split in self.splits:
            return split
        role = {"test": self.test, "dev": self.dev, "validation": self.dev, "val": self.dev, "train": self.train}.get(split)
        if role:
            return role
        raise ValueError(f"benchmark {self.name!r} has no split {split!r} (splits: {', '.join(self.splits) or 'none bundled'})")


BENCHMARKS: dict[str, BenchmarkInfo] = {
    b.name: b
    for b in (
        BenchmarkInfo("qald7", "QALD-7 task 4 (Wikidata)", "wikidata", ("train", "dev", "test"), test="test", dev="dev", train="train"),  # dev: eval.splits
        BenchmarkInfo("qald9plus", "QALD-9-plus (Wikidata)", "wikidata", ("train", "dev", "test"), test="test", dev="dev", train="train"),  # dev: eval.splits
        BenchmarkInfo("qald10", "QALD-10", "wikidata", ("train", "dev", "test"), test="test", dev="dev", train="train"),  # dev: eval.splits
        BenchmarkInfo("wwq", "WikiWebQuestions", "wikidata", ("train", "dev", "test"), test="test", dev="dev", train="train"),
        BenchmarkInfo("spinach", "SPINACH", "wikidata", ("dev", "test"), test="test", dev="dev", metric_mode="rows"),
        BenchmarkInfo("lcquad2", "LC-QuAD 2.0", "wikidata", ("test",), test="test"),
        BenchmarkInfo("webqsp", "WebQuestionsSP", "freebase", ("train", "test"), test="test", train="train"),
        BenchmarkInfo("cwq", "ComplexWebQuestions", "freebase", ("val", "test"), test="test", dev="val"),
        BenchmarkInfo("grailqa", "GrailQA (not bundled)", "freebase", (), bundled=False),
    )
}


def catalogue_text() -> str:
    """The benchmark names and graphs, for --help."""
    return "one of: " + ", ".join(f"{b.name} ({b.kg})" for b in BENCHMARKS.values() if b.bundled) + \
        "; the embedded endpoint holds a Wikidata sample"


def benchmark_info(name: str) -> BenchmarkInfo:
    try:
        return BENCHMARKS[name]
    except KeyError:
        raise ValueError(f"unknown benchmark {name!r} (known: {', '.join(BENCHMARKS)})") from None


# --------------------------------------------------------------------------- files


def benchmarks_dir(settings: "Settings | None" = None) -> Path:
    if settings is None:
        return default_data_dir() / "benchmarks"
    return Path(settings.data_dir) / "benchmarks"


def gold_file_name(endpoint_tag: str, split: str) -> str:
    """`gold-<endpoint>-<split>.jsonl.gz`; the embedded sample's tag is 'embedded'."""
    slug = re.sub(r"[^A-Za-z0-9._]+", "-", endpoint_tag).strip("-").lower() or "endpoint"
    return f"gold-{slug}-{split}.jsonl.gz"


def write_jsonl_gz(path: Path, records: Iterable[dict[str, Any]]) -> None:
    """Deterministic gzip JSON lines: fixed key order as given, no name and mtime 0 in the header."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    buf = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buf, compresslevel=9, mtime=0) as gz:
        for rec in records:
            gz.write(json.dumps(rec, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))
            gz.write(b"\n")
    path.write_bytes(buf.getvalue())


def read_records(path: str | Path) -> list[dict[str, Any]]:
    """Records from .jsonl, .jsonl.gz, .json or .json.gz (a list, or an object with a list under
    'questions' or 'data')."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"no such data file: {path}")
    opener = gzip.open if path.suffix == ".gz" else open
    stem = path.name[:-3] if path.suffix == ".gz" else path.name
    with opener(path, "rt", encoding="utf-8") as fh:
        if stem.endswith(".jsonl"):
            out = []
            for n, line in enumerate(fh, 1):
                if line.strip():
                    try:
                        out.append(json.loads(line))
                    except json.JSONDecodeError as exc:
                        raise ValueError(f"{path}:{n}: not JSON ({exc.msg})") from exc
            return out
        try:
            obj = json.load(fh)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}: not JSON ({exc.msg})") from exc
    if isinstance(obj, dict):
        for key in ("questions", "data"):
            if isinstance(obj.get(key), list):
                return obj[key]
        raise ValueError(f"{path}: a JSON object needs a list under 'questions' or 'data'")
    if not isinstance(obj, list):
        raise ValueError(f"{path}: expected a list of records")
    return obj


# --------------------------------------------------------------------------- records


def _question_text(q: Any) -> str | None:
    if isinstance(q, list):  # QALD: [{"language": "en", "string": ...}, ...]
        for item in q:
            if isinstance(item, dict) and item.get("language") == "en":
                return item.get("string")
        return None
    if isinstance(q, dict):
        return q.get("en")
    return q


def _json_text(obj: Any) -> str | None:
    if obj is None:
        return None
    if isinstance(obj, str):
        return obj
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def _normalise(rec: Any, i: int, kg: str, split: str) -> dict[str, Any]:
    """One record in our schema (plus gold columns if the record carries them)."""
    if not isinstance(rec, dict):
        raise ValueError(f"record {i}: expected an object, got {type(rec).__name__}")
    question = _question_text(rec.get("question", rec.get("utterance")))
    if not isinstance(question, str) or not question.strip():
        raise ValueError(f"record {i} ({rec.get('id', '?')}): no English question string")
    sparql = rec.get("sparql")
    if sparql is None and isinstance(rec.get("query"), dict):
        sparql = rec["query"].get("sparql")
    if sparql is not None and not isinstance(sparql, str):
        raise ValueError(f"record {i}: 'sparql' must be a string")
    aggregation = rec.get("aggregation")
    if aggregation is not None and not isinstance(aggregation, bool):
        aggregation = str(aggregation).strip().lower() == "true"
    answer_type = rec.get("answer_type", rec.get("answertype"))
    out = {
        "id": str(rec.get("id", i)),
        "question": question.strip(),
        "sparql": sparql,
        "kg": rec.get("kg") or kg,
        "split": rec.get("split") or split,
        "answer_type": None if answer_type is None else str(answer_type),
        "aggregation": aggregation,
        "source_answers": _json_text(rec.get("source_answers")),
        "gold": _json_text(rec.get("gold")),
        "answerable": rec.get("answerable"),
        "gold_error": rec.get("gold_error"),
    }
    if isinstance(out["gold_error"], dict):
        out["gold_error"] = out["gold_error"].get("kind")
    return out


def load_records(
    name: str,
    split: str,
    settings: "Settings | None" = None,
    data_file: str | Path | None = None,
) -> list[dict[str, Any]]:
    """Plain-dict records (our schema, SPARQL-JSON as text) of a bundled benchmark, a user
    file, or a hub dataset. No gold is joined here."""
    info = BENCHMARKS.get(name)
    kg = info.kg if info else (settings.kg if settings else "wikidata")
    if data_file is not None:
        raw = read_records(data_file)
        if raw and all(isinstance(r, dict) and r.get("split") for r in raw):
            if any(r["split"] == split for r in raw):
                raw = [r for r in raw if r["split"] == split]
        return [_normalise(r, i, kg, split) for i, r in enumerate(raw)]
    if info is not None:
        if not info.bundled:
            raise ValueError(f"benchmark {name!r} is not bundled ({info.title}); pass data_file= (our schema) or a hub id")
        split = info.resolve_split(split)
        path = benchmarks_dir(settings) / name / f"{split}.jsonl.gz"
        if not path.exists():
            raise FileNotFoundError(f"bundled benchmark file missing: {path} (run scripts/build_benchmarks.py)")
        return [_normalise(r, i, kg, split) for i, r in enumerate(read_records(path))]
    if "/" in name or Path(name).exists():
        if Path(name).exists():
            return load_records(Path(name).stem, split, settings, data_file=name)
        return _hub_records(name, split, kg)
    raise ValueError(f"unknown benchmark {name!r}: not bundled ({', '.join(BENCHMARKS)}), not a file, not a hub id")


def _hub_records(hub_id: str, split: str, kg: str) -> list[dict[str, Any]]:
    import datasets

    try:
        ds = datasets.load_dataset(hub_id, split=split)
    except Exception as exc:  # offline misses, unknown ids, bad splits
        raise ValueError(f"could not load hub dataset {hub_id!r} split {split!r}: {exc}") from exc
    return [_normalise(r, i, kg, split) for i, r in enumerate(ds)]


# --------------------------------------------------------------------------- gold


def read_gold(path: str | Path) -> dict[str, dict[str, Any]]:
    """Frozen gold by id."""
    return {str(r["id"]): r for r in read_records(path)}


def bundled_gold_path(name: str, split: str, settings: "Settings | None" = None) -> Path | None:
    """The gold bundled for a benchmark split on the embedded sample, when it exists (None elsewhere)."""
    info = BENCHMARKS.get(name)
    if info is None or not info.bundled or (settings is not None and not settings.is_embedded):
        return None
    try:
        resolved = info.resolve_split(split)
    except ValueError:
        return None
    path = benchmarks_dir(settings) / name / gold_file_name("embedded", resolved)
    return path if path.exists() else None


def _features() -> "datasets.Features":
    from datasets import Features, Value

    return Features(
        {
            "id": Value("string"),
            "question": Value("string"),
            "sparql": Value("string"),
            "kg": Value("string"),
            "split": Value("string"),
            "answer_type": Value("string"),
            "aggregation": Value("bool"),
            "source_answers": Value("string"),
            "gold": Value("string"),
            "answerable": Value("bool"),
            "gold_error": Value("string"),
        }
    )


def _reason(rec: dict[str, Any]) -> str | None:
    """Why a record is not answerable (None: it is)."""
    if rec["answerable"] is True:
        return None
    if rec["answerable"] is None:
        return "not_frozen"
    if rec["gold_error"]:
        return rec["gold_error"]
    return unanswerable_reason(json.loads(rec["gold"]) if rec.get("gold") else None, rec.get("sparql")) or "empty"


def load_benchmark(
    name: str,
    split: str,
    settings: "Settings | None" = None,
    data_file: str | Path | None = None,
    *,
    gold_file: str | Path | None = None,
    answerable_only: bool = False,
) -> "datasets.Dataset":
    """A benchmark split as a `datasets.Dataset`, offline.

    `name` is a bundled benchmark (`BENCHMARKS`), or, with `data_file`, any name for a user
    file in our schema (.jsonl/.json, optionally .gz), or a hub id ("owner/name", needs the
    hub cache when offline). `split` may also be a role ('test', 'dev', 'train').

    Frozen gold is joined from `gold_file`, else (embedded endpoint or no settings) from the
    bundled `gold-embedded-<split>.jsonl.gz` when it exists. `answerable_only=True` keeps the
    questions whose frozen gold is answerable (`eval.answerability`: error-free, non-empty, not
    degenerate); the counts left out by reason ('empty', 'degenerate_aggregate',
    'ask_false_unconfirmed', error kinds, 'not_frozen') are logged and kept in `filter_report(ds)`.
    """
    from datasets import Dataset, DatasetInfo

    records = load_records(name, split, settings, data_file)
    resolved = records[0]["split"] if records else split
    path = Path(gold_file) if gold_file is not None else None
    if path is None and data_file is None:
        path = bundled_gold_path(name, split, settings)
    if path is not None:
        gold = read_gold(path)
        for rec in records:
            g = gold.get(rec["id"])
            if g is None:
                continue
            rec["gold"] = _json_text(g.get("result"))
            rec["answerable"] = bool(g.get("answerable"))
            err = g.get("error")
            rec["gold_error"] = err.get("kind") if isinstance(err, dict) else err
    description = ""
    if answerable_only:
        if not any(r["answerable"] is not None for r in records):
            raise ValueError(
                f"{name}/{split}: no frozen gold to filter on (run scripts/build_benchmarks.py --freeze-gold, or pass gold_file=)"
            )
        reasons: dict[str, int] = {}
        kept = []
        for rec in records:
            why = _reason(rec)
            if why is None:
                kept.append(rec)
            else:
                reasons[why] = reasons.get(why, 0) + 1
        report = {
            "benchmark": name,
            "split": resolved,
            "gold_file": str(path) if path else None,
            "total": len(records),
            "kept": len(kept),
            "left_out": len(records) - len(kept),
            "reasons": dict(sorted(reasons.items())),
        }
        log.info(
            "%s/%s: kept %d of %d answerable questions; left out %d (%s)",
            name, resolved, report["kept"], report["total"], report["left_out"],
            ", ".join(f"{k} {v}" for k, v in report["reasons"].items()) or "none",
        )
        records = kept
        description = json.dumps({"answerable_filter": report})
    columns = RECORD_FIELDS + GOLD_FIELDS
    rows = [{k: r.get(k) for k in columns} for r in records]
    features = _features()
    return Dataset.from_list(rows, features=features, info=DatasetInfo(description=description, features=features))


def filter_report(ds: "datasets.Dataset") -> dict[str, Any] | None:
    """The answerable-filter report of a Dataset from `load_benchmark(..., answerable_only=True)`."""
    try:
        return json.loads(ds.info.description or "{}").get("answerable_filter")
    except (json.JSONDecodeError, AttributeError):
        return None


__all__ = [
    "BENCHMARKS",
    "BenchmarkInfo",
    "GOLD_FIELDS",
    "RECORD_FIELDS",
    "benchmark_info",
    "benchmarks_dir",
    "bundled_gold_path",
    "filter_report",
    "gold_file_name",
    "load_benchmark",
    "load_records",
    "read_gold",
    "read_records",
    "write_jsonl_gz",
]
