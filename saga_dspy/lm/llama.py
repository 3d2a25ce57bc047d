"""The bundled model in this process: llama-cpp-python behind a DSPy engine (`LlamaCppEngine`) inside a `dspy.LM`
(`LocalLlamaLM`), with a RAM cache of evaluated prompt prefixes."""

from __future__ import annotations

import functools
import importlib
import importlib.util
import logging
import os
import sys
import threading
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dspy

from saga_dspy.config import Settings
from saga_dspy.lm.field_limits import ANY_FIELD, FieldLimit, parse_limits
from saga_dspy.lm.marked_reply import marked_reply
from saga_dspy.lm.markers import ARGS_FIELD, THOUGHT_FIELD, reply_fields
from saga_dspy.lm.model_files import INSTALL_HINT, LOCAL_LM_MODEL, LocalModelError, ensure_local_model
from saga_dspy.lm.prefix_cache import PrefixStateCache, lean_load_state, lean_save_state
from saga_dspy.lm.prefix_store import PrefixStore, model_identity
from saga_dspy.lm.prompt_lookup import RecentLookup, install_drafting
from saga_dspy.lm.wire import TextEngine, capped_max_tokens, chat_messages, chat_response, stops_with_marker

log = logging.getLogger(__name__)

# --- the offline model -------------------------------------------------------

LOCAL_THREADS = 2
LOCAL_PREFIX_CACHE_BYTES = (
    4 << 30
)  # RAM for evaluated prompt prefixes (KV cells, ~29 KB a token), least recently used dropped

LLAMA_MISSING = (
    "llama-cpp-python is not installed, and the local model ('--lm local') needs it. "
    "Install the `local` extra: `make local-model`, or `pip install -e '.[local]'` "
    "(it compiles llama.cpp from source: 3-5 minutes on 2 cores). "
    "Or use a served model: --lm openai/<name> --api-base http://host:port/v1"
)


# --- llama.cpp in process ------------------------------------------------------


def llama_cpp_available() -> bool:
    """Whether llama-cpp-python is importable (without loading its native library)."""
    try:
        return importlib.util.find_spec("llama_cpp") is not None
    except (ImportError, ValueError):
        return False


BUSY_CPUS = 0.5  # CPUs' worth of other work at load time above which llama.cpp's threads sleep instead of spinning


def cpus_in_use(window: float = 0.25) -> float | None:
    """How many CPUs' worth of work the machine did over `window` seconds (/proc/stat; None where unreadable)."""

    def sample() -> tuple[int, int]:
        with open("/proc/stat", encoding="ascii") as handle:
            fields = [int(x) for x in handle.readline().split()[1:]]
        idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
        return sum(fields[:8]) - idle, sum(fields[:8])

    try:
        busy0, total0 = sample()
        time.sleep(window)
        busy1, total1 = sample()
    except (OSError, ValueError, IndexError):
        return None
    if total1 <= total0:
        return None
    return (busy1 - busy0) / (total1 - total0) * (os.cpu_count() or 1)


def omp_wait_policy(busy: float | None) -> str | None:
    """OpenMP's wait policy for llama.cpp's threads (read once, when its runtime loads), from the CPUs already in
    use: on an otherwise idle machine none (libgomp's default: a waiting thread spins briefly, then sleeps), on a busy
    one PASSIVE (it sleeps at once). Measured here (`bench_llama_settings.py --wait-policies`, 2 cores): idle, the
    default generates 1.3-1.6x faster than PASSIVE, prompts about as fast; beside one busy process PASSIVE generates
    1.3-1.8x faster (spinning threads starve each other). Unknown load: PASSIVE, the safe side."""
    return "PASSIVE" if busy is None or busy >= BUSY_CPUS else None


def choose_wait_policy() -> None:
    """Sets OMP_WAIT_POLICY by `omp_wait_policy` unless it is set or llama.cpp's runtime is loaded already."""
    if "llama_cpp" not in sys.modules and "OMP_WAIT_POLICY" not in os.environ:
        busy = cpus_in_use()
        policy = omp_wait_policy(busy)
        log.info(
            "llama.cpp threads: OpenMP wait policy %s (%s CPUs busy)",
            policy or "default (spin, then sleep)",
            "unknown" if busy is None else f"{busy:.2f}",
        )
        if policy is not None:
            os.environ["OMP_WAIT_POLICY"] = policy


