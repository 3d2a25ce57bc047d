"""Bundled benchmark files, the loaders, gold freezing and the answerable filter."""

from __future__ import annotations

import gzip
import json
import os
import shutil
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

from saga_dspy.config import Settings, default_data_dir  # noqa: E402
from saga_dspy.eval.loading.datasets import (
    BENCHMARKS,
    GOLD_FIELDS,
    RECORD_FIELDS,
    filter_report,
    gold_file_name,
    load_benchmark,
    read_gold,
    read_records,
    write_jsonl_gz,
)
from saga_dspy.eval.loading.gold import freeze_gold  # noqa: E402
from saga_dspy.kg.errors import QuerySyntaxError, QueryTimeout  # noqa: E402
from saga_dspy.kg.results import AskResult, Binding, SelectResult, parse_sparql_json  # noqa: E402

BENCH_DIR = default_data_dir() / "benchmarks"

# Source counts (the source README and files); LC-QuAD 2.0 drops info.invalid (none in this copy).
EXPECTED = {
    ("qald7", "train"): 76,  # the source's 100 less the 24 carved into dev (saga_dspy.eval.loading.splits)
    ("qald7", "dev"): 24,
    ("qald7", "test"): 50,
    ("qald9plus", "train"): 281,  # 371 less 90 dev
    ("qald9plus", "dev"): 90,
    ("qald9plus", "test"): 136,
    ("qald10", "train"): 297,  # 412 less 115 dev
    ("qald10", "dev"): 115,
    ("qald10", "test"): 394,
    ("wwq", "train"): 2431,
    ("wwq", "dev"): 454,
    ("wwq", "test"): 1431,
    ("spinach", "dev"): 155,
    ("spinach", "test"): 165,
    ("lcquad2", "test"): 5715,
    ("webqsp", "train"): 3453,
    ("webqsp", "test"): 1639,
    ("cwq", "val"): 3519,
    ("cwq", "test"): 3531,
}


def _sources() -> Path | None:
    for cand in (os.environ.get("SAGA_BENCHMARK_SOURCES"), Path(__file__).parents[3] / "shared" / "data"):
        if cand and (Path(cand) / "benchmarks").is_dir():
            return Path(cand) / "benchmarks"
    return None


SOURCES = _sources()


def _source_count(name: str, split: str) -> int:
    """Count the questions of a source file independently of the build script."""
    files = {
        ("qald7", "train"): "qald7/qald-7-train-en-wikidata.json",
        ("qald7", "test"): "qald7/qald-7-test-en-wikidata.json",
        ("qald9plus", "train"): "qald9plus/spinach_qald9plus_en_train.json",
        ("qald9plus", "test"): "qald9plus/spinach_qald9plus_en_test.json",
        ("qald10", "train"): "qald10/grasp_qald10_train.jsonl",
        ("qald10", "test"): "qald10/qald_10.json",
        ("wwq", "train"): "wwq/wwq_train.json",
        ("wwq", "dev"): "wwq/wwq_dev.json",
        ("wwq", "test"): "wwq/grasp_wwq_test.jsonl",
        ("spinach", "dev"): "spinach/dev.json",
        ("spinach", "test"): "spinach/test.json",
        ("lcquad2", "test"): "lcquad2/grasp_lcquad2_test.jsonl",
        ("webqsp", "train"): "freebase/grasp_wqsp_train.jsonl",
        ("webqsp", "test"): "freebase/grasp_wqsp_test.jsonl",
        ("cwq", "val"): "freebase/grasp_cwq_val.jsonl",
        ("cwq", "test"): "freebase/grasp_cwq_test.jsonl",
    }
    path = SOURCES / files[(name, split)]
    if path.suffix == ".jsonl":
        rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        return sum(1 for r in rows if not (r.get("info") or {}).get("invalid"))
    obj = json.loads(path.read_text(encoding="utf-8"))
    return len(obj["questions"] if isinstance(obj, dict) else obj)


# --------------------------------------------------------------------------- bundled files


