"""stop: mark the last successfully executed query as the final one."""

from __future__ import annotations

from saga_dspy.grounding.context import QuestionContext
from saga_dspy.grounding.render import clip
from saga_dspy.kg.results import SelectResult


def do_stop(ctx: QuestionContext) -> str:
    ctx.counters["stops"] += 1
    ctx.stopped = True
    ex = ctx.last_successful()
    if ex is None:
        ctx.final_sparql = None
        ctx.final_execution = None
        return "Stopped. No query was executed successfully, so there is no final query."
    ctx.final_sparql = ex.sparql
    ctx.final_execution = ex
    what = {
        "ok": f"{ex.rows} row{'s' if ex.rows != 1 else ''}" if isinstance(ex.result, SelectResult) else "an answer",
        "empty": "no results",
        "blocked": "no results (blocked)",
    }.get(ex.status, ex.status)
    return f"Stopped. Final query (the last successful execution, {what}):\n{clip(ex.sparql, 600)}"
