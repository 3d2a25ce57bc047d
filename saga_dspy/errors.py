"""The errors every layer may raise and every command line reports in one line (`cli.run_main`): a leaf,
imported by the layers' own error types (`kg.errors.SparqlError`, `eval.errors.EvalError`)."""

from __future__ import annotations


class SagaError(Exception):
    """Bad input or a failed query, said in one line: the command line exits 2 with it, never a traceback."""


class Interrupted(Exception):
    """A run stopped by Ctrl-C or SIGTERM after saving what it had (the command line exits 130)."""
