"""Served models: an OpenAI-compatible server (`api_base`) through our own small engine, or any dspy/litellm model.

With ``api_base`` (llama.cpp's server, vLLM, Ollama, any ``/v1/chat/completions``) the requests go through
`OpenAICompatibleEngine`, a DSPy 3.4 engine over one pooled httpx client: it sends ``max_tokens`` (DSPy's
native lm15 engine sends only ``max_completion_tokens``, which llama.cpp's server ignores) and costs ~2 ms of
CPU a call where LiteLLM's request handling cost ~7.5 ms (measured against a loopback server), which is most of
what an evaluation thread spends outside the LM. DSPy still owns the cache, retries, history and usage.
Without ``api_base`` the model string goes to LiteLLM as before (hosted providers, their keys and quirks).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import threading
from typing import Any

import dspy

from saga_dspy.config import Settings, secret_value
from saga_dspy.lm.wire import (
    END_OF_REPLY,
    TextEngine,
    capped_max_tokens,
    chat_messages,
    chat_response,
    stops_with_marker,
)

CACHE_SCOPE_USER = "saga-dspy@"  # + the server's digest: the `user` of every request to a served model
CACHE_SCOPE_HEADER = "X-Saga-Endpoint"  # the same digest as a header, for servers LiteLLM talks to


def lm_cache_scope(settings: Settings) -> str | None:
    """A short digest naming the server (`api_base`), or None for the provider's default endpoint.

    DSPy keeps api_base (and a custom engine's whole connection) out of its cache key, so two servers
    that serve the same model name would share cache entries. The digest rides in the LM's `user`
    setting (our engine; OpenAI's end-user identifier, which servers ignore) or in a request header
    (LiteLLM), both of which DSPy does key on.
    """
    if not settings.api_base:
        return None
    base = settings.api_base.strip().rstrip("/").lower()
    return hashlib.sha256(base.encode("utf-8")).hexdigest()[:16]


# Model-string prefixes that mean "an OpenAI-compatible /chat/completions server" (LiteLLM's spellings); other
# providers with an api_base (ollama_chat/ speaks Ollama's own API) keep going through LiteLLM.
OPENAI_COMPATIBLE_PREFIXES = frozenset(
    {"openai", "hosted_vllm", "custom_openai", "openai_like", "lm_studio", "llamacpp"}
)


def _provider(model: str) -> str:
    head, sep, rest = model.partition("/")
    return head if sep and rest else "openai"


def _wire_model(model: str) -> str:
    """The model name the server knows: the LM's string without its provider prefix ('openai/qwen' -> 'qwen')."""
    rest = model.partition("/")[2]
    return rest if rest and _provider(model) in OPENAI_COMPATIBLE_PREFIXES else model


class OpenAICompatibleEngine(TextEngine):
    """A DSPy 3.4 engine (`complete(Request) -> Response`) for one OpenAI-compatible chat server.

    One attempt per call: DSPy retries the retryable lm15 errors this raises (timeouts, transport
    failures, 429, 5xx) `num_retries` times. Generation is capped at `max_tokens` whatever a call asks
    for, and ends at the text adapters' closing marker. The API key lives here only: it is never part
    of `dump_state` (a saved program), of the DSPy cache key or of a trace.
    """

    supported_params = frozenset(
        {
            "temperature",
            "max_tokens",
            "seed",
            "stop",
            "top_p",
            "top_k",
            "response_format",
            "frequency_penalty",
            "presence_penalty",
        }
    )
    # no api_key: a saved program never carries a secret (a loaded one reads OPENAI_API_KEY, if any)
    STATE = ("api_base", "timeout", "max_tokens", "max_connections")

    def __init__(
        self,
        api_base: str,
        *,
        api_key: str | None = None,
        timeout: float = 120.0,
        max_tokens: int = 512,
        max_connections: int = 64,
    ):
        if not api_base or not str(api_base).strip():
            raise ValueError("OpenAICompatibleEngine needs api_base (e.g. http://127.0.0.1:8080/v1)")
        if max_tokens is None or int(max_tokens) < 1:
            raise ValueError("max_tokens must be a positive integer")
        self.api_base = str(api_base).strip().rstrip("/")
        self.timeout = float(timeout)
        self.max_tokens = int(max_tokens)
        self.max_connections = int(max_connections)
        self._api_key = api_key or None
        self._client: Any = None
        self._lock = threading.Lock()

    # -- engine protocol ----------------------------------------------------------

    def complete(self, request: Any) -> Any:
        from dspy.clients.engines.base import validate_request
        from dspy.lm15 import UnsupportedFeatureError

        validate_request(request)
        if request.tools:
            raise UnsupportedFeatureError("This engine sends no native tool definitions; use a text adapter.")
        body = self._body(request)
        data = self._post(body)
        choices = data.get("choices") or []
        if not choices:
            raise self._error("ServerError", f"the server answered without a choice: {str(data)[:200]}")
        cached = ((data.get("usage") or {}).get("prompt_tokens_details") or {}).get("cached_tokens")
        return chat_response(data, request.model, cached)

    def close(self) -> None:
        with self._lock:
            client, self._client = self._client, None
        if client is not None:
            client.close()

    @classmethod
    def load_state(cls, state: dict[str, Any]) -> OpenAICompatibleEngine:
        return cls(**state, api_key=os.environ.get("OPENAI_API_KEY"))

    def __repr__(self) -> str:
        return f"OpenAICompatibleEngine({self.api_base!r}, max_tokens={self.max_tokens}, timeout={self.timeout})"

    def __deepcopy__(self, memo: dict) -> OpenAICompatibleEngine:
        return self  # copies of the LM (dspy's lm.copy) share the engine and its pool of connections

    def __getstate__(self) -> dict[str, Any]:  # a pickled LM (e.g. a whole program saved by cloudpickle):
        state = dict(self.__dict__)  # no client, no lock, and no key: a pickle may reach a disk
        state["_client"], state["_lock"], state["_api_key"] = None, None, None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._api_key = os.environ.get("OPENAI_API_KEY") or None
        self._lock = threading.Lock()

    # -- internals ------------------------------------------------------------------

    def _body(self, request: Any) -> dict[str, Any]:
        config = request.config
        body: dict[str, Any] = {
            "model": _wire_model(request.model),
            "messages": chat_messages(request),
            "max_tokens": capped_max_tokens(config, self.max_tokens),
            "stop": stops_with_marker(config),
        }
        for name in ("temperature", "top_p", "top_k", "seed", "frequency_penalty", "presence_penalty"):
            value = getattr(config, name)
            if value is not None:
                body[name] = value
        if config.user_id:
            body["user"] = config.user_id
        fmt = config.response_format  # lm15's canonical shape: {"type": "json_object"} or {"type": "json_schema", ...}
        if fmt is not None and fmt.get("type") == "json_object":
            body["response_format"] = {"type": "json_object"}
        elif fmt is not None and fmt.get("type") == "json_schema":
            inner = {
                "name": fmt.get("name") or "response",
                "schema": fmt["schema"],
                **({"strict": fmt["strict"]} if "strict" in fmt else {}),
            }
            body["response_format"] = {"type": "json_schema", "json_schema": inner}
        return body

    def _http(self) -> Any:
        with self._lock:
            if self._client is None:
                import httpx

                headers = {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}
                limits = httpx.Limits(
                    max_connections=self.max_connections, max_keepalive_connections=self.max_connections
                )
                self._client = httpx.Client(
                    base_url=self.api_base,
                    headers=headers,
                    limits=limits,
                    timeout=httpx.Timeout(self.timeout, connect=min(10.0, self.timeout)),
                    verify=_ssl_context(),
                )
            return self._client

    def _post(self, body: dict[str, Any]) -> dict[str, Any]:
        import httpx

        try:
            reply = self._http().post("/chat/completions", json=body)
        except httpx.TimeoutException as exc:
            raise self._error("TimeoutError", f"no answer from {self.api_base} within {self.timeout:g} s") from exc
        except httpx.HTTPError as exc:  # refused, reset, DNS: the server is not there (retryable)
            raise self._error("TransportError", f"cannot reach {self.api_base}: {exc}") from exc
        if reply.status_code >= 400:
            raise self._status_error(reply)
        try:
            data = reply.json()
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise self._error("ServerError", f"the server's answer is not JSON: {reply.text[:200]!r}") from exc
        if not isinstance(data, dict):
            raise self._error("ServerError", f"the server's answer is not a JSON object: {reply.text[:200]!r}")
        return data

    def _status_error(self, reply: Any) -> Exception:
        status = reply.status_code
        try:
            detail = reply.json().get("error") or reply.text
            detail = detail.get("message", detail) if isinstance(detail, dict) else detail
        except (ValueError, AttributeError):
            detail = reply.text
        message = f"{self.api_base} answered HTTP {status}: {str(detail)[:300]}"
        if status == 429:
            retry_after = reply.headers.get("retry-after")
            try:
                seconds = float(retry_after) if retry_after else None
            except ValueError:
                seconds = None
            return self._error("RateLimitError", message, status=status, retry_after=seconds)
        if status in (401, 403):
            return self._error("AuthError", message, status=status)
        if status >= 500:
            return self._error("ServerError", message, status=status)
        lowered = message.lower()
        if "context" in lowered and ("length" in lowered or "window" in lowered or "exceed" in lowered):
            return self._error("ContextLengthError", message, status=status)  # dspy.ReAct truncates and retries
        return self._error("InvalidRequestError", message, status=status)

    @staticmethod
    def _error(kind: str, message: str, **fields: Any) -> Exception:
        import dspy.lm15 as lm15

        return getattr(lm15, kind)(message, provider="openai-compatible", **fields)


@functools.lru_cache(maxsize=1)
def _ssl_context() -> Any:
    """One TLS context per process (httpx builds and loads the CA bundle anew for every client: ~50 ms)."""
    import httpx

    return httpx.create_ssl_context()


def remote_lm(settings: Settings) -> dspy.LM:
    """`dspy.LM` for a served model: our engine for an OpenAI-compatible `api_base`, LiteLLM otherwise.

    max_tokens always reaches the server, and a server's replies are cached under its own scope."""
    kwargs: dict[str, Any] = {
        "temperature": settings.temperature,
        "max_tokens": settings.max_tokens,
        "seed": settings.seed,
        "cache": settings.lm_cache,
        "num_retries": settings.lm_retries,
    }
    api_key = secret_value(settings.api_key)
    scope = lm_cache_scope(settings)
    if scope is not None and _provider(settings.lm) in OPENAI_COMPATIBLE_PREFIXES:  # our engine stops at END_OF_REPLY
        kwargs["user"] = CACHE_SCOPE_USER + scope
        engine = OpenAICompatibleEngine(
            settings.api_base or "",  # set: a scope names it
            api_key=api_key or os.environ.get("OPENAI_API_KEY"),
            timeout=settings.lm_timeout,
            max_tokens=settings.max_tokens,
        )
        return dspy.LM(settings.lm, engine=engine, **kwargs)
    # a hung server holds a call for at most lm_timeout, retried lm_retries times (litellm's default: 6,000 s)
    kwargs["timeout"] = settings.lm_timeout
    if api_key:
        kwargs["api_key"] = api_key
    if scope is not None:  # e.g. ollama_chat/: LiteLLM speaks the server's own API and sends this header along
        kwargs["stop"] = [END_OF_REPLY]  # self-hosted models may run on past their reply (see LlamaCppEngine)
        kwargs["api_base"] = settings.api_base
        kwargs["headers"] = {CACHE_SCOPE_HEADER: scope}
        kwargs["engine"] = "litellm"  # DSPy's native lm15 engine would send only max_completion_tokens
    return dspy.LM(settings.lm, **kwargs)
