"""A compact rendering of the tools' observations in the controller's trajectory (`Settings.compact_observations`).

What goes is what the controller does not act on, measured on the recorded dev and slice runs (45 runs): of 930
lookups right after a search, the model looked up the search's first hit 780 times, the second 121, the third 6,
never a later one; the property hits after the second were used once in 604 searches; the lookup's `Other
properties` line (~120 tokens) gave a property no other line showed in 19 of 1003 lookups; no later action used
an id from the rows of a result longer than ten (92 such executions), nor from its first ten. The rest are words the
instructions already say: the search's heading (the action names the query), the guidance around a `Next:` line,
"no property conflicts", how a candidate was built. Ids, labels, descriptions, types, the `[domain | range]`
annotations, ★, values and the candidates' answers stay. A text transform of the rendered observation, so the
recorded observations, the live ones and the demonstrations' are compacted alike, and the same text always
gives the same compact text (the prompt stays append-only)."""

from __future__ import annotations

import re

from saga_dspy.proposer.candidate import ASK, COMPARATIVE, FURTHER, NARROWED, ONE_HOP, RELATION, SUPERLATIVE
from saga_dspy.tools.lookup import CANDIDATES_HEAD, NEXT_OTHERWISE

SEARCH_ENTITIES = 3  # entity hits a compact search shows (and the one its Next: line names)
SEARCH_PROPERTIES = 2  # property hits a compact search shows
OTHER_PROPERTIES = 10  # names on a compact lookup's `Other properties` line
RESULT_ROWS = 10  # rows of an executed query's result a compact observation shows

_SEARCH_HEAD = re.compile(r'\ASearch results for ".*":\n')
_NEXT_LOOKUP = re.compile(
    r'^Next: (\w+\(\{"qid": "[^"]+"\}\)) if \S+ \(.*\) is what the question means; else look up another hit or '
    r"search again\.$",
    re.M,
)
_NAMED_HIT = re.compile(r'^Next: \w+\(\{"qid": "([^"]+)"\}\) if ', re.M)  # the hit a search's Next: line names
_OUTGOING = re.compile(r"^(Outgoing properties \(\d+), most relevant first\):$", re.M)
_INCOMING = re.compile(r"^Incoming: (\S+ \S+ \S+), most relevant first:$", re.M)
_OTHER = re.compile(r"^Other properties: (.*?)(?: \(\+(\d+) more\))?$", re.M)
_OTHER_NAME = re.compile(r"(?<=\)), (?=\S)")  # between two `label (P123)` names (a label may hold a comma)
_CANDIDATE = re.compile(r"^(\d+)\. \[([^\]\n]*)\] ", re.M)
BUILT = frozenset({ONE_HOP, RELATION, NARROWED, FURTHER, COMPARATIVE, SUPERLATIVE, ASK})  # how a candidate was built
NO_CONFLICTS = "Type filter: no property conflicts."
SHORT_OTHERWISE = "; else execute a query."  # the end of the candidates' Next: line, shortened
_NEXT_CANDIDATES = re.compile(r'^(Next: stop with \{"candidate": .*)' + re.escape(NEXT_OTHERWISE) + "$", re.M)


def compact_observation(text: str, tool: str) -> str:
    """The observation of `tool` without what the controller does not act on (the module's docstring)."""
    if tool == "search_wikidata":
        return _search(text)
    if tool == "get_wikidata_entry":
        return _lookup(text)
    if tool == "execute_sparql":
        return _execute(text)
    return text


def _search(text: str) -> str:
    text = _SEARCH_HEAD.sub("", text)
    named = _NAMED_HIT.search(text)
    pick = named.group(1) if named else None
    text = _NEXT_LOOKUP.sub(r"Next: \1 if it is what the question means; else another hit or a new search.", text)
    out: list[str] = []
    limit, kept, hidden = 0, 0, 0
    for line in text.split("\n"):
        if line.startswith("- ") and limit:
            if kept < limit or (pick is not None and line.startswith(f"- {pick} ")):
                out.append(line)
                kept += 1
            else:
                hidden += 1
            continue
        if hidden:  # the section's hits left out, counted
            out.append(f"(+{hidden} more)")
        hidden, kept = 0, 0
        limit = {"Entities:": SEARCH_ENTITIES, "Properties:": SEARCH_PROPERTIES}.get(line, 0)
        out.append(line)
    if hidden:
        out.append(f"(+{hidden} more)")
    return "\n".join(out)


def _lookup(text: str) -> str:
    lines = [line for line in text.split("\n") if line != NO_CONFLICTS]
    text = "\n".join(lines).replace(CANDIDATES_HEAD, "Candidate queries (executed):")
    text = _NEXT_CANDIDATES.sub(lambda m: m.group(1) + SHORT_OTHERWISE, text)
    text = _OUTGOING.sub(r"\1):", text)
    text = _INCOMING.sub(r"Incoming (\1):", text)
    text = _CANDIDATE.sub(_candidate, text)
    return _OTHER.sub(_other, text)


_TABLE = re.compile(r"^\[OK\] (\d+)(\+?) rows?:$")  # the head of a result table (`render_table`)
_AFTER_TABLE = ("[cut: ", "[the endpoint returned", "Note: ", "Next: ")  # the lines that may follow its rows


def _execute(text: str) -> str:
    """The result table's first RESULT_ROWS rows; the rest counted in the table's own cut note."""
    lines = text.split("\n")
    found = next(((i, table) for i, line in enumerate(lines) if (table := _TABLE.match(line))), None)
    if found is None:
        return text
    head, table = found
    start = end = head + 2  # after the variables' line
    while end < len(lines) and not lines[end].startswith(_AFTER_TABLE):
        end += 1
    if end - start <= RESULT_ROWS:
        return text
    rows, capped = table.groups()
    rest = lines[end + 1 :] if end < len(lines) and lines[end].startswith("[cut: ") else lines[end:]
    cut = f"[cut: {int(rows) - RESULT_ROWS} more rows not shown; {RESULT_ROWS} of {rows}{capped} shown]"
    return "\n".join([*lines[: start + RESULT_ROWS], cut, *rest])


def _candidate(match: re.Match[str]) -> str:
    """A candidate's bracket with the properties it uses, without how it was built ('one-hop + ...; ')."""
    built, sep, props = match.group(2).partition("; ")
    if not set(built.split(" + ")) <= BUILT:  # no build steps: the bracket is left as it is
        return match.group(0)
    return f"{match.group(1)}. [{props}] " if sep else f"{match.group(1)}. "


def _other(match: re.Match[str]) -> str:
    names = _OTHER_NAME.split(match.group(1))
    more = len(names) - OTHER_PROPERTIES + int(match.group(2) or 0)
    if len(names) <= OTHER_PROPERTIES:
        return match.group(0)
    return f"Other properties: {', '.join(names[:OTHER_PROPERTIES])} (+{more} more)"


def restates(line: str, observation: str) -> bool:
    """A state line the step's own observation already shows: the type-context line of the entity it looked up,
    the knowledge-log line of the query it executed."""
    head = observation.split("\n", 1)[0]
    if line.startswith("[ok] "):
        return head.startswith("[OK]")
    entity = re.match(r"- (\S+) ", line)
    return entity is not None and f"({entity.group(1)}):" in head


__all__ = ["compact_observation", "restates"]
