"""The evaluation's one error type: bad input (unknown dataset, missing gold, a test split to tune on) said in one
line."""

from __future__ import annotations

from saga_dspy.errors import SagaError


class EvalError(SagaError, RuntimeError):
    """A run cannot start (bad flags, no gold, a resume that does not match)."""
