"""A chat completion over a llama-cpp-python model in which the engine writes the fixed text itself: the reply a
final assistant message began and the field markers of a DSPy chat-format reply (`lm.markers`), the model the
values; a reply caught in a loop ends."""

from __future__ import annotations

import functools
import importlib.util
import time
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from saga_dspy.lm.field_limits import ANY_FIELD, FieldLimit, ended, json_opening
from saga_dspy.lm.markers import OPENING, field_choices, field_value, marker, next_field, tool_arguments
from saga_dspy.lm.prefix_cache import common_prefix
from saga_dspy.lm.prefix_store import MIN_PREFIX_TOKENS, PrefixStore


def _token_text(llama: Any, token: int) -> str:
    return llama.detokenize([token], special=True).decode("utf-8", "replace") if token != -1 else ""


@functools.lru_cache(maxsize=4)
def _compiled_template(template: str) -> Any:
    """A chat template compiled once per process (a model has one), not at every continuation."""
    from jinja2.ext import loopcontrols
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    return ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols]).from_string(
        template
    )


def chat_prompt(llama: Any, messages: list[dict[str, str]], generation_prompt: bool = True) -> str:
    """The text llama-cpp-python's `create_chat_completion` builds for `messages` with the model's own (GGUF) chat
    template and the generation prompt: a sandboxed Jinja render with its options and names (a real-model test
    compares the tokens)."""

    def raise_exception(message: str) -> None:
        raise ValueError(message)

    return _compiled_template(llama.metadata["tokenizer.chat_template"]).render(
        messages=messages,
        eos_token=_token_text(llama, llama.token_eos()),
        bos_token=_token_text(llama, llama.token_bos()),
        add_generation_prompt=generation_prompt,
        raise_exception=raise_exception,
        strftime_now=lambda f: time.strftime(f),
    )


def _end_of_turn(llama: Any) -> Any:
    """llama.cpp's end-of-generation test (every EOG token of the vocabulary: Qwen's <|im_end|> and
    <|endoftext|>); an object that is not llama-cpp-python's (a test double) ends at its eos token."""
    if not hasattr(llama, "_model") or importlib.util.find_spec("llama_cpp") is None:
        eos = llama.token_eos()
        return lambda token: token == eos
    from llama_cpp import llama_cpp as native

    vocab = llama._model.vocab
    return lambda token: bool(native.llama_vocab_is_eog(vocab, token))


LOOP_PERIODS = range(8, 129)  # token lengths of a block whose repetition is a degenerate loop
LOOP_REPEATS = 3  # ... when it ends the reply this many times in a row
LONG_LOOP = 32  # ... or twice, for a block this long or longer


def repeats_for(period: int) -> int:
    """How many times in a row a block of `period` tokens must end the reply to be a loop."""
    return 2 if period >= LONG_LOOP else LOOP_REPEATS


def looping(tokens: Sequence[int]) -> int:
    """The period of a block that ends `tokens` as a loop: three times in a row, or twice when it is 32 tokens or
    longer (0: none).

    A model greedy-decoding a long argument can fall into a loop and write the same nested pattern until the
    cap; three exact repetitions of 8 or more tokens, or two of 32 or more, are never a query or a thought worth
    the rest of it."""
    n = len(tokens)
    for period in LOOP_PERIODS:
        repeats = repeats_for(period)
        if n < period * repeats:
            if n < period * 2:
                break
            continue
        block = tokens[n - period :]
        if all(tokens[n - (i + 1) * period : n - i * period] == block for i in range(1, repeats)):
            return period
    return 0


def _field_at(fields: list[str], reply: str) -> str | None:
    """The field whose value `reply` is writing: the last one whose marker it holds."""
    held = [field for field in fields if f"[[ ## {field} ## ]]" in reply]
    return held[-1] if held else None


def shared_prefix(llama: Any, messages: list[dict[str, str]], prompt_ids: list[int]) -> list[int]:
    """The prompt's tokens before its last user message (the instructions and the demonstrations every question
    of a form shares); [] when there are none or they do not tokenize as the prompt's first tokens."""
    last_user = max((i for i, m in enumerate(messages) if m["role"] == "user"), default=0)
    if last_user == 0:
        return []
    text = chat_prompt(llama, messages[:last_user], generation_prompt=False)
    ids = llama.tokenize(text.encode("utf-8"), add_bos=True, special=True)
    return ids if prompt_ids[: len(ids)] == ids else []


def _restore_stored(llama: Any, store: PrefixStore, head: list[int]) -> int:
    """Restores the longest prefix of `head` the store holds where it is longer than what the model holds now;
    how many tokens it restored (0: none)."""
    stored = store.longest(head)
    if stored is None or stored.length <= common_prefix(llama._input_ids.tolist(), head):
        return 0
    state = store.load(stored, llama.n_ctx())
    if state is None:
        return 0
    llama.load_state(state)
    return stored.length


