"""Benchmarks as Hugging Face `datasets`, and frozen gold answers.

Bundled benchmarks live in `<data_dir>/benchmarks/<name>/<split>.jsonl.gz`, one record a
line with the fields `RECORD_FIELDS` (built by `scripts/build_benchmarks.py`, see each
benchmark's PROVENANCE.md). Gold answers are frozen by executing each gold query on an
endpoint (`freeze_gold`); the bundled frozen gold for the embedded sample is
`gold-embedded-<split>.jsonl.gz` next to the split, and `load_benchmark` joins it in as the
columns `gold` (SPARQL-JSON text), `answerable` and `gold_error`.

In a loaded Dataset, `source_answers` and `gold` are SPARQL-JSON *text* (or None), so the
column types stay fixed whatever the result shapes; `saga_dspy.eval.scoring.metrics` accepts the text.
"""

from __future__ import annotations

import gzip
import io
import json
import logging
import re
import uuid
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from saga_dspy.config import DEFAULT_KG, Settings, default_data_dir
from saga_dspy.eval.files import write_file
from saga_dspy.eval.loading.answerability import unanswerable_reason
from saga_dspy.input_files import read_input_bytes, reading

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
    numeric_ids: tuple[str, ...] = ()  # splits whose official file writes ids as JSON numbers (bundled as strings)

    def resolve_split(self, split: str) -> str:
        """A split name, or a role ('test', 'dev', 'train') mapped to this benchmark's split."""
        if split in self.splits:
            return split
        role = {"test": self.test, "dev": self.dev, "validation": self.dev, "val": self.dev, "train": self.train}.get(
            split
        )
        if role:
            return role
        raise ValueError(
            f"benchmark {self.name!r} has no split {split!r} (splits: {', '.join(self.splits) or 'none bundled'})"
        )


def _train_dev_test(name: str, title: str, kg: str, **more: Any) -> BenchmarkInfo:
    """A benchmark whose splits are train, dev and test under those names."""
    return BenchmarkInfo(name, title, kg, ("train", "dev", "test"), test="test", dev="dev", train="train", **more)


BENCHMARKS: dict[str, BenchmarkInfo] = {
    b.name: b
    for b in (
        _train_dev_test("qald7", "QALD-7 task 4 (Wikidata)", "wikidata"),  # dev: eval.loading.splits
        _train_dev_test("qald9plus", "QALD-9-plus (Wikidata)", "wikidata"),  # dev: eval.loading.splits
        _train_dev_test("qald10", "QALD-10", "wikidata", numeric_ids=("test",)),  # dev: eval.loading.splits
        _train_dev_test("wwq", "WikiWebQuestions", "wikidata"),
        BenchmarkInfo("spinach", "SPINACH", "wikidata", ("dev", "test"), test="test", dev="dev", metric_mode="rows"),
        BenchmarkInfo("lcquad2", "LC-QuAD 2.0", "wikidata", ("test",), test="test"),
        BenchmarkInfo("webqsp", "WebQuestionsSP", "freebase", ("train", "test"), test="test", train="train"),
        BenchmarkInfo("cwq", "ComplexWebQuestions", "freebase", ("val", "test"), test="test", dev="val"),
        BenchmarkInfo("grailqa", "GrailQA (not bundled)", "freebase", (), bundled=False),
    )
}


def catalogue_text() -> str:
    """The benchmark names and graphs, for --help."""
    return (
        "one of: "
        + ", ".join(f"{b.name} ({b.kg})" for b in BENCHMARKS.values() if b.bundled)
        + "; the embedded endpoint holds a Wikidata sample"
    )


def benchmark_info(name: str) -> BenchmarkInfo:
    try:
        return BENCHMARKS[name]
    except KeyError:
        raise ValueError(f"unknown benchmark {name!r} (known: {', '.join(BENCHMARKS)})") from None


# --------------------------------------------------------------------------- files


def benchmarks_dir(settings: Settings | None = None) -> Path:
    if settings is None:
        return default_data_dir() / "benchmarks"
    return Path(settings.data_dir) / "benchmarks"


def gold_file_name(endpoint_tag: str, split: str) -> str:
    """`gold-<endpoint>-<split>.jsonl.gz`; the embedded sample's tag is 'embedded'."""
    slug = re.sub(r"[^A-Za-z0-9._]+", "-", endpoint_tag).strip("-").lower() or "endpoint"
    return f"gold-{slug}-{split}.jsonl.gz"