def test_registry_matches_bundled_files():
    bundled = {(n, s) for n, info in BENCHMARKS.items() for s in info.splits}
    assert bundled == set(EXPECTED)
    for name, info in BENCHMARKS.items():
        assert (BENCH_DIR / name / "PROVENANCE.md").exists()
        for split in info.splits:
            assert (BENCH_DIR / name / f"{split}.jsonl.gz").exists()
        for role in ("test", "dev", "train"):
            assert getattr(info, role) in (None, *info.splits)
    assert not BENCHMARKS["grailqa"].bundled
    assert "absent" in (BENCH_DIR / "grailqa" / "PROVENANCE.md").read_text().lower()


@pytest.mark.parametrize("name,split", sorted(EXPECTED))
def test_counts_per_split(name, split):
    records = read_records(BENCH_DIR / name / f"{split}.jsonl.gz")
    assert len(records) == EXPECTED[(name, split)]
    manifest = json.loads((BENCH_DIR / "MANIFEST.json").read_text())
    assert manifest[name]["splits"][split]["count"] == len(records)


@pytest.mark.skipif(SOURCES is None, reason="source data not available")
@pytest.mark.parametrize("name,split", sorted(EXPECTED))
def test_counts_match_the_sources(name, split):
    from saga_dspy.eval.loading.splits import DEV_SPLITS

    bundled = len(read_records(BENCH_DIR / name / f"{split}.jsonl.gz"))
    if name in DEV_SPLITS and split in ("train", "dev"):  # dev is carved from the source's train
        assert _source_count(name, "train") == bundled + len(
            read_records(BENCH_DIR / name / f"{'dev' if split == 'train' else 'train'}.jsonl.gz")
        )
    else:
        assert _source_count(name, split) == bundled


@pytest.mark.parametrize("name,split", sorted(EXPECTED))
def test_schema(name, split):
    info = BENCHMARKS[name]
    records = read_records(BENCH_DIR / name / f"{split}.jsonl.gz")
    ids = set()
    for rec in records:
        assert tuple(rec) == RECORD_FIELDS
        assert isinstance(rec["id"], str) and rec["id"] not in ids
        ids.add(rec["id"])
        assert isinstance(rec["question"], str) and rec["question"].strip() == rec["question"] and rec["question"]
        assert isinstance(rec["sparql"], str) and rec["sparql"].strip()
        assert rec["kg"] == info.kg and rec["split"] == split
        assert rec["answer_type"] is None or isinstance(rec["answer_type"], str)
        assert rec["aggregation"] is None or isinstance(rec["aggregation"], bool)
        if rec["source_answers"] is not None:
            parse_sparql_json(rec["source_answers"])


def test_source_answers_and_annotations():
    q10 = read_records(BENCH_DIR / "qald10" / "test.jsonl.gz")
    assert sum(1 for r in q10 if "boolean" in r["source_answers"]) == 61
    assert sum(1 for r in q10 if r["aggregation"]) == 102
    assert q10[0]["question"] == "After whom is the Riemannian geometry named?"
    q7 = read_records(BENCH_DIR / "qald7" / "test.jsonl.gz")
    assert sum(1 for r in q7 if r["answer_type"] == "boolean") == 8
    assert all(r["source_answers"] is not None for r in q7)
    wwq_dev = read_records(BENCH_DIR / "wwq" / "dev.jsonl.gz")
    assert all(r["source_answers"]["results"]["bindings"] for r in wwq_dev)
    for name in ("qald9plus", "spinach", "lcquad2", "webqsp", "cwq"):
        for split in BENCHMARKS[name].splits:
            assert all(r["source_answers"] is None for r in read_records(BENCH_DIR / name / f"{split}.jsonl.gz"))


def test_licences_next_to_files():
    assert (BENCH_DIR / "qald10" / "LICENSE_QALD-10").exists()
    assert (BENCH_DIR / "qald9plus" / "LICENSE_QALD_9_plus").exists()
    assert (BENCH_DIR / "spinach" / "LICENSE_spinach").exists()


def test_total_size_is_small():
    total = sum(p.stat().st_size for p in BENCH_DIR.rglob("*") if p.is_file())
    assert total < 8_000_000


def test_write_jsonl_gz_is_deterministic(tmp_path):
    recs = [{"id": "1", "question": "é?"}, {"id": "2", "question": "b"}]
    write_jsonl_gz(tmp_path / "a.jsonl.gz", recs)
    write_jsonl_gz(tmp_path / "b.jsonl.gz", recs)
    a = (tmp_path / "a.jsonl.gz").read_bytes()
    assert a == (tmp_path / "b.jsonl.gz").read_bytes()
    assert a[4:8] == b"\0\0\0\0"  # gzip mtime
    assert read_records(tmp_path / "a.jsonl.gz") == recs


