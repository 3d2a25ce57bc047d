"""A ReAct trajectory: the steps of one question and their rendering into the controller's prompt, within a character
budget."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any

from saga_dspy.agent.compact import compact_observation

KEEP_FULL_STEPS = 5  # the most recent steps keep their whole observation (the paper's action history)
SUMMARY_CHARS = 160  # an older step's observation shrinks to one line of this length
NO_STEPS = "(no steps yet)"  # the trajectory before the first step (where the layout shows a placeholder)


@dataclass
class Step:
    """One controller turn: what it thought and did, and what it saw."""

    thought: str
    tool_name: str
    tool_args: dict[str, Any]
    observation: str
    note: str = ""  # e.g. "unparsable", "rejected", "tool-error"
    state: str = ""  # the lines the step added to the type context and log (`Settings.state_in_trajectory`)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        if not self.state:  # only where the layout writes the state into the trajectory
            del out["state"]
        return out


def one_line(text: str, limit: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def clip(text: str, limit: int | None) -> str:
    text = str(text)
    if limit is None or len(text) <= limit:
        return text
    return text[: max(0, limit - 40)].rstrip() + f"\n… [{len(text) - limit + 40} more characters cut]"


def _render_action(step: Step) -> str:
    args = json.dumps(step.tool_args, ensure_ascii=False) if step.tool_args else "{}"
    return f"{step.tool_name}({args})"


def render_trajectory(
    steps: list[Step],
    budget: int | None = None,
    *,
    observation_chars: int | None = 3000,
    keep_full: int | None = KEEP_FULL_STEPS,
    first_index: int = 0,
    empty: str = NO_STEPS,
    compact: bool = False,
) -> str:
    """The trajectory as the controller reads it, within `budget` characters.

    The last `keep_full` steps show their observation (clipped to `observation_chars`);
    older steps show a one-line summary. Over budget, more steps are summarised, then the
    oldest steps are dropped (a note says so), then the remaining observations are clipped.
    `keep_full=None` (stable history): every step stays whole while the budget allows; past it the
    oldest steps are summarised KEEP_FULL_STEPS at a time (steps 1-5, then 1-10, ...), so the text of
    an earlier step changes only when a block is summarised, not at every step (a sliding window
    re-writes an old step at every step, and a local model's prefix cache then evaluates everything
    after it again). `empty`: the text of a trajectory with no step; `compact`: each observation in its compact
    rendering (`agent.compact`).
    """
    if not steps:
        return empty

    def render(full_from: int, drop: int, obs_limit: int | None) -> str:
        parts = []
        if drop:
            parts.append(f"(steps 1-{first_index + drop} left out to save space; the knowledge log summarises them)")
        for i, step in enumerate(steps[drop:], start=drop):
            number = first_index + i + 1
            shown = compact_observation(step.observation, step.tool_name) if compact else step.observation
            obs = clip(shown, obs_limit) if i >= full_from else one_line(shown, SUMMARY_CHARS)
            thought = step.thought if i >= full_from else one_line(step.thought, SUMMARY_CHARS)
            state = f"\n{step.state}" if step.state else ""  # what the step added to the state, after its observation
            action = _render_action(step)
            parts.append(f"Step {number}\nThought: {thought}\nAction: {action}\nObservation: {obs}{state}")
        return "\n\n".join(parts)

    n = len(steps)
    if keep_full is None:  # whole while it fits, then summarised in blocks of KEEP_FULL_STEPS steps
        for full_from in range(0, n, KEEP_FULL_STEPS):
            text = render(full_from, 0, observation_chars)
            if budget is None or len(text) <= budget:
                return text
    else:
        full_from = max(0, n - keep_full)
        text = render(full_from, 0, observation_chars)
    if budget is None or len(text) <= budget:
        return text
    for start in range(full_from + 1, n):  # summarise more, keeping the latest step whole
        text = render(start, 0, observation_chars)
        if len(text) <= budget:
            return text
    full_from = n - 1
    for drop in range(1, n):  # drop the oldest steps
        text = render(full_from, drop, observation_chars)
        if len(text) <= budget:
            return text
    drop = n - 1
    limit = observation_chars or len(steps[-1].observation)
    while limit > 200:  # finally clip the latest observation
        limit //= 2
        text = render(full_from, drop, limit)
        if len(text) <= budget:
            return text
    return text[-budget:] if budget > 0 else ""
