"""Paired comparison of two systems on the same questions: mean difference, bootstrap CI, wins/losses/ties; and
one system on two question sets (a dev split against a test split): the difference with its interval.

Ablations here are 12-60 questions, so a difference in mean F1 means little without its interval. The
percentile bootstrap (`scipy.stats.bootstrap`) resamples *questions* (both systems' scores of a question move
together: the per-question differences are resampled; two question sets each within itself), seeded so a table
is reproducible.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass

import numpy as np
from scipy import stats

RESAMPLES = 10_000
LEVEL = 0.95
SEED = 0


@dataclass(frozen=True)
class PairedComparison:
    """B against A on the same n questions: delta = mean(B) - mean(A), [low, high] its bootstrap interval."""

    n: int
    mean_a: float
    mean_b: float
    delta: float
    low: float
    high: float
    wins: int  # questions where B scores higher than A
    losses: int
    ties: int
    level: float = LEVEL
    resamples: int = RESAMPLES

    def as_dict(self) -> dict[str, float | int]:
        return asdict(self)

    def describe(self, scale: float = 100.0) -> str:
        """One line, in points of `scale` (100: F1 in percent)."""
        pct = round(self.level * 100)
        return (
            f"{self.delta * scale:+.1f} [{self.low * scale:+.1f}, {self.high * scale:+.1f}] ({pct}% CI, n={self.n}; "
            f"{_count(self.wins, 'win')}, {_count(self.losses, 'loss')}, {_count(self.ties, 'tie')})"
        )


def _count(n: int, noun: str) -> str:
    """`1 win`, `2 wins`, `1 loss`, `0 losses`."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}{'es' if noun.endswith('s') else 's'}"


def percentile_interval(
    samples: Sequence[np.ndarray], statistic, *, resamples: int, level: float, seed: int
) -> tuple[float, float]:
    """`scipy.stats.bootstrap`'s percentile interval of `statistic(*samples)`, each sample resampled within
    itself; a sample of one value has no spread to resample (scipy needs two): its interval is the statistic."""
    if min(len(s) for s in samples) < 2:
        value = float(statistic(*samples, axis=-1))
        return value, value
    result = stats.bootstrap(
        tuple(samples),
        statistic,
        n_resamples=resamples,
        confidence_level=level,
        method="percentile",
        vectorized=True,
        rng=np.random.default_rng(seed),
    )
    return float(result.confidence_interval.low), float(result.confidence_interval.high)


def _mean(x: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.mean(x, axis=axis)


def _mean_difference(x: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.mean(x, axis=axis) - np.mean(y, axis=axis)


def paired_bootstrap(
    a: Sequence[float],
    b: Sequence[float],
    *,
    resamples: int = RESAMPLES,
    level: float = LEVEL,
    seed: int = SEED,
) -> PairedComparison:
    """Paired percentile bootstrap of mean(b) - mean(a); `a[i]` and `b[i]` score the same question."""
    if len(a) != len(b):
        raise ValueError(f"paired scores need the same questions: {len(a)} vs {len(b)}")
    if not 0 < level < 1:
        raise ValueError(f"level must lie in (0, 1), not {level}")
    x = np.asarray(a, dtype=float)
    y = np.asarray(b, dtype=float)
    n = len(x)
    if n == 0:
        return PairedComparison(0, 0.0, 0.0, 0.0, 0.0, 0.0, 0, 0, 0, level, resamples)
    diff = y - x  # paired: a resample draws questions, so it draws their differences
    low, high = percentile_interval([diff], _mean, resamples=resamples, level=level, seed=seed)
    return PairedComparison(
        n=n,
        mean_a=float(x.mean()),
        mean_b=float(y.mean()),
        delta=float(diff.mean()),
        low=float(low),
        high=float(high),
        wins=int((diff > 0).sum()),
        losses=int((diff < 0).sum()),
        ties=int((diff == 0).sum()),
        level=level,
        resamples=resamples,
    )


def paired_by_id(a: Mapping[str, float], b: Mapping[str, float], **kwargs: float | int) -> PairedComparison:
    """`paired_bootstrap` over the question ids both runs scored (sorted, so the result does not depend on order)."""
    ids = sorted(set(a) & set(b))
    return paired_bootstrap([a[i] for i in ids], [b[i] for i in ids], **kwargs)  # type: ignore[arg-type]


@dataclass(frozen=True)
class SetComparison:
    """The same system on two question sets: delta = mean(A) - mean(B), [low, high] its bootstrap interval."""

    n_a: int
    n_b: int
    mean_a: float
    mean_b: float
    delta: float
    low: float
    high: float
    level: float = LEVEL

    def as_dict(self) -> dict[str, float | int]:
        return asdict(self)


def set_bootstrap(
    a: Sequence[float], b: Sequence[float], *, resamples: int = RESAMPLES, level: float = LEVEL, seed: int = SEED
) -> SetComparison:
    """Percentile bootstrap of mean(a) - mean(b) for two independent question sets, each resampled within itself."""
    x = np.asarray(a, dtype=float)
    y = np.asarray(b, dtype=float)
    if not len(x) or not len(y):
        raise ValueError("both question sets need scores")
    low, high = percentile_interval([x, y], _mean_difference, resamples=resamples, level=level, seed=seed)
    return SetComparison(
        len(x), len(y), float(x.mean()), float(y.mean()), float(x.mean() - y.mean()), float(low), float(high), level
    )