def write_jsonl_gz(path: Path, records: Iterable[dict[str, Any]]) -> None:
    """Deterministic gzip JSON lines: fixed key order as given, no name and mtime 0 in the header."""
    buf = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buf, compresslevel=9, mtime=0) as gz:
        for rec in records:
            gz.write(json.dumps(rec, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))
            gz.write(b"\n")
    write_file(path, buf.getvalue())


def read_records(path: str | Path) -> list[dict[str, Any]]:
    """Records from .jsonl, .jsonl.gz, .json or .json.gz (a list, or an object with a list under
    'questions' or 'data')."""
    path = Path(path)
    try:
        text = read_input_bytes(path, "data file").decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path}: not UTF-8 text ({exc.reason})") from None
    stem = path.name[:-3] if path.suffix == ".gz" else path.name
    if stem.endswith(".jsonl"):
        out = []
        for n, line in enumerate(text.splitlines(), 1):
            if line.strip():
                try:
                    out.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    raise ValueError(f"{path}:{n}: not JSON ({exc.msg})") from exc
        return out
    try:
        obj = json.loads(text)
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


def _qald_answers(rec: dict[str, Any]) -> Any:
    """QALD-JSON's stored answers (`answers`: a list of one SPARQL-JSON result), or None."""
    answers = rec.get("answers")
    return answers[0] if isinstance(answers, list) and len(answers) == 1 else None


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
        "source_answers": _json_text(rec.get("source_answers", _qald_answers(rec))),
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
    settings: Settings | None = None,
    data_file: str | Path | None = None,
) -> list[dict[str, Any]]:
    """Plain-dict records (our schema, SPARQL-JSON as text) of a bundled benchmark, a user
    file, or a hub dataset. No gold is joined here."""
    return load_questions(name, split, settings, data_file).to_list()


def load_questions(
    name: str,
    split: str,
    settings: Settings | None = None,
    data_file: str | Path | None = None,
) -> datasets.Dataset:
    """The questions (columns `RECORD_FIELDS` + `GOLD_FIELDS`, gold as the records carry it) as a
    Dataset. A bundled split and a user file take one path (`read_records`, `_normalise`, in memory: reading
    writes nothing); a hub id goes through `load_dataset` and the hub cache."""
    quiet_progress()
    info = BENCHMARKS.get(name)
    kg = info.kg if info else (settings.kg if settings else DEFAULT_KG)
    if data_file is not None:
        with reading(data_file, "data file"):
            raw = read_records(data_file)
            if raw and all(isinstance(r, dict) and r.get("split") for r in raw):
                if any(r["split"] == split for r in raw):
                    raw = [r for r in raw if r["split"] == split]
            return _from_records(raw, kg, split)
    if info is not None:
        if not info.bundled:
            raise ValueError(
                f"benchmark {name!r} is not bundled ({info.title}); pass data_file= (our schema) or a hub id"
            )
        split = info.resolve_split(split)
        path = benchmarks_dir(settings) / name / f"{split}.jsonl.gz"
        if not path.exists():
            raise FileNotFoundError(f"bundled benchmark file missing: {path} (run scripts/build_benchmarks.py)")
        return _from_records(read_records(path), kg, split)
    if "/" in name or Path(name).exists():
        if Path(name).exists():
            return load_questions(Path(name).stem, split, settings, data_file=name)
        return _hub_questions(name, split, kg)
    raise ValueError(f"unknown benchmark {name!r}: not bundled ({', '.join(BENCHMARKS)}), not a file, not a hub id")


def quiet_progress() -> None:
    """No `datasets` progress bars: loading a split takes well under a second, and the bars
    would interleave with the eval's own."""
    import datasets

    datasets.disable_progress_bars()


def _from_records(raw: list[Any], kg: str, split: str) -> datasets.Dataset:
    """Records of a bundled split or a user file, in our schema, as an in-memory Dataset (nothing is written: no
    Arrow cache, so loading works on a read-only data and cache directory)."""
    from datasets import Dataset

    return Dataset.from_list([_normalise(r, i, kg, split) for i, r in enumerate(raw)], features=_features())


def _fresh_fingerprint() -> str:
    """The fingerprint of a transform kept in memory (`keep_in_memory=True`: no cache file to find again)."""
    return uuid.uuid4().hex


