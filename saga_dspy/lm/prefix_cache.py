"""The RAM cache of evaluated prompt prefixes behind the local engine: llama-cpp-python's state-cache interface
(longest-prefix lookup, least recently used dropped) counting each state's real size, and the lean state copies
the engine saves and restores around every completion."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any


def slim_logits(state: Any) -> None:
    """Keep one row of a saved state's logits instead of the whole batch (n_batch x n_vocab floats, ~300 MB).

    A restored state is never sampled from: llama-cpp-python marks it `_requires_eval` and decodes at least
    its last token again (and `lean_load_state` does not even write the rows back). So a state costs its KV
    cells only, and the cache holds the instruction prefixes of every kind of call (controller, answer
    type, extract) across questions instead of the last two or three prompts. (States saved by
    `lean_save_state` already have one row.)"""
    scores = getattr(state, "scores", None)
    if scores is not None and getattr(scores, "ndim", 0) == 2 and scores.shape[0] > 1:
        state.scores = scores[-1:].copy()


def lean_save_state(llama: Any) -> Any:
    """llama-cpp-python's `save_state` (run after every completion while a cache is set) without its copy of
    the whole logits buffer: min(tokens, n_batch) x n_vocab floats, ~311 MB for Qwen2.5, copied in 0.4-0.8 s
    on this CPU, six times a question, for a state that `slim_logits` cuts to one row anyway."""
    import ctypes

    import llama_cpp
    from llama_cpp.llama import LlamaState

    size = int(llama_cpp.llama_state_get_size(llama.ctx))
    buffer = (ctypes.c_uint8 * size)()
    written = int(llama_cpp.llama_state_get_data(llama.ctx, buffer, size))
    if written > size:
        raise RuntimeError("Failed to copy llama state data")
    return LlamaState(
        scores=llama.scores[:1].copy(),  # one row keeps the state's shape; it is never read
        input_ids=llama.input_ids.copy(),
        n_tokens=llama.n_tokens,
        llama_state=ctypes.string_at(buffer, written),
        llama_state_size=written,
        seed=llama._seed,
    )


def lean_load_state(llama: Any, state: Any) -> None:
    """llama-cpp-python's `load_state` without writing the state's logits over the whole logits buffer (and
    scanning the rest to zero it): a restored state is decoded again from its last token before anything is
    sampled (`_requires_eval`), so those rows are never read."""
    import ctypes

    import llama_cpp

    llama.input_ids = state.input_ids.copy()
    llama.n_tokens = state.n_tokens
    llama._requires_eval = True
    llama._seed = state.seed
    size = int(state.llama_state_size)
    data = (ctypes.c_uint8 * size).from_buffer_copy(state.llama_state)
    if llama_cpp.llama_state_set_data(llama.ctx, data, size) != size:
        raise RuntimeError("Failed to set llama state data")


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """How many leading tokens two token sequences share."""
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


SUPERSEDED_TAIL = 1024  # a saved state whose tokens a newer one holds all but at most this many of is dropped


def admit(
    states: OrderedDict[tuple[int, ...], Any],
    key: tuple[int, ...],
    value: Any,
    size: Callable[[tuple[int, ...], Any], int],
    capacity: int | None,
    tail: int = SUPERSEDED_TAIL,
) -> None:
    """Save `key`'s state in a longest-prefix LRU: the states it supersedes go, then the least recently used
    ones while the whole exceeds `capacity` bytes (None: unbounded).

    A state is superseded when the new one holds all of it but at most its last `tail` tokens, and at least
    `tail` of them (a short state, an answer-type or pruning prompt, is kept beside a long one): a step of a
    question extends the previous step's prompt and differs only in the tail after the trajectory (the type
    context, the log, the reply), so without this every question kept ~5 near-copies (~110 MB each at 4k
    tokens) and pushed out the states that let later questions reuse their shared demonstrations. What goes
    is at most that tail, which only the same call made again would reuse."""
    states.pop(key, None)
    for old in [k for k in states if common_prefix(k, key) >= max(len(k) - tail, tail)]:
        del states[old]
    states[key] = value
    while capacity is not None and len(states) > 1 and sum(size(k, v) for k, v in states.items()) > capacity:
        states.popitem(last=False)


class PrefixStateCache:
    """llama-cpp-python's state cache interface (longest-prefix lookup, LRU), counting each state's real size.

    Its own LlamaRAMCache counts only the KV bytes of a state, not the logits copy saved with it
    (n_batch x n_vocab floats: ~300 MB for Qwen2.5), so a "3 GiB" cache grew past 15 GB in one eval run;
    this one keeps one row of those logits (`slim_logits`) and counts what it keeps."""

    def __init__(self, capacity_bytes: int, superseded_tail: int = SUPERSEDED_TAIL):
        self.capacity_bytes = int(capacity_bytes)
        self.superseded_tail = int(superseded_tail)
        self.states: OrderedDict[tuple[int, ...], Any] = OrderedDict()

    @staticmethod
    def size_of(state: Any) -> int:
        return int(state.llama_state_size) + sum(
            int(getattr(getattr(state, name, None), "nbytes", 0)) for name in ("scores", "input_ids")
        )

    @property
    def cache_size(self) -> int:
        return sum(self.size_of(state) for state in self.states.values())

    def _longest(self, key: tuple[int, ...]) -> tuple[int, ...] | None:
        best, best_len = None, 0
        for k in self.states:
            n = common_prefix(k, key)
            if n > best_len:
                best, best_len = k, n
        return best

    def __getitem__(self, key: Sequence[int]) -> Any:
        found = self._longest(tuple(key))
        if found is None:
            raise KeyError("no cached prefix")
        self.states.move_to_end(found)
        return self.states[found]

    def __contains__(self, key: Sequence[int]) -> bool:
        return self._longest(tuple(key)) is not None

    def __setitem__(self, key: Sequence[int], state: Any) -> None:
        slim_logits(state)
        admit(
            self.states,
            tuple(key),
            state,
            lambda _key, kept: self.size_of(kept),
            self.capacity_bytes,
            self.superseded_tail,
        )
