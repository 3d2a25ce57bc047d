"""The fixed dev slice (data/slices/dev60/): at least 60 answerable dev questions from more than one benchmark, and
what scripts/build_dev_slice.py writes from the bundled gold."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from saga_dspy.eval.loading.datasets import load_records

REPO = Path(__file__).resolve().parents[2]
SLICE = REPO / "data" / "slices" / "dev60"


def _slice() -> dict[str, list[str]]:
    return {p.stem: p.read_text(encoding="utf-8").split() for p in sorted(SLICE.glob("*.ids"))}


def test_the_dev_slice_holds_sixty_dev_questions_of_several_benchmarks():
    parts = _slice()
    assert len(parts) >= 2 and sum(len(ids) for ids in parts.values()) >= 60
    for dataset, ids in parts.items():
        assert len(ids) == len(set(ids))
        dev = {r["id"] for r in load_records(dataset, "dev")}
        others = {r["id"] for split in ("train", "test") for r in load_records(dataset, split)}
        assert set(ids) <= dev, dataset
        assert not set(ids) & (others - dev), dataset


def test_the_committed_slice_is_what_the_script_builds(tmp_path, monkeypatch):
    spec = importlib.util.spec_from_file_location("build_dev_slice", REPO / "scripts" / "build_dev_slice.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.main(["--out", str(tmp_path)]) == 0
    built = {p.stem: p.read_text(encoding="utf-8").split() for p in sorted(tmp_path.glob("*.ids"))}
    assert built == _slice()
