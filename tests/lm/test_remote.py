"""saga_dspy.lm.remote and build_lm: served models, against an OpenAI-compatible server on 127.0.0.1."""

from __future__ import annotations

import json

import dspy
import pytest
from helpers.dspy_cache import fresh_dspy_cache  # noqa: F401  (autouse: a memory-only DSPy cache)
from helpers.openai_stub import OpenAIStub

from saga_dspy.config import Settings
from saga_dspy.lm import (
    CACHE_SCOPE_HEADER,
    CACHE_SCOPE_USER,
    LocalLlamaLM,
    OpenAICompatibleEngine,
    build_lm,
    lm_cache_scope,
)

# --- served models ---------------------------------------------------------------------------------


PARIS = "[[ ## answer ## ]]\nParis\n\n[[ ## completed ## ]]"


def served(reply: str = PARIS, status: int = 200) -> OpenAIStub:
    """An OpenAI-compatible chat endpoint on 127.0.0.1 that records what it receives."""
    return OpenAIStub(reply=reply, status=status)


def test_remote_lm_has_max_tokens_and_a_cache_scope_per_server():
    a = build_lm(Settings(lm="openai/some-model", api_base="http://127.0.0.1:9/v1", max_tokens=77))
    b = build_lm(Settings(lm="openai/some-model", api_base="http://127.0.0.1:10/v1", max_tokens=77))
    assert isinstance(a, dspy.LM) and not isinstance(a, LocalLlamaLM)
    assert a.kwargs["max_tokens"] == 77 and a.kwargs["temperature"] == 0.0 and a.kwargs["seed"] == 0
    # our engine, not LiteLLM's (4x its CPU a call) nor dspy's native lm15 one (only max_completion_tokens)
    assert isinstance(a.engine, OpenAICompatibleEngine) and a.engine.max_tokens == 77
    scope_a, scope_b = (lm.kwargs["user"] for lm in (a, b))
    assert scope_a != scope_b
    assert scope_a == CACHE_SCOPE_USER + lm_cache_scope(Settings(api_base="http://127.0.0.1:9/v1/"))  # same server
    # Different servers, different DSPy cache keys (DSPy itself ignores api_base in the key).
    from dspy.clients.execution import IGNORED_CACHE_KEYS, prepare

    keys = {dspy.cache.cache_key(prepare(lm, "hi", None, {}).key(lm, False), IGNORED_CACHE_KEYS) for lm in (a, b)}
    assert len(keys) == 2
    assert a.copy(temperature=0.5).kwargs["user"] == scope_a  # DSPy's copies keep the scope


def test_an_ollama_server_keeps_litellm_and_its_scope_header():
    lm = build_lm(Settings(lm="ollama_chat/qwen2.5-coder", api_base="http://127.0.0.1:11434", max_tokens=50))
    assert lm.engine == "litellm" and lm.kwargs["api_base"] == "http://127.0.0.1:11434"
    assert lm.kwargs["headers"][CACHE_SCOPE_HEADER] == lm_cache_scope(Settings(api_base="http://127.0.0.1:11434"))
    assert lm.kwargs["max_tokens"] == 50 and "user" not in lm.kwargs


def test_remote_lm_without_api_base_is_plain():
    lm = build_lm(Settings(lm="openai/gpt-4o-mini", api_key="sk-test", lm_cache=False))
    assert "headers" not in lm.kwargs and "api_base" not in lm.kwargs
    assert lm.kwargs["max_tokens"] == 512 and lm.cache is False
    assert lm_cache_scope(Settings(lm="openai/gpt-4o-mini")) is None