def require_llama_cpp() -> Any:
    """The `llama_cpp` module, or a LocalModelError that says how to install it.

    Before llama.cpp's OpenMP runtime loads, chooses its wait policy by how busy the machine is
    (`omp_wait_policy`), unless OMP_WAIT_POLICY is set: a user's choice stands.
    """
    choose_wait_policy()
    try:
        import llama_cpp
    except ImportError as exc:
        raise LocalModelError(LLAMA_MISSING) from exc
    return llama_cpp


@dataclass
class _Loaded:
    llama: Any
    lock: threading.Lock


class _EvalMeter:
    """Wraps a Llama's `eval`: llama-cpp-python evaluates a completion's prompt in its first eval() call, after
    skipping the prefix it already holds, then one sampled token per call; `sizes[0]` is the prompt tokens
    really evaluated."""

    def __init__(self, inner: Any):
        self.inner = inner
        self.sizes: list[int] = []

    def __call__(self, tokens: Sequence[int]) -> Any:
        self.sizes.append(len(tokens))
        return self.inner(tokens)


def _eval_meter(llama: Any) -> _EvalMeter | None:
    """The meter on this Llama's eval (installed once; None for an object without eval, e.g. a test double)."""
    meter = getattr(llama, "_saga_eval_meter", None)
    if meter is None and callable(getattr(llama, "eval", None)):
        meter = _EvalMeter(llama.eval)
        llama.eval = meter  # the instance attribute shadows the method: generate() calls self.eval
        llama._saga_eval_meter = meter
    return meter


# One heavyweight Llama per (file, context size, threads) and process; it holds
# no per-question state (llama.cpp only keeps the last prompt's KV prefix).
_MODELS: dict[tuple[str, int, int], _Loaded] = {}
_MODELS_LOCK = threading.Lock()


def _load_llama(model_path: str, n_ctx: int, n_threads: int, seed: int) -> _Loaded:
    key = (str(Path(model_path).resolve()), int(n_ctx), int(n_threads))
    with _MODELS_LOCK:
        loaded = _MODELS.get(key)
        if loaded is None:
            llama_cpp = require_llama_cpp()
            if not Path(model_path).is_file():
                raise LocalModelError(f"No model file at {model_path}. To install the local model, {INSTALL_HINT}.")
            llama = llama_cpp.Llama(
                model_path=key[0],
                n_ctx=key[1],
                n_threads=key[2],
                n_threads_batch=key[2],
                n_gpu_layers=0,
                seed=seed,
                verbose=False,
            )
            # Evaluated prompt prefixes kept in RAM: the system prompt (instructions) is the same for every
            # question, but the answer-type call in between would evict it from llama.cpp's single KV prefix.
            # On this 2-core CPU a prompt token costs ~30 ms, so the instructions alone cost ~40 s a question.
            llama.set_cache(PrefixStateCache(LOCAL_PREFIX_CACHE_BYTES))
            # instance attributes shadow the methods that _create_completion calls around every completion
            llama.save_state = functools.partial(lean_save_state, llama)
            llama.load_state = functools.partial(lean_load_state, llama)
            install_drafting(llama)  # prompt-lookup drafts, where an engine sets them (`lm.prompt_lookup`)
            loaded = _MODELS[key] = _Loaded(llama, threading.Lock())
    return loaded


