"""A question's run as the `dspy.Prediction` a SagaProgram returns: the final query with its answers and status,
the trajectory, the counters (tools, program steps, LM calls and tokens) and what went wrong."""

from __future__ import annotations

import time
from typing import Any

import dspy

from saga_dspy.agent.authorship import author_of
from saga_dspy.agent.calls import QuestionCalls
from saga_dspy.agent.episode import Episode
from saga_dspy.agent.failures import INFRASTRUCTURE, PROGRAM, QUERY, is_infrastructure_error
from saga_dspy.agent.final_query import FinalQuery, nonempty
from saga_dspy.kg.endpoint import Endpoint
from saga_dspy.kg.errors import SparqlError
from saga_dspy.kg.results import AskResult, QueryResult, SelectResult

RESULT_SAMPLE_ROWS = 5

COUNTER_NAMES = (
    "steps",
    "lm_steps",
    "lookups",
    "searches",
    "examples",
    "executions",
    "auto_runs",
    "program_executions",
    "assisted",
    "blocked",
    "empty",
    "prunes",
    "extracts",
    "answer_type_calls",
    "checks",
    "unparsable",
    "rejected",
    "repeated",
    "overflows",
    "lm_calls",
    "prompt_tokens",
    "completion_tokens",
    "prompt_tokens_evaluated",
    "prompt_tokens_reused",
)  # a prediction's counters besides `seconds`


def token_totals(usage_by_lm: dict[str, dict[str, Any]]) -> tuple[int, int, int]:
    """(prompt tokens, completion tokens, prompt tokens reused from a cache: 0 where the LM does not say)."""
    prompt = completion = reused = 0
    for usage in usage_by_lm.values():
        prompt += int(usage.get("prompt_tokens") or usage.get("input_tokens") or 0)
        completion += int(usage.get("completion_tokens") or usage.get("output_tokens") or 0)
        details = usage.get("prompt_tokens_details") or {}
        reused += int((details.get("cached_tokens") if isinstance(details, dict) else 0) or 0)
    return prompt, completion, reused


def token_counters(usage_by_lm: dict[str, dict[str, Any]]) -> dict[str, int]:
    prompt, completion, reused = token_totals(usage_by_lm)
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "prompt_tokens_evaluated": max(0, prompt - reused),
        "prompt_tokens_reused": reused,
    }


def prediction(
    episode: Episode,
    endpoint: Endpoint,
    variant: str,
    calls: QuestionCalls,
    usage_totals: dict[str, dict[str, Any]],
    started: float,
    error: str | None,
    error_kind: str | None = None,
) -> dspy.Prediction:
    """The episode's prediction (of the variant named `variant`); its final query is run on `endpoint` unless the
    steps already ran it."""
    decided = episode.final or FinalQuery(None, None)
    final = decided.sparql
    answers = None
    status = "none"
    final_error = None  # the final query's own failure: the agent's mistake, not the program's
    if final:
        if episode.status_of(final) == "blocked":
            status = "blocked"
        else:
            try:  # the answers the execute tool (or the policy) already got for this very query, else the endpoint's
                answers = episode.result_of(final)
                if answers is None:
                    answers = decided.result
                if answers is None:
                    answers = endpoint.query(final)
                status = "ok" if nonempty(answers) else "empty"
            except SparqlError as exc:
                status = "error"
                final_error = f"{exc.kind}: {exc}"
                if error is None and is_infrastructure_error(exc):  # not the agent's mistake
                    error, error_kind = f"endpoint unavailable: {exc}", INFRASTRUCTURE
            except Exception as exc:  # an endpoint bug on the final query: reported, not raised
                status = "error"
                final_error = f"{type(exc).__name__}: {exc}"
    if error is None and episode.lm_errors and not episode.steps:
        error = episode.lm_errors[-1]
    if error is not None and error_kind is None:
        error_kind = PROGRAM
    elif error is None and final_error is not None:
        error_kind = QUERY
    at = episode.answer_type
    pred = dspy.Prediction(
        question=episode.question,
        sparql=final or "",
        answers=answers,
        answer_labels=episode.answer_labels(answers) if status == "ok" else {},
        answer_type=at.render() if at is not None else "",
        answer_type_label=at.label if at is not None else "",
        answer_type_qid=at.qid if at is not None else "",
        query_form=episode.form,
        trajectory=[s.to_dict() for s in episode.steps],
        counters=counters(episode, calls, usage_totals, started),
        final_status=status,
        final_error=final_error,
        final_source=decided.source,
        final_author=author_of(decided.source, decided.rewritten_from or final, episode.steps, episode.shown).as_dict(),
        rewritten_from=decided.rewritten_from,
        variant=variant,
        demos_dropped=episode.demos_dropped,
        notes=list(episode.notes) + [f"LM error: {e}" for e in episode.lm_errors],
        error=error,
        error_kind=error_kind,
        budget_exceeded=episode.budget_exceeded,
    )
    episode.emit("final", prediction=pred)
    return pred


def counters(
    episode: Episode, calls: QuestionCalls, usage_totals: dict[str, dict[str, Any]], started: float
) -> dict[str, Any]:
    """The prediction's counters (`COUNTER_NAMES` and `seconds`)."""
    ctx_counters = episode.ctx.counters
    return {
        "steps": len(episode.steps),
        "lookups": int(ctx_counters.get("lookups", 0)),
        "searches": int(ctx_counters.get("searches", 0)),
        "examples": int(ctx_counters.get("examples", 0)),
        "executions": int(ctx_counters.get("executions", 0)),
        "auto_runs": episode.auto_runs,
        "program_executions": episode.extra_executions,
        "assisted": episode.assisted,
        "blocked": int(ctx_counters.get("blocked", 0)),
        "empty": int(ctx_counters.get("empty", 0)),
        "unparsable": sum(1 for s in episode.steps if s.note == "unparsable"),
        "rejected": sum(1 for s in episode.steps if s.note == "rejected"),
        "repeated": sum(1 for s in episode.steps if s.note == "repeated"),
        "overflows": episode.overflows,
        **calls.counters(),
        **token_counters(usage_totals),
        "seconds": round(time.monotonic() - started, 3),
    }


def empty_prediction(question: str, error: str, started: float, variant: str) -> dspy.Prediction:
    """The prediction of a question that never started (no LM, or a failure before its first step)."""
    return dspy.Prediction(
        question=question,
        sparql="",
        answers=None,
        answer_type="",
        answer_type_label="",
        answer_type_qid="",
        query_form="",
        trajectory=[],
        final_status="error" if error else "none",
        final_error=None,
        final_source=None,
        final_author=author_of(None, None, []).as_dict(),
        rewritten_from=None,
        variant=variant,
        notes=[],
        error=error,
        counters={**dict.fromkeys(COUNTER_NAMES, 0), "seconds": round(time.monotonic() - started, 3)},
    )


def result_sample(result: QueryResult | None, rows: int = RESULT_SAMPLE_ROWS) -> str:
    if result is None:
        return "(not executed)"
    if isinstance(result, AskResult):
        return f"ASK -> {str(result.value).lower()}"
    if isinstance(result, SelectResult):
        if not result.rows:
            return "(no rows)"
        lines = []
        for row in result.rows[:rows]:
            lines.append(", ".join(f"?{k}={b.value}" for k, b in row.items()))
        more = f"\n… {len(result.rows) - rows} more rows" if len(result.rows) > rows else ""
        return "\n".join(lines) + more
    return str(result)[:500]


__all__ = ["COUNTER_NAMES", "counters", "empty_prediction", "prediction", "result_sample", "token_counters"]
