"""A compiled program's demo pool: the solved questions its per-question demos are picked from, and how many.

`optimize` compiles the pool (gold-teacher records plus the model's own successful train runs) and k into
program.json, beside dspy's per-predictor state (instructions, fixed demos), under `STATE_KEY`; loading the
file gives back the same pool, k and instructions, so `eval --program` / `ask --program` run the program as
compiled. A program.json without that key (fixed compiled demos only) loads as before. Each record is in the
demo-pool format of `agent.demos` and says where it came from in `source` (`SOURCES`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

STATE_KEY = "saga_demo_pool"
FORMAT = 1
GOLD = "gold"  # the gold teacher ran the train question's gold query through our tools
BOOTSTRAP = "bootstrap"  # the model's own run on a train question, kept because its answers scored
SOURCES = (GOLD, BOOTSTRAP)


@dataclass(frozen=True)
class CompiledPool:
    """The per-question demo pool of a compiled program: `records` to pick from, `k` demos a question."""

    records: tuple[dict[str, Any], ...]
    k: int

    @classmethod
    def of(cls, records: Iterable[Mapping[str, Any]], k: int) -> CompiledPool:
        return cls(tuple(dict(r) for r in records), int(k))

    def sources(self) -> dict[str, int]:
        return dict(sorted(Counter(str(r.get("source")) for r in self.records).items()))

    def to_state(self) -> dict[str, Any]:
        return {"format": FORMAT, "k": self.k, "sources": self.sources(), "records": list(self.records)}

    @classmethod
    def from_state(cls, state: Any) -> CompiledPool | None:
        """The pool saved under `STATE_KEY` (None when there is none); a ValueError in one line when it is unusable."""
        if state is None:
            return None
        if not isinstance(state, dict):
            raise ValueError(f"its {STATE_KEY} entry is not a JSON object")
        if state.get("format") != FORMAT:
            raise ValueError(
                f"its demo pool has format {state.get('format')!r}; this saga-dspy reads format {FORMAT} "
                "(compile it again with this version)"
            )
        k, records = state.get("k"), state.get("records")
        if not isinstance(k, int) or isinstance(k, bool) or k < 0:
            raise ValueError(f"its demo pool's k must be a whole number >= 0, not {k!r}")
        if not isinstance(records, list) or not all(isinstance(r, dict) and r.get("question") for r in records):
            raise ValueError("its demo pool's records must be a list of solved questions (objects with a question)")
        unknown = sorted({str(r.get("source")) for r in records} - set(SOURCES))
        if unknown:
            raise ValueError(f"its demo pool has records of unknown source {', '.join(unknown)} (one of {SOURCES})")
        return cls.of(records, k)


__all__ = ["BOOTSTRAP", "FORMAT", "GOLD", "SOURCES", "STATE_KEY", "CompiledPool"]