class LlamaCppEngine(TextEngine):
    """A DSPy 3.4 engine (`complete(Request) -> Response`) over one llama-cpp-python model.

    Calls are serialised with one lock per loaded model, so any number of
    threads (dspy.Evaluate, parallel questions) can share it. Generation is
    capped at `max_tokens` whatever a call asks for (llama-cpp-python also
    trims it to what the context window leaves); a prompt that does not fit
    raises lm15's ContextLengthError, which DSPy turns into
    ContextWindowExceededError (dspy.ReAct then truncates its trajectory).

    `llama=` injects a ready object with llama-cpp-python's
    `create_chat_completion` (tests); otherwise the model at `model_path` is
    loaded on the first call.

    `field_limits`: how the named fields of a marked reply are kept short (`lm.field_limits`; a request's
    metadata may bring its own); `prompt_lookup`: tokens drafted from the prompt per step (0: none). `totals`
    counts what its calls cost (LM calls, prompt tokens, those evaluated, tokens sampled and written, seconds).
    """

    # response_format: llama.cpp constrains decoding to JSON (JSONAdapter's json_object mode).
    supported_params = frozenset({"temperature", "max_tokens", "seed", "stop", "top_p", "top_k", "response_format"})
    STATE = (
        "model_path",
        "n_ctx",
        "n_threads",
        "max_tokens",
        "temperature",
        "seed",
        "write_markers",
        "field_limits",
        "prompt_lookup",
        "prefix_store",
    )

    def __init__(
        self,
        model_path: str | os.PathLike[str] | None = None,
        *,
        n_ctx: int = 8192,
        n_threads: int = LOCAL_THREADS,
        max_tokens: int = 512,
        temperature: float = 0.0,
        seed: int = 0,
        write_markers: bool = True,
        field_limits: Mapping[str, FieldLimit | Mapping[str, Any]] | None = None,
        prompt_lookup: int = 0,
        prefix_store: str | os.PathLike[str] | None = None,
        llama: Any = None,
    ):
        if model_path is None and llama is None:
            raise ValueError("LlamaCppEngine needs model_path= (a GGUF file) or llama=")
        if max_tokens is None or int(max_tokens) < 1:
            raise ValueError("max_tokens must be a positive integer")
        self.model_path = os.fspath(model_path) if model_path is not None else None
        self.n_ctx = int(n_ctx)
        self.n_threads = int(n_threads)
        self.max_tokens = int(max_tokens)
        self.temperature = float(temperature)
        self.seed = int(seed)
        self.write_markers = bool(write_markers)
        self.field_limits = {k: v.to_dict() for k, v in parse_limits(field_limits).items()}
        self.prompt_lookup = int(prompt_lookup)
        self.prefix_store = os.fspath(prefix_store) if prefix_store is not None else None
        self._store: PrefixStore | None = None
        self.totals: Counter[str] = Counter()
        self._injected = _Loaded(llama, threading.Lock()) if llama is not None else None

    # -- engine protocol ----------------------------------------------------------

    def complete(self, request: Any) -> Any:
        from dspy.clients.engines.base import validate_request
        from dspy.lm15 import ContextLengthError, UnsupportedFeatureError

        validate_request(request)
        if request.tools:
            raise UnsupportedFeatureError("The local model takes no native tool definitions; use a text adapter.")
        messages = chat_messages(request)
        config = request.config
        loaded = self._handle()
        kwargs = self._generation_kwargs(config)
        metadata = (config.extensions or {}).get("metadata") or {}
        limits = parse_limits(metadata.get("field_limits", self.field_limits))
        with loaded.lock:
            meter = _eval_meter(loaded.llama)
            if meter is not None:
                meter.sizes.clear()
            loaded.llama.draft_model = RecentLookup(self.prompt_lookup) if self.prompt_lookup > 0 else None
            try:
                begun = bool(messages) and messages[-1]["role"] == "assistant"  # a text reply: no JSON mode
                write = bool(metadata.get("write_markers", self.write_markers))
                fields = reply_fields(messages) if write and (begun or "response_format" not in kwargs) else []
                if fields or begun:
                    raw = marked_reply(loaded.llama, messages, kwargs, fields, limits, self._prefix_store())
                else:
                    raw = loaded.llama.create_chat_completion(messages=messages, **kwargs)
            except ValueError as exc:
                if "context window" in str(exc):
                    raise ContextLengthError(str(exc), provider="local") from exc
                raise
            # the prompt's first eval (a prefix stored before it: that eval and the next)
            first = 2 if (raw.get("timings") or {}).get("stored") else 1
            evaluated = sum(meter.sizes[:first]) if meter is not None and meter.sizes else None
        prompt_tokens = (raw.get("usage") or {}).get("prompt_tokens")
        # the prompt tokens llama.cpp did not evaluate: held in its KV prefix or restored from the state cache
        reused = max(0, int(prompt_tokens) - evaluated) if evaluated is not None and prompt_tokens else None
        self._count(raw, evaluated)
        return chat_response(raw, request.model, reused)

    def _count(self, raw: dict[str, Any], evaluated: int | None) -> None:
        """Adds a completion to `totals` (a plain chat completion's sampled tokens are its completion tokens)."""
        usage = raw.get("usage") or {}
        timings = raw.get("timings") or {}
        totals = self.totals
        totals["calls"] += 1
        totals["prompt_tokens"] += int(usage.get("prompt_tokens") or 0)
        totals["evaluated"] += int(evaluated or 0)
        totals["sampled"] += int(timings.get("sampled", usage.get("completion_tokens") or 0))
        totals["written"] += int(timings.get("written", 0))
        totals["restored"] += int(timings.get("restored", 0))
        totals["prompt_ms"] += int(1000 * float(timings.get("prompt_seconds", 0.0)))
        totals["reply_ms"] += int(1000 * float(timings.get("reply_seconds", 0.0)))

    def close(self) -> None:
        """Nothing to release: the model stays loaded for the process (see `_MODELS`)."""

    @classmethod
    def load_state(cls, state: dict[str, Any]) -> LlamaCppEngine:
        return cls(**state)

    def __repr__(self) -> str:
        where = self.model_path or "injected"
        return (
            f"LlamaCppEngine({where!r}, n_ctx={self.n_ctx}, n_threads={self.n_threads}, max_tokens={self.max_tokens})"
        )

    def load(self) -> None:
        """Load the model now (a run's warm-up), not in its first question."""
        self._handle()

    def runtime(self) -> dict[str, Any]:
        """What sets this process's speed besides the prompts (a run's metrics keep it, so seconds from two days
        can be read side by side): llama.cpp's threads and the OpenMP wait policy chosen when it loaded, which
        moves generation 1.3-1.6x (`omp_wait_policy`), and the reply's limits and drafts."""
        return {
            "n_threads": self.n_threads,
            "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY") or "default",
            "write_markers": self.write_markers,
            "field_limits": self.field_limits,
            "prompt_lookup": self.prompt_lookup,
            "prefix_store": self.prefix_store is not None,
        }

    # -- internals ------------------------------------------------------------------

    def _handle(self) -> _Loaded:
        if self._injected is not None:
            return self._injected
        assert self.model_path is not None
        return _load_llama(self.model_path, self.n_ctx, self.n_threads, self.seed)

    def _prefix_store(self) -> PrefixStore | None:
        """The on-disk store of shared prompt prefixes, for a model loaded from a file (None: none)."""
        if self._store is None and self.prefix_store is not None and self.model_path is not None:
            self._store = PrefixStore(self.prefix_store, model_identity(self.model_path, self.n_ctx))
        return self._store

    def _generation_kwargs(self, config: Any) -> dict[str, Any]:
        kwargs: dict[str, Any] = {
            "max_tokens": capped_max_tokens(config, self.max_tokens),
            "temperature": self.temperature if config.temperature is None else float(config.temperature),
            "seed": self.seed if config.seed is None else int(config.seed),
        }
        # A model may go on after its reply, inventing the observation and the next steps until the cap.
        # DSPy's text adapters end a reply with this.
        kwargs["stop"] = stops_with_marker(config)
        if config.top_p is not None:
            kwargs["top_p"] = float(config.top_p)
        if config.top_k is not None:
            kwargs["top_k"] = int(config.top_k)
        if config.frequency_penalty is not None:
            kwargs["frequency_penalty"] = float(config.frequency_penalty)
        if config.presence_penalty is not None:
            kwargs["presence_penalty"] = float(config.presence_penalty)
        fmt = config.response_format
        if fmt is not None:
            if fmt.get("type") == "json_schema":
                kwargs["response_format"] = {"type": "json_object", "schema": fmt["schema"]}
            else:
                kwargs["response_format"] = {"type": "json_object"}
        return kwargs


