"""A plain string field is formatted as itself, without DSPy's per-value pydantic detour.

DSPy's ChatAdapter formats every field value through `serialize_for_json`, which builds a new pydantic
`TypeAdapter` for the value's type each time (~25 µs); a controller call with its demonstrations has
60 such values, nearly all strings, whose JSON form is the string itself. `install()` puts a wrapper
in front of the adapter's `format_field_value` that returns a `str` value as DSPy would and hands
anything else to DSPy's own function, so prompts are the same to the byte (a test compares them)."""

from __future__ import annotations

from typing import Any

import dspy.adapters.chat_adapter as chat_adapter
from dspy.adapters.utils import format_field_value as dspy_format_field_value


def format_field_value(field_info: Any, value: Any, assume_text: bool = True) -> str | dict:
    """DSPy's `format_field_value`, with a plain string returned as it is."""
    if type(value) is str:
        return value if assume_text else {"type": "text", "text": value}
    return dspy_format_field_value(field_info, value, assume_text)


def install() -> None:
    """Route ChatAdapter's field formatting through `format_field_value` (once; a wrapper someone else put
    there is left alone)."""
    if chat_adapter.format_field_value is dspy_format_field_value:
        chat_adapter.format_field_value = format_field_value


__all__ = ["format_field_value", "install"]
