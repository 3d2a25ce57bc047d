"""The fixed dev slice of the end-to-end tables: every answerable QALD-10 dev question plus a seeded sample of the
answerable WikiWebQuestions and QALD-9-plus dev questions, written as id files under data/slices/dev60/.

    .venv/bin/python scripts/build_dev_slice.py            # rewrites data/slices/dev60/*.ids

Answerable means what eval keeps by default (frozen gold on the bundled sample, not empty or degenerate); the ids
are read from the bundled gold files alone, so the slice does not depend on a built store. Dev splits only: the
slice is where choices are made, test splits stay untouched.
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from saga_dspy.config import Settings  # noqa: E402
from saga_dspy.eval.loading.evalset import load_eval_set  # noqa: E402

# benchmark -> how many of its answerable dev questions (None: all of them)
PARTS: dict[str, int | None] = {"qald10": None, "wwq": 16, "qald9plus": 12}
SEED = 20261204


def answerable_ids(dataset: str) -> list[str]:
    settings = Settings(dataset=dataset, split="dev")
    return list(load_eval_set(settings, progress=False).data["id"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO / "data" / "slices" / "dev60")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    total = 0
    for dataset, n in PARTS.items():
        ids = answerable_ids(dataset)
        chosen = ids if n is None else sorted(random.Random(f"{SEED}:{dataset}").sample(ids, min(n, len(ids))))
        (args.out / f"{dataset}.ids").write_text("\n".join(chosen) + "\n", encoding="utf-8")
        total += len(chosen)
        print(f"{dataset}: {len(chosen)} of {len(ids)} answerable dev questions")
    print(f"dev slice: {total} questions in {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