# --------------------------------------------------------------------------- loader


def test_load_bundled_benchmark():
    ds = load_benchmark("qald10", "test")
    assert len(ds) == 394
    assert list(ds.column_names) == list(RECORD_FIELDS + GOLD_FIELDS)
    assert isinstance(ds[0]["question"], str)
    assert ds.features["question"].dtype == "string"
    assert json.loads(ds[0]["source_answers"])["results"]["bindings"]


def test_split_roles_and_errors():
    assert len(load_benchmark("cwq", "dev")) == 3519  # the dev role is CWQ's val split
    assert set(load_benchmark("spinach", "test")["kg"]) == {"wikidata"}
    with pytest.raises(ValueError, match="no split"):
        load_benchmark("spinach", "train")
    with pytest.raises(ValueError, match="unknown benchmark"):
        load_benchmark("nonesuch", "test")
    with pytest.raises(ValueError, match="not bundled"):
        load_benchmark("grailqa", "test")
    with pytest.raises(ValueError, match="hub dataset"):  # offline and not cached
        load_benchmark("nobody/nonexistent-dataset", "test")


def test_load_user_data_file(tmp_path):
    path = tmp_path / "mine.jsonl"
    path.write_text(
        "\n".join(
            json.dumps(r)
            for r in [
                {"id": 1, "question": " Who? ", "sparql": "SELECT ?x WHERE {}", "split": "test"},
                {
                    "id": "b",
                    "question": [{"language": "de", "string": "Was?"}, {"language": "en", "string": "What?"}],
                    "sparql": "ASK {}",
                    "split": "test",
                    "source_answers": {"head": {}, "boolean": True},
                },
                {"id": "c", "question": "Other split", "sparql": "ASK {}", "split": "train"},
            ]
        )
    )
    ds = load_benchmark("mine", "test", data_file=path)
    assert ds["id"] == ["1", "b"]
    assert ds["question"] == ["Who?", "What?"]
    assert json.loads(ds[1]["source_answers"]) == {"head": {}, "boolean": True}
    assert ds["gold"] == [None, None]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps([{"id": 1, "sparql": "ASK {}"}]))
    with pytest.raises(ValueError, match="question"):
        load_benchmark("bad", "test", data_file=bad)


# --------------------------------------------------------------------------- gold freezing


class FakeEndpoint:
    """Answers from a dict: query text -> typed result or an exception to raise."""

    name = "fake-endpoint"

    def __init__(self, answers):
        self.answers = answers
        self.calls = []

    def query(self, sparql, timeout=None):
        self.calls.append((sparql, timeout))
        out = self.answers[sparql]
        if isinstance(out, Exception):
            raise out
        return out


WD = "http://www.wikidata.org/entity/"


def _select(*qids, var="x"):
    return SelectResult([var], [{var: Binding("uri", WD + q)} for q in qids])


def _sa(*qids):
    return _select(*qids).to_json()


@pytest.fixture
def small_benchmark(tmp_path):
    records = [
        {"id": "agree", "question": "q1", "sparql": "Q_AGREE", "source_answers": _sa("Q1", "Q2")},
        {"id": "differ", "question": "q2", "sparql": "Q_DIFFER", "source_answers": _sa("Q1", "Q2")},
        {"id": "empty", "question": "q3", "sparql": "Q_EMPTY", "source_answers": None},
        {"id": "broken", "question": "q4", "sparql": "Q_BROKEN", "source_answers": _sa("Q9")},
        {"id": "slow", "question": "q5", "sparql": "Q_SLOW"},
        {"id": "ask", "question": "q6", "sparql": "Q_ASK", "source_answers": {"head": {}, "boolean": False}},
        {"id": "ask_unconfirmed", "question": "q7", "sparql": "Q_ASK2", "source_answers": None},
    ]
    path = tmp_path / "small.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n")
    endpoint = FakeEndpoint(
        {
            "Q_AGREE": _select("Q2", "Q1"),
            "Q_DIFFER": _select("Q1"),
            "Q_EMPTY": SelectResult(["x"], []),
            "Q_BROKEN": QuerySyntaxError("Parse error at line 1: unexpected token"),
            "Q_SLOW": QueryTimeout("the query ran past 5.0 s"),
            "Q_ASK": AskResult(False),
            "Q_ASK2": AskResult(False),
        }
    )
    return path, endpoint


