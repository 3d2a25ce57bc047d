"""Served models: any dspy/litellm model string, with max_tokens always sent and a cache key per server."""

from __future__ import annotations

import hashlib
import os
from typing import Any

import dspy

from saga_dspy.config import Settings, secret_value
from saga_dspy.lm.llama import END_OF_REPLY


CACHE_SCOPE_HEADER = "X-Saga-Endpoint"


def lm_cache_scope(settings: Settings) -> str | None:
    """A short digest naming the server (`api_base`), or None for the provider's default endpoint.

    DSPy drops api_base/api_key from its cache key; this digest travels as a
    request header, which DSPy does keep in the key (and LiteLLM sends as an
    HTTP header that servers ignore).
    """
    if not settings.api_base:
        return None
    base = settings.api_base.strip().rstrip("/").lower()
    return hashlib.sha256(base.encode("utf-8")).hexdigest()[:16]


def remote_lm(settings: Settings) -> dspy.LM:
    """`dspy.LM` for a dspy/litellm model string; max_tokens always reaches the server."""
    kwargs: dict[str, Any] = {
        "temperature": settings.temperature,
        "max_tokens": settings.max_tokens,
        "seed": settings.seed,
        "cache": settings.lm_cache,
        # a hung server holds a call for at most lm_timeout, retried lm_retries times (litellm's default: 6,000 s)
        "timeout": settings.lm_timeout,
        "num_retries": settings.lm_retries,
    }
    api_key = secret_value(settings.api_key)
    if api_key:
        kwargs["api_key"] = api_key
    scope = lm_cache_scope(settings)
    if scope is not None:
        kwargs["api_base"] = settings.api_base
        kwargs["headers"] = {CACHE_SCOPE_HEADER: scope}
        kwargs["stop"] = [END_OF_REPLY]  # self-hosted small models run on past their reply (see LlamaCppEngine)
        # LiteLLM sends `max_tokens` as given (dspy's native lm15 engine would
        # send only `max_completion_tokens` to an "openai/..." model).
        kwargs["engine"] = "litellm"
        provider = settings.lm.split("/", 1)[0] if "/" in settings.lm else "openai"
        if "api_key" not in kwargs and provider == "openai" and not os.environ.get("OPENAI_API_KEY"):
            # Local OpenAI-compatible servers need no key, but the OpenAI client refuses to start without one.
            kwargs["api_key"] = "sk-no-key-required"
    return dspy.LM(settings.lm, **kwargs)
