"""Behaviour unchanged between two commits, without an LM: what each commit's code writes for

- the committed dev slice (`results/dev60-s28`, every benchmark and variant) rescored with
  `python -m saga_dspy.eval rescore RUN_DIR` (a copy of each run directory; the two final queries stored without
  answers are re-executed on the embedded sample store, the result cache off), and
- a scripted-LM evaluation (`tests/helpers/scripted_lm.py`, as `tests/helpers/runs.py` runs it: `full` and
  `spinach` on six QALD-10 test questions, one thread, on the embedded sample store): predictions.jsonl,
  metrics.json and comparison.json of each variant,

compared file by file (predictions line by line, by question id) with timings and timestamps left out.

    python benchmarks/behaviour_check.py f60c79d [HEAD]         # each commit's code in a temporary worktree
    python benchmarks/behaviour_check.py produce OUT [--tree DIR]
    python benchmarks/behaviour_check.py compare A B

Prints `identical`, or each difference and exits 1. Both commits use this checkout's scripted LM and dev-slice
files, so only the code under test differs. `--cache DIR`: the cache with the built sample store (default:
`.cache/test`, the tests' own; another one is built there first, which takes minutes)."""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
SLICE = REPO / "results" / "dev60-s28"
RUN_FILES = ("predictions.jsonl", "config.json", "metrics.json")
COMPARED = ("predictions.jsonl", "metrics.json", "metrics.rescored.json", "comparison.json")
RUN_IDS = ("0", "5", "17", "9", "13", "8")  # tests/helpers/runs.py: entity, entity, boolean, entity, count, literal
# a key that holds a duration, a time of day or a date: not behaviour
TIMING = re.compile(r"seconds|(^|_)ms$|time|created|resumed|started|finished|elapsed|duration|runtime|^date$")


def _scripted_run(out: str, cache: str, tests: str) -> None:
    """The scripted-LM evaluation, in a process whose `saga_dspy` is the tree under test."""
    import io

    import dspy
    from dspy.clients.cache import Cache

    sys.path.append(tests)  # helpers.scripted_lm: this checkout's, the same LM for both commits
    dspy.cache = Cache(enable_disk_cache=False, enable_memory_cache=True, disk_cache_dir=None)
    import saga_dspy
    from saga_dspy.config import Settings, apply_offline_env

    if not Path(saga_dspy.__file__).resolve().is_relative_to(Path.cwd().resolve()):
        raise SystemExit(f"saga_dspy is imported from {saga_dspy.__file__}, not from the tree under test")
    apply_offline_env()
    try:
        from saga_dspy.eval.loading.evalset import load_eval_set
        from saga_dspy.eval.running.runner import evaluate
    except ImportError:  # eval/ before it was cut into parts
        from saga_dspy.eval.evalset import load_eval_set  # type: ignore[no-redef]
        from saga_dspy.eval.runner import evaluate  # type: ignore[no-redef]
    from helpers.scripted_lm import TwoVariantLM, scripted_plans, wrong_plan

    settings = Settings(
        cache_dir=Path(cache),
        result_cache=False,
        query_timeout=20.0,
        dataset="qald10",
        split="test",
        demos=0,
        max_steps=6,
        mlflow=False,
        lm="scripted",
        lm_cache=False,
        num_threads=1,
    )
    evalset = load_eval_set(settings, ids=list(RUN_IDS), progress=False)
    missed = [evalset.items[1], evalset.items[4]]  # spinach answers these with an item no gold holds
    lm = TwoVariantLM(scripted_plans(evalset.items), {item.question: wrong_plan(item.question) for item in missed})
    evaluate(settings, ["full", "spinach"], out=out, ids=list(RUN_IDS), lm=lm, progress=False, stream=io.StringIO())


def _run(tree: Path, args: list[str]) -> None:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    done = subprocess.run([sys.executable, *args], cwd=tree, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"failed in {tree}: {' '.join(args[:4])}\n{done.stdout[-2000:]}{done.stderr[-4000:]}")


