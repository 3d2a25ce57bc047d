"""benchmarks/form_replay.py: a recorded final query rewritten to the question's form, run on the real store."""

from __future__ import annotations

import json
from pathlib import Path

from helpers.scripts import load_script

REPO = Path(__file__).resolve().parents[2]
SELECT = "SELECT ?c WHERE { wd:Q9439 wdt:P40 ?c }"
COUNT = "SELECT (COUNT(DISTINCT ?c) AS ?count) WHERE { wd:Q9439 wdt:P40 ?c }"


def _run(path: Path, variant: str, gold: dict) -> Path:
    path.mkdir(parents=True)
    (path / "config.json").write_text(json.dumps({"dataset": "qald10", "variant": variant}))
    lines = [
        {"id": "a", "query_form": "COUNT", "sparql": SELECT, "final_source": "extract", "f1": 0.0, "gold": gold},
        {"id": "b", "query_form": "SELECT", "sparql": SELECT, "final_source": "extract", "f1": 0.5, "gold": gold},
    ]
    (path / "predictions.jsonl").write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    return path


def test_an_uncounted_listing_is_counted_where_the_variant_rewrites(tmp_path, endpoint):
    replay = load_script("benchmarks/form_replay.py")
    gold = endpoint.query(COUNT).to_json()
    row = replay.replay_run(_run(tmp_path / "nar", "no-auto-run", gold), endpoint)
    assert (row["n"], row["f1"], row["f1_replayed"]) == (2, 0.25, 0.75)
    assert row["changed"] == [{"id": "a", "source": "extract", "f1": 0.0, "new_f1": 1.0}]
    off = replay.replay_run(_run(tmp_path / "off", "no-form-rewrite", gold), endpoint)
    assert off["changed"] == [] and off["f1_replayed"] == off["f1"] == 0.25
