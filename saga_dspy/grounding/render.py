"""Compact renderers with budgets: every observation fits `settings.observation_chars`
characters and says what it left out."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ..kg.results import XSD, AskResult, Binding, SelectResult

CELL = 48
DESCRIPTION = 90
VALUE = 60
CLASS_LABEL = 32  # a class named in a list (types, domain, range): some labels are a whole sentence


def clip(text: str, limit: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: max(1, limit - 1)] + "…"


_DATE = re.compile(r"^(-?\d{1,})-(\d\d)-(\d\d)T00:00:00Z?$")


def literal_text(b: Binding, limit: int = VALUE) -> str:
    """Dates shortened (1767-03-15; bare years for deep-time dates), numbers bare, strings quoted."""
    value = b.value
    m = _DATE.match(value)
    if m:
        year, month, day = m.groups()
        return year if (month == "01" and day == "01" and len(year.lstrip("-")) > 4) else f"{year}-{month}-{day}"
    if b.datatype and b.datatype.startswith(XSD) and b.datatype != XSD + "string":
        if re.fullmatch(r"-?\d+\.0+", value):
            value = value.split(".")[0]
        return clip(value, limit)
    text = clip(value, limit)
    if b.lang and b.lang != "en":
        return f'"{text}"@{b.lang}'
    return f'"{text}"'


def entity_text(eid: str, label: str, limit: int = VALUE) -> str:
    return f"{clip(label, limit)} ({eid})" if label else eid


def class_names(classes: Sequence[str], label: Callable[[str], str], limit: int = 3, ids: bool = False) -> str:
    names = []
    for c in list(classes)[:limit]:
        name = clip(label(c), CLASS_LABEL)
        names.append(f"{name} ({c})" if ids and name != c else name)
    more = len(classes) - limit
    return ", ".join(names) + (f" +{more} more" if more > 0 else "")


def fit(text: str, budget: int) -> str:
    """Last resort: cut a text to the budget and say so."""
    if len(text) <= budget:
        return text
    note = f"\n…[cut: {len(text) - budget + 40} more characters]"
    return text[: max(0, budget - len(note))].rstrip() + note


# --- blocks within a budget ------------------------------------------------------------------------------


@dataclass
class Block:
    """One item of a list observation, in three sizes: full, compact, a name."""

    full: str
    compact: str
    name: str


@dataclass
class Rendered:
    text: str
    shown_full: int = 0
    shown_compact: int = 0
    named_only: int = 0
    omitted: int = 0
    cut_notes: list[str] = field(default_factory=list)


def render_blocks(
    head: Sequence[str], blocks: Sequence[Block], budget: int, *, tail: Sequence[str] = (), what: str = "properties"
) -> Rendered:
    """Head lines, then the blocks in order within the budget.

    When every block fits in its compact form, all are shown and the first ones (in rank
    order) are upgraded to their full form while the budget allows; otherwise blocks are
    shown compact until the budget runs out and the rest are named, then counted. A final
    line says what was cut."""
    lines = [line for line in head if line]
    tail_lines = [line for line in tail if line]
    used = sum(len(line) + 1 for line in lines) + sum(len(line) + 1 for line in tail_lines)
    reserve = 100  # the cut note
    out = Rendered("")
    room = budget - used - reserve
    compact_total = sum(len(b.compact) + 1 for b in blocks)
    chosen: list[str] = []
    rest: list[Block] = []
    if compact_total <= room:
        spare = room - compact_total
        upgrading = True  # details go to the first blocks in rank order, without gaps
        for block in blocks:
            extra = len(block.full) - len(block.compact)
            if upgrading and extra <= spare:
                chosen.append(block.full)
                spare -= max(0, extra)
                out.shown_full += 1
            else:
                upgrading = upgrading and block.full == block.compact
                chosen.append(block.compact)
                out.shown_compact += int(block.full != block.compact)
                out.shown_full += int(block.full == block.compact)
    else:
        room -= 80  # the names line
        for i, block in enumerate(blocks):
            if len(block.compact) + 1 <= room:
                chosen.append(block.compact)
                room -= len(block.compact) + 1
                out.shown_compact += int(block.full != block.compact)
                out.shown_full += int(block.full == block.compact)
            else:
                rest = list(blocks[i:])
                break
    lines.extend(chosen)
    if rest:
        room = max(0, budget - sum(len(x) + 1 for x in lines) - sum(len(x) + 1 for x in tail_lines) - reserve)
        names: list[str] = []
        size = len("Not shown (budget): ")
        for block in rest:
            if not block.name:
                continue
            if size + len(block.name) + 2 > room:
                break
            names.append(block.name)
            size += len(block.name) + 2
        if names:
            lines.append("Not shown (budget): " + ", ".join(names))
        out.named_only = len(names)
        out.omitted = sum(1 for b in rest if b.name) - len(names)
    notes = []
    if out.shown_compact:
        notes.append(f"{out.shown_compact} without details")
    if out.named_only:
        notes.append(f"{out.named_only} named only")
    if out.omitted:
        notes.append(f"{out.omitted} more {what} omitted")
    if notes:
        lines.append(f"[cut to fit {budget} chars: {what}: " + "; ".join(notes) + "]")
    out.cut_notes = notes
    lines.extend(tail_lines)
    out.text = fit("\n".join(lines), budget)
    return out


# --- result tables ---------------------------------------------------------------------------------------------


def cell_text(b: Binding | None, label_of: Callable[[str], tuple[str | None, str]], limit: int = CELL) -> str:
    """label_of(iri) -> (short id or None, label)."""
    if b is None:
        return "-"
    if b.type == "uri":
        eid, label = label_of(b.value)
        if eid:
            return entity_text(eid, label, limit)
        return clip(b.value, limit)
    if b.type == "bnode":
        return "_:" + clip(b.value, 12)
    return literal_text(b, limit)


def render_table(
    result: SelectResult, label_of: Callable[[str], tuple[str | None, str]], budget: int, *, head: str = ""
) -> str:
    variables = list(result.variables)
    n = len(result.rows)
    total = f"{n}{'+' if result.capped else ''} row{'s' if n != 1 else ''}"
    lines = [f"{head} {total}:" if head else f"{total}:"] if n else [f"{head} {total}." if head else f"{total}."]
    if not n:
        return "\n".join(lines)
    lines.append(" | ".join("?" + v for v in variables))
    used = sum(len(x) + 1 for x in lines)
    shown = 0
    for row in result.rows:
        line = " | ".join(cell_text(row.get(v), label_of) for v in variables)
        if used + len(line) + 1 > budget - 80:
            break
        lines.append(line)
        used += len(line) + 1
        shown += 1
    if shown < n:
        lines.append(
            f"[cut: {n - shown} more row{'s' if n - shown != 1 else ''} not shown; "
            f"{shown} of {n}{'+' if result.capped else ''} shown]"
        )
    elif result.capped:
        lines.append(f"[the endpoint returned more rows than the {n} kept]")
    return fit("\n".join(lines), budget)


def one_hop_query(eid: str, pid: str, *, incoming: bool = False, restriction: str = "") -> str:
    """The one-hop Wikidata query a lookup proposes: the entity's values of `pid`, or (`incoming`) the items
    whose `pid` is the entity; `restriction`: a further pattern on ?x (`?x wdt:P106 wd:Q82955`)."""
    pattern = f"?x wdt:{pid} wd:{eid}" if incoming else f"wd:{eid} wdt:{pid} ?x"
    return items_query(f"{pattern}{' . ' + restriction if restriction else ''}")


_ITEMS = re.compile(r"SELECT DISTINCT \?x WHERE \{ (.+) \}", re.S)
_DIRECT = re.compile(r"wdt:(P\d+)")


def items_query(body: str, modifiers: str = "") -> str:
    """The shape of every query a lookup puts forward: the distinct ?x of `body`, then `modifiers` (ORDER BY …)."""
    return f"SELECT DISTINCT ?x WHERE {{ {body} }}{modifiers}"


def counted_query(body: str, modifiers: str) -> str:
    """The ?x of `body` grouped, then `modifiers` over how many distinct ?v each has (`HAVING(COUNT(DISTINCT ?v) >
    2)`, `ORDER BY DESC(COUNT(DISTINCT ?v)) LIMIT 1`)."""
    return f"SELECT ?x WHERE {{ {body} }} GROUP BY ?x {modifiers}"


def items_body(sparql: str | None) -> str | None:
    """The body of a query `items_query` wrote without modifiers; None for any other query."""
    m = _ITEMS.fullmatch(sparql or "")
    return m.group(1) if m else None


def body_pids(body: str) -> list[str]:
    """The properties a query body uses directly (`wdt:P…`), each once, in order."""
    return list(dict.fromkeys(_DIRECT.findall(body)))


def render_ask(result: AskResult) -> str:
    return f"ASK result: {'true' if result.value else 'false'}"


__all__ = [
    "body_pids",
    "counted_query",
    "clip",
    "fit",
    "one_hop_query",
    "literal_text",
    "entity_text",
    "class_names",
    "Block",
    "Rendered",
    "render_blocks",
    "render_table",
    "render_ask",
    "cell_text",
]
