"""How a field of a marked reply is kept short: a token cap, an end where the model starts writing a turn of its own
(`Action: …`, `Observation: …`), i.e. a tool result that never ran, and a choice among the values the prompt lists
(the tool's name) written out once its first tokens name one, and a JSON object (the tool's arguments) whose fixed
opening the engine writes and which ends where the object closes.

A thought that runs on can write "Action: search(…) Observation: …" of its own and then act on an id it
invented. The engine (`lm.marked_reply`)
ends such a field where the limit says and writes the next field's marker itself, so the model goes on to the
action it meant."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

# a line (or sentence) that opens a ReAct turn: what the tools would write next, not the model
INVENTED_TURN = re.compile(r"(?:^|\n|(?<=[.!?:]) )\s*(?:Action|Observation|Action Input|Tool result)\s*\d*\s*:", re.I)
SENTENCE_END = re.compile(r"[.!?](?=\s|$)")
ANY_FIELD = "*"  # the key of a limit for every field of a reply (where the field has none of its own)


@dataclass(frozen=True)
class FieldLimit:
    """`tokens`: the field ends after this many tokens of the model (0: no cap); `cut_invented`: it ends where it
    starts an invented turn; `choice`: where the prompt lists the field's values, it is the one value the model's
    first tokens begin (the engine writes the rest); `json_object`: the value is a JSON object, which ends where it
    closes, and whose opening `{"arg": "` the engine writes where the reply named a tool the prompt lists with
    one argument."""

    tokens: int = 0
    cut_invented: bool = False
    choice: bool = False
    json_object: bool = False

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def parse_limits(raw: Mapping[str, Any] | None) -> dict[str, FieldLimit]:
    """Limits by field name from their JSON form (a request's metadata); those that limit nothing are left out."""
    out = {}
    for name, spec in (raw or {}).items():
        limit = spec if isinstance(spec, FieldLimit) else FieldLimit(**dict(spec))
        if limit.tokens > 0 or limit.cut_invented or limit.choice or limit.json_object:
            out[str(name)] = limit
    return out


def invented_at(value: str) -> int | None:
    """Where `value` starts an invented turn (None: it does not)."""
    found = INVENTED_TURN.search(value)
    return found.start() if found else None


def capped(value: str) -> str:
    """A value cut at its cap: up to its last sentence end when that keeps half of it or more, else as it is."""
    ends = [m.end() for m in SENTENCE_END.finditer(value)]
    return value[: ends[-1]] if ends and ends[-1] >= len(value) // 2 else value


def chosen(value: str, choices: Sequence[str]) -> str | None:
    """The one of `choices` that `value` (begun) is the start of; None while it begins none or several."""
    begun = value.strip()
    found = [choice for choice in choices if choice.startswith(begun)] if begun else []
    return found[0] if len(found) == 1 else None


def closed_object(value: str) -> str | None:
    """`value` up to the end of the JSON object it begins with, once that object is complete (None: not yet)."""
    begun = value.lstrip()
    if not begun.startswith("{"):
        return None
    try:
        obj, end = json.JSONDecoder().raw_decode(begun)
    except ValueError:
        return None
    return begun[:end] if isinstance(obj, dict) else None


def json_opening(tool: str | None, arguments: Mapping[str, str]) -> str:
    """The fixed start of a tool's arguments object: `{"arg": "` when the prompt lists `tool` with one argument
    (a string), else nothing (the model writes it all)."""
    argument = arguments.get((tool or "").strip())
    return f'{{"{argument}": "' if argument else ""


def ended(value: str, limit: FieldLimit, tokens: int, choices: Sequence[str] = ()) -> str | None:
    """The field's value as it ends now, by `limit`, after `tokens` of the model's tokens (None: it goes on);
    `choices`: the values the prompt lists for the field."""
    if limit.choice and (named := chosen(value, choices)) is not None:
        return named
    if limit.json_object and (whole := closed_object(value)) is not None:
        return whole
    if limit.cut_invented and (at := invented_at(value)) is not None:
        return value[:at].rstrip()
    if limit.tokens and tokens >= limit.tokens:
        return capped(value).rstrip()
    return None


__all__ = [
    "ANY_FIELD",
    "FieldLimit",
    "capped",
    "chosen",
    "closed_object",
    "ended",
    "invented_at",
    "json_opening",
    "parse_limits",
]
