"""Shared prompt prefixes kept on disk (`lm.prefix_store`): a later process restores the instructions and fixed
demonstrations instead of evaluating them; on a llama double that evaluates as llama-cpp-python does (the
longest prefix it holds is kept, the rest evaluated) and records what it evaluated."""

from __future__ import annotations

import numpy as np
from helpers.char_llama import CharTokens

from saga_dspy.lm.marked_reply import marked_reply
from saga_dspy.lm.prefix_cache import common_prefix
from saga_dspy.lm.prefix_store import PrefixStore

CHATML = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
N_CTX = 20_000


class EvalLlama(CharTokens):
    """One token a character; `generate` keeps the longest prefix its context holds and evaluates the rest
    (`evaluated`: the lengths of its eval calls), then writes `reply` and ends its turn."""

    metadata = {"tokenizer.chat_template": CHATML}
    cache = None

    def __init__(self, reply: str = "done"):
        self.reply = reply
        self.input_ids = np.zeros(N_CTX, dtype=np.intc)
        self.n_tokens = 0
        self.evaluated: list[int] = []
        self._requires_eval = False

    @property
    def _input_ids(self):
        return self.input_ids[: self.n_tokens]

    def n_ctx(self):
        return N_CTX

    def eval(self, tokens):
        self.input_ids[self.n_tokens : self.n_tokens + len(tokens)] = tokens
        self.n_tokens += len(tokens)
        self.evaluated.append(len(tokens))

    def generate(self, tokens, **sampling):
        held = common_prefix(self._input_ids.tolist(), tokens)
        self.n_tokens = min(held, len(tokens) - 1)
        self.eval(tokens[self.n_tokens :])
        for c in self.reply:
            yield ord(c) + 1000
        yield 7

    def save_state(self):
        return type(
            "State",
            (),
            {
                "input_ids": self.input_ids.copy(),
                "n_tokens": self.n_tokens,
                "llama_state": self.input_ids[: self.n_tokens].tobytes(),  # the KV cells of those tokens, here
                "seed": 0,
            },
        )()

    def load_state(self, state):
        self.input_ids = state.input_ids.copy()
        self.n_tokens = state.n_tokens
        assert state.llama_state == self.input_ids[: self.n_tokens].tobytes()


SYSTEM = "You write SPARQL. " * 40  # the instructions: the same for every question
DEMO = [{"role": "user", "content": "a solved question " * 10}, {"role": "assistant", "content": "its steps " * 10}]


def messages(question: str) -> list[dict[str, str]]:
    return [{"role": "system", "content": SYSTEM}, *DEMO, {"role": "user", "content": question}]


def test_a_later_process_restores_the_shared_prefix_and_evaluates_only_the_question(tmp_path):
    store = PrefixStore(tmp_path / "states", "model-a")
    first = EvalLlama()
    out = marked_reply(first, messages("Who wrote Dune?"), {}, [], store=store)
    assert out["choices"][0]["message"]["content"] == "done"
    prompt = out["usage"]["prompt_tokens"]
    (stored,) = list((tmp_path / "states").glob("*.npz"))
    prefix = out["timings"]["stored"]
    assert 0 < prefix < prompt and stored.name.startswith(f"model-a-{prefix}-")
    assert first.evaluated == [prefix, prompt - prefix]  # the prefix alone, then the question: nothing twice
    assert (tmp_path / "states").stat().st_mode & 0o077 == 0  # owner-only

    later = EvalLlama()  # a new process: nothing in its context
    again = marked_reply(later, messages("Who directed Alien?"), {}, [], store=store)
    assert again["timings"]["restored"] == prefix and not again["timings"]["stored"]
    assert later.evaluated == [again["usage"]["prompt_tokens"] - prefix]  # only what follows the shared prefix
    assert again["choices"][0]["message"]["content"] == "done"

    other = PrefixStore(tmp_path / "states", "model-b")  # another model file: the state is not its own
    fresh = EvalLlama()
    marked_reply(fresh, messages("Who directed Alien?"), {}, [], store=other)
    assert sum(fresh.evaluated) == again["usage"]["prompt_tokens"]


def test_no_store_or_a_prompt_without_shared_messages_stores_nothing(tmp_path):
    store = PrefixStore(tmp_path / "states", "m")
    marked_reply(EvalLlama(), [{"role": "user", "content": "Q " * 400}], {}, [], store=store)
    assert not (tmp_path / "states").exists()
    plain = EvalLlama()
    marked_reply(plain, messages("Q"), {}, [], store=None)
    assert len(plain.evaluated) == 1


def test_an_unreadable_file_is_dropped_and_the_oldest_go_past_the_capacity(tmp_path):
    store = PrefixStore(tmp_path, "m")
    marked_reply(EvalLlama(), messages("Q1"), {}, [], store=store)
    (path,) = list(tmp_path.glob("*.npz"))
    path.write_bytes(b"not an array file")
    llama = EvalLlama()
    out = marked_reply(llama, messages("Q2"), {}, [], store=store)
    assert out["timings"]["restored"] == 0 and sum(llama.evaluated) == out["usage"]["prompt_tokens"]
    assert path.is_file() and path.stat().st_size > 100  # stored again, whole
    small = PrefixStore(tmp_path, "m", capacity_bytes=1)
    for n in (1, 2):
        system = {"role": "system", "content": f"Variant {n}. " + SYSTEM}
        marked_reply(EvalLlama(), [system, *DEMO, {"role": "user", "content": "Q"}], {}, [], store=small)
    (kept,) = list(tmp_path.glob("*.npz"))  # the newest stays, the older ones went
    assert kept.name.startswith("m-") and kept != path
