"""A ChatAdapter that writes a plain string field as itself, without DSPy's per-value pydantic detour.

DSPy's ChatAdapter formats every field value through `serialize_for_json`, which builds a new pydantic
`TypeAdapter` for the value's type each time (~25 µs); a controller call with its demonstrations has
60 such values, nearly all strings, whose JSON form is the string itself. `StringFieldsAdapter` formats a
`str` value as DSPy would and hands anything else to DSPy's own `format_field_value`, so prompts are the same
to the byte (a test compares them). The program passes it to its calls (`dspy.context(adapter=...)`) where no
adapter is configured; DSPy's own module-level function is left as it is. It reads a `Literal` output field (the
controller's `next_tool_name`) as the text the model wrote: the episode checks the name itself and answers one it
has no tool for with a step that says so (`parsing.normalize_tool_name`), where DSPy's parse would refuse the reply."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Hashable
from typing import Any, Literal, cast, get_origin

from dspy.adapters.chat_adapter import ChatAdapter, FieldInfoWithName
from dspy.adapters.utils import format_field_value as dspy_format_field_value
from dspy.signatures.signature import Signature

from saga_dspy.lm.markers import short_closing


def format_field_value(field_info: Any, value: Any, assume_text: bool = True) -> str | dict:
    """DSPy's `format_field_value`, with a plain string returned as it is."""
    if type(value) is str:
        return value if assume_text else {"type": "text", "text": value}
    return dspy_format_field_value(field_info, value, assume_text)


def read_as_text(signature: type[Signature]) -> type[Signature]:
    """`signature` with each `Literal` output field read as `str` (the same signature when it has none)."""
    if not any(get_origin(f.annotation) is Literal for f in signature.output_fields.values()):
        return signature
    return _text_twin(cast(Hashable, signature))


@functools.lru_cache(maxsize=32)  # a controller's signature, and its per-question twins shown no demonstration
def _text_twin(signature: Any) -> type[Signature]:
    for name, field in signature.output_fields.items():
        if get_origin(field.annotation) is Literal:
            signature = signature.with_updated_fields(name, type_=str)
    return signature


_chat_parse = inspect.unwrap(ChatAdapter.parse)


class StringFieldsAdapter(ChatAdapter):
    """ChatAdapter whose two field-formatting methods (DSPy's, line for line) use `format_field_value`, and whose
    parse reads a `Literal` output field as text (`read_as_text`). `closing`: the line that ends the prompt, DSPy's
    (`dspy`) or the output fields' names only (`short`, `Settings.closing_line`)."""

    def __init__(self, *args: Any, closing: str = "dspy", **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.closing = closing

    def user_message_output_requirements(self, signature: type[Signature]) -> str:
        if self.closing == "short":
            return short_closing(list(signature.output_fields))
        return super().user_message_output_requirements(signature)

    def parse(self, signature: type[Signature], completion: str) -> dict[str, Any]:
        return _chat_parse(self, read_as_text(signature), completion)

    def format_user_message_content(
        self,
        signature: type[Signature],
        inputs: dict[str, Any],
        prefix: str = "",
        suffix: str = "",
        main_request: bool = False,
    ) -> str:
        messages = [prefix]
        for k, v in signature.input_fields.items():
            if k in inputs:
                messages.append(f"[[ ## {k} ## ]]\n{format_field_value(field_info=v, value=inputs.get(k))}")
        if main_request:
            output_requirements = self.user_message_output_requirements(signature)
            if output_requirements is not None:
                messages.append(output_requirements)
        messages.append(suffix)
        return "\n\n".join(messages).strip()

    def format_field_with_value(self, fields_with_values: dict[FieldInfoWithName, Any]) -> str:
        output = [
            f"[[ ## {field.name} ## ]]\n{format_field_value(field_info=field.info, value=value)}"
            for field, value in fields_with_values.items()
        ]
        return "\n\n".join(output).strip()


# DSPy wraps `format` and `parse` with its callbacks again in every Adapter subclass; ChatAdapter's `format` is
# wrapped already, so each call would fire its callbacks twice (`parse` calls ChatAdapter's unwrapped)
StringFieldsAdapter.format = ChatAdapter.format


__all__ = ["StringFieldsAdapter", "format_field_value", "read_as_text"]
