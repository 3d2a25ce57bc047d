"""A small SPARQL tokenizer: enough structure to reason about a query's text
(its form, prefixes, SERVICE clauses) without being fooled by strings, IRIs or
comments, and without a full parse that would reject endpoint extensions."""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass

_TOKEN = re.compile(
    r"""
    (?P<ws>[\ \t\r\n]+)
  | (?P<comment>\#[^\n\r]*)
  | (?P<string>'''(?:[^'\\]|\\.|'(?!''))*'''|\"\"\"(?:[^"\\]|\\.|"(?!""))*\"\"\"
              |'(?:[^'\\\n]|\\.)*'|"(?:[^"\\\n]|\\.)*")
  | (?P<iri><[^<>"{}|^`\\\x00-\x20]*>)
  | (?P<var>[?$][A-Za-z0-9_\u00B7-\uFFFF]+)
  | (?P<pname>(?:[A-Za-z][\w.-]*)?:(?:[\w\-:%.]*[\w\-:%])?)
  | (?P<name>[A-Za-z_][\w]*)
  | (?P<langtag>@[A-Za-z]+(?:-[A-Za-z0-9]+)*)
  | (?P<punct>\^\^|&&|\|\||!=|<=|>=|[{}()\[\];,.*=<>!+\-/|^@?a-z0-9])
  | (?P<other>.)
    """,
    re.X | re.S,
)


@dataclass(frozen=True)
class Token:
    kind: str
    text: str
    start: int
    end: int

    @property
    def upper(self) -> str:
        return self.text.upper()


@functools.lru_cache(maxsize=256)
def tokenize(query: str) -> tuple[Token, ...]:
    """All significant tokens (no whitespace, no comments). Memoised: one query's text is tokenized by the
    guard, the prefix completion, the pattern analysis and the form checks in turn."""
    tokens = []
    for match in _TOKEN.finditer(query):
        kind = match.lastgroup or "other"
        if kind in ("ws", "comment"):
            continue
        tokens.append(Token(kind, match.group(), match.start(), match.end()))
    return tuple(tokens)


def declared_prefixes(tokens: Sequence[Token]) -> dict[str, str]:
    """PREFIX declarations of the prologue: name (without colon) -> IRI."""
    out: dict[str, str] = {}
    for i, tok in enumerate(tokens[:-2]):
        if (
            tok.kind == "name"
            and tok.upper == "PREFIX"
            and tokens[i + 1].kind == "pname"
            and tokens[i + 2].kind == "iri"
        ):
            out[tokens[i + 1].text.rstrip(":")] = tokens[i + 2].text[1:-1]
    return out


def used_prefixes(tokens: Sequence[Token]) -> set[str]:
    return {tok.text.split(":", 1)[0] for tok in tokens if tok.kind == "pname"}


def query_form(tokens: Sequence[Token]) -> str | None:
    """The first keyword after the prologue (SELECT, ASK, INSERT, …), upper-cased."""
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if tok.kind == "name" and tok.upper == "PREFIX":
            i += 3
        elif tok.kind == "name" and tok.upper == "BASE":
            i += 2
        elif tok.kind == "name":
            return tok.upper
        else:
            return None
    return None


def expand(pname: str, prefixes: dict[str, str]) -> str | None:
    prefix, _, local = pname.partition(":")
    base = prefixes.get(prefix)
    return base + local if base is not None else None


def matching_brace(tokens: Sequence[Token], open_index: int) -> int:
    """Index of the `}` closing the `{` at open_index, or -1."""
    depth = 0
    for i in range(open_index, len(tokens)):
        if tokens[i].text == "{":
            depth += 1
        elif tokens[i].text == "}":
            depth -= 1
            if depth == 0:
                return i
    return -1