def test_freeze_gold_with_fake_endpoint(small_benchmark, tmp_path):
    data_file, endpoint = small_benchmark
    out = tmp_path / "gold-fake-test.jsonl.gz"
    summary = freeze_gold("small", "test", endpoint, out, data_file=data_file, timeout=5.0, date="2025-01-02")
    assert [c[1] for c in endpoint.calls] == [5.0] * 7
    gold = read_gold(out)
    assert list(gold) == ["agree", "differ", "empty", "broken", "slow", "ask", "ask_unconfirmed"]
    assert gold["agree"]["answerable"] and gold["agree"]["source_f1"] == 1.0
    assert parse_sparql_json(gold["agree"]["result"]).rows  # SPARQL-JSON as stored
    assert gold["differ"]["source_f1"] == pytest.approx(2 / 3)
    assert gold["empty"]["answerable"] is False and gold["empty"]["error"] is None
    assert gold["broken"]["error"] == {"kind": "syntax", "message": "Parse error at line 1: unexpected token"}
    assert gold["broken"]["result"] is None and gold["broken"]["answerable"] is False
    assert gold["slow"]["error"]["kind"] == "timeout"
    assert gold["ask"]["answerable"] is True and gold["ask"]["result"] == {"head": {}, "boolean": False}
    # a `false` the dataset does not confirm may only mean the sample lacks the data
    assert gold["ask_unconfirmed"]["answerable"] is False
    assert all(g["endpoint"] == "fake-endpoint" and g["date"] == "2025-01-02" for g in gold.values())

    assert summary["total"] == 7
    assert summary["answerable"] == 3
    assert summary["empty"] == 1
    assert summary["ask_false_unconfirmed"] == 1
    assert summary["errors"] == {"syntax": 1, "timeout": 1}
    # source answers: agree, differ, broken (error: not compared), ask
    assert summary["source_answers"] == {
        "with": 4,
        "compared": 3,
        "agree": 2,
        "agreement": pytest.approx(2 / 3),
        "mean_f1": pytest.approx((1 + 2 / 3 + 1) / 3),
    }
    written = json.loads((tmp_path / "gold-fake-test.summary.json").read_text())
    assert written["answerable"] == 3 and written["endpoint"] == "fake-endpoint"
    # deterministic output for a fixed date
    first = out.read_bytes()
    freeze_gold("small", "test", endpoint, out, data_file=data_file, timeout=5.0, date="2025-01-02")
    assert out.read_bytes() == first


def test_answerable_filter_and_report(small_benchmark, tmp_path):
    data_file, endpoint = small_benchmark
    out = tmp_path / "gold.jsonl.gz"
    freeze_gold("small", "test", endpoint, out, data_file=data_file, date="2025-01-02")
    full = load_benchmark("small", "test", data_file=data_file, gold_file=out)
    assert full["answerable"] == [True, True, False, False, False, True, False]
    assert full["gold_error"] == [None, None, None, "syntax", "timeout", None, None]
    assert json.loads(full[0]["gold"])["results"]["bindings"]
    assert filter_report(full) is None

    ds = load_benchmark("small", "test", data_file=data_file, gold_file=out, answerable_only=True)
    assert ds["id"] == ["agree", "differ", "ask"]
    report = filter_report(ds)
    assert report["total"] == 7 and report["kept"] == 3 and report["left_out"] == 4
    assert report["reasons"] == {"empty": 1, "syntax": 1, "timeout": 1, "ask_false_unconfirmed": 1}

    with pytest.raises(ValueError, match="no frozen gold"):
        load_benchmark("small", "test", data_file=data_file, answerable_only=True)


def test_unfrozen_ids_are_reported(small_benchmark, tmp_path):
    data_file, endpoint = small_benchmark
    out = tmp_path / "gold.jsonl.gz"
    freeze_gold("small", "test", endpoint, out, data_file=data_file, date="2025-01-02")
    partial = [g for g in read_records(out) if g["id"] != "agree"]
    write_jsonl_gz(out, partial)
    ds = load_benchmark("small", "test", data_file=data_file, gold_file=out, answerable_only=True)
    assert ds["id"] == ["differ", "ask"]
    assert filter_report(ds)["reasons"] == {
        "empty": 1,
        "not_frozen": 1,
        "syntax": 1,
        "timeout": 1,
        "ask_false_unconfirmed": 1,
    }


