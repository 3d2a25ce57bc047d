"""Evaluated shared prompt prefixes kept on disk: the instructions and fixed demonstrations that come before a
question's own message, so a later process (the next eval run, every `ask`) restores them instead of evaluating
them again (~3.5k tokens, ~50 s on 2 cores, at the first question of each query form).

A state is stored under the model's identity (file, size, modification time, context size, llama-cpp-python
version) and the digest of its tokens; a prompt restores the longest stored prefix it begins with. Files are
plain arrays (`numpy.load` without pickle), written whole to a temporary file and renamed, owner-only; the
least recently used go when the directory exceeds its capacity."""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

PREFIX_STORE_BYTES = 2 << 30  # disk for stored prefixes (~29 KB a token: ~100 MB a 3.5k-token prefix)
MIN_PREFIX_TOKENS = 256  # a shorter shared prefix is not worth a file


def model_identity(model_path: str | os.PathLike[str], n_ctx: int) -> str:
    """What a stored state is valid for: the model file as it is now, the context size and llama-cpp-python's
    version (the state's layout)."""
    try:
        version = importlib.metadata.version("llama-cpp-python")
    except importlib.metadata.PackageNotFoundError:
        version = "none"
    path = Path(model_path).resolve()
    stat = path.stat()
    raw = f"{path}|{stat.st_size}|{stat.st_mtime_ns}|{int(n_ctx)}|{version}"
    return hashlib.sha256(raw.encode("utf-8")).hexdigest()[:16]


@dataclass
class StoredState:
    """A restored state with llama-cpp-python's LlamaState fields (what `prefix_cache.lean_load_state` reads)."""

    input_ids: np.ndarray
    scores: np.ndarray
    n_tokens: int
    llama_state: bytes
    llama_state_size: int
    seed: int


def digest(tokens: Sequence[int]) -> str:
    return hashlib.sha256(np.asarray(tokens, dtype=np.int32).tobytes()).hexdigest()[:32]


class Stored(NamedTuple):
    length: int
    path: Path


class PrefixStore:
    """The stored prefixes of one model in `directory` (created owner-only on the first save)."""

    def __init__(self, directory: str | os.PathLike[str], model_id: str, capacity_bytes: int = PREFIX_STORE_BYTES):
        self.directory = Path(directory)
        self.model_id = model_id
        self.capacity_bytes = int(capacity_bytes)

    def _stored(self) -> list[Stored]:
        out = []
        for path in self.directory.glob(f"{self.model_id}-*-*.npz") if self.directory.is_dir() else ():
            length, _, _ = path.stem[len(self.model_id) + 1 :].partition("-")
            if length.isdigit():
                out.append(Stored(int(length), path))
        return out

    def longest(self, tokens: Sequence[int]) -> Stored | None:
        """The longest stored prefix that `tokens` begin with."""
        for stored in sorted(self._stored(), key=lambda s: -s.length):
            if stored.length <= len(tokens) and stored.path.stem.endswith(digest(tokens[: stored.length])):
                return stored
        return None

    def holds(self, tokens: Sequence[int]) -> bool:
        return (self.directory / self._name(tokens)).is_file()

    def _name(self, tokens: Sequence[int]) -> str:
        return f"{self.model_id}-{len(tokens)}-{digest(tokens)}.npz"

    def load(self, stored: Stored, n_ctx: int) -> StoredState | None:
        """The stored state (its input ids padded to the context size), or None when the file cannot be read (it
        is removed: a later save writes it again)."""
        try:
            with np.load(stored.path, allow_pickle=False) as data:
                ids = np.zeros(int(n_ctx), dtype=np.intc)
                n_tokens = int(data["n_tokens"])
                ids[:n_tokens] = data["input_ids"][:n_tokens]
                blob = data["llama_state"].tobytes()
                seed = int(data["seed"])
        except (OSError, ValueError, KeyError):
            with contextlib.suppress(OSError):
                stored.path.unlink()
            return None
        with contextlib.suppress(OSError):
            os.utime(stored.path)  # recently used: the last to go
        scores = np.zeros((1, 1), dtype=np.single)  # never read: a restored state is decoded again first
        return StoredState(ids, scores, n_tokens, blob, len(blob), seed)

    def save(self, tokens: Sequence[int], state: Any) -> None:
        """Writes `state` (of exactly `tokens`) whole, then drops the least recently used beyond the capacity."""
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        n_tokens = int(state.n_tokens)
        fd, tmp = tempfile.mkstemp(dir=self.directory, prefix=".tmp-", suffix=".npz")
        try:
            with os.fdopen(fd, "wb") as out:
                np.savez(
                    out,
                    input_ids=np.asarray(state.input_ids[:n_tokens], dtype=np.intc),
                    n_tokens=np.int64(n_tokens),
                    llama_state=np.frombuffer(state.llama_state, dtype=np.uint8),
                    seed=np.int64(state.seed),
                )
            os.replace(tmp, self.directory / self._name(tokens))
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
        self._evict()

    def _evict(self) -> None:
        """Drops the least recently used files while the directory holds more than its capacity (the newest
        stays whatever its size)."""
        files = []
        for path in self.directory.glob("*.npz"):
            with contextlib.suppress(OSError):  # another process may have dropped it
                stat = path.stat()
                files.append((stat.st_mtime_ns, stat.st_size, path))
        total = 0
        for i, (_, size, path) in enumerate(sorted(files, reverse=True)):
            total += size
            if total > self.capacity_bytes and i > 0:
                with contextlib.suppress(OSError):
                    path.unlink()


__all__ = [
    "MIN_PREFIX_TOKENS",
    "PREFIX_STORE_BYTES",
    "PrefixStore",
    "Stored",
    "StoredState",
    "digest",
    "model_identity",
]