def _with_gold_columns(ds: datasets.Dataset, gold: dict[str, dict[str, Any]] | None = None) -> datasets.Dataset:
    """`ds` with the `GOLD_FIELDS` columns, filled from frozen `gold` by id where it has the id."""
    gold = gold or {}

    def join(row: dict[str, Any]) -> dict[str, Any]:
        g = gold.get(row["id"])
        if g is None:
            return {k: row.get(k) for k in GOLD_FIELDS}
        err = g.get("error")
        return {
            "gold": _json_text(g.get("result")),
            "answerable": bool(g.get("answerable")),
            "gold_error": err.get("kind") if isinstance(err, dict) else err,
        }

    # the closure holds the whole frozen gold: datasets would pickle and hash it (~0.2 s a split) only to name a
    # cache file; the result is kept in memory, so there is no cache file to name
    return ds.map(join, features=_features(), keep_in_memory=True, new_fingerprint=_fresh_fingerprint())


def _hub_questions(hub_id: str, split: str, kg: str) -> datasets.Dataset:
    import datasets

    try:
        ds = datasets.load_dataset(hub_id, split=split)
    except Exception as exc:  # offline misses, unknown ids, bad splits
        raise ValueError(f"could not load hub dataset {hub_id!r} split {split!r}: {exc}") from exc
    return ds.map(
        lambda r, i: _normalise(r, i, kg, split),
        with_indices=True,
        remove_columns=ds.column_names,
        features=_features(),
    )


# --------------------------------------------------------------------------- gold


def read_gold(path: str | Path) -> dict[str, dict[str, Any]]:
    """Frozen gold by id."""
    return {str(r["id"]): r for r in read_records(path)}


def bundled_gold_path(name: str, split: str, settings: Settings | None = None) -> Path | None:
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


def _features() -> datasets.Features:
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
    settings: Settings | None = None,
    data_file: str | Path | None = None,
    *,
    gold_file: str | Path | None = None,
    answerable_only: bool = False,
) -> datasets.Dataset:
    """A benchmark split as a `datasets.Dataset`, offline.

    `name` is a bundled benchmark (`BENCHMARKS`), or, with `data_file`, any name for a user
    file in our schema (.jsonl/.json, optionally .gz), or a hub id ("owner/name", needs the
    hub cache when offline). `split` may also be a role ('test', 'dev', 'train').

    Frozen gold is joined from `gold_file`, else (embedded endpoint or no settings) from the
    bundled `gold-embedded-<split>.jsonl.gz` when it exists. `answerable_only=True` keeps the
    questions whose frozen gold is answerable (`eval.loading.answerability`: error-free, non-empty, not
    degenerate); the counts left out by reason ('empty', 'degenerate_aggregate',
    'ask_false_unconfirmed', error kinds, 'not_frozen') are logged and kept in `filter_report(ds)`.
    """
    ds = load_questions(name, split, settings, data_file)
    resolved = ds[0]["split"] if len(ds) else split
    path = Path(gold_file) if gold_file is not None else None
    if path is None and data_file is None:
        path = bundled_gold_path(name, split, settings)
    if path is not None:
        with reading(path, "gold file"):
            ds = _with_gold_columns(ds, read_gold(path))
    return _answerable(ds, name, split, resolved, path) if answerable_only else ds


def _answerable(ds: datasets.Dataset, name: str, split: str, resolved: str, path: Path | None) -> datasets.Dataset:
    """The questions whose frozen gold is answerable; the counts left out by reason logged and kept in the
    dataset's description (`filter_report`)."""
    if not any(a is not None for a in ds["answerable"]):
        raise ValueError(
            f"{name}/{split}: no frozen gold to filter on "
            "(run scripts/build_benchmarks.py --freeze-gold, or pass gold_file=)"
        )
    whys = [_reason(row) for row in ds]
    reasons = dict(sorted(Counter(w for w in whys if w is not None).items()))
    ds = ds.filter(
        lambda _row, i: whys[i] is None, with_indices=True, keep_in_memory=True, new_fingerprint=_fresh_fingerprint()
    )
    report = {
        "benchmark": name,
        "split": resolved,
        "gold_file": str(path) if path else None,
        "total": len(whys),
        "kept": len(ds),
        "left_out": len(whys) - len(ds),
        "reasons": reasons,
    }
    log.info(
        "%s/%s: kept %d of %d answerable questions; left out %d (%s)",
        name,
        resolved,
        report["kept"],
        report["total"],
        report["left_out"],
        ", ".join(f"{k} {v}" for k, v in reasons.items()) or "none",
    )
    ds.info.description = json.dumps({"answerable_filter": report})
    return ds


def filter_report(ds: datasets.Dataset) -> dict[str, Any] | None:
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
    "load_questions",
    "load_records",
    "read_gold",
    "read_records",
    "write_jsonl_gz",
]
