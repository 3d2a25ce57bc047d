"""What a tool returns beside its observation: the lookup's queries, the execution an execute_sparql call made and
stop's final execution, as typed values the episode records (no tool leaves a result in the shared context for
another module to read back)."""

from __future__ import annotations

from dataclasses import dataclass

from saga_dspy.grounding.context import Execution
from saga_dspy.proposer import Candidate


@dataclass(frozen=True)
class _Observed:
    """A tool's observation (`text`: what the controller reads, and what `str()` gives) with what it returns
    beside it (the subclasses' fields)."""

    text: str

    def __str__(self) -> str:
        return self.text


@dataclass(frozen=True)
class LookupResult(_Observed):
    """The lookup's observation (`text`) and the queries it puts forward: `proposal`, the query of its ★ property
    (named in the text); `candidate`, the proposer's first (the program's fallback, run only when an episode
    would otherwise end with no executed query); `shown`, the ranked candidates the text lists (none when
    `settings.shown_candidates` is 0)."""

    proposal: str | None = None
    candidate: str | None = None
    shown: tuple[Candidate, ...] = ()


@dataclass(frozen=True)
class ExecuteResult(_Observed):
    """execute_sparql's observation and the execution it recorded (None where nothing ran: an empty query)."""

    execution: Execution | None = None


@dataclass(frozen=True)
class StopResult(_Observed):
    """stop's observation and the execution it marks as final (None when no query succeeded)."""

    final: Execution | None = None


ToolOutput = str | LookupResult | ExecuteResult | StopResult


def observation_of(output: ToolOutput) -> str:
    """The text the controller reads."""
    return output if isinstance(output, str) else output.text
