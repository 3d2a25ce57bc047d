"""Candidate programs and their valset scores.

A candidate is the default program changed in what a compile may change: the demo pool its per-question demos
come from, k (demos a question), the predictors' instructions. `Scorer.score` evaluates one on the valset
(`eval.running.runner.run_variant` into `candidates/NN/`, so each is a re-scorable run), logs its F1 as a child MLflow
run of the compile run and as one step of the compile run's `candidate_f1`, prints it, and keeps the best so
far. `pool_candidates` is BootstrapFewShotWithRandomSearch's candidate list, over pools and k instead of fixed
demo sets: the default program (DSPy's zero-shot seed), the gold records alone (its labelled-only seed), gold
plus every bootstrapped trace (its unshuffled seed), then seeded random subsets of the traces with a random k.
"""

from __future__ import annotations

import json
import random
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import KW_ONLY, dataclass, field
from pathlib import Path
from typing import Any

from saga_dspy.agent.compiled_pool import GOLD, CompiledPool
from saga_dspy.agent.pools import choose_pool
from saga_dspy.agent.program import SagaProgram
from saga_dspy.config import Settings
from saga_dspy.errors import Interrupted
from saga_dspy.eval.files import write_file
from saga_dspy.eval.loading.evalset import EvalSet
from saga_dspy.eval.loading.firewall import normalise_text
from saga_dspy.eval.running.runner import run_variant
from saga_dspy.eval.scoring.significance import PairedComparison, paired_by_id
from saga_dspy.eval.tracking.tracker import Tracker
from saga_dspy.services import KgServices

DEFAULT = "default"


@dataclass
class Candidate:
    """A program to score: `pool` None is the default program (the dataset's pool file, the settings' k)."""

    name: str
    pool: CompiledPool | None = None
    instructions: dict[str, str] = field(default_factory=dict)  # predictor name -> instructions
    f1: float | None = None
    em: float | None = None
    per_question: dict[str, float] = field(default_factory=dict)
    run_dir: str | None = None
    versus_default: PairedComparison | None = None  # paired on the valset against the default program

    def key(self) -> tuple:
        pool = None if self.pool is None else (tuple(r["question"] for r in self.pool.records), self.pool.k)
        return pool, tuple(sorted(self.instructions.items()))

    def summary(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "k": None if self.pool is None else self.pool.k,
            "pool": None if self.pool is None else self.pool.sources(),
            "instructions_changed": sorted(self.instructions),
            "f1": self.f1,
            "em": self.em,
            "versus_default": None if self.versus_default is None else self.versus_default.as_dict(),
            "run_dir": self.run_dir,
        }


def read_pool_file(path: str | Path) -> list[dict[str, Any]]:
    """A demo-pool JSONL file's records, each with its `source` (gold-teacher records where unmarked)."""
    records = []
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                record = json.loads(line)
                record.setdefault("source", GOLD)
                records.append(record)
    return records


def default_pool(settings: Settings) -> CompiledPool:
    """The default program's pool and k, as a compiled pool (what a compile that changes nothing carries)."""
    path = choose_pool(settings).path  # `Settings.demo_pool`: the dataset's own pool, else the shared one
    return CompiledPool.of(read_pool_file(path) if path is not None and path.is_file() else [], settings.demos)


def build_program(
    settings: Settings, services: KgServices, candidate: Candidate, cls: type[SagaProgram] = SagaProgram
) -> SagaProgram:
    program = cls(settings.model_copy(update={"program": None}), endpoint=services.endpoint, search=services.search)
    if candidate.pool is not None:
        program.use_pool(candidate.pool)
    set_instructions(program, candidate.instructions)
    return program


def set_instructions(program: SagaProgram, instructions: dict[str, str]) -> None:
    predictors = dict(SagaProgram.named_predictors(program))
    for name, text in instructions.items():
        predictors[name].signature = predictors[name].signature.with_instructions(text)


def instructions_of(program: SagaProgram, baseline: SagaProgram) -> dict[str, str]:
    """The predictors' instructions where `program`'s differ from `baseline`'s."""
    base = {n: p.signature.instructions for n, p in SagaProgram.named_predictors(baseline)}
    return {
        n: p.signature.instructions
        for n, p in SagaProgram.named_predictors(program)
        if p.signature.instructions != base.get(n)
    }


