"""How a property's domain or range evidence reads in an observation (shared by search, lookup and examples)."""

from __future__ import annotations

from saga_dspy.grounding.context import QuestionContext
from saga_dspy.grounding.render import class_names


def evidence_text(ctx: QuestionContext, ev, observed: tuple[str, ...] = ()) -> str:
    if ev is not None and ev.classes:
        soft = "typically " if ev.source == "empirical" else ""
        return soft + class_names(ev.classes, ctx.class_label, 2)
    if observed:
        return class_names(observed, ctx.class_label, 2) + " (seen in this question)"
    return "unknown"