class LocalLlamaLM(dspy.LM):
    """`dspy.LM` over a `LlamaCppEngine`: the bundled model, in this process.

    DSPy owns caching (keyed by the model string `LOCAL_LM_MODEL`, the messages
    and the generation settings; the weights are pinned by their SHA-256),
    history and usage tracking. `copy()` shares the engine and so the model.
    A final assistant message is continued, not answered, and the engine writes a chat-format reply's field
    markers itself (`marked_reply`).
    """

    continues_replies = True

    def __init__(
        self,
        model: str = LOCAL_LM_MODEL,
        *,
        model_path: str | os.PathLike[str] | None = None,
        llama: Any = None,
        n_ctx: int = 8192,
        n_threads: int = LOCAL_THREADS,
        temperature: float = 0.0,
        max_tokens: int = 512,
        seed: int = 0,
        write_markers: bool | None = None,
        field_limits: Mapping[str, FieldLimit | Mapping[str, Any]] | None = None,
        prompt_lookup: int = 0,
        prefix_store: str | os.PathLike[str] | None = None,
        cache: bool = True,
        num_retries: int = 0,
        engine: Any = None,
        **kwargs: Any,
    ):
        metadata = dict(kwargs.pop("metadata", None) or {})  # a loaded state brings its own
        write_markers = bool(metadata.get("write_markers", True) if write_markers is None else write_markers)
        limits = {
            k: v.to_dict()
            for k, v in parse_limits(metadata.get("field_limits") if field_limits is None else field_limits).items()
        }
        if engine is None or isinstance(engine, str):
            engine = LlamaCppEngine(
                model_path,
                llama=llama,
                n_ctx=n_ctx,
                n_threads=n_threads,
                max_tokens=max_tokens,
                temperature=temperature,
                seed=seed,
                write_markers=write_markers,
                field_limits=limits,
                prompt_lookup=prompt_lookup,
                prefix_store=prefix_store,
            )
        kwargs.pop("async_engine", None)
        super().__init__(
            model,
            temperature=temperature,
            max_tokens=max_tokens,
            seed=seed,
            cache=cache,
            num_retries=num_retries,
            engine=engine,
            # travels in every request (config.extensions, the one passthrough key lm15 admits), so DSPy's
            # cache keys a reply by how it was made; the engine reads it from there
            metadata={**metadata, "write_markers": write_markers, **({"field_limits": limits} if limits else {})},
            **kwargs,
        )

    @property
    def llama_engine(self) -> LlamaCppEngine:
        return self.engine


