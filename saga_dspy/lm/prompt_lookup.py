"""Prompt-lookup decoding for the local engine: tokens the reply copies from its prompt (an id from an observation,
a query a lookup showed) are drafted from the prompt and checked in one batch, not generated one at a time.

llama-cpp-python's `Llama.generate` runs any draft model set on the Llama (`draft_model`): it evaluates the sampled
token with the draft behind it, samples at each position and keeps the draft up to the first token the model
would not have written, so a reply is the same as without it. Two parts are ours: `RecentLookup`, the draft
(llama-cpp-python's `LlamaPromptLookupDecoding` takes the *first* match of the last n-gram in the prompt, which is
in the instructions or a demonstration; here the *latest*, in the observations the reply copies from), and
`DraftingEval`, an eval that asks llama.cpp for the logits of every position of a short batch only (a Llama made
with a draft model keeps all of every prompt's logits instead: n_ctx x n_vocab floats, 5 GB for Qwen2.5, and a
copy of ~600 KB per prompt token)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

LOOKUP_NGRAMS = (3, 2)  # the last this many tokens are looked for in the prompt, longest first


class RecentLookup:
    """A draft model: the `tokens` that followed the latest earlier occurrence of the last 3 (else 2) tokens."""

    def __init__(self, tokens: int, ngrams: Sequence[int] = LOOKUP_NGRAMS):
        self.tokens = int(tokens)
        self.ngrams = tuple(ngrams)

    def __call__(self, input_ids: Any, /, **_kwargs: Any) -> np.ndarray:
        ids = np.asarray(input_ids, dtype=np.intc)
        n = len(ids)
        for size in self.ngrams:
            if n <= size:
                continue
            windows = np.lib.stride_tricks.sliding_window_view(ids[: n - 1], size)  # each start but the last n-gram
            hits = np.nonzero(np.all(windows == ids[n - size :], axis=1))[0]
            if len(hits):
                start = int(hits[-1]) + size
                return ids[start : min(start + self.tokens, n)].copy()
        return np.array([], dtype=np.intc)


class DraftingEval:
    """A Llama's `eval` that, while a draft model is set, evaluates a batch as short as a drafted step with the
    logits of every position (to sample at each); any other batch (a prompt) goes to llama-cpp-python's eval, which
    keeps the last position's only."""

    def __init__(self, llama: Any, inner: Any):
        self.llama = llama
        self.inner = inner

    def __call__(self, tokens: Sequence[int]) -> None:
        llama = self.llama
        draft = getattr(llama, "draft_model", None)
        if draft is None or len(tokens) > int(getattr(draft, "tokens", 0)) + 1 or len(tokens) > llama.n_batch:
            return self.inner(tokens)
        n_past = llama.n_tokens
        llama._ctx.kv_cache_seq_rm(-1, n_past, -1)
        llama._batch.set_batch(batch=list(tokens), n_past=n_past, logits_all=True)
        llama._ctx.decode(llama._batch)
        llama.input_ids[n_past : n_past + len(tokens)] = tokens
        llama.n_tokens += len(tokens)
        llama._requires_eval = False
        return None


def install_drafting(llama: Any) -> None:
    """Route this Llama's eval through `DraftingEval` (once; the instance attribute shadows the method)."""
    if not isinstance(getattr(llama, "eval", None), DraftingEval):
        llama.eval = DraftingEval(llama, llama.eval)


__all__ = ["DraftingEval", "RecentLookup", "install_drafting"]