def test_bundled_gold_is_joined_for_the_embedded_endpoint(tmp_path):
    """freeze_gold on a bundled benchmark (copied to a scratch data dir) and the default join."""
    data_dir = tmp_path / "data"
    (data_dir / "benchmarks" / "qald7").mkdir(parents=True)
    shutil.copy(BENCH_DIR / "qald7" / "test.jsonl.gz", data_dir / "benchmarks" / "qald7" / "test.jsonl.gz")
    settings = Settings(data_dir=data_dir)
    records = read_records(data_dir / "benchmarks" / "qald7" / "test.jsonl.gz")
    answers = {r["sparql"]: parse_sparql_json(r["source_answers"]) for r in records}
    answers[records[0]["sparql"]] = QuerySyntaxError("boom")
    endpoint = FakeEndpoint(answers)
    target = data_dir / "benchmarks" / "qald7" / gold_file_name("embedded", "test")
    summary = freeze_gold("qald7", "test", endpoint, target, settings=settings, date="2025-01-02")
    assert endpoint.calls[0][1] == settings.query_timeout
    assert summary["total"] == 50 and summary["errors"] == {"syntax": 1}
    assert summary["source_answers"]["compared"] == 49 and summary["source_answers"]["agree"] == 49

    ds = load_benchmark("qald7", "test", settings=settings)
    assert ds["answerable"].count(True) == 49
    kept = load_benchmark("qald7", "test", settings=settings, answerable_only=True)
    assert len(kept) == 49 and filter_report(kept)["reasons"] == {"syntax": 1}
    # a live endpoint does not get the embedded sample's gold
    live = load_benchmark(
        "qald7", "test", settings=Settings(data_dir=data_dir, endpoint="https://query.wikidata.org/sparql")
    )
    assert set(live["gold"]) == {None}
    with gzip.open(target, "rt") as fh:
        assert json.loads(fh.readline())["endpoint"] == "fake-endpoint"


def _files(*roots: Path) -> dict[str, tuple[int, int]]:
    """Every file and folder under `roots` (the roots too) with its size and modification time."""
    paths = [p for root in roots for p in (root, *root.rglob("*"))]
    return {str(p): (p.stat().st_size, p.stat().st_mtime_ns) for p in paths}


def _set_writable(root: Path, writable: bool) -> None:
    for path in (root, *root.rglob("*")):
        mode = path.stat().st_mode
        path.chmod(mode | 0o200 if writable else mode & ~0o222)


def test_loading_an_eval_set_writes_nothing(tmp_path):
    """Reading an eval set (a bundled split with its gold; a train split, checked against the test splits) works on
    a read-only data and cache directory and writes nothing there; a user file whose gold is not frozen is an error
    that names freeze-gold, not a freeze (that is the run's own step, `gold.freeze_missing_gold`)."""
    from saga_dspy.eval.errors import EvalError
    from saga_dspy.eval.loading.evalset import load_eval_set

    data, cache = tmp_path / "data", tmp_path / "cache"
    shutil.copytree(default_data_dir() / "benchmarks", data / "benchmarks")
    cache.mkdir()
    mine = tmp_path / "mine.jsonl"
    mine.write_text(json.dumps({"id": "q1", "question": "Who?", "sparql": "SELECT ?x WHERE { ?x ?p ?o }"}) + "\n")
    settings = Settings(data_dir=data, cache_dir=cache, dataset="qald10", split="test")
    before = _files(data, cache)
    _set_writable(data, False)
    _set_writable(cache, False)
    try:
        test = load_eval_set(settings, progress=False)
        train = load_eval_set(settings.model_copy(update={"split": "train"}), progress=False)
        assert len(test) and len(train) and test.gold_file and train.filter_report["reasons"].get("test_twin")
        assert _files(data, cache) == before
        with pytest.raises(EvalError, match="freeze-gold --dataset mine"):
            load_eval_set(settings.model_copy(update={"dataset": "mine"}), data_file=mine, progress=False)
    finally:
        _set_writable(data, True)
        _set_writable(cache, True)
    assert _files(data, cache) == before
