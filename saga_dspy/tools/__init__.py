"""The five SAGA tools as plain typed functions over a `QuestionContext`.

`make_tools(ctx)` returns `[search_wikidata, get_wikidata_entry, get_property_examples,
execute_sparql, stop]` (names and argument shapes of the paper's controller prompt).
Each returns an observation within `settings.observation_chars` that says what it cut: a
string, or for the lookup, execute_sparql and stop a typed result (`results.LookupResult`, `results.ExecuteResult`,
`results.StopResult`)
whose `text` is the observation; none raises (errors come back as `[ERROR] …` observations).

One module per tool (search, lookup, examples, execute, stop); `specs` holds their names,
arguments and descriptions, read here and by the agent's ReAct module."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import replace
from typing import TypeVar

from saga_dspy.grounding.context import QuestionContext
from saga_dspy.grounding.render import clip, fit
from saga_dspy.tools.examples import do_examples
from saga_dspy.tools.execute import do_execute
from saga_dspy.tools.lookup import do_lookup
from saga_dspy.tools.results import ExecuteResult, LookupResult, StopResult, ToolOutput, observation_of
from saga_dspy.tools.search import do_search
from saga_dspy.tools.specs import TOOL_SPECS
from saga_dspy.tools.stop import do_stop

log = logging.getLogger(__name__)


Out = TypeVar("Out", str, LookupResult, ExecuteResult, StopResult)


def _guarded(ctx: QuestionContext, name: str, argument: str, fn: Callable[[], Out]) -> Out | str:
    started = time.monotonic()
    before = ctx.counters["sparql_queries"]
    try:
        out: Out | str = fn()
    except Exception as exc:  # noqa: BLE001 - a tool never raises into the agent loop
        log.warning("tool %s failed: %s", name, exc, exc_info=log.isEnabledFor(logging.DEBUG))
        ctx.counters["errors"] += 1
        out = f"[ERROR] {name} failed: {type(exc).__name__}: {clip(str(exc), 200)}"
    ctx.record_call(name, argument, started, before)
    return fit(out, ctx.budget) if isinstance(out, str) else replace(out, text=fit(out.text, ctx.budget))


def make_tools(ctx: QuestionContext) -> list[Callable[..., ToolOutput]]:
    """The five tools bound to `ctx`, as plain typed functions named and documented by `specs.TOOL_SPECS`."""

    def search_wikidata(query: str) -> str:
        return _guarded(ctx, "search_wikidata", query, lambda: do_search(ctx, query))

    def get_wikidata_entry(qid: str) -> LookupResult | str:
        return _guarded(ctx, "get_wikidata_entry", qid, lambda: do_lookup(ctx, qid))

    def get_property_examples(pid: str) -> str:
        return _guarded(ctx, "get_property_examples", pid, lambda: do_examples(ctx, pid))

    def execute_sparql(sparql: str) -> ExecuteResult | str:
        return _guarded(ctx, "execute_sparql", sparql, lambda: do_execute(ctx, sparql))

    def stop() -> StopResult | str:
        return _guarded(ctx, "stop", "", lambda: do_stop(ctx))

    tools: list[Callable[..., ToolOutput]] = [
        search_wikidata,
        get_wikidata_entry,
        get_property_examples,
        execute_sparql,
        stop,
    ]
    for tool in tools:
        tool.__doc__ = TOOL_SPECS[tool.__name__].description
    return tools


__all__ = [
    "ExecuteResult",
    "LookupResult",
    "StopResult",
    "ToolOutput",
    "do_examples",
    "do_execute",
    "do_lookup",
    "do_search",
    "do_stop",
    "make_tools",
    "observation_of",
]
