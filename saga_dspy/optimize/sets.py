"""The question sets of a compile: train (demonstrations come from it), the valset (candidates are scored on it)
and the report set (compiled vs default, never used for any choice).

Train is the benchmark's train split without the questions that collide with a test or dev question of any
bundled benchmark of the same graph (`eval.loading.splits.held_out_firewall`) or with a valset / report question: no
held-out question, nor a paraphrase or a same-query twin of one, becomes a demonstration. The valset defaults
to the benchmark's dev split; by default a seeded half of it is the valset and the other half the report set.
A report question that collides with a valset question is dropped. Test splits are refused everywhere.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from saga_dspy.config import Settings
from saga_dspy.eval.errors import EvalError
from saga_dspy.eval.loading.datasets import BENCHMARKS
from saga_dspy.eval.loading.evalset import EvalItem, EvalSet, load_eval_set
from saga_dspy.eval.loading.firewall import Firewall
from saga_dspy.eval.loading.gold import freeze_missing_gold
from saga_dspy.eval.loading.splits import held_out_firewall

REST = "rest"  # the report set: the valset split's questions not drawn for the valset


class OptimizeError(EvalError):
    pass


def refuse_test_split(dataset: str, split: str, data_file: str | None = None) -> str:
    """The resolved split, or OptimizeError for a test split (never compile on test questions)."""
    info = BENCHMARKS.get(dataset)
    resolved = split
    if info is not None and data_file is None:
        try:
            resolved = info.resolve_split(split)
        except ValueError as exc:
            raise OptimizeError(str(exc)) from exc
        if resolved == info.test or split == "test":
            usable = [s for s in info.splits if s != info.test]
            raise OptimizeError(
                f"refusing to optimize on {dataset}/{resolved}: it is the test split (compile on "
                f"{' or '.join(usable) if usable else 'another benchmark: this one has only a test split'})"
            )
    elif "test" in split.lower():
        raise OptimizeError(f"refusing to optimize on a split named {split!r}: it looks like a test split")
    return resolved


def parse_set(spec: str, dataset: str) -> tuple[str, str]:
    """(benchmark, split) of `SPLIT` (of `dataset`) or `BENCHMARK:SPLIT`; a test split is refused."""
    bench, _, split = spec.rpartition(":")
    bench = bench or dataset
    if bench not in BENCHMARKS:
        raise OptimizeError(f"unknown benchmark {bench!r} in {spec!r} (one of {', '.join(BENCHMARKS)})")
    return bench, refuse_test_split(bench, split)


@dataclass
class OptimizeSets:
    """The three sets (as EvalSets: what `eval.running.runner.run_variant` runs) and what was dropped on the way."""

    train: EvalSet
    valset: EvalSet
    report: EvalSet
    firewall: dict[str, Any] = field(default_factory=dict)
    held_out: Firewall = field(default_factory=Firewall)  # what no demonstration may collide with

    def items(self, which: str) -> list[EvalItem]:
        return getattr(self, which).items

    def describe(self) -> str:
        return (
            f"train {self.train.name}: {len(self.train)} questions; valset {self.valset.name}: {len(self.valset)}; "
            f"report set {self.report.name}: {len(self.report)}"
        )


def _firewall_of(items: Sequence[EvalItem], source: str) -> Firewall:
    return Firewall.of_records(({"question": i.question, "sparql": i.gold_sparql, "id": i.id} for i in items), source)


def drop_colliding(evalset: EvalSet, firewall: Firewall) -> tuple[EvalSet, int]:
    """(the questions that collide with nothing in `firewall`, how many were dropped)."""
    kept = [i.id for i in evalset.items if not firewall.collides(i.question, i.gold_sparql)]
    return evalset.select_ids(kept), len(evalset) - len(kept)


def _seeded(evalset: EvalSet, seed: int) -> list[str]:
    ids = [i.id for i in evalset.items]
    random.Random(seed).shuffle(ids)
    return ids


def build_sets(
    settings: Settings,
    *,
    train_split: str = "train",
    valset: str = "dev",
    report_set: str = REST,
    valset_size: int | None = None,
    report_size: int | None = None,
    seed: int = 0,
    data_file: str | None = None,
    gold_file: str | None = None,
    progress: bool = False,
    stream=None,
) -> OptimizeSets:
    """The sets of a compile on `settings.dataset` (see the module docstring); says what it dropped on `stream`."""
    dataset = settings.dataset
    split = refuse_test_split(dataset, train_split, data_file)
    val_bench, val_split = parse_set(valset, dataset)

    def load(bench: str, split: str, **files: Any) -> EvalSet:
        freeze_missing_gold(settings, bench, split, progress=progress, **files)
        return load_eval_set(
            settings.model_copy(update={"dataset": bench, "split": split, "limit": None}), progress=progress, **files
        )

    val_all = load(val_bench, val_split)
    order = _seeded(val_all, seed)
    if report_set == REST:
        n_val = (len(order) + 1) // 2 if valset_size is None else min(valset_size, len(order))
        val = val_all.select_ids(order[:n_val])
        report_all = val_all.select_ids(order[n_val:])
    else:
        val = val_all.select_ids(order[:valset_size] if valset_size is not None else order)
        report_all = load(*parse_set(report_set, dataset))
    report, report_twins = drop_colliding(report_all, _firewall_of(val.items, "valset"))
    if report_size is not None:
        report = report.select_ids(_seeded(report, seed)[:report_size])

    train_all = load(dataset, split, data_file=data_file, gold_file=gold_file)
    info = BENCHMARKS.get(dataset)
    held = held_out_firewall(settings, kg=info.kg if info else settings.kg)
    held.extend(_firewall_of(val.items, "valset")).extend(_firewall_of(report.items, "report"))
    train, dropped = drop_colliding(train_all, held)
    train = replace(train, selection={**train.selection, "firewall_dropped": dropped, "seed": seed})
    report_dropped = {"collide_with_valset": report_twins}
    firewall = {"train_dropped": dropped, "held_out_questions": len(held), "report_dropped": report_dropped}
    if stream is not None:
        print(
            f"firewall: dropped {dropped} of the {len(train_all)} answerable {dataset}/{split} questions that "
            f"collide with a test or dev question of a {info.kg if info else settings.kg} benchmark or with the "
            "valset / report set; "
            f"{report_twins} report questions that collide with a valset question",
            file=stream,
        )
    if not len(val):
        raise OptimizeError(f"the valset {val_all.name} has no answerable question")
    return OptimizeSets(train, val, report, firewall, held)


__all__ = ["REST", "OptimizeError", "OptimizeSets", "build_sets", "drop_colliding", "parse_set", "refuse_test_split"]