def produce(out: Path, tree: Path, cache: Path) -> None:
    """OUT/rescore/<benchmark>/<variant>/ and OUT/scripted/<variant>/, written by the code of `tree`."""
    out = out.resolve()
    for run in sorted(p.parent for p in SLICE.glob("*/*/predictions.jsonl")):
        copy = out / "rescore" / run.relative_to(SLICE)
        copy.mkdir(parents=True)
        for name in RUN_FILES:
            shutil.copy(run / name, copy / name)
        config = json.loads((copy / "config.json").read_text(encoding="utf-8"))
        config["settings"].update(cache_dir=str(cache), result_cache=False)  # the store here, every query asked
        (copy / "config.json").write_text(json.dumps(config), encoding="utf-8")
        _run(tree, ["-m", "saga_dspy.eval", "rescore", str(copy)])
    code = f"import sys; sys.path.insert(0, {str(REPO / 'benchmarks')!r}); import behaviour_check as b; "
    code += "b._scripted_run(*sys.argv[1:])"
    _run(tree, ["-c", code, str(out / "scripted"), str(cache), str(REPO / "tests")])


def _without_timings(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_timings(v) for k, v in value.items() if not TIMING.search(str(k))}
    if isinstance(value, list):
        return [_without_timings(v) for v in value]
    return value


def _records(path: Path) -> dict[str, Any]:
    """The file's content by key: each predictions line by its question id, else the whole JSON under ''."""
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".jsonl":
        return {str(line["id"]): _without_timings(line) for line in map(json.loads, text.splitlines()) if line}
    return {"": _without_timings(json.loads(text))}


def _short(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, ensure_ascii=False)
    return text if len(text) <= 160 else text[:157] + "..."


def compare(a: Path, b: Path) -> list[str]:
    """Each difference between the files two `produce` runs wrote."""
    names = {p.relative_to(a) for p in a.rglob("*") if p.name in COMPARED}
    names |= {p.relative_to(b) for p in b.rglob("*") if p.name in COMPARED}
    out = []
    for name in sorted(names):
        if not (a / name).is_file() or not (b / name).is_file():
            out.append(f"{name}: only in {a if (a / name).is_file() else b}")
            continue
        left, right = _records(a / name), _records(b / name)
        for key in sorted(set(left) | set(right)):
            x, y = left.get(key), right.get(key)
            if x == y:
                continue
            where = f"{name}" + (f" id {key}" if key else "")
            if isinstance(x, dict) and isinstance(y, dict):
                for field in sorted(set(x) | set(y)):
                    if x.get(field) != y.get(field):
                        out.append(f"{where} {field}: {_short(x.get(field))} != {_short(y.get(field))}")
            else:
                out.append(f"{where}: {_short(x)} != {_short(y)}")
    return out


def _commit_outputs(revs: list[str], work: Path, cache: Path) -> list[Path]:
    outs = []
    for n, rev in enumerate(revs):
        tree, out = work / f"tree-{n}", work / f"out-{n}"
        subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", "-q", str(tree), rev], check=True)
        try:
            print(f"{rev}: producing in {tree}", file=sys.stderr)
            produce(out, tree, cache)
        finally:
            subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(tree)], check=True)
        outs.append(out)
    return outs


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", type=Path, default=REPO / ".cache" / "test", help="cache with the sample store")
    if argv[:1] == ["produce"]:
        parser.add_argument("out", type=Path)
        parser.add_argument("--tree", type=Path, default=REPO, help="the checkout whose code runs (default: this)")
        args = parser.parse_args(argv[1:])
        produce(args.out, args.tree.resolve(), args.cache.resolve())
        return 0
    if argv[:1] == ["compare"]:
        parser.add_argument("a", type=Path)
        parser.add_argument("b", type=Path)
        args = parser.parse_args(argv[1:])
        found = compare(args.a, args.b)
    else:
        parser.add_argument("base", help="the commit to compare against")
        parser.add_argument("head", nargs="?", default="HEAD", help="the commit under test (default: HEAD)")
        parser.add_argument("--keep", type=Path, help="write the outputs here (default: a temporary directory)")
        args = parser.parse_args(argv)
        work = args.keep or Path(tempfile.mkdtemp(prefix="behaviour-"))
        work.mkdir(parents=True, exist_ok=True)
        a, b = _commit_outputs([args.base, args.head], work.resolve(), args.cache.resolve())
        found = compare(a, b)
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    print("identical" if not found else "\n".join(found))
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