def local_lm(settings: Settings, *, model_path: str | os.PathLike[str] | None = None) -> LocalLlamaLM:
    """The offline LM: checks llama-cpp-python and the model file now, loads the model on first call."""
    if not llama_cpp_available():
        raise LocalModelError(LLAMA_MISSING)
    path = Path(model_path) if model_path is not None else ensure_local_model(settings)
    return LocalLlamaLM(
        model_path=path,
        n_ctx=settings.context_window,
        n_threads=LOCAL_THREADS,
        temperature=settings.temperature,
        max_tokens=settings.max_tokens,
        seed=settings.seed,
        write_markers=settings.write_markers,
        field_limits=reply_limits(settings),
        prompt_lookup=settings.prompt_lookup,
        prefix_store=prefix_store_dir(settings),
        cache=settings.lm_cache,
    )


def prefix_store_dir(settings: Settings) -> Path | None:
    """Where the local model keeps evaluated shared prompt prefixes (`prefix_store`: auto is under the cache
    directory; none: nowhere)."""
    if settings.prefix_store == "none":
        return None
    return settings.cache_dir / "prefix-states" if settings.prefix_store == "auto" else Path(settings.prefix_store)


def reply_limits(settings: Settings) -> dict[str, FieldLimit]:
    """The limits settings put on a reply's fields: a controller reply's thought (`thought_tokens`,
    `cut_invented_turns`), its tool arguments (`write_arguments`), and every field whose values the prompt lists
    (`write_choices`)."""
    limit = FieldLimit(settings.thought_tokens, settings.cut_invented_turns)
    arguments = FieldLimit(choice=settings.write_choices, json_object=settings.write_arguments)
    return parse_limits(
        {THOUGHT_FIELD: limit, ARGS_FIELD: arguments, ANY_FIELD: FieldLimit(choice=settings.write_choices)}
    )


# --- served models -------------------------------------------------------------
