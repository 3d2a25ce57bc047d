"""Text from the graph or a model shown on a terminal: its control characters escaped (`\\x1b`, `\\u202e`), so an
entity label cannot clear the screen, set the window title, move the cursor or reorder what is printed."""

from __future__ import annotations

import re
from typing import TextIO

# C0 but tab and newline, DEL, C1, and the line / bidirectional-override controls of Unicode
CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def escape_controls(text: str) -> str:
    """`text` with each control character written as its Python escape."""
    return CONTROLS.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


class EscapingWriter:
    """A text stream that escapes control characters on their way to `out` (print(..., file=EscapingWriter(...)))."""

    def __init__(self, out: TextIO):
        self.out = out

    def write(self, text: str) -> int:
        return self.out.write(escape_controls(text))

    def flush(self) -> None:
        self.out.flush()


def escape_json_controls(text: str) -> str:
    """JSON text with the control characters `json.dumps(ensure_ascii=False)` leaves raw (DEL, C1, Unicode's)
    written as `\\uXXXX`: the same data, harmless on a terminal. Only inside strings can they occur."""
    return CONTROLS.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
