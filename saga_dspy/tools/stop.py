"""stop: the last successfully executed query is the final one (`StopResult.final`)."""

from __future__ import annotations

from saga_dspy.grounding.context import QuestionContext
from saga_dspy.grounding.render import clip
from saga_dspy.kg.results import SelectResult
from saga_dspy.tools.results import StopResult


def do_stop(ctx: QuestionContext) -> StopResult:
    ctx.counters["stops"] += 1
    ex = ctx.last_successful()
    if ex is None:
        return StopResult("Stopped. No query was executed successfully, so there is no final query.")
    what = {
        "ok": f"{ex.rows} row{'s' if ex.rows != 1 else ''}" if isinstance(ex.result, SelectResult) else "an answer",
        "empty": "no results",
        "blocked": "no results (blocked)",
    }.get(ex.status, ex.status)
    return StopResult(f"Stopped. Final query (the last successful execution, {what}):\n{clip(ex.sparql, 600)}", ex)
