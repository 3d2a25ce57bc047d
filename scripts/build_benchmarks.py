#!/usr/bin/env python
"""Build the bundled benchmark files from the source data, and optionally freeze gold.

    python scripts/build_benchmarks.py --sources ../shared/data [--out data/benchmarks]
    python scripts/build_benchmarks.py --freeze-gold [--benchmarks qald10 wwq] [--splits test]

The first form converts every benchmark whose source files exist into
`<out>/<name>/<split>.jsonl.gz` in one schema (see `saga_dspy.eval.loading.datasets.RECORD_FIELDS`),
copies the licence files next to them and writes a PROVENANCE.md per benchmark and a
MANIFEST.json with the counts and checksums. Output is deterministic: records keep the
source order, JSON keys have a fixed order, gzip headers carry no name and mtime 0.

The second form executes every gold query of the Wikidata benchmarks on the configured
endpoint (`open_endpoint(Settings())`, the embedded sample by default) and writes
`<out>/<name>/gold-<endpoint>-<split>.jsonl.gz` plus a `.summary.json` next to it.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from saga_dspy.eval.loading.datasets import BENCHMARKS, RECORD_FIELDS, gold_file_name, write_jsonl_gz  # noqa: E402
from saga_dspy.kg.results import parse_sparql_json  # noqa: E402

# --------------------------------------------------------------------------- sources


def _read_json(path: Path) -> Any:
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    with open(path, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def _compact_answers(obj: Any) -> dict[str, Any] | None:
    """The dataset's stored answer, normalised (validated) through the typed results."""
    if obj is None:
        return None
    return parse_sparql_json(obj).to_json()


def _record(
    rid: Any,
    question: str,
    sparql: str,
    kg: str,
    split: str,
    answer_type: str | None = None,
    aggregation: bool | None = None,
    source_answers: Any = None,
) -> dict[str, Any]:
    if not isinstance(question, str) or not question.strip():
        raise ValueError(f"record {rid!r}: no English question")
    if not isinstance(sparql, str) or not sparql.strip():
        raise ValueError(f"record {rid!r}: no SPARQL")
    rec = {
        "id": str(rid),
        "question": question.strip(),
        "sparql": sparql.strip(),
        "kg": kg,
        "split": split,
        "answer_type": answer_type,
        "aggregation": aggregation,
        "source_answers": _compact_answers(source_answers),
    }
    assert list(rec) == list(RECORD_FIELDS)
    return rec


def _bool(value: Any) -> bool | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return value
    return str(value).strip().lower() == "true"


def _english(question: list[dict[str, Any]]) -> str:
    for q in question:
        if q.get("language") == "en":
            return q.get("string", "")
    return ""


def _qald(path: Path, kg: str, split: str, stats: Stats) -> list[dict[str, Any]]:
    """QALD JSON (QALD-7 task 4, QALD-10): multilingual question, query.sparql, answers."""
    out = []
    for q in _read_json(path)["questions"]:
        answers = q.get("answers") or []
        if len(answers) > 1:
            raise ValueError(f"{path.name} {q['id']}: {len(answers)} answer objects")
        out.append(
            _record(
                q["id"],
                _english(q["question"]),
                q["query"]["sparql"],
                kg,
                split,
                answer_type=q.get("answertype"),
                aggregation=_bool(q.get("aggregation")),
                source_answers=answers[0] if answers else None,
            )
        )
    stats.source[split] = len(out)
    return out


def _plain_list(path: Path, kg: str, split: str, stats: Stats, question_key: str = "question") -> list[dict[str, Any]]:
    """A JSON list of {id, question|utterance, sparql[, results]} (SPINACH, WWQ train/dev)."""
    out = []
    for r in _read_json(path):
        results = r.get("results")
        out.append(
            _record(
                r["id"],
                r[question_key],
                r["sparql"],
                kg,
                split,
                source_answers=results if results is not None else None,
            )
        )
    stats.source[split] = len(out)
    return out


