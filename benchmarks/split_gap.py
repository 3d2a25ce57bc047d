"""How far apart are the LLM-free candidate's scores on a benchmark's dev split, its test split and its train folds?

    .venv/bin/python benchmarks/split_gap.py --dataset wwq --dev results/components/s28-wwq-dev.json \\
        --test results/components/s28-wwq-test.json --cv results/cv/s29.json [--returned] [--json OUT]

Reads `stats components --json` files (one row per answerable question) and a `benchmarks/lexicon_cv.py` file
(its out-of-fold rows for the dataset): each set's mean candidate F1 (as run; `--returned`: as the program returns
it) and the differences dev - test, dev - train folds and train folds - test, each with a bootstrap interval (each
split resampled within itself, `eval.scoring.significance.set_bootstrap`). Dev above the out-of-fold train figure by
more than chance says the choices fitted dev; test below both says the test split differs from the other two.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from saga_dspy.eval.running.records import write_json  # noqa: E402
from saga_dspy.eval.scoring.significance import set_bootstrap  # noqa: E402


def component_scores(path: Path, key: str) -> list[float]:
    """A components report's per-question candidate F1 (0 where there is no candidate)."""
    report = json.loads(path.read_text(encoding="utf-8"))
    return [row.get(key) or 0.0 for row in report["candidate_per_question"]]


def cv_scores(path: Path, dataset: str, key: str) -> list[float]:
    """A cross-validation report's out-of-fold F1 of the dataset's questions (0 where there is no candidate)."""
    report = json.loads(path.read_text(encoding="utf-8"))
    return [(row["out_of_fold"] or {}).get(key) or 0.0 for row in report["per_question"].get(dataset, [])]


def gaps(sets: dict[str, list[float]]) -> dict[str, dict]:
    out = {}
    for a, b in (("dev", "test"), ("dev", "train_folds"), ("train_folds", "test")):
        if sets.get(a) and sets.get(b):
            c = set_bootstrap(sets[a], sets[b])
            out[f"{a} - {b}"] = {k: round(v, 3) if isinstance(v, float) else v for k, v in c.as_dict().items()}
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--dev", type=Path)
    parser.add_argument("--test", type=Path)
    parser.add_argument("--cv", type=Path, help="a benchmarks/lexicon_cv.py report")
    parser.add_argument("--returned", action="store_true", help="F1 as the program returns the candidate")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    key = "returned_f1" if args.returned else "f1"
    sets = {
        "dev": component_scores(args.dev, key) if args.dev else [],
        "test": component_scores(args.test, key) if args.test else [],
        "train_folds": cv_scores(args.cv, args.dataset, key) if args.cv else [],
    }
    report = {"dataset": args.dataset, "score": key, "gaps": gaps(sets)}
    for name, row in report["gaps"].items():
        print(
            f"{args.dataset} {name}: {row['mean_a']:.3f} - {row['mean_b']:.3f} = {row['delta']:+.3f} "
            f"[{row['low']:+.3f}, {row['high']:+.3f}] (n = {row['n_a']}, {row['n_b']})"
        )
    if args.json:
        write_json(args.json, report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
