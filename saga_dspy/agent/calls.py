"""The LM calls of one question, counted by kind, and the bound they keep: calls <= controller turns + SPARE_CALLS.

Every controller turn (an LM-driven step) is one call. Anything else (the answer-type call, a
neighbourhood prune, the extract fallback, the answer check, the adapter's JSON retry of an unreadable
reply) takes one of the question's SPARE_CALLS; when none is left it is
not made (the prune keeps the whole neighbourhood, the extract and the check are skipped, the reply is not
retried). Installed as a dspy callback per forward() (dspy.context: per thread), so it counts every LM call
that really happened, whoever made it; a prompt refused for its length (context overflow) costs nothing
and is not an LM call here (the prediction counts it as an overflow)."""

from __future__ import annotations

import contextlib
import threading
from collections import Counter
from collections.abc import Iterator

import dspy
from dspy.adapters.chat_adapter import ChatAdapter
from dspy.adapters.json_adapter import JSONAdapter
from dspy.utils.callback import BaseCallback
from dspy.utils.exceptions import ContextWindowExceededError

from saga_dspy.agent.formatting import StringFieldsAdapter

SPARE_CALLS = 2  # LM calls per question beyond one per controller turn (at most steps + 2)
CALL_KINDS = ("answer_type", "prune", "extract", "check")


def is_context_overflow(exc: BaseException | None) -> bool:
    """Was this LM failure a prompt too long for the context window?"""
    if exc is None:
        return False
    if isinstance(exc, ContextWindowExceededError):
        return True
    name = type(exc).__name__
    text = str(exc).lower()
    return name in ("ContextLengthError", "ContextWindowExceededError") or (
        "context" in text and ("window" in text or "length" in text) and ("exceed" in text or "too long" in text)
    )


class QuestionCalls(BaseCallback):
    """One question's LM calls: all of them (`calls`), controller turns, and the spare ones taken by kind."""

    def __init__(self, spare: int = SPARE_CALLS, exempt: frozenset[str] = frozenset()):
        self.calls = 0  # every LM call that ended (ok or failed)
        self.turns = 0  # controller turns (LM-driven steps)
        self.spare = spare
        self.exempt = exempt  # kinds outside the bound (SPINACH prunes every neighbourhood by design)
        self.taken: Counter[str] = Counter()
        self._lock = threading.Lock()

    def on_lm_end(self, call_id, outputs, exception):
        if is_context_overflow(exception):
            return
        with self._lock:
            self.calls += 1

    def left(self) -> int:
        """Spare calls still free (calls already made count, whatever their kind)."""
        with self._lock:
            return self.turns + self.spare + sum(self.taken[k] for k in self.exempt) - self.calls

    def turn(self) -> None:
        """A controller turn is about to call the LM."""
        with self._lock:
            self.turns += 1

    def take(self, kind: str) -> bool:
        """Reserve one spare call for `kind`; False (and nothing reserved) when none is left."""
        if kind not in self.exempt and self.left() < 1:
            return False
        with self._lock:
            self.taken[kind] += 1
        return True

    @contextlib.contextmanager
    def one_call(self) -> Iterator[None]:
        """Around a predictor call: without a spare call for it, the adapter's JSON retry of an unreadable reply is
        off."""
        adapter = dspy.settings.adapter
        if self.left() >= 2 or not (
            adapter is None or (isinstance(adapter, ChatAdapter) and not isinstance(adapter, JSONAdapter))
        ):
            yield
            return
        callbacks = list(getattr(adapter, "callbacks", None) or [])
        closing = getattr(adapter, "closing", "dspy")  # the configured adapter's closing line, kept
        single = StringFieldsAdapter(callbacks=callbacks, use_json_adapter_fallback=False, closing=closing)
        with dspy.context(adapter=single):
            yield

    def counters(self) -> dict[str, int]:
        """A prediction's LM counters: all calls, controller turns, and the spare calls by kind."""
        taken = self.taken
        return {
            "lm_calls": self.calls,
            "lm_steps": self.turns,
            "answer_type_calls": taken["answer_type"],
            "prunes": taken["prune"],
            "extracts": taken["extract"],
            "checks": taken["check"],
        }


__all__ = ["CALL_KINDS", "SPARE_CALLS", "QuestionCalls", "is_context_overflow"]
