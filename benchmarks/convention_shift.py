"""Do a benchmark's splits follow the same annotation conventions? Train's word -> property majorities, per split.

    .venv/bin/python benchmarks/convention_shift.py --dataset wwq --dataset qald10 --json results/conventions/NAME.json

For the train split's most frequent content words (stemmed, `grounding.words`), the property most of the train
questions saying the word have in their gold query ("speak" -> official language, where it has a majority of
MAJORITY or more among MIN_QUESTIONS questions or more); then, on each split, the share of the questions saying one
of those words whose gold query has the word's train property. A split annotated like train agrees about as
often as train does; a split annotated by other conventions (another source's gold for the same kind of question)
agrees less, and no grounding learned from train or chosen on dev can close that gap. Only gold queries are read:
nothing is run, nothing is chosen from it.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "scripts"))

from mine_lexicon import Question  # noqa: E402

from saga_dspy.config import Settings, apply_offline_env  # noqa: E402
from saga_dspy.eval.datasets import BENCHMARKS, load_records  # noqa: E402
from saga_dspy.eval.records import write_json  # noqa: E402
from saga_dspy.eval.splits import without_test_twins  # noqa: E402
from saga_dspy.grounding.words import STOPWORDS, WORD, stem  # noqa: E402

TOP_WORDS = 80  # train's most frequent content words looked at
MIN_QUESTIONS = 5  # train questions saying a word before its majority is a convention
MAJORITY = 0.4  # the share of them whose gold has the property


def _stems(text: str) -> set[str]:
    return {stem(w) for w in WORD.findall(text.lower()) if w not in STOPWORDS and len(w) > 1}


def _properties(q: Question) -> set[str]:
    return {pid for pid, _, _ in q.props}


def conventions(train: list[Question]) -> dict[str, tuple[str, int, float]]:
    """word -> (its majority property, train questions saying it, the property's share among them)."""
    said: Counter = Counter(w for q in train for w in _stems(q.text))
    out = {}
    for word, n in said.most_common(TOP_WORDS):
        if n < MIN_QUESTIONS:
            break
        props: Counter = Counter(p for q in train if word in _stems(q.text) for p in _properties(q))
        if props:
            pid, k = max(sorted(props.items()), key=lambda item: item[1])
            if k / n >= MAJORITY:
                out[word] = (pid, n, round(k / n, 3))
    return out


def agreement(questions: list[Question], table: dict[str, tuple[str, int, float]]) -> dict[str, Any]:
    """Over (question, convention word it says) pairs: how often the gold query has the word's train property."""
    pairs = agree = 0
    per_word: dict[str, list[int]] = {}
    for q in questions:
        props = _properties(q)
        for word in _stems(q.text) & table.keys():
            hit = table[word][0] in props
            pairs += 1
            agree += hit
            row = per_word.setdefault(word, [0, 0])
            row[0] += 1
            row[1] += hit
    # the same per-word shares weighted by how often train says each word: agreement at train's mix of questions
    weight = {w: table[w][1] for w in per_word}
    mixed = sum(weight[w] * k / n for w, (n, k) in per_word.items()) / sum(weight.values()) if per_word else None
    return {
        "questions": len(questions),
        "pairs": pairs,
        "agreement": round(agree / pairs, 3) if pairs else None,
        "agreement_at_train_mix": round(mixed, 3) if mixed is not None else None,
        "per_word": {w: {"n": n, "agree": round(k / n, 3)} for w, (n, k) in sorted(per_word.items())},
    }


def shift(dataset: str, settings: Settings) -> dict[str, Any]:
    info = BENCHMARKS[dataset]
    splits = {role: getattr(info, role) for role in ("train", "dev", "test") if getattr(info, role, None)}
    read = {}
    for role, split in splits.items():
        records = load_records(dataset, split, settings)
        if role == "train":
            records, _ = without_test_twins(records, dataset, split, settings)
        read[role] = [q for r in records if (q := Question(r, None)).parsed is not None]
    table = conventions(read["train"])
    return {
        "dataset": dataset,
        "conventions": {w: {"property": p, "train_questions": n, "train_share": s} for w, (p, n, s) in table.items()},
        "splits": {role: agreement(questions, table) for role, questions in read.items()},
    }


def main(argv: list[str] | None = None) -> int:
    apply_offline_env()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", dest="datasets", action="append", required=True)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    settings = Settings()
    reports = [shift(name, settings) for name in args.datasets]
    for r in reports:
        figures = {role: (s["agreement"], s["agreement_at_train_mix"], s["pairs"]) for role, s in r["splits"].items()}
        print(f"{r['dataset']}: {len(r['conventions'])} train conventions; agreement (as is, at train's mix, pairs):")
        print(f"  {figures}")
    if args.json:
        write_json(args.json, reports)
    return 0


if __name__ == "__main__":
    sys.exit(main())