def _store_prefix(llama: Any, store: PrefixStore, prefix: list[int]) -> int:
    """Evaluates `prefix` alone (what the model holds of it is kept) and stores its state; the tokens evaluated.
    Only called where the model holds no more of the prompt than `prefix`, so the prompt loses no reuse."""
    held = common_prefix(llama._input_ids.tolist(), prefix)
    llama.n_tokens = held
    llama.eval(prefix[held:])  # drops the cells past `held` first
    store.save(prefix, llama.save_state())
    return len(prefix) - held


def marked_reply(
    llama: Any,
    messages: list[dict[str, str]],
    kwargs: dict[str, Any],
    fields: list[str],
    limits: Mapping[str, FieldLimit] | None = None,
    store: PrefixStore | None = None,
) -> dict[str, Any]:
    """A chat completion whose fixed text the engine writes: the reply a final assistant message began (the model
    continues it, and the completion is only what follows, as OpenAI-compatible servers return a continued
    message) and the field markers of `fields` (`lm.markers`).

    The messages are rendered as `create_chat_completion` renders them (`chat_prompt`, so the prefix cache
    matches). A fresh reply begins with the first field's marker, evaluated with the prompt; when the model
    begins a marker (`\\n\\n[[`), the rest of the next field's marker is evaluated in one batch behind it; the
    marker that would close the reply (`[[ ## completed`) ends it. The model writes every value; where it
    would have written a marker itself, the text is the same. With no fields this is a plain continuation.

    `limits` (`lm.field_limits`): a field they name (`ANY_FIELD`: every other) ends where its limit says (a token
    cap, an invented turn, the one value of those the prompt lists that its first tokens begin, a JSON object
    closed), and the engine writes the rest of that value and the next field's marker, as if the model had; a
    tool's arguments object begins with the engine's `{"arg": "` where the prompt lists that tool's one argument.
    The reply's `timings` say how many tokens the model sampled and the engine wrote, and the seconds to the first
    sampled token and after it."""
    begun = messages[-1]["content"] if messages and messages[-1]["role"] == "assistant" else ""
    prompt_text = chat_prompt(llama, messages[:-1] if begun else messages) + begun
    opened = marker(fields[0]) if fields and not begun else ""
    # the prompt's tokens, then the opening marker's: a marker line begins a new token after the generation
    # prompt's newline (checked with the bundled tokenizer), so this is the tokenization of the whole text
    prompt_ids = llama.tokenize(prompt_text.encode("utf-8"), add_bos=True, special=True)
    head = prompt_ids + (llama.tokenize(opened.encode("utf-8"), add_bos=False, special=True) if opened else [])
    if len(head) >= llama.n_ctx():
        raise ValueError(f"Requested tokens ({len(head)}) exceed context window of {llama.n_ctx()}")
    budget = min(int(kwargs.get("max_tokens") or 1 << 30), llama.n_ctx() - len(head))
    eos = _token_text(llama, llama.token_eos())  # the end of the assistant's turn, as text
    stops = [s for s in dict.fromkeys([*kwargs.get("stop", []), eos]) if s]
    sampling = {
        "temp": float(kwargs.get("temperature", 0.0)),
        "top_k": int(kwargs.get("top_k", 40)),
        "top_p": float(kwargs.get("top_p", 0.95)),
        "min_p": 0.05,
        "repeat_penalty": 1.0,
        "frequency_penalty": float(kwargs.get("frequency_penalty", 0.0)),
        "presence_penalty": float(kwargs.get("presence_penalty", 0.0)),
    }
    started = time.perf_counter()  # the prompt's seconds count the restores and a stored prefix's evaluation
    if llama.cache:  # as create_completion: a longer evaluated prefix saved earlier is restored first
        try:
            saved = llama.cache[head]
            if common_prefix(saved.input_ids.tolist(), head) > common_prefix(llama._input_ids.tolist(), head):
                llama.load_state(saved)
        except KeyError:
            pass
    restored, stored, stored_evaluated = 0, 0, 0
    if store is not None and not begun:  # the instructions and fixed demonstrations, from an earlier process
        restored = _restore_stored(llama, store, head)
        prefix = shared_prefix(llama, messages, prompt_ids)
        if (
            len(prefix) >= MIN_PREFIX_TOKENS
            and common_prefix(llama._input_ids.tolist(), head) <= len(prefix)
            and not store.holds(prefix)
        ):
            stored, stored_evaluated = len(prefix), _store_prefix(llama, store, prefix)
    ends_turn = _end_of_turn(llama)
    llama.set_seed(int(kwargs.get("seed", 0)))
    limits = limits or {}
    choices = field_choices(messages)
    arguments = tool_arguments(messages)

    def opening(field: str, reply: str) -> list[int]:
        """The fixed opening of `field`'s value the engine writes (a tool's arguments object), as tokens."""
        limit = limits.get(field, limits.get(ANY_FIELD))
        at = fields.index(field)
        if limit is None or not limit.json_object or at == 0:
            return []
        text = json_opening(field_value(reply, fields[at - 1]), arguments)
        return llama.tokenize(text.encode("utf-8"), add_bos=False, special=True) if text else []

    added: list[int] = []  # after the head: the model's tokens and the markers written for it
    text, finish, running = "", "length", True
    field = _field_at(fields, begun + opened)  # the field being written, its value's start in added and text
    field_from, field_chars, field_tokens = 0, 0, 0
    first, sampled = None, 0
    while running and len(added) < budget:
        running = False
        for token in llama.generate(head + added, **sampling):
            first = first or time.perf_counter()
            if ends_turn(token):
                finish = "stop"
                break
            added.append(token)
            sampled += 1
            field_tokens += 1
            text = llama.detokenize(added, prev_tokens=head).decode("utf-8", "ignore")
            cut = min((text.index(s) for s in stops if s in text), default=-1)
            if cut >= 0:
                text, finish = text[:cut], "stop"
                break
            if fields and (begun + opened + text).endswith(OPENING):
                field = next_field(fields, begun + opened + text)
                if field is None:  # the closing marker: the reply is complete
                    text, finish = text[: -len(OPENING)], "stop"
                    break
                rest = llama.tokenize(marker(field)[len("[[") :].encode("utf-8"), add_bos=False, special=True)
                added += rest[: budget - len(added)]  # the cap counts the markers written too
                text = llama.detokenize(added, prev_tokens=head).decode("utf-8", "ignore")
                field_from, field_chars, field_tokens = len(added), len(text), 0
                added += opening(field, begun + opened + text)[: budget - len(added)]
                text = llama.detokenize(added, prev_tokens=head).decode("utf-8", "ignore")
                running = True  # generate again: the marker is evaluated in one batch with the model's "[["
                break
            limit = limits.get(field, limits.get(ANY_FIELD)) if field is not None else None
            listed = choices.get(field or "", ())
            value = ended(text[field_chars:], limit, field_tokens, listed) if limit is not None else None
            if value is not None and field is not None:  # the field ends here: the next marker is written for it
                following = next_field(fields, begun + opened + text)
                kept = llama.tokenize(value.encode("utf-8"), add_bos=False, special=True) if value else []
                added = added[:field_from] + kept
                if following is None:
                    text, finish = llama.detokenize(added, prev_tokens=head).decode("utf-8", "ignore"), "stop"
                    break
                added += llama.tokenize(OPENING.encode("utf-8"), add_bos=False, special=True)
                added += llama.tokenize(marker(following)[len("[[") :].encode("utf-8"), add_bos=False, special=True)
                del added[budget:]
                text = llama.detokenize(added, prev_tokens=head).decode("utf-8", "ignore")
                field, field_from, field_chars, field_tokens = following, len(added), len(text), 0
                added += opening(following, begun + opened + text)[: budget - len(added)]
                text = llama.detokenize(added, prev_tokens=head).decode("utf-8", "ignore")
                running = True
                break
            if len(added) >= budget:
                break
            period = looping(added)
            if period:  # one copy of the block stays: the reply reads as cut at the cap, which it would reach
                del added[len(added) - (repeats_for(period) - 1) * period :]
                text = llama.detokenize(added, prev_tokens=head).decode("utf-8", "ignore")
                break
    ended_at = time.perf_counter()
    if llama.cache:
        llama.cache[head + added] = llama.save_state()
    n_prompt = len(prompt_ids)
    return {
        "id": f"cmpl-{uuid.uuid4()}",
        "object": "chat.completion",
        "created": int(time.time()),
        "choices": [{"index": 0, "message": {"role": "assistant", "content": opened + text}, "finish_reason": finish}],
        "usage": {
            "prompt_tokens": n_prompt,
            "completion_tokens": len(head) - n_prompt + len(added),
            "total_tokens": len(head) + len(added),
        },
        "timings": {
            "sampled": sampled,
            "written": max(0, len(head) - n_prompt + len(added) - sampled),
            "restored": restored,  # prompt tokens restored from the store
            "stored": stored,  # the prefix stored (its tokens evaluated in an eval call of their own)
            "stored_evaluated": stored_evaluated,
            "prompt_seconds": (first or ended_at) - started,
            "reply_seconds": ended_at - (first or ended_at),
        },
    }