def test_served_model_receives_max_tokens_and_servers_do_not_share_cache(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with served() as one, served() as two:
        lm_one = build_lm(Settings(lm="openai/qwen", api_base=one.api_base, max_tokens=123, seed=3))
        lm_two = build_lm(Settings(lm="openai/qwen", api_base=two.api_base, max_tokens=123, seed=3))
        for lm in (lm_one, lm_two, lm_one):
            with dspy.context(lm=lm, adapter=dspy.ChatAdapter()):
                assert dspy.Predict("question -> answer")(question="Capital of France?").answer == "Paris"

        assert len(one.requests) == 1, "the repeated call on server one should be a cache hit"
        assert len(two.requests) == 1, "server two must not be answered from server one's cache entry"
        body = one.requests[0]["body"]
        assert one.requests[0]["path"].endswith("/chat/completions")
        assert body["max_tokens"] == 123 and body["stop"] == ["[[ ## completed ## ]]"]
        assert body["model"] == "qwen" and body["temperature"] == 0.0 and body["seed"] == 3
        assert body["user"] == CACHE_SCOPE_USER + lm_cache_scope(Settings(api_base=one.api_base))
        headers = {k.lower(): v for k, v in one.requests[0]["headers"].items()}
        assert "authorization" not in headers  # no key configured: none sent


def test_served_model_key_is_sent_and_never_saved(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with served() as server:
        lm = build_lm(Settings(lm="openai/qwen", api_base=server.api_base, api_key="sk-secret-123", lm_cache=False))
        with dspy.context(lm=lm, adapter=dspy.ChatAdapter()):
            dspy.Predict("question -> answer")(question="Capital of France?")
        headers = {k.lower(): v for k, v in server.requests[0]["headers"].items()}
        assert headers["authorization"] == "Bearer sk-secret-123"
        assert "sk-secret" not in json.dumps(lm.dump_state()) and "sk-secret" not in repr(lm.engine)
        assert "sk-secret" not in json.dumps(lm.history[-1], default=str)


def test_served_model_json_mode_reaches_the_server():
    reply = '{"answer": "Paris"}'
    with served(reply) as server:
        lm = build_lm(Settings(lm="openai/qwen", api_base=server.api_base, lm_cache=False))
        with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
            assert dspy.Predict("question -> answer")(question="Capital of France?").answer == "Paris"
        assert server.requests[0]["body"]["response_format"]["type"] in ("json_object", "json_schema")


@pytest.mark.parametrize(
    "status, kind, retried",
    [
        (500, "LMServerError", True),
        (429, "LMRateLimitError", True),
        (401, "LMAuthError", False),
        (400, "LMInvalidRequestError", False),
    ],
)
def test_served_model_errors_are_dspy_errors_and_only_transient_ones_retried(status, kind, retried):
    import dspy.utils.exceptions as exceptions

    with served(status=status) as server:
        lm = build_lm(Settings(lm="openai/qwen", api_base=server.api_base, lm_cache=False, lm_retries=1))
        with pytest.raises(exceptions.LMError) as caught:
            lm("hello")
    assert isinstance(caught.value, getattr(exceptions, kind)), repr(caught.value)
    assert len(server.requests) == (2 if retried else 1)
    assert f"HTTP {status}" in str(caught.value)


def test_served_model_context_overflow_is_dspy_context_window_error():
    from dspy.utils.exceptions import ContextWindowExceededError

    message = "the request exceeds the available context size, try increasing it"
    with served(message, status=400) as server:
        lm = build_lm(Settings(lm="openai/qwen", api_base=server.api_base, lm_cache=False))
        with pytest.raises(ContextWindowExceededError):
            lm("hello")


def test_a_dead_server_is_an_infrastructure_error():
    import socket

    from dspy.utils.exceptions import LMError

    from saga_dspy.agent.failures import is_infrastructure_error

    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    lm = build_lm(Settings(lm="openai/qwen", api_base=f"http://127.0.0.1:{port}/v1", lm_cache=False, lm_retries=0))
    with pytest.raises(LMError) as caught:
        lm("hello")
    assert is_infrastructure_error(caught.value) and "cannot reach" in str(caught.value)


def test_copies_of_a_served_lm_share_one_connection_pool():
    lm = build_lm(Settings(lm="openai/qwen", api_base="http://127.0.0.1:9/v1"))
    copy = lm.copy(temperature=0.7)
    assert copy.engine is lm.engine and copy.kwargs["temperature"] == 0.7 and lm.kwargs["temperature"] == 0.0
    import pickle

    lm.engine._http()
    secret = OpenAICompatibleEngine("http://127.0.0.1:9/v1", api_key="sk-secret-456")
    data = pickle.dumps(secret)  # a pickled engine leaves its client, its lock and its key behind
    assert b"sk-secret-456" not in data
    restored = pickle.loads(data)
    assert restored.api_base == secret.api_base and restored._client is None
