"""How much of the dev questions the mined lexicon covers (sizes from its own counts).

    python benchmarks/lexicon_coverage.py [--split dev]

Per Wikidata benchmark split: the share of questions with at least one content word the lexicon gives a
property share for (MIN_SUPPORT train questions behind it), of content words with one, of questions whose head
noun has a class or answer entry that decides, of questions a wh-phrase opening or head noun decides the
answer kind or form for, and of questions whose frame ("where is _ from") has MIN_SUPPORT train questions.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from saga_dspy.config import Settings, apply_offline_env  # noqa: E402
from saga_dspy.eval.loading.datasets import BENCHMARKS, load_records  # noqa: E402
from saga_dspy.grounding.lexicon import MIN_SUPPORT, load_lexicon, question_keys  # noqa: E402
from saga_dspy.grounding.ranking import word_groups  # noqa: E402
from saga_dspy.grounding.words import head_phrases, phrase_key, question_frame  # noqa: E402


def coverage(lexicon, questions: list[str]) -> dict:
    with_word = words = covered = with_head = decided = framed = 0
    for q in questions:
        groups = word_groups(q)
        hits = [
            g for g in groups if any(lexicon.words.get(f, 0) >= MIN_SUPPORT and lexicon.properties.get(f) for f in g)
        ]
        words += len(groups)
        covered += len(hits)
        with_word += bool(hits)
        keys = [phrase_key(p) for p in head_phrases(q, counted=True)]
        with_head += any(lexicon.item_class(k) or lexicon.answer(k) for k in keys)
        decided += any(lexicon.vote(question_keys(q), t) for t in ("kind", "form"))
        framed += lexicon.frames.get(question_frame(q), {}).get("n", 0) >= MIN_SUPPORT
    n = len(questions) or 1
    pct = lambda a, b: round(100.0 * a / b, 1) if b else None  # noqa: E731
    return {
        "questions": len(questions),
        "with_a_property_word_pct": pct(with_word, n),
        "content_words_with_a_property_share_pct": pct(covered, words),
        "head_noun_with_a_class_or_answer_pct": pct(with_head, n),
        "kind_or_form_decided_pct": pct(decided, n),
        "frame_with_support_pct": pct(framed, n),
    }


def main() -> int:
    apply_offline_env()
    parser = argparse.ArgumentParser()
    parser.add_argument("--split", default="dev")
    args = parser.parse_args()
    settings = Settings()
    lexicon = load_lexicon(settings)
    out = {"lexicon": lexicon.meta.get("counts"), "mined_questions": lexicon.meta.get("questions"), "splits": {}}
    for name, info in BENCHMARKS.items():
        if info.kg != "wikidata" or not info.bundled:
            continue
        try:
            split = info.resolve_split(args.split)
        except ValueError:
            continue
        records = load_records(name, split, settings)
        out["splits"][f"{name}/{split}"] = coverage(lexicon, [r.get("question") or "" for r in records])
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
