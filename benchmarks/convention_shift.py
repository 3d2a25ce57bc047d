"""Do a benchmark's splits follow the same annotation conventions? Train's word -> property majorities, per split.

    .venv/bin/python benchmarks/convention_shift.py --dataset wwq --dataset qald10 --json results/conventions/NAME.json

For the train split's most frequent content words (stemmed, `grounding.words`), the property most of the train
questions saying the word have in their gold query ("speak" -> official language, where it has a majority of
MAJORITY or more among MIN_QUESTIONS questions or more); then, on each split, the share of the questions saying one
of those words whose gold query has the word's train property. A split annotated like train agrees about as
often as train does; a split annotated by other conventions (another source's gold for the same kind of question)
agrees less, and no grounding learned from train or chosen on dev can close that gap. Second, the paraphrase twins:
a train question and a dev or test question the firewall calls the same question by its words (`eval.loading.firewall`,
the text and Jaccard rules), with whether their gold queries use the same properties and, where not, the swap
("what language do people speak in iceland?": official language in train, language used in test). Only gold
queries are read: nothing is run, nothing is chosen from it.
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
from saga_dspy.eval.loading.datasets import BENCHMARKS, load_records  # noqa: E402
from saga_dspy.eval.loading.firewall import Firewall  # noqa: E402
from saga_dspy.eval.loading.splits import without_test_twins  # noqa: E402
from saga_dspy.eval.running.records import write_json  # noqa: E402
from saga_dspy.grounding.ranking import word_groups  # noqa: E402

TOP_WORDS = 80  # train's most frequent content words looked at
MIN_QUESTIONS = 5  # train questions saying a word before its majority is a convention
MAJORITY = 0.4  # the share of them whose gold has the property
WORD_RULES = ("text", "jaccard")  # the firewall's collisions by the question's words, not by its query


def _stems(text: str) -> set[str]:
    """The stems of the text's content words (the property ranking's words, without their other forms)."""
    return {group[0] for group in word_groups(text)}


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


def twins(train: list[dict[str, Any]], held_out: list[dict[str, Any]], source: str) -> dict[str, Any]:
    """The train questions the firewall finds the same as a held-out question by their words: how many, how many
    have gold queries with the same properties, and the swaps (train's properties -> the split's) where not."""
    by_id = {str(r.get("id")): r for r in held_out}
    firewall = Firewall.of_records(held_out, source)
    pairs = same = 0
    swaps: Counter = Counter()
    for rec in train:
        for hit in firewall.collisions(rec.get("question"), rec.get("sparql")):
            if hit.reason in WORD_RULES and hit.id in by_id:
                mine, theirs = (_properties(Question(r, None)) for r in (rec, by_id[hit.id]))
                pairs += 1
                same += mine == theirs
                if mine != theirs:
                    swaps[f"{' '.join(sorted(mine)) or '-'} -> {' '.join(sorted(theirs)) or '-'}"] += 1
    return {
        "pairs": pairs,
        "same_properties": same,
        "share": round(same / pairs, 3) if pairs else None,
        "swaps": dict(swaps.most_common()),
    }


def shift(dataset: str, settings: Settings) -> dict[str, Any]:
    info = BENCHMARKS[dataset]
    splits = {role: getattr(info, role) for role in ("train", "dev", "test") if getattr(info, role, None)}
    read, raw = {}, {}
    for role, split in splits.items():
        raw[role] = records = load_records(dataset, split, settings)
        if role == "train":
            records, _ = without_test_twins(records, dataset, split, settings)
        read[role] = [q for r in records if (q := Question(r, None)).parsed is not None]
    table = conventions(read["train"])
    return {
        "dataset": dataset,
        "conventions": {w: {"property": p, "train_questions": n, "train_share": s} for w, (p, n, s) in table.items()},
        "splits": {role: agreement(questions, table) for role, questions in read.items()},
        "twins": {role: twins(raw["train"], raw[role], f"{dataset}/{splits[role]}") for role in raw if role != "train"},
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
        pairs = {role: (t["same_properties"], t["pairs"]) for role, t in r["twins"].items()}
        print(f"  paraphrase twins with train (same properties, pairs): {pairs}")
    if args.json:
        write_json(args.json, reports)
    return 0


if __name__ == "__main__":
    sys.exit(main())
