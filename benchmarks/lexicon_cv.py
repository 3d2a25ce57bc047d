"""Cross-validated grounding on the train splits: each fold's questions measured with a lexicon mined without them.

    .venv/bin/python benchmarks/lexicon_cv.py --folds 5 --json results/cv/NAME.json

The train questions the lexicon is mined from (`scripts/mine_lexicon.py`) are split into folds by their gold
query's entity constants (questions about the same entities share a fold, so a paraphrase never sits on both
sides). For each fold the lexicon is mined from the other folds and `stats components`' LLM-free candidate query
is run on the fold's questions with it; the same questions are also run with the lexicon mined from every fold
(in sample) and with no lexicon at all (`--lexicon none`: the grammar alone). The out-of-fold figure is what the
grounding does on train questions it was not mined from: a selection measure over several hundred questions that
never touches dev or test. Per-question rows are kept so two runs can be compared question by question.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "scripts"))

from mine_lexicon import TRAIN, Question, mine_questions, train_questions  # noqa: E402

from saga_dspy.config import Settings, apply_offline_env  # noqa: E402
from saga_dspy.eval.running.records import write_json  # noqa: E402
from saga_dspy.eval.stats.components import component_stats  # noqa: E402
from saga_dspy.services import KgServices  # noqa: E402

SIDES = ("out_of_fold", "in_sample", "no_lexicon")
MINER_SOURCES = ("scripts/mine_lexicon.py", "saga_dspy/grounding/words.py", "saga_dspy/grounding/lexicon.py")


def fold_of(q: Question, folds: int) -> int:
    """The question's fold: a stable hash of its gold query's entity constants (its text where it has none)."""
    key = " ".join(sorted(q.entities)) or q.text.lower()
    return int(hashlib.sha256(key.encode("utf-8")).hexdigest(), 16) % folds


def lexicon_key(questions: list[Question]) -> str:
    """What a kept fold lexicon was mined from: its questions and the miner's code (a changed miner mines anew)."""
    digest = hashlib.sha256()
    for rel in MINER_SOURCES:
        digest.update((REPO / rel).read_bytes())
    for key in sorted(f"{q.rec['benchmark']}:{q.rec['id']}" for q in questions):
        digest.update(key.encode("utf-8") + b"\n")
    return digest.hexdigest()[:12]


def _run(
    settings: Settings, kg: KgServices, by_benchmark: dict[str, list[str]], log
) -> dict[str, tuple[dict[str, dict], int]]:
    """Per benchmark, `component_stats`' candidate rows on those question ids (by id) and how many are answerable."""
    out = {}
    for name, ids in by_benchmark.items():
        if not ids:
            continue
        report = component_stats(
            settings,
            name,
            "train",
            endpoint=kg.endpoint,
            search=kg.search,
            schema=kg.schema,
            hierarchy=kg.hierarchy,
            ids=ids,
            log=log,
        )
        rows = {row["id"]: row for row in report["candidate_per_question"]}
        out[name] = rows, report["candidate_query"]["answerable_questions"]
    return out


def summarise(rows: dict[str, list[dict[str, Any]]], answerable: dict[str, int]) -> dict[str, Any]:
    """Mean F1 as run and as returned over each benchmark's answerable questions (a question with no candidate
    scores 0), each lexicon side by side."""
    out = {}
    for name, items in rows.items():
        n = answerable.get(name, 0)
        figure = {"answerable_questions": n}
        for side in SIDES:
            for key in ("f1", "returned_f1"):
                scores = [r[side][key] if r.get(side) else 0.0 for r in items]
                figure[f"{side}_{key}"] = round(sum(scores) / n, 3) if n else None
        out[name] = figure
    return out


def main(argv: list[str] | None = None) -> int:
    apply_offline_env()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--json", type=Path, help="write the figures and per-question rows here")
    parser.add_argument(
        "--lexicons",
        type=Path,
        help="keep the fold lexicons here and reuse those mined from the same questions and code",
    )
    args = parser.parse_args(argv)
    log = lambda msg: print(msg, file=sys.stderr)  # noqa: E731
    started = time.monotonic()
    settings = Settings()
    questions, provenance = train_questions(settings, log)
    fold = {id(q): fold_of(q, args.folds) for q in questions}
    rows: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
    answerable: dict[str, int] = defaultdict(int)
    with tempfile.TemporaryDirectory() as tmp, KgServices(settings) as kg:
        where = args.lexicons or Path(tmp)

        def mined(name: str, subset: list[Question]) -> Path:
            path = where / f"{name}-{lexicon_key(subset)}.json.gz"
            return path if path.is_file() else mine_questions(subset, kg.endpoint, kg.schema, log).save(path)

        every = mined("all", questions)
        for k in range(args.folds):
            held = [q for q in questions if fold[id(q)] == k]
            path = mined(f"fold{k}-of-{args.folds}", [q for q in questions if fold[id(q)] != k])
            ids = {name: [str(q.rec["id"]) for q in held if q.rec["benchmark"] == name] for name in TRAIN}
            sides = {
                "out_of_fold": _run(settings.model_copy(update={"lexicon": str(path)}), kg, ids, log),
                "in_sample": _run(settings.model_copy(update={"lexicon": str(every)}), kg, ids, log),
                "no_lexicon": _run(settings.model_copy(update={"lexicon": "none"}), kg, ids, log),
            }
            for name, qids in ids.items():
                answerable[name] += sides["out_of_fold"].get(name, ({}, 0))[1]
                for qid in qids:
                    found = {side: got.get(name, ({}, 0))[0].get(qid) for side, got in sides.items()}
                    if any(found.values()):
                        rows[name][qid] = {"id": qid, "fold": k, **found}
            log(f"fold {k}: {len(held)} questions")
    per_benchmark = {name: sorted(items.values(), key=lambda r: r["id"]) for name, items in rows.items()}
    report = {
        "folds": args.folds,
        "mined_questions": len(questions),
        "provenance": provenance,
        "figures": summarise(per_benchmark, answerable),
        "per_question": per_benchmark,
        "seconds": round(time.monotonic() - started, 1),
    }
    print(json.dumps(report["figures"], indent=1))
    if args.json:
        write_json(args.json, report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