def _grasp(path: Path, kg: str, split: str, stats: Stats, drop_invalid: bool = False) -> list[dict[str, Any]]:
    """GRASP jsonl: id, question, sparql, paraphrases, info (results / invalid)."""
    out = []
    rows = _read_jsonl(path)
    stats.source[split] = len(rows)
    for r in rows:
        info = r.get("info") or {}
        if drop_invalid and info.get("invalid"):
            stats.dropped.setdefault(split, {}).setdefault("info.invalid", 0)
            stats.dropped[split]["info.invalid"] += 1
            continue
        results = info.get("results")
        out.append(_record(r["id"], r["question"], r["sparql"], kg, split, source_answers=results))
    if drop_invalid:
        stats.dropped.setdefault(split, {}).setdefault("info.invalid", 0)
    return out


# --------------------------------------------------------------------------- specs


@dataclass
class Stats:
    source: dict[str, int] = field(default_factory=dict)
    dropped: dict[str, dict[str, int]] = field(default_factory=dict)


@dataclass
class SplitSpec:
    split: str
    folder: str
    file: str
    reader: Callable[..., list[dict[str, Any]]]
    kwargs: dict[str, Any] = field(default_factory=dict)


@dataclass
class BenchSpec:
    name: str
    title: str
    splits: list[SplitSpec]
    licences: list[tuple[str, str]]  # (folder, file)
    notes: list[str] = field(default_factory=list)


SPECS: list[BenchSpec] = [
    BenchSpec(
        "qald7",
        "QALD-7 task 4 (Wikidata)",
        [
            SplitSpec("train", "qald7", "qald-7-train-en-wikidata.json", _qald),
            SplitSpec("test", "qald7", "qald-7-test-en-wikidata.json", _qald),
        ],
        [],
        [
            "Questions: the English string of each QALD question; `answer_type` is QALD's `answertype`, "
            '`aggregation` QALD\'s `aggregation` (the strings "true"/"false" as booleans).',
            "`source_answers` are the answers stored in the QALD file (collected on Wikidata in 2017).",
            "No licence file was part of the source data (ag-sc/QALD); the upstream licence was not verified here.",
        ],
    ),
    BenchSpec(
        "qald9plus",
        "QALD-9-plus (Wikidata, English), SPINACH's copy",
        [
            SplitSpec("train", "qald9plus", "spinach_qald9plus_en_train.json", _plain_list),
            SplitSpec("test", "qald9plus", "spinach_qald9plus_en_test.json", _plain_list),
        ],
        [("qald9plus", "LICENSE_QALD_9_plus"), ("spinach", "LICENSE_spinach")],
        [
            "The files carry no answers (`source_answers` is null): the QALD-9-plus answer files were not obtainable.",
            "QALD-9-plus is CC BY 4.0 (LICENSE_QALD_9_plus); the English extraction is SPINACH's "
            "(Apache-2.0, LICENSE_spinach).",
        ],
    ),
    BenchSpec(
        "qald10",
        "QALD-10 (Wikidata)",
        [
            SplitSpec("train", "qald10", "grasp_qald10_train.jsonl", _grasp),
            SplitSpec("test", "qald10", "qald_10.json", _qald),
        ],
        [("qald10", "LICENSE_QALD-10"), ("qald9plus", "LICENSE_QALD_9_plus")],
        [
            "test: the official QALD-10 file (KGQA/QALD-10, MIT), with its `aggregation` flags and stored answers; "
            "QALD-10 gives no answer type. GRASP's copy of the test set (grasp_qald10_test.jsonl) has the same "
            "questions and queries in the same order and was not used.",
            "train: GRASP's 412-question train set, i.e. QALD-9-plus (Wikidata) with fixes; QALD-9-plus is CC BY 4.0 "
            "(LICENSE_QALD_9_plus). No answers (`source_answers` null). "
            "GRASP's own licence file was not part of the source data.",
            "QALD-10's official test ids are integers; they are stored as strings.",
        ],
    ),
    BenchSpec(
        "wwq",
        "WikiWebQuestions",
        [
            SplitSpec("train", "wwq", "wwq_train.json", _plain_list, {"question_key": "utterance"}),
            SplitSpec("dev", "wwq", "wwq_dev.json", _plain_list, {"question_key": "utterance"}),
            SplitSpec("test", "wwq", "grasp_wwq_test.jsonl", _grasp),
        ],
        [],
        [
            "train/dev: stanford-oval/wikidata-emnlp23 (`utterance` -> `question`); dev has stored results "
            "(bare binding lists, wrapped here as SPARQL-JSON), train has none.",
            "test: GRASP's copy with `info.results` as `source_answers`. Some stored answers are large "
            "(one test question has 19,539 rows).",
            "No licence file was part of the source data; the upstream licences were not verified here.",
        ],
    ),
    BenchSpec(
        "spinach",
        "SPINACH",
        [
            SplitSpec("dev", "spinach", "dev.json", _plain_list),
            SplitSpec("test", "spinach", "test.json", _plain_list),
        ],
        [("spinach", "LICENSE_spinach")],
        [
            "The source `title` and `url` (the Wikidata Request-a-query thread) are not kept; no answers are stored.",
            "The gold queries are written for query.wikidata.org: "
            "most rely on its predefined prefixes (wd:, wdt:, ...) "
            "and many on `SERVICE wikibase:label`; SPINACH scores them with its row-major F1 (`metric_mode = rows`).",
        ],
    ),
    BenchSpec(
        "lcquad2",
        "LC-QuAD 2.0 (test)",
        [SplitSpec("test", "lcquad2", "grasp_lcquad2_test.jsonl", _grasp, {"drop_invalid": True})],
        [],
        [
            "GRASP's copy of the LC-QuAD 2.0 test set; questions flagged `info.invalid` are dropped "
            "(none are flagged in this copy). LC-QuAD 2.0 ships no answers.",
            "The original LC-QuAD 2.0 test set is usually reported with about 6,000 questions; this copy has fewer "
            "(GRASP's own selection, e.g. without questions lacking a text; not verified here).",
            "Questions are kept verbatim, including LC-QuAD's template artefacts (e.g. `2009-0-0`); "
            "paraphrases are not kept.",
            "No licence file was part of the source data; the upstream licence was not verified here.",
        ],
    ),
    BenchSpec(
        "webqsp",
        "WebQuestionsSP (Freebase)",
        [
            SplitSpec("train", "freebase", "grasp_wqsp_train.jsonl", _grasp),
            SplitSpec("test", "freebase", "grasp_wqsp_test.jsonl", _grasp),
        ],
        [],
        [
            "GRASP's copy with Freebase SPARQL (prefix `fb:`); no answers. Needs a Freebase endpoint: "
            "the embedded sample is Wikidata only, so no gold is frozen for it.",
            "No licence file was part of the source data; the upstream licence was not verified here.",
        ],
    ),
    BenchSpec(
        "cwq",
        "ComplexWebQuestions (Freebase)",
        [
            SplitSpec("val", "freebase", "grasp_cwq_val.jsonl", _grasp),
            SplitSpec("test", "freebase", "grasp_cwq_test.jsonl", _grasp),
        ],
        [],
        [
            "GRASP's copy with Freebase SPARQL; `val` is the dev split. No answers. Needs a Freebase endpoint.",
            "No licence file was part of the source data; the upstream licence was not verified here.",
        ],
    ),
    BenchSpec(
        "grailqa",
        "GrailQA (Freebase)",
        [],
        [],
        [
            "Absent: no GrailQA files were part of the source data, so nothing is bundled. "
            "`load_benchmark('grailqa', ...)` needs `data_file=` (our schema) or a hub id.",
        ],
    ),
]


