"""The field markers of a DSPy chat-format reply, which the prompt fixes and the engine can write itself.

A ChatAdapter reply reads `[[ ## next_thought ## ]]\\n…\\n\\n[[ ## next_tool_name ## ]]\\n…\\n\\n`
`[[ ## next_tool_args ## ]]\\n…\\n\\n[[ ## completed ## ]]`: 29 of a controller reply's ~70 tokens are markers
whose text and order the last user message has already spelt out ("Respond with the corresponding output fields,
starting with the field …"). The local model generates a token at a time (~70 ms at a question's context length
on this CPU), but evaluates a batch of known tokens at a fraction of that, so the local engine writes the markers
(`lm.marked_reply`) and the model writes the values. Only the text is read here; nothing imports DSPy's adapters.
"""

from __future__ import annotations

import re

THOUGHT_FIELD = "next_thought"  # dspy.ReAct's reasoning field: most of what a controller reply generates
ARGS_FIELD = "next_tool_args"  # dspy.ReAct's arguments field: a JSON object, the last field of a controller reply
OPENING = "\n\n[["  # how the model begins the next marker: the engine writes the rest of it
_ORDER = re.compile(
    r"Respond with the corresponding output fields, starting with the field (.*?), and then ending "
    r"with the marker for `\[\[ ## completed ## \]\]`",
    re.S,
)
_FIELD = re.compile(r"`\[\[ ## (\w+) ## \]\]`")
SHORT_CLOSING = "Respond with {fields}."  # the short closing line (`Settings.closing_line`): the fields' names only
_SHORT_ORDER = re.compile(r"Respond with (\w+(?:, \w+)*)\.\s*\Z")


def short_closing(fields: list[str]) -> str:
    """The short closing line that asks for `fields` in order (~15 tokens where ChatAdapter's takes ~90)."""
    return SHORT_CLOSING.format(fields=", ".join(fields))


def reply_fields(messages: list[dict[str, str]]) -> list[str]:
    """The output fields, in order, that the last user message asks for (ChatAdapter's closing instruction, or the
    short one ending the message); [] when it asks for none: such a prompt is generated as it is."""
    for message in reversed(messages):
        if message["role"] == "user":
            content = str(message.get("content") or "")
            if found := _ORDER.search(content):
                return _FIELD.findall(found.group(1))
            found = _SHORT_ORDER.search(content)
            return found.group(1).split(", ") if found else []
    return []


_CHOICES = re.compile(
    r"^\[\[ ## (\w+) ## \]\]\n\{\1\} +# note: the value you produce "
    r"(?:must exactly match \(no extra characters\) one of|must be one of): ([^\n]*)$",
    re.M,
)


def field_choices(messages: list[dict[str, str]]) -> dict[str, tuple[str, ...]]:
    """The values the prompt's field structure (ChatAdapter's system message) lists for an output field, by field:
    a `Literal` or enum field such as the tool's name."""
    system = next((str(m.get("content") or "") for m in messages if m["role"] == "system"), "")
    return {name: tuple(v for v in values.split("; ") if v) for name, values in _CHOICES.findall(system)}


def marker(field: str) -> str:
    """A field's marker line, as ChatAdapter writes it."""
    return f"[[ ## {field} ## ]]\n"


def next_field(fields: list[str], reply: str) -> str | None:
    """The field after the last one whose marker the reply holds (the first if it holds none; None after the
    last field: the next marker closes the reply)."""
    held = [i for i, field in enumerate(fields) if f"[[ ## {field} ## ]]" in reply]
    after = held[-1] + 1 if held else 0
    return fields[after] if after < len(fields) else None


# the controller's tool list in its instructions, a line a tool: "(1) search_wikidata(query): …"
_TOOL = re.compile(r"^[ \t]*\(\d+\) (\w+)\((\w*)\): ", re.M)


def tool_arguments(messages: list[dict[str, str]]) -> dict[str, str]:
    """The one argument of each tool the system message lists with one (`agent.react`'s instructions), by tool."""
    system = next((str(m.get("content") or "") for m in messages if m["role"] == "system"), "")
    return {name: argument for name, argument in _TOOL.findall(system) if argument}


def field_value(reply: str, field: str) -> str | None:
    """The value the reply holds for `field` (up to the next marker), None when it holds no marker of it."""
    at = reply.rfind(marker(field))
    return None if at < 0 else reply[at + len(marker(field)) :].split(OPENING, 1)[0].strip()
