"""What both of our LM engines (the in-process llama.cpp one and the OpenAI-compatible HTTP one) exchange with a
model: chat messages from DSPy's canonical request, the generation cap and stop strings, and DSPy's response from
an OpenAI-style chat completion (llama-cpp-python returns that shape too); and the part of DSPy's engine protocol
they share (`TextEngine`)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, ClassVar

END_OF_REPLY = "[[ ## completed ## ]]"  # ChatAdapter's closing marker: generation stops there

FINISH_REASONS = {  # OpenAI's finish reasons -> lm15's
    "stop": "stop",
    "length": "length",
    "tool_calls": "tool_call",
    "function_call": "tool_call",
}


class TextEngine:
    """What both engines share of DSPy 3.4's engine protocol: text in, text out (no tool calls, reasoning or
    response schema); a stream that is the whole completion as events; a saved state that is the constructor's
    keyword arguments named in `STATE`, each kept as the attribute of that name (`load_state` builds from it)."""

    supports_function_calling = False
    supports_reasoning = False
    supports_response_schema = False
    STATE: ClassVar[tuple[str, ...]] = ()

    def complete(self, request: Any) -> Any:
        raise NotImplementedError

    def stream(self, request: Any) -> Iterator[Any]:
        from dspy.lm15 import response_to_events

        return response_to_events(self.complete(request))

    def dump_state(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.STATE}


def capped_max_tokens(config: Any, cap: int) -> int:
    """What a call may generate: what it asks for (else the cap), never more than the cap."""
    asked = config.max_tokens if config.max_tokens is not None else cap
    return max(1, min(int(asked), cap))


def stops_with_marker(config: Any) -> list[str]:
    """The call's stop strings and the text adapters' end-of-reply marker (once)."""
    return list(dict.fromkeys([*(config.stop or []), END_OF_REPLY]))


def chat_messages(request: Any) -> list[dict[str, str]]:
    """A canonical lm15 Request as chat-template messages (text only)."""
    from dspy.lm15 import TextPart, UnsupportedFeatureError

    def text_of(parts: Any, where: str) -> str:
        if isinstance(parts, str):
            return parts
        if not all(isinstance(p, TextPart) for p in parts):
            kinds = sorted({type(p).__name__ for p in parts if not isinstance(p, TextPart)})
            raise UnsupportedFeatureError(f"This engine sends text only; {where} has {kinds}.")
        return "\n".join(p.text for p in parts)

    messages: list[dict[str, str]] = []
    if request.system is not None:
        messages.append({"role": "system", "content": text_of(request.system, "the system prompt")})
    for message in request.messages:
        role = {"developer": "system"}.get(message.role, message.role)
        if role not in ("system", "user", "assistant"):
            raise UnsupportedFeatureError(f"This engine sends no {message.role!r} messages.")
        messages.append({"role": role, "content": text_of(message.parts, f"a {message.role} message")})
    return messages


def chat_response(completion: dict[str, Any], model: str, cache_read_tokens: int | None) -> Any:
    """DSPy's lm15 Response for an OpenAI-style chat completion's first choice; `cache_read_tokens`: the prompt
    tokens the model did not evaluate again (its prefix cache), when known."""
    from dspy.lm15 import Message, Response, Usage

    choice = completion["choices"][0]
    usage = completion.get("usage") or {}
    return Response(
        id=completion.get("id") or None,
        model=model,
        message=Message.assistant((choice.get("message") or {}).get("content") or ""),
        finish_reason=FINISH_REASONS.get(choice.get("finish_reason") or "stop", "stop"),
        usage=Usage(
            input_tokens=usage.get("prompt_tokens"),
            output_tokens=usage.get("completion_tokens"),
            cache_read_tokens=cache_read_tokens,
        ),
    )