def _sources_lines(sources: Path, folder: str) -> dict[str, list[str]]:
    path = sources / "benchmarks" / folder / "SOURCES.txt"
    out: dict[str, list[str]] = {}
    if path.exists():
        for line in path.read_text(encoding="utf-8").splitlines():
            parts = line.split("\t")
            if parts and parts[0]:
                out[parts[0]] = parts[1:]
    return out


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def build(sources: Path, out: Path) -> dict[str, Any]:
    manifest: dict[str, Any] = {}
    for spec in SPECS:
        bench_dir = out / spec.name
        bench_dir.mkdir(parents=True, exist_ok=True)
        kg = BENCHMARKS[spec.name].kg
        stats = Stats()
        rows_md: list[str] = []
        built: dict[str, Any] = {}
        for sp in spec.splits:
            src = sources / "benchmarks" / sp.folder / sp.file
            if not src.exists():
                rows_md.append(f"| {sp.split} | `{sp.file}` (absent) | – | – | – | – |")
                continue
            records = sp.reader(src, kg, sp.split, stats, **sp.kwargs)
            ids = [r["id"] for r in records]
            if len(set(ids)) != len(ids):
                raise ValueError(f"{spec.name}/{sp.split}: duplicate ids")
            target = bench_dir / f"{sp.split}.jsonl.gz"
            write_jsonl_gz(target, records)
            dropped = stats.dropped.get(sp.split, {})
            with_answers = sum(1 for r in records if r["source_answers"] is not None)
            boolean = sum(1 for r in records if r["source_answers"] is not None and "boolean" in r["source_answers"])
            src_meta = _sources_lines(sources, sp.folder).get(sp.file, [])
            repo, path, commit = (src_meta + ["?", "?", "?"])[:3]
            built[sp.split] = {
                "file": target.name,
                "count": len(records),
                "source_count": stats.source[sp.split],
                "dropped": dropped,
                "with_source_answers": with_answers,
                "boolean_source_answers": boolean,
                "source": {"repository": repo, "path": path, "commit": commit, "file": sp.file},
                "bytes": target.stat().st_size,
                "sha256": _sha256(target),
            }
            drop_text = ", ".join(f"{n} {why}" for why, n in dropped.items()) or "none"
            rows_md.append(
                f"| {sp.split} | `{repo}` `{path}` @ `{commit[:12]}` | {stats.source[sp.split]} | "
                f"{len(records)} | {drop_text} | {with_answers} |"
            )
        licences = []
        for folder, name in spec.licences:
            lic = sources / "benchmarks" / folder / name
            if lic.exists():
                shutil.copyfile(lic, bench_dir / name)
                licences.append(name)
        _write_provenance(bench_dir, spec, kg, rows_md, licences, sources)
        manifest[spec.name] = {"kg": kg, "title": spec.title, "splits": built, "licences": licences}
    carve_dev_splits(out, manifest)
    text = json.dumps(manifest, indent=2, ensure_ascii=False, sort_keys=True) + "\n"
    (out / "MANIFEST.json").write_text(text, encoding="utf-8")
    return manifest


