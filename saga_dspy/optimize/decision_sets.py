"""The examples of a per-decision compile: its trainset from the train split's gold, its valset from the valset's.

The questions are `optimize.sets.build_sets`' (the same sets as a whole-program compile): train behind the firewall
over every test and dev question of the graph's benchmarks and the valset / report questions, the valset a seeded
part of the dev split, the report set the rest (never used here, kept for the whole-program comparison). Each set's
decision examples are built once and cached (`optimize.decision_data`); the train examples are checked against the
firewall again before use, so no held-out question reaches a demo whatever a cache holds.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import dspy

from saga_dspy.agent.program import SagaProgram
from saga_dspy.optimize.decision_data import DecisionData, DecisionExample, build_decision_data
from saga_dspy.optimize.sets import OptimizeSets


@dataclass
class DecisionSets:
    """One decision's train and valset examples, the datasets they come from, what the firewall dropped."""

    decision: str
    sets: OptimizeSets
    train_data: DecisionData
    val_data: DecisionData
    train: list[DecisionExample] = field(default_factory=list)
    valset: list[DecisionExample] = field(default_factory=list)
    firewall_dropped: int = 0

    def trainset(self) -> list[dspy.Example]:
        return [e.example() for e in self.train]

    def labelled(self, k: int, seed: int) -> list[dspy.Example]:
        """`k` train examples as labelled demos that show every kind of choice (`DecisionExample.kind`) before any
        kind twice: the kinds in order of frequency, one example of each in turn, each kind's drawn seeded. A
        random draw would show a rare choice (leaving the candidates) seldom, and a demo set without it teaches the
        model never to make it."""
        by_kind: dict[str, list[DecisionExample]] = {}
        for example in self.train:
            by_kind.setdefault(example.kind, []).append(example)
        rng = random.Random(seed)
        pools = [rng.sample(group, len(group)) for group in sorted(by_kind.values(), key=len, reverse=True)]
        picked: list[DecisionExample] = []
        while len(picked) < k and any(pools):
            for pool in pools:
                if pool and len(picked) < k:
                    picked.append(pool.pop())
        return [e.example() for e in picked]

    def val_examples(self) -> list[dspy.Example]:
        return [e.example() for e in self.valset]

    def describe(self) -> str:
        return (
            f"{self.decision} decisions: train {len(self.train)} (of {len(self.train_data.of(self.decision))} from "
            f"{len(self.sets.train)} {self.sets.train.name} questions), valset {len(self.valset)} (from "
            f"{len(self.sets.valset)} {self.sets.valset.name} questions); the report set's {len(self.sets.report)} "
            "questions are not used"
        )

    def record(self) -> dict[str, Any]:
        """What config.json / metrics.json say about the examples."""
        return {
            "decision": self.decision,
            "n_train": len(self.train),
            "n_valset": len(self.valset),
            "train_sizes": self.train_data.sizes(),
            "valset_sizes": self.val_data.sizes(),
            "train_skipped": self.train_data.skipped,
            "valset_skipped": self.val_data.skipped,
            "train_cache": _cache_name(self.train_data.cache_file),  # under the cache dir's decisions/
            "valset_cache": _cache_name(self.val_data.cache_file),
            "firewall_dropped": self.firewall_dropped,
            "train_ids": [e.id for e in self.train],
            "valset_ids": [e.id for e in self.valset],
        }


def _cache_name(path: str | None) -> str | None:
    return Path(path).name if path else None


def decision_sets(
    program: SagaProgram,
    sets: OptimizeSets,
    decision: str,
    *,
    train_size: int | None = None,
    seed: int = 0,
    use_cache: bool = True,
    progress: bool = False,
) -> DecisionSets:
    """The decision's examples of `sets` (built or read from the cache); at most `train_size` train examples, a seeded
    draw."""
    train_data = build_decision_data(
        program, sets.train.items, name=sets.train.name, use_cache=use_cache, progress=progress
    )
    val_data = build_decision_data(
        program, sets.valset.items, name=f"{sets.valset.name}-valset", use_cache=use_cache, progress=progress
    )
    held = sets.held_out
    train = [e for e in train_data.of(decision) if not held.collides(e.question, e.gold_sparql)]
    dropped = len(train_data.of(decision)) - len(train)
    random.Random(seed).shuffle(train)
    if train_size is not None:
        train = train[:train_size]
    return DecisionSets(decision, sets, train_data, val_data, train, val_data.of(decision), dropped)


__all__ = ["DecisionSets", "decision_sets"]
