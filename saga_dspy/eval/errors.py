"""The evaluation's one error type: bad input (unknown dataset, missing gold, a test split to tune on) said in one line."""

from __future__ import annotations


class EvalError(RuntimeError):
    """A run cannot start (bad flags, no gold, a resume that does not match)."""


class Interrupted(Exception):
    """A run stopped by Ctrl-C or SIGTERM after saving what it had (the command line exits 130)."""