def carve_dev_splits(out: Path, manifest: dict[str, Any]) -> None:
    """Carve the seeded dev splits (`saga_dspy.eval.loading.splits.DEV_SPLITS`) from the written train files,
    after the firewall against every test split of the same graph; train keeps the rest."""
    from saga_dspy.eval.loading.datasets import read_records
    from saga_dspy.eval.loading.firewall import Firewall
    from saga_dspy.eval.loading.splits import DEV_SEED, DEV_SPLITS, carve_dev, held_out_splits

    # the committed dev splits were carved under the firewall's first rule (`near=False`); the tighter one
    # would change which train questions are clean and so re-carve every split that others measure on
    carved = Firewall(near=False)
    for name, n in DEV_SPLITS.items():
        train_path = out / name / "train.jsonl.gz"
        if not train_path.exists():
            continue
        kg = BENCHMARKS[name].kg
        tests = Firewall(near=False)
        for other, split in held_out_splits(kg, roles=("test",)):
            path = out / other / f"{split}.jsonl.gz"
            if path.exists():
                tests.extend(Firewall.of_records(read_records(path), f"{other}/{split}"))
        train = read_records(train_path)
        dev, rest, counts = carve_dev(train, n, seed=DEV_SEED, tests=tests, prefer=carved)
        carved.extend(Firewall.of_records(dev, f"{name}/dev"))
        for rec in dev:
            rec["split"] = "dev"
        write_jsonl_gz(out / name / "dev.jsonl.gz", dev)
        write_jsonl_gz(train_path, rest)
        splits = manifest[name]["splits"]
        source = splits["train"]
        for split, records in (("dev", dev), ("train", rest)):
            path = out / name / f"{split}.jsonl.gz"
            splits[split] = {
                **source,
                "file": path.name,
                "count": len(records),
                "with_source_answers": sum(1 for r in records if r["source_answers"] is not None),
                "boolean_source_answers": sum(
                    1 for r in records if r["source_answers"] is not None and "boolean" in r["source_answers"]
                ),
                "bytes": path.stat().st_size,
                "sha256": _sha256(path),
                "carved": {**counts, "seed": DEV_SEED, "role": split},
            }
        note = (
            f"\n## dev split\n\n`dev.jsonl.gz`: {len(dev)} questions carved from the source train split "
            f"(seed {DEV_SEED}, `saga_dspy.eval.loading.splits.carve_dev`), none colliding with any test question of a "
            f"{kg} benchmark ({counts['collide_with_test']} train questions do; "
            f"{counts['dev_twins_of_earlier_dev']} dev questions are twins of an earlier benchmark's dev "
            f"questions, preferred so the same questions are held out everywhere). `train.jsonl.gz` holds the "
            f"other {len(rest)}.\n"
        )
        with open(out / name / "PROVENANCE.md", "a", encoding="utf-8") as fh:
            fh.write(note)


