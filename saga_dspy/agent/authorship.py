"""Who wrote an episode's final query: the one definition read by predictions.jsonl, the run summary, `eval
report` / `compare`, MLflow and optimize's bootstrap.

    model            the model wrote it (an execute_sparql step of its own, or the query it gave stop)
    model-candidate  the model executed a candidate the lookup showed it (`rank`), as it was or `edited`
    extract          its extract call wrote it after the steps ran out
    program          the program ran it for the model: the fallback candidate at a bare stop or at the episode's
                     end, the proposal at a repeated action, or the candidate replacing a query with an unseen id
                     (`repaired`)
    none             no final query
Beside the author: `rewritten`, the program rewrote the query's head to the question's form (ASK / COUNT)."""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

AUTHORS = ("model", "model-candidate", "extract", "program", "none")
MODEL_AUTHORS = frozenset({"model", "model-candidate"})
# Notes of an execute step the program took (agent.final_query): the lookup's proposal or candidate, run at a bare
# stop, at a repeated action, or at the episode's end. "from-stop" is not among them: the model wrote that query as
# stop's argument, the program only executed it.
PROGRAM_NOTES = frozenset({"from-suggestion", "from-candidate", "from-repeat"})
EDITED_SIMILARITY = 0.75  # a query whose tokens match a shown candidate's this much (difflib ratio) edits it
_TOKEN = re.compile(r"[\w:]+|[^\w\s]")


@dataclass(frozen=True)
class Author:
    """The final query's author (`kind`, one of AUTHORS) and what happened to it: `rank` of the shown candidate
    the model executed and whether it `edited` it first; `rewritten` to the question's form; `repaired`."""

    kind: str
    rank: int | None = None
    edited: bool = False
    rewritten: bool = False
    repaired: bool = False

    @property
    def by_model(self) -> bool:
        """The model authored it (its own query or a shown candidate it chose to execute)."""
        return self.kind in MODEL_AUTHORS

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Author:
        rank = data.get("rank")
        return cls(
            str(data.get("kind") or "none"),
            int(rank) if isinstance(rank, int) else None,
            bool(data.get("edited")),
            bool(data.get("rewritten")),
            bool(data.get("repaired")),
        )


def _tokens(sparql: str) -> list[str]:
    return _TOKEN.findall(sparql or "")


def candidate_match(sparql: str, shown: Sequence[tuple[int, str]]) -> tuple[int, bool] | None:
    """(rank, edited) of the shown candidate `sparql` is (token for token), else of the one it edits (the most
    similar, at least EDITED_SIMILARITY); None when it is neither. `shown`: (rank, query) of each shown candidate."""
    tokens = _tokens(sparql)
    best: tuple[float, int] | None = None
    for rank, query in shown:
        theirs = _tokens(query)
        if theirs == tokens:
            return rank, False
        ratio = difflib.SequenceMatcher(None, tokens, theirs, autojunk=False).ratio()
        if ratio >= EDITED_SIMILARITY and (best is None or ratio > best[0]):
            best = (ratio, rank)
    return (best[1], True) if best else None


def _get(step: Any, name: str) -> Any:
    return step.get(name) if isinstance(step, Mapping) else getattr(step, name, None)


def author_of(
    source: str | None, final: str | None, steps: Iterable[Any], shown: Sequence[tuple[int, str]] = ()
) -> Author:
    """The author of a final query chosen by `source` (`final_query.FinalQuery.source`), `final` being the query
    before any rewrite; `steps`: the episode's steps (Step objects or their dicts), `shown`: the candidates its
    lookups showed, (rank, query)."""
    source = source or ""
    final = (final or "").strip()
    if not source or not final:
        return Author("none")
    base, _, flag = source.partition("+")
    rewritten = flag == "rewritten"
    if base in ("candidate", "repaired"):
        return Author("program", rewritten=rewritten, repaired=base == "repaired")
    if base == "extract":
        return Author("extract", rewritten=rewritten)
    for step in steps:
        args = _get(step, "tool_args")
        sparql = args.get("sparql") if isinstance(args, Mapping) else None
        if _get(step, "tool_name") != "execute_sparql" or not isinstance(sparql, str) or sparql.strip() != final:
            continue
        if _get(step, "note") in PROGRAM_NOTES:
            return Author("program", rewritten=rewritten)
        break
    match = candidate_match(final, shown)
    if match is not None:
        return Author("model-candidate", match[0], match[1], rewritten)
    return Author("model", rewritten=rewritten)


def author_of_line(line: Mapping[str, Any]) -> Author:
    """A predictions line's author: as recorded, else (a run from before authors were recorded) from its final
    source and trajectory."""
    recorded = line.get("final_author")
    if isinstance(recorded, Mapping):
        return Author.from_dict(recorded)
    final = line.get("rewritten_from") or line.get("sparql")
    return author_of(line.get("final_source"), final, line.get("trajectory") or [])


__all__ = [
    "AUTHORS",
    "Author",
    "MODEL_AUTHORS",
    "PROGRAM_NOTES",
    "author_of",
    "author_of_line",
    "candidate_match",
]
