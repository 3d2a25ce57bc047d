"""What a step added to the controller's state, written once after its observation (`Settings.state_in_trajectory`).

The controller reads the type context and the knowledge log. As input fields after the trajectory they are
written whole at every step, so a local model evaluates them again at every step; written into the trajectory,
each line the state gains appears once, after the observation of the step that brought it, and an earlier step's
text never changes. A line is new when this question's trajectory has not shown it yet (`StateLines.added`):
a line that changes (the variable types) is shown again as it now reads, one that leaves the state is not
mentioned. Text in, text out: the live state and a demonstration's recorded states go through it alike."""

from __future__ import annotations

from dataclasses import dataclass, field

from saga_dspy.agent.compact import restates
from saga_dspy.agent.demo_views import NOT_KEPT
from saga_dspy.grounding.state import controller_state

TYPES_HEADER = "Type context:"
LOG_HEADER = "Knowledge log:"
# the state's own headers and placeholders: no information of their own
_SILENT = frozenset({"Known entity types:", "Known entity types: (none yet)", "(none yet)", "(nothing yet)", NOT_KEPT})


@dataclass
class StateLines:
    """The state lines one question's trajectory has shown so far; `compact`: a line the step's own observation
    shows is not written again (`agent.compact.restates`)."""

    compact: bool = False
    shown: set[str] = field(default_factory=set)

    def added(self, type_context: str, knowledge_log: str, observation: str = "") -> str:
        """The block of lines the state holds now that the trajectory has not shown ('' for none), marked shown;
        `type_context` and `knowledge_log` as the program renders them (`controller_state` is applied here), after
        the step whose observation is `observation`."""
        types, log = controller_state(type_context, knowledge_log)
        parts = []
        for header, text in ((TYPES_HEADER, types), (LOG_HEADER, log)):
            new = [line for line in _lines(text) if line not in self.shown]
            self.shown.update(new)
            if self.compact:
                new = [line for line in new if not restates(line, observation)]
            if new:
                parts.append("\n".join([header, *new]))
        return "\n".join(parts)


def _lines(text: str) -> list[str]:
    lines = [line.rstrip() for line in str(text or "").splitlines()]
    return [line for line in lines if line.strip() and line.strip() not in _SILENT]


__all__ = ["LOG_HEADER", "TYPES_HEADER", "StateLines"]