def _write_provenance(
    bench_dir: Path, spec: BenchSpec, kg: str, rows: list[str], licences: list[str], sources: Path
) -> None:
    lines = [f"# {spec.title} — `{spec.name}`", "", f"Knowledge graph: **{kg}**.", ""]
    if spec.splits:
        lines += [
            "| split | source (repository, path, commit) | source questions | bundled | dropped "
            "| with source answers |",
            "|---|---|---|---|---|---|",
            *rows,
            "",
        ]
    lines += [f"- {note}" for note in spec.notes]
    lines += [
        "",
        "Built by `scripts/build_benchmarks.py` from the public files listed in each source folder's "
        "SOURCES.txt (repository, path, commit). One record per line (gzip, source order) with the fields "
        "`id, question, sparql, kg, split, answer_type, aggregation, source_answers` (`source_answers`: the "
        "dataset's own stored answers as SPARQL-JSON, normalised, or null).",
        "",
        "Licence files copied here: " + (", ".join(f"`{n}`" for n in licences) if licences else "none (see notes)."),
        "",
        "Frozen gold (`gold-<endpoint>-<split>.jsonl.gz`, if present) is the result of executing each gold query "
        "on that endpoint, with the endpoint name and date; its `.summary.json` gives answerable counts, errors and "
        "agreement with `source_answers`.",
        "",
    ]
    (bench_dir / "PROVENANCE.md").write_text("\n".join(lines), encoding="utf-8")


# --------------------------------------------------------------------------- gold


def freeze_all(out: Path, names: list[str] | None, splits: list[str] | None) -> None:
    from saga_dspy.config import Settings, apply_offline_env
    from saga_dspy.eval.loading.gold import freeze_gold
    from saga_dspy.kg.endpoint import open_endpoint

    apply_offline_env()
    settings = Settings()
    endpoint = open_endpoint(settings)
    tag = "embedded" if settings.is_embedded else None
    try:
        for name, info in BENCHMARKS.items():
            if info.kg != settings.kg or (names and name not in names):
                continue
            for split in info.splits:
                if splits and split not in splits:
                    continue
                source = out / name / f"{split}.jsonl.gz"
                if not source.exists():
                    continue
                target = out / name / gold_file_name(tag or endpoint.name, split)
                summary = freeze_gold(name, split, endpoint, target, settings=settings, data_file=source, progress=True)
                print(
                    f"{name}/{split}: {summary['answerable']}/{summary['total']} answerable, "
                    f"empty {summary['empty']}, errors {summary['errors']}, "
                    f"agreement {summary['source_answers']}",
                    flush=True,
                )
    finally:
        close = getattr(endpoint, "close", None)
        if callable(close):
            close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--sources",
        type=Path,
        default=os.environ.get("SAGA_BENCHMARK_SOURCES") or None,
        help="source data folder (with benchmarks/; default: $SAGA_BENCHMARK_SOURCES)",
    )
    parser.add_argument("--out", type=Path, default=REPO / "data" / "benchmarks", help="output folder")
    parser.add_argument(
        "--freeze-gold", action="store_true", help="execute the gold queries on the configured endpoint"
    )
    parser.add_argument("--benchmarks", nargs="*", help="only these benchmarks (freezing)")
    parser.add_argument("--splits", nargs="*", help="only these splits (freezing)")
    args = parser.parse_args(argv)
    if not args.sources and not args.freeze_gold:
        parser.error("give --sources to build, and/or --freeze-gold")
    if args.sources:
        if not (args.sources / "benchmarks").is_dir():
            parser.error(f"{args.sources} has no benchmarks/ folder")
        manifest = build(args.sources, args.out)
        for name, entry in manifest.items():
            for split, s in entry["splits"].items():
                print(
                    f"{name:10s} {split:6s} {s['count']:6d} / {s['source_count']:6d}  {s['bytes']:9,d} B  "
                    f"dropped {s['dropped'] or '-'}"
                )
    if args.freeze_gold:
        freeze_all(args.out, args.benchmarks, args.splits)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