def merge_pool(gold: Sequence[dict[str, Any]], traces: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The gold records with the bootstrapped traces: a trace of a question the pool has replaces that gold record
    (two demos of one question would fill two of a question's k slots with the same thing), others are added."""
    by_text = {normalise_text(t["question"]): t for t in traces}
    kept = [by_text.pop(normalise_text(r["question"]), r) for r in gold]
    return [*kept, *(t for t in traces if normalise_text(t["question"]) in by_text)]


def pool_candidates(
    default: CompiledPool,
    gold: Sequence[dict[str, Any]],
    traces: Sequence[dict[str, Any]],
    *,
    k: int,
    k_choices: Sequence[int],
    n: int,
    seed: int = 0,
) -> list[Candidate]:
    """At most `n` distinct candidates (see the module docstring), the default program (`default`: its pool and
    k) first; a candidate the same as an earlier one is left out."""
    out = [Candidate(DEFAULT, default)]
    fixed = [Candidate(f"gold k={k}", CompiledPool.of(gold, k))]
    if traces:
        fixed.append(Candidate(f"gold+bootstrap({len(traces)}) k={k}", CompiledPool.of(merge_pool(gold, traces), k)))
    seen = {c.key() for c in out}
    for cand in fixed:
        if len(out) < n and cand.key() not in seen:
            out.append(cand)
            seen.add(cand.key())
    for s in range(seed, seed + 20 * n):
        if len(out) >= n:
            break
        rng = random.Random(s)
        size = rng.randint(1, len(traces)) if traces else 0
        picked = sorted(rng.sample(range(len(traces)), size))
        cand_k = rng.choice(list(k_choices))
        cand = Candidate(
            f"seed {s}: gold+bootstrap({size}) k={cand_k}",
            CompiledPool.of(merge_pool(gold, [traces[i] for i in picked]), cand_k),
        )
        if cand.key() not in seen:
            out.append(cand)
            seen.add(cand.key())
    return out


@dataclass(eq=False)
class Scorer:
    """Scores candidates on the valset, each a run directory and a child run; keeps the best (ties: the earlier)
    among those clearly better than the first, the default program (`versus_first`)."""

    settings: Settings
    valset: EvalSet
    services: KgServices
    out_dir: Path
    tracker: Tracker
    _: KW_ONLY
    lm: Any = None
    progress: bool = False
    stream: Any = None  # default: stdout
    on_best: Callable[[Candidate, SagaProgram], None] | None = None
    scored: list[Candidate] = field(default_factory=list, init=False)
    best: Candidate | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        self.stream = self.stream or sys.stdout

    def score(self, candidate: Candidate, program: SagaProgram | None = None) -> Candidate:
        index = len(self.scored)
        program = program or build_program(self.settings, self.services, candidate)
        run_dir = self.out_dir / "candidates" / f"{index:02d}"
        k = program.settings.demos
        settings = self.settings.model_copy(update={"demos": k, "program": None})
        with self.tracker.run(
            f"candidate {index}: {candidate.name}",
            params={"candidate": candidate.name, "k": k, "valset": self.valset.name, "n_valset": len(self.valset)},
            tags={"kind": "optimize-candidate", "out_dir": str(run_dir)},
            nested=True,
        ) as child_id:
            result = run_variant(
                settings,
                self.valset,
                run_dir,
                program=program,
                endpoint=self.services.endpoint,
                lm=self.lm,
                overwrite=True,
                progress=self.progress,
                desc=f"candidate {index}",
                extra_config={"candidate": candidate.summary()},
            )
            self.tracker.log_metrics({"f1": result.metrics.get("f1"), "em": result.metrics.get("em")})
        if result.interrupted:
            raise Interrupted(f"interrupted while scoring candidate {index} ({candidate.name})")
        candidate.f1 = float(result.metrics.get("f1") or 0.0)
        candidate.em = float(result.metrics.get("em") or 0.0)
        candidate.per_question = {line["id"]: float(line["f1"]) for line in result.lines}
        candidate.run_dir = str(run_dir)
        self.scored.append(candidate)
        self.tracker.log_metrics({"candidate_f1": candidate.f1}, step=index)
        candidate.versus_default = versus = self.versus_first(candidate)
        better = self.better(candidate)
        if versus is not None:  # why it was kept or not, beside its F1 in the child run
            self.tracker.log_metrics_to(
                child_id,
                {
                    "versus_default_delta": versus.delta,
                    "versus_default_low": versus.low,
                    "versus_default_high": versus.high,
                },
            )
        print(
            candidate_line(
                index,
                candidate.name,
                f"F1 {candidate.f1:.3f} on {len(self.valset)} questions",
                versus,
                self.scored[0].name,
                better,
            ),
            file=self.stream,
        )
        if better:
            self.best = candidate
            if self.on_best is not None:
                self.on_best(candidate, program)
        return candidate

    def better(self, candidate: Candidate) -> bool:
        """Is the scored candidate (its `versus_default` set) the new best: above the best so far and clearly above
        the default?"""
        if self.best is None:
            return True
        versus = candidate.versus_default
        return (candidate.f1 or 0.0) > (self.best.f1 or 0.0) and versus is not None and versus.low > 0

    def versus_first(self, candidate: Candidate) -> PairedComparison | None:
        """The candidate against the first one scored (the default program) on the valset, paired by question; a
        candidate replaces the default only when the interval's lower end is above zero, so a compile does not
        trade the default for a valset's noise (a few questions of 15). None for the first itself."""
        first = self.scored[0] if self.scored else None
        if first is None or first is candidate:
            return None
        return paired_by_id(first.per_question, candidate.per_question)


def chosen_of(scored: Sequence[Candidate], chosen: str | None) -> Candidate | None:
    """The scored candidate a compile kept (by name); for an optimizer whose own pick is no scored candidate
    (MIPROv2, GEPA: the best of its trials), the highest scored."""
    named = [c for c in scored if c.name == chosen]
    return named[0] if named else max(scored, key=lambda c: c.f1 or 0.0, default=None)


def save_program(program: SagaProgram, path: Path) -> Path:
    """dspy's save into a private scratch directory, then the file written in place by `files.write_file`."""
    path = Path(path)
    with tempfile.TemporaryDirectory(prefix=".save-") as scratch:
        saved = Path(scratch) / path.name  # dspy picks the format from the suffix
        program.save(str(saved))
        return write_file(path, saved.read_bytes())


def candidate_line(
    index: int, name: str, score: str, versus: PairedComparison | None, against: str, better: bool
) -> str:
    """The line printed for a scored candidate: its valset score, how it compares with the first one scored (the
    default), whether it is the best so far."""
    return (
        f"candidate {index} {name}: valset {score}"
        + (f", {versus.describe()} against {against}" if versus is not None else "")
        + (" (best so far)" if better else "")
    )


__all__ = [
    "DEFAULT",
    "Candidate",
    "Scorer",
    "build_program",
    "candidate_line",
    "chosen_of",
    "default_pool",
    "instructions_of",
    "merge_pool",
    "pool_candidates",
    "read_pool_file",
    "save_program",
    "set_instructions",
]
