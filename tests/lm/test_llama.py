"""saga_dspy.lm.llama, marked_reply, prefix_cache: the in-process llama.cpp engine on a scripted llama
object. The tests with the real model are opt-in: SAGA_LLM_TESTS=1.
"""

from __future__ import annotations

import os
import sys
import threading
import time

import dspy
import pytest
from helpers.char_llama import CharTokens
from helpers.dspy_cache import fresh_dspy_cache  # noqa: F401  (autouse: a memory-only DSPy cache)

from saga_dspy import lm as lm_mod
from saga_dspy.config import Settings
from saga_dspy.lm import (
    LlamaCppEngine,
    LocalLlamaLM,
    LocalModelError,
    build_lm,
)
from saga_dspy.lm import llama as llama_mod
from saga_dspy.lm import marked_reply as marked_reply_mod
from saga_dspy.lm.markers import short_closing

# --- llama-cpp-python missing --------------------------------------------------------------------


def test_missing_llama_cpp_says_how_to_install(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # import llama_cpp -> ImportError
    with pytest.raises(LocalModelError) as err:
        lm_mod.require_llama_cpp()
    assert "pip install -e '.[local]'" in str(err.value) and "make local-model" in str(err.value)
    with pytest.raises(LocalModelError, match="llama-cpp-python is not installed"):
        build_lm(Settings(lm="local", cache_dir=tmp_path))


def test_llama_threads_spin_on_an_idle_machine_and_sleep_on_a_busy_one(monkeypatch):
    assert llama_mod.omp_wait_policy(0.1) is None  # libgomp's default: spin briefly, then sleep
    assert llama_mod.omp_wait_policy(1.0) == "PASSIVE"
    assert llama_mod.omp_wait_policy(None) == "PASSIVE"  # unknown: the safe choice
    busy = llama_mod.cpus_in_use(0.05)
    assert busy is None or 0.0 <= busy <= (os.cpu_count() or 1) + 0.01
    for load, expected in ((1.5, "PASSIVE"), (0.0, None)):
        monkeypatch.delitem(sys.modules, "llama_cpp", raising=False)  # not loaded yet
        monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
        monkeypatch.setattr(llama_mod, "cpus_in_use", lambda window=0.25, load=load: load)
        llama_mod.choose_wait_policy()
        assert os.environ.get("OMP_WAIT_POLICY") == expected
    monkeypatch.setenv("OMP_WAIT_POLICY", "ACTIVE")  # a user's choice stands
    monkeypatch.setattr(llama_mod, "cpus_in_use", lambda window=0.25: 2.0)
    llama_mod.choose_wait_policy()
    assert os.environ["OMP_WAIT_POLICY"] == "ACTIVE"
    monkeypatch.delenv("OMP_WAIT_POLICY")  # once the runtime is loaded, nothing changes
    monkeypatch.setitem(sys.modules, "llama_cpp", type(sys)("llama_cpp"))
    llama_mod.choose_wait_policy()
    assert "OMP_WAIT_POLICY" not in os.environ


# --- the engine, with a scripted stand-in for llama_cpp.Llama ------------------------------------


class ScriptedLlama:
    """Answers create_chat_completion like llama-cpp-python; records calls and overlap."""

    def __init__(self, reply="[[ ## answer ## ]]\n4\n\n[[ ## completed ## ]]", delay=0.0, error=None):
        self.reply = reply
        self.delay = delay
        self.error = error
        self.calls: list[dict] = []
        self.active = 0
        self.max_active = 0
        self._guard = threading.Lock()

    def create_chat_completion(self, messages, **kwargs):
        with self._guard:
            self.active += 1
            self.max_active = max(self.max_active, self.active)
        try:
            time.sleep(self.delay)
            self.calls.append({"messages": messages, **kwargs})
            if self.error is not None:
                raise self.error
            reply = self.reply(messages) if callable(self.reply) else self.reply
            return {
                "id": "chatcmpl-test",
                "object": "chat.completion",
                "model": "scripted",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": reply}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18},
            }
        finally:
            with self._guard:
                self.active -= 1


def test_calls_from_several_threads_never_overlap():
    llama = ScriptedLlama(delay=0.05)
    lm = LocalLlamaLM(llama=llama, cache=False)
    results, errors = [], []

    def ask(i):
        try:
            results.append(lm(f"question {i}")[0])
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not errors
    assert len(results) == 6 and len(llama.calls) == 6
    assert llama.max_active == 1


def test_copies_share_the_model_and_its_lock():
    llama = ScriptedLlama(delay=0.05)
    lm = LocalLlamaLM(llama=llama, cache=False)
    copies = [lm.copy(temperature=0.5) for _ in range(3)]
    threads = [threading.Thread(target=c, args=("hi",)) for c in copies + [lm]]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert len(llama.calls) == 4 and llama.max_active == 1


def test_generation_is_capped_and_settings_are_passed():
    llama = ScriptedLlama()
    lm = LocalLlamaLM(llama=llama, max_tokens=50, temperature=0.3, seed=7, cache=False)
    lm("hello", max_tokens=4000)
    lm("hello again")
    assert [c["max_tokens"] for c in llama.calls] == [50, 50]
    assert llama.calls[1]["temperature"] == pytest.approx(0.3)
    assert llama.calls[1]["seed"] == 7
    assert llama.calls[1]["messages"] == [{"role": "user", "content": "hello again"}]
    assert llama.calls[1]["stop"] == ["[[ ## completed ## ]]"]  # a small model runs on past its reply


CHATML = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


class TokenLlama(CharTokens):
    """llama-cpp-python's token interface with one token per character (eos: 7): `generate` writes the rest of
    `reply` after whatever the assistant turn already holds (the engine may only have written what the model
    would have), and records how many tokens each generation got and which characters the model made."""

    metadata = {"tokenizer.chat_template": CHATML}
    cache = None

    def __init__(self, reply: str, n_ctx: int = 100_000):
        self.reply, self._n_ctx = reply, n_ctx
        self.generations: list[dict] = []

    def n_ctx(self):
        return self._n_ctx

    def generate(self, tokens, **sampling):
        text = self.detokenize(tokens).decode()
        head = "<|im_start|>assistant\n"
        written = text[text.rindex(head) + len(head) :]
        assert self.reply.startswith(written), written  # nothing the model would not have written
        record = {"prompt": text, "tokens": len(tokens), "model": "", "sampling": sampling}
        self.generations.append(record)
        for c in self.reply[len(written) :]:
            record["model"] += c
            yield ord(c) + 1000
        yield 7


ASKS = (
    "Respond with the corresponding output fields, starting with the field `[[ ## next_thought ## ]]`, then "
    "`[[ ## next_tool_name ## ]]`, then `[[ ## next_tool_args ## ]]`, and then ending with the marker for "
    "`[[ ## completed ## ]]`."
)
STEP = (
    "[[ ## next_thought ## ]]\nLook it up.\n\n[[ ## next_tool_name ## ]]\nsearch_wikidata\n\n"
    '[[ ## next_tool_args ## ]]\n{"query": "x"}\n\n[[ ## completed ## ]]\n'
)


def test_the_engine_writes_the_field_markers_and_the_model_the_values():
    llama = TokenLlama(STEP)
    lm = LocalLlamaLM(llama=llama, cache=False, seed=3)
    out = lm(messages=[{"role": "system", "content": "S"}, {"role": "user", "content": "Q\n\n" + ASKS}])
    assert out == [STEP[: STEP.index("\n\n[[ ## completed")]]  # the reply, up to the marker that closes it
    # three generations: the first marker went in with the prompt, the others right behind the model's "[["
    assert [g["model"] for g in llama.generations] == [
        "Look it up.\n\n[[",
        "search_wikidata\n\n[[",
        '{"query": "x"}\n\n[[',
    ]
    assert llama.generations[0]["prompt"].endswith("<|im_start|>assistant\n[[ ## next_thought ## ]]\n")
    assert llama.generations[1]["prompt"].endswith("Look it up.\n\n[[ ## next_tool_name ## ]]\n")
    assert llama.generations[0]["sampling"]["temp"] == 0.0 and llama.seed == 3
    usage = lm.history[-1]["usage"]
    # the reply's tokens, and the model's "\n\n[[" that began the closing marker
    assert usage["completion_tokens"] == len(out[0]) + len("\n\n[[") and usage["prompt_tokens"] == len(
        llama.generations[0]["prompt"]
    ) - len("[[ ## next_thought ## ]]\n")


def test_the_engine_writes_the_markers_the_short_closing_line_names():
    llama = TokenLlama(STEP)
    ask = short_closing(["next_thought", "next_tool_name", "next_tool_args"])  # `--closing-line short`
    out = LocalLlamaLM(llama=llama, cache=False)(messages=[{"role": "user", "content": "Q\n\n" + ask}])
    assert out == [STEP[: STEP.index("\n\n[[ ## completed")]]
    written = [g["model"] for g in llama.generations]
    assert written == ["Look it up.\n\n[[", "search_wikidata\n\n[[", '{"query": "x"}\n\n[[']


def test_a_reply_is_parsed_by_chat_adapter_and_can_be_generated_whole():
    llama = TokenLlama("[[ ## reasoning ## ]]\n17 + 25 = 42.\n\n[[ ## answer ## ]]\n42\n\n[[ ## completed ## ]]")
    with dspy.context(lm=LocalLlamaLM(llama=llama, cache=False), adapter=dspy.ChatAdapter()):
        pred = dspy.Predict("question -> reasoning: str, answer: int")(question="What is 17 + 25?")
    assert (pred.reasoning, pred.answer) == ("17 + 25 = 42.", 42)
    assert [g["model"] for g in llama.generations] == ["17 + 25 = 42.\n\n[[", "42\n\n[["]
    # without the setting (or for a prompt that names no fields) the model writes the whole reply
    whole = ScriptedLlama(reply="[[ ## reasoning ## ]]\nr\n\n[[ ## answer ## ]]\n42\n\n[[ ## completed ## ]]")
    with dspy.context(lm=LocalLlamaLM(llama=whole, cache=False, write_markers=False), adapter=dspy.ChatAdapter()):
        assert dspy.Predict("question -> reasoning: str, answer: int")(question="?").answer == 42
    assert len(whole.calls) == 1


def test_a_reply_caught_in_a_loop_ends_after_its_third_repeat_with_one_copy_kept():
    start = (
        "[[ ## next_thought ## ]]\nRun it.\n\n[[ ## next_tool_name ## ]]\nexecute_sparql\n\n"
        '[[ ## next_tool_args ## ]]\n{"sparql": "SELECT ?x WHERE { '
    )
    loop = "?z wdt:P1 ?y ; "  # 15 one-character tokens, written over and over as a 1.5B model did
    llama = TokenLlama(start + loop * 40 + '}"}\n\n[[ ## completed ## ]]')
    lm = LocalLlamaLM(llama=llama, cache=False, max_tokens=2000)
    out = lm(messages=[{"role": "user", "content": ASKS}])[0]
    assert out == (start + loop).rstrip()  # stopped at the third copy, two of them taken back
    assert len(llama.generations[-1]["model"]) <= len('{"sparql": "SELECT ?x WHERE { ') + 3 * len(loop)  # not 600 more
    # repetition short of a loop (under 8 tokens thrice, or 8 to 31 tokens twice) is the model's to write
    looping = marked_reply_mod.looping
    assert looping([1, 2, 3] * 8) == 0 and looping(list(range(8)) * 2) == 0 and looping(list(range(8)) * 3) == 8
    assert looping([1, 2, 3] * 9) == 9  # a short block nine times is a 9-token block thrice
    long_block = list(range(100, 140))  # 40 tokens: twice is a loop, once is not
    assert looping([7] + long_block * 2) == 40 and looping([7] + long_block) == 0
    assert looping(list(range(20)) * 2) == 0  # a 20-token block needs three
    assert looping(list(range(120)) * 2) == 120 and looping(list(range(130)) * 2) == 0


def test_a_marked_reply_keeps_the_cap_and_ends_at_the_end_of_turn():
    llama = TokenLlama(STEP)
    lm = LocalLlamaLM(llama=llama, cache=False, max_tokens=20)
    out = lm(messages=[{"role": "user", "content": ASKS}])[0]
    # 20 tokens of reply after the opening marker: the model's and the marker written for it count alike
    assert out == STEP[: len("[[ ## next_thought ## ]]\n") + 20]
    early = TokenLlama("[[ ## next_thought ## ]]\nDone.")  # the model ends its turn before any other field
    assert LocalLlamaLM(llama=early, cache=False)(messages=[{"role": "user", "content": ASKS}]) == [
        "[[ ## next_thought ## ]]\nDone."
    ]
    with pytest.raises(dspy.ContextWindowExceededError):  # as create_chat_completion's error
        LocalLlamaLM(llama=TokenLlama(STEP, n_ctx=30), cache=False)(messages=[{"role": "user", "content": ASKS}])


def test_a_final_assistant_message_is_continued_not_answered():
    begun = '[[ ## next_tool_args ## ]]\n{"sparql": "'
    llama = TokenLlama(begun + 'SELECT ?x WHERE { ?x ?p ?o }"}\n\n[[ ## completed ## ]]')
    lm = LocalLlamaLM(llama=llama, cache=False)
    out = lm(
        messages=[
            {"role": "system", "content": "S"},
            {"role": "user", "content": "U\n\n" + ASKS},
            {"role": "assistant", "content": begun},
        ],
        response_format={"type": "json_object"},
    )
    assert out == ['SELECT ?x WHERE { ?x ?p ?o }"}']  # only what the model added
    # the chat template's text for the messages before, its generation prompt, then the begun reply
    assert llama.generations[0]["prompt"] == (
        "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU\n\n"
        + ASKS
        + "<|im_end|>\n<|im_start|>assistant\n"
        + begun
    )
    assert len(llama.generations) == 1  # the begun reply held every field: the model's "\n\n[[" ended it
    plain = ScriptedLlama()
    LocalLlamaLM(llama=plain, cache=False)(messages=[{"role": "user", "content": "U"}])
    assert "messages" in plain.calls[-1]  # any other conversation is a chat completion


def test_predict_with_chat_adapter_and_usage_tracking():
    llama = ScriptedLlama()
    lm = LocalLlamaLM(llama=llama, cache=False, write_markers=False)  # a whole reply (markers: tests above)
    with dspy.context(lm=lm, adapter=dspy.ChatAdapter(), track_usage=True):
        pred = dspy.Predict("question -> answer")(question="What is 2 + 2?")
    assert pred.answer == "4"
    usage = pred.get_lm_usage()[lm.model]
    assert usage["prompt_tokens"] == 11 and usage["completion_tokens"] == 7
    roles = [m["role"] for m in llama.calls[0]["messages"]]
    assert roles[0] == "system" and roles[-1] == "user"


def test_json_adapter_gets_json_mode():
    llama = ScriptedLlama(reply='{"answer": "4"}')
    lm = LocalLlamaLM(llama=llama, cache=False)
    with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
        pred = dspy.Predict("question -> answer")(question="What is 2 + 2?")
    assert pred.answer == "4"
    assert llama.calls[0]["response_format"] == {"type": "json_object"}


def test_react_runs_on_the_engine():
    def reply(messages):
        prompt = messages[-1]["content"]
        if (
            "next_thought" in messages[0]["content"]
            and "[[ ## trajectory ## ]]" in prompt
            and "observation_0" not in prompt
        ):
            return (
                "[[ ## next_thought ## ]]\nAdd them.\n\n[[ ## next_tool_name ## ]]\nadd\n\n"
                '[[ ## next_tool_args ## ]]\n{"a": 2, "b": 3}\n\n[[ ## completed ## ]]'
            )
        if "next_thought" in messages[0]["content"]:
            return (
                "[[ ## next_thought ## ]]\nDone.\n\n[[ ## next_tool_name ## ]]\nfinish\n\n"
                "[[ ## next_tool_args ## ]]\n{}\n\n[[ ## completed ## ]]"
            )
        return "[[ ## reasoning ## ]]\nadd gave 5\n\n[[ ## answer ## ]]\n5\n\n[[ ## completed ## ]]"

    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    lm = LocalLlamaLM(llama=ScriptedLlama(reply=reply), cache=False, write_markers=False)  # whole replies
    with dspy.context(lm=lm, adapter=dspy.ChatAdapter()):
        pred = dspy.ReAct("question -> answer", tools=[add], max_iters=4)(question="2 + 3?")
    assert pred.answer == "5"
    assert pred.trajectory["observation_0"] == 5


def test_a_prompt_too_long_is_a_context_window_error():
    llama = ScriptedLlama(error=ValueError("Requested tokens (9000) exceed context window of 8192"))
    lm = LocalLlamaLM(llama=llama, cache=False)
    with pytest.raises(dspy.ContextWindowExceededError):
        lm("a very long prompt")
    assert len(llama.calls) == 1  # not retried


def test_responses_are_cached_by_dspy():
    llama = ScriptedLlama()
    lm = LocalLlamaLM(llama=llama, cache=True)
    assert lm("same prompt") == lm("same prompt")
    assert len(llama.calls) == 1


def test_a_cached_reply_is_keyed_by_whether_the_engine_wrote_its_markers():
    """The same messages with the markers written and generated are two requests: a cached reply made one way is
    never served for the other (the setting travels in the request, which is DSPy's cache key)."""
    messages = [{"role": "user", "content": "Q\n\n" + ASKS}]
    written, generated = TokenLlama(STEP), ScriptedLlama(reply=STEP)
    first = LocalLlamaLM(llama=written, cache=True)(messages=messages)
    again = LocalLlamaLM(llama=TokenLlama(STEP), cache=True)(messages=messages)  # same setting: served from the cache
    whole = LocalLlamaLM(llama=generated, cache=True, write_markers=False)(messages=messages)
    assert first == again and len(written.generations) == 3
    assert len(generated.calls) == 1 and whole[0].startswith("[[ ## next_thought ## ]]")


def test_state_round_trip(tmp_path):
    lm = LocalLlamaLM(model_path=tmp_path / "m.gguf", n_ctx=4096, max_tokens=64, cache=False)
    state = lm.dump_state()
    again = dspy.BaseLM.load_state(state, allow_custom_lm_class=True)
    assert isinstance(again, LocalLlamaLM)
    assert again.engine.dump_state() == lm.engine.dump_state()
    assert again.kwargs["max_tokens"] == 64
    generated = LocalLlamaLM(model_path=tmp_path / "m.gguf", write_markers=False, cache=False)
    back = dspy.BaseLM.load_state(generated.dump_state(), allow_custom_lm_class=True)
    assert back.kwargs["metadata"] == {"write_markers": False} and back.engine.write_markers is False


def test_build_lm_local_uses_settings(monkeypatch, tmp_path):
    model = tmp_path / "model.gguf"
    monkeypatch.setattr(llama_mod, "ensure_local_model", lambda settings: model)
    monkeypatch.setattr(llama_mod, "llama_cpp_available", lambda: True)
    lm = build_lm(Settings(lm="local", context_window=2048, max_tokens=99, temperature=0.2, seed=5, lm_cache=False))
    assert isinstance(lm, LocalLlamaLM) and isinstance(lm, dspy.BaseLM)
    engine = lm.engine
    assert isinstance(engine, LlamaCppEngine)
    assert (engine.model_path, engine.n_ctx, engine.n_threads, engine.max_tokens) == (str(model), 2048, 2, 99)
    assert (engine.temperature, engine.seed) == (0.2, 5)
    assert lm.cache is False and lm.kwargs["max_tokens"] == 99


# --- the real model (opt-in) ---------------------------------------------------------------------------


@pytest.mark.llm
@pytest.mark.skipif(os.environ.get("SAGA_LLM_TESTS") != "1", reason="needs the real local model: SAGA_LLM_TESTS=1")
def test_real_local_model_answers_a_predict():
    lm = build_lm(Settings(lm="local", lm_cache=False, max_tokens=64))
    with dspy.context(lm=lm, adapter=dspy.ChatAdapter(), track_usage=True):
        start = time.perf_counter()
        pred = dspy.Predict("question -> answer: int")(question="What is 17 + 25? Reply with the number only.")
        seconds = time.perf_counter() - start
    assert pred.answer == 42
    usage = pred.get_lm_usage()[lm.model]
    assert usage["prompt_tokens"] > 50 and 0 < usage["completion_tokens"] <= 64
    print(f"real local model: {seconds:.1f} s, {usage}")


@pytest.mark.llm
@pytest.mark.skipif(os.environ.get("SAGA_LLM_TESTS") != "1", reason="needs the real local model: SAGA_LLM_TESTS=1")
def test_real_local_model_continues_a_begun_reply_after_the_chat_completion_prefix():
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter

    from saga_dspy.agent.begun_reply import BegunReplyAdapter
    from saga_dspy.lm.marked_reply import chat_prompt

    lm = build_lm(Settings(lm="local", lm_cache=False, max_tokens=16))
    llama = lm.llama_engine._handle().llama
    messages = [
        {"role": "system", "content": "S"},
        {"role": "user", "content": "U1"},
        {"role": "assistant", "content": "A1"},
        {"role": "user", "content": "U2"},
    ]
    eos = llama._model.token_get_text(llama.token_eos())
    # the text create_chat_completion builds (llama-cpp-python's own formatter), so the prefix cache matches
    assert (
        chat_prompt(llama, messages)
        == Jinja2ChatFormatter(llama.metadata["tokenizer.chat_template"], eos, "")(messages=messages).prompt
    )
    begun = "[[ ## reasoning ## ]]\n17 + 25 = 42.\n\n[[ ## answer ## ]]\n"
    with dspy.context(lm=lm, adapter=BegunReplyAdapter(begun)):
        pred = dspy.Predict("question -> reasoning: str, answer: int")(question="What is 17 + 25?")
    assert pred.answer == 42 and pred.reasoning == "17 + 25 = 42."
    assert not lm.history[-1]["outputs"][0].lstrip().startswith("[[")  # continued, not answered anew


def test_prefix_state_cache_keeps_one_logits_row_and_finds_the_longest_prefix():
    import numpy as np

    from saga_dspy.lm import PrefixStateCache

    class State:
        def __init__(self, n):
            self.llama_state_size = 100
            self.scores = np.arange(n * 10, dtype=np.float32).reshape(n, 10)  # a whole batch of logits rows
            self.input_ids = np.zeros(n, dtype=np.intc)

    cache = PrefixStateCache(capacity_bytes=700, superseded_tail=0)
    cache[(1, 2, 3)] = State(3)  # 100 + one row (40) + 12
    cache[(1, 2, 9, 9)] = State(4)  # 100 + 40 + 16
    cache[(7, 7)] = State(2)  # 100 + 40 + 8
    assert cache.cache_size == 152 + 156 + 148
    kept = cache.states[(1, 2, 3)].scores
    assert kept.shape == (1, 10) and kept[0, 0] == 20.0  # the last row, copied (the batch is not kept alive)
    assert cache[(1, 2, 9, 9, 5)] is cache.states[(1, 2, 9, 9)]  # longest shared prefix
    assert (8,) not in cache
    with pytest.raises(KeyError):
        cache[(8, 8)]
    cache[(5,)] = State(8)  # 100 + 40 + 32 = 172: over 700, the least recently used go first
    cache[(6,)] = State(8)
    assert cache.cache_size <= 700 and (1, 2, 3) not in cache.states and (1, 2, 9, 9) in cache.states


def test_a_state_the_next_step_extends_is_dropped_and_other_questions_states_are_kept():
    import numpy as np

    from saga_dspy.lm import PrefixStateCache

    class State:
        llama_state_size, scores, input_ids = 100, np.zeros((1, 1), dtype=np.float32), np.zeros(1, dtype=np.intc)

    shared = tuple(range(100))  # the instructions and a demonstration two questions share
    first = shared + (1,) * 20  # question 1, step 1 (its tail: the type context, the log, the reply)
    cache = PrefixStateCache(capacity_bytes=10**6, superseded_tail=8)
    cache[first + (5,) * 6] = State()
    cache[first + (2,) * 30] = State()  # step 2 extends step 1's prompt: step 1's state is superseded
    assert list(cache.states) == [first + (2,) * 30]
    cache[shared + (3,) * 40] = State()  # question 2 shares only the prefix: question 1's state stays
    assert len(cache.states) == 2
    cache[(9,) * 5] = State()  # a short prompt of another kind (answer type, pruning) ...
    cache[shared + (3,) * 41] = State()  # ... is not superseded by a long one that shares none of it
    assert (9,) * 5 in cache.states and shared + (3,) * 40 not in cache.states
    assert cache[first + (2,) * 5] is cache.states[first + (2,) * 30]  # question 1's prefix: its latest state
    whole = PrefixStateCache(capacity_bytes=10**6, superseded_tail=0)  # a state is only dropped for a longer copy
    whole[first + (5,) * 6] = State()
    whole[first + (2,) * 30] = State()
    whole[first + (2,) * 31] = State()
    assert list(whole.states) == [first + (5,) * 6, first + (2,) * 31]


class PrefixReusingLlama(ScriptedLlama):
    """Like llama-cpp-python: keeps the last prompt's tokens (here: characters), evaluates only what follows
    the common prefix in one eval() call, then one eval() per generated token."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.held: list[int] = []
        self.evaluated: list[int] = []

    def eval(self, tokens):
        self.evaluated.append(len(tokens))

    def create_chat_completion(self, messages, **kwargs):
        tokens = [ord(c) for m in messages for c in m["content"]]
        prefix = 0
        for a, b in zip(self.held, tokens[:-1]):
            if a != b:
                break
            prefix += 1
        self.eval(tokens[prefix:])
        for _ in range(3):
            self.eval([0])
        self.held = tokens
        out = super().create_chat_completion(messages, **kwargs)
        out["usage"] = {"prompt_tokens": len(tokens), "completion_tokens": 3, "total_tokens": len(tokens) + 3}
        return out


def test_prompt_tokens_reused_from_the_prefix_are_reported():
    llama = PrefixReusingLlama()
    lm = LocalLlamaLM(llama=llama, cache=False)
    shared = "You are a careful agent. " * 20
    with dspy.context(lm=lm, track_usage=True) as _, dspy.track_usage() as usage:
        lm(messages=[{"role": "user", "content": shared + "first question"}])
        lm(messages=[{"role": "user", "content": shared + "second question"}])
    total = usage.get_total_tokens()[lm.model]
    assert llama.evaluated[0] == len(shared) + len("first question")
    assert total["prompt_tokens_details"]["cached_tokens"] == len(shared)  # the second call reused the prefix
    assert total["prompt_tokens"] == 2 * len(shared) + len("first question") + len("second question")


@pytest.mark.llm
@pytest.mark.skipif(os.environ.get("SAGA_LLM_TESTS") != "1", reason="needs the real local model: SAGA_LLM_TESTS=1")
def test_real_local_model_restores_a_slim_state_across_another_prompt():
    """A prefix evaluated before another prompt replaced the live KV comes back from the state cache, whose
    states keep one logits row, and the reply after the restore is still right."""
    lm = build_lm(Settings(lm="local", lm_cache=False, max_tokens=16))
    rules = " ".join(f"Rule {i}: reply with the number only." for i in range(40))
    with dspy.context(lm=lm, adapter=dspy.ChatAdapter(), track_usage=True):
        dspy.Predict(dspy.Signature("question -> answer: int", rules))(question="What is 2 + 2?")
        dspy.Predict("text -> summary")(text="Another prompt with another system message.")
        pred = dspy.Predict(dspy.Signature("question -> answer: int", rules))(question="What is 17 + 25?")
    assert pred.answer == 42
    usage = pred.get_lm_usage()[lm.model]
    assert usage["prompt_tokens_details"]["cached_tokens"] >= 300  # the system message was not evaluated again
    cache = lm.llama_engine._handle().llama.cache
    assert all(state.scores.shape[0] == 1 for state in cache.states.values())
