"""Before the first question: the endpoint answers `ASK {}`, the entity search and the schema index open, and a
served LM answers one tiny request (the tracking store is asked by the tracker when it opens, `eval.tracking.store`).
A run against a dead server otherwise spends its whole split finding out one question at a time; here it stops with
one line (an `EvalError`: exit 2) before anything is run or written. Freezing gold asks the endpoint first too."""

from __future__ import annotations

import time
from typing import Any

import dspy

from saga_dspy.config import Settings, secret_value
from saga_dspy.eval.errors import EvalError
from saga_dspy.kg.errors import SparqlError
from saga_dspy.services import KgServices

PROBE = [{"role": "user", "content": "Reply with the single word: ok"}]
PROBE_TOKENS = 8
ENDPOINT_TIMEOUT = 20.0  # seconds at most for ASK {}
MAX_MESSAGE = 300


def one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= MAX_MESSAGE else text[: MAX_MESSAGE - 1] + "…"


def check_endpoint(settings: Settings, services: KgServices) -> None:
    try:
        services.endpoint.query("ASK {}", timeout=min(settings.query_timeout, ENDPOINT_TIMEOUT))
    except SparqlError as exc:
        raise EvalError(f"preflight: the endpoint {settings.endpoint} does not answer ASK {{}} ({exc})") from None


def check_kg_data(services: KgServices) -> None:
    """The entity search and the schema index (a missing index, a search refused for this endpoint)."""
    for name in ("search", "schema"):
        try:
            getattr(services, name)
        except (OSError, ValueError) as exc:
            raise EvalError(f"preflight: {one_line(exc)}") from None


def check_lm(settings: Settings, lm: Any) -> float | None:
    """One tiny uncached request to a served LM; its seconds (None: nothing to ask, an in-process model is loaded
    by the warm-up instead)."""
    if lm is None or getattr(lm, "llama_engine", None) is not None:
        return None
    started = time.monotonic()
    try:
        with dspy.context(callbacks=[]):  # not a question: no trace, no span
            lm(messages=PROBE, max_tokens=PROBE_TOKENS, cache=False)
    except Exception as exc:  # whatever the provider raises: unreachable, refused, unknown model, bad key
        where = f" at {settings.api_base}" if settings.api_base else ""
        text = one_line(exc)
        key = secret_value(settings.api_key)
        if key:
            text = text.replace(key, "***")
        raise EvalError(f"preflight: the LM {settings.lm}{where} did not answer a one-line request ({text})") from None
    return time.monotonic() - started


def preflight(settings: Settings, services: KgServices, lm: Any = None) -> dict[str, float | None]:
    """All three checks (`lm`: the run's LM, else DSPy's configured one); the seconds each took."""
    started = time.monotonic()
    check_endpoint(settings, services)
    endpoint_seconds = time.monotonic() - started
    check_kg_data(services)
    lm_seconds = check_lm(settings, lm if lm is not None else dspy.settings.lm)
    return {"endpoint_seconds": round(endpoint_seconds, 3), "lm_seconds": lm_seconds and round(lm_seconds, 3)}
