"""Held-out splits: the dev splits carved from train, and the firewall over everything held out.

Tuning on test questions bends every figure, so each benchmark with training data has a fixed,
seeded dev split carved from its train split (`DEV_SPLITS`), after the firewall: no dev question
collides with any test split of the same graph, so tuning on dev never tunes on a test twin.
The QALD family shares questions (QALD-10 train is QALD-9-plus with fixes), so the dev splits
are carved in order and a later one prefers the questions that are twins of an earlier dev split:
the same questions are held out everywhere and the demo pools lose as few as possible.

`held_out_firewall` indexes every bundled test and dev split of a graph: demo pools and
`optimize`'s default train set are checked against it.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from typing import Any

from saga_dspy.config import DEFAULT_KG, Settings
from saga_dspy.eval.loading.datasets import BENCHMARKS, benchmarks_dir, load_records
from saga_dspy.eval.loading.firewall import Firewall

DEV_SEED = 11
# benchmark -> dev questions carved from its train split, in carving order (QALD-7 and
# QALD-9-plus in proportion to QALD-10's first 100 of 412: 24 of 100 and 90 of 371). QALD-10 holds
# out 115 so that its dev split has over 30 questions answerable on the bundled sample (100 had 28),
# enough for the 30-question local-model slice; the seeded order makes the first 100 the same.
DEV_SPLITS: dict[str, int] = {"qald10": 115, "qald9plus": 90, "qald7": 24}


def carve_dev(
    train: Sequence[dict[str, Any]],
    n: int,
    *,
    seed: int = DEV_SEED,
    tests: Firewall,
    prefer: Firewall | None = None,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, int]]:
    """(dev, rest of train, counts): `n` train records that collide with no test question,
    seeded; those colliding with `prefer` (earlier dev splits) first. Source order is kept in
    both parts."""
    clean = [r for r in train if not tests.collides(r.get("question"), r.get("sparql"))]
    order = list(range(len(clean)))
    random.Random(f"{seed}:{len(train)}").shuffle(order)
    if prefer is not None and len(prefer):
        order.sort(key=lambda i: not prefer.collides(clean[i].get("question"), clean[i].get("sparql")))
    picked = {id(clean[i]) for i in order[:n]}
    dev = [r for r in train if id(r) in picked]
    rest = [r for r in train if id(r) not in picked]
    counts = {
        "train": len(train),
        "collide_with_test": len(train) - len(clean),
        "dev": len(dev),
        "dev_twins_of_earlier_dev": sum(
            1 for r in dev if prefer is not None and len(prefer) and prefer.collides(r.get("question"), r.get("sparql"))
        ),
    }
    return dev, rest, counts


def held_out_splits(kg: str, roles: Iterable[str] = ("test", "dev")) -> list[tuple[str, str]]:
    """(benchmark, split) of every bundled held-out split of a graph."""
    out = []
    for name, info in BENCHMARKS.items():
        if info.kg != kg or not info.bundled:
            continue
        for role in roles:
            split = getattr(info, role, None)
            if split and (name, split) not in out:
                out.append((name, split))
    return out


def held_out_firewall(
    settings: Settings | None = None, kg: str = DEFAULT_KG, roles: Iterable[str] = ("test", "dev")
) -> Firewall:
    """The firewall over every bundled test (and dev) question of `kg` that exists on disk."""
    return benchmark_firewall(dict.fromkeys(name for name, _ in held_out_splits(kg, roles)), settings, roles)


def benchmark_firewall(
    names: Iterable[str], settings: Settings | None = None, roles: Iterable[str] = ("test", "dev")
) -> Firewall:
    """The firewall over the test (and dev) splits of the named benchmarks (unknown names and
    splits not bundled are skipped: a user file has no bundled held-out split; any other failure to
    read one raises, so a firewall never silently lacks a split)."""
    firewall = Firewall()
    for name in dict.fromkeys(names):
        info = BENCHMARKS.get(name)
        for split in dict.fromkeys(getattr(info, role, None) for role in roles) if info else ():
            if split and (benchmarks_dir(settings) / name / f"{split}.jsonl.gz").is_file():
                firewall.extend(Firewall.of_records(load_records(name, split, settings), f"{name}/{split}"))
    return firewall


def is_train_split(dataset: str, split: str) -> bool:
    """Is `split` the bundled benchmark's train split (what `without_test_twins` filters)?"""
    info = BENCHMARKS.get(dataset)
    return info is not None and split == info.train


def without_test_twins(
    records: list[dict[str, Any]], dataset: str, split: str, settings: Settings
) -> tuple[list[dict[str, Any]], int]:
    """A train split's records without the twins of any test question of its graph's benchmarks (the demo pools'
    firewall), and how many went: a benchmark's train split is carved against its own test split only and holds
    others' test questions (QALD-10 train most of QALD-7 test), and whatever reads train (an eval run, component
    figures) must not read test questions. Other splits as they are."""
    if not is_train_split(dataset, split):
        return records, 0
    firewall = held_out_firewall(settings, BENCHMARKS[dataset].kg, roles=("test",))
    kept = [r for r in records if not firewall.collides(r.get("question"), r.get("sparql"))]
    return kept, len(records) - len(kept)


__all__ = [
    "DEV_SEED",
    "DEV_SPLITS",
    "benchmark_firewall",
    "carve_dev",
    "held_out_firewall",
    "held_out_splits",
    "is_train_split",
    "without_test_twins",
]
