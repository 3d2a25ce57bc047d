"""Typed SPARQL results shared by the endpoints, the tools, the formatter and the metric.

Every endpoint parses its answer once into these types, so nothing downstream
ever looks at raw SPARQL-JSON or pyoxigraph terms.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

import orjson

XSD = "http://www.w3.org/2001/XMLSchema#"
RDF_LANGSTRING = "http://www.w3.org/1999/02/22-rdf-syntax-ns#langString"

TermType = Literal["uri", "literal", "bnode"]


@dataclass(frozen=True)
class Binding:
    """One RDF term bound to a variable, in SPARQL-JSON's own vocabulary."""

    type: TermType
    value: str
    datatype: str | None = None
    lang: str | None = None

    @property
    def is_iri(self) -> bool:
        return self.type == "uri"

    def to_json(self) -> dict[str, str]:
        out = {"type": self.type, "value": self.value}
        if self.lang:
            out["xml:lang"] = self.lang
        elif self.datatype:
            out["datatype"] = self.datatype
        return out

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> Binding:
        if not isinstance(obj, dict) or "value" not in obj:
            raise ValueError(f"not a SPARQL-JSON term: {obj!r}")
        kind = obj.get("type", "literal")
        if kind == "typed-literal":  # SPARQL-JSON from old Virtuoso versions
            kind = "literal"
        if kind not in ("uri", "literal", "bnode"):
            raise ValueError(f"unknown SPARQL-JSON term type {kind!r}")
        datatype, lang, value = obj.get("datatype"), obj.get("xml:lang"), obj["value"]
        if not isinstance(value, str) or not all(isinstance(x, (str, type(None))) for x in (datatype, lang)):
            raise ValueError(f"a SPARQL-JSON term's value, datatype and xml:lang are strings: {obj!r:.200}")
        if datatype == RDF_LANGSTRING:
            datatype = None
        return cls(kind, value, datatype, lang)


Row = dict[str, Binding]


@dataclass
class SelectResult:
    """Rows of a SELECT query; `capped` says the endpoint had more rows than we kept."""

    variables: list[str]
    rows: list[Row] = field(default_factory=list)
    capped: bool = False

    def __len__(self) -> int:
        return len(self.rows)

    @property
    def is_empty(self) -> bool:
        return not self.rows

    def column(self, var: str) -> list[Binding]:
        return [row[var] for row in self.rows if var in row]

    def values(self) -> list[Binding]:
        """Every bound value, row by row, column by column."""
        return [row[v] for row in self.rows for v in self.variables if v in row]

    def to_json(self) -> dict[str, Any]:
        return {
            "head": {"vars": list(self.variables)},
            "results": {"bindings": [{k: b.to_json() for k, b in row.items()} for row in self.rows]},
            **({"capped": True} if self.capped else {}),
        }


@dataclass
class AskResult:
    """The answer of an ASK query."""

    value: bool

    @property
    def is_empty(self) -> bool:
        return False

    def to_json(self) -> dict[str, Any]:
        return {"head": {}, "boolean": self.value}


QueryResult = SelectResult | AskResult


MAX_JSON_DEPTH = 1024  # orjson's own bound; SPARQL-JSON is five levels deep


def load_json(data: bytes | str) -> Any:
    """An endpoint's JSON reply parsed strictly (UTF-8, no NaN) and with a nesting bound (`MAX_JSON_DEPTH`): a reply
    nested deeper is a ValueError like any other malformed one, never a RecursionError."""
    return orjson.loads(data)


def parse_sparql_json(obj: Any) -> QueryResult:
    """Parse SPARQL-JSON (a dict), a bare bindings list, a bool, or a typed result."""
    if isinstance(obj, (SelectResult, AskResult)):
        return obj
    if isinstance(obj, bool):
        return AskResult(obj)
    if isinstance(obj, list):
        rows = [_parse_row(r) for r in obj]
        variables: list[str] = []
        for row in rows:
            variables.extend(v for v in row if v not in variables)
        return SelectResult(variables, rows)
    if not isinstance(obj, dict):
        raise ValueError(f"not a SPARQL result: {type(obj).__name__}")
    if "boolean" in obj:
        value = obj["boolean"]
        if isinstance(value, str) and value.strip().lower() in ("true", "false"):
            value = value.strip().lower() == "true"
        if not isinstance(value, bool):
            raise ValueError(f"SPARQL-JSON 'boolean' must be true or false, not {value!r:.100}")
        return AskResult(value)
    if "results" not in obj or not isinstance(obj["results"], dict):
        raise ValueError("SPARQL-JSON needs 'boolean' or 'results'")
    rows = [_parse_row(r) for r in obj["results"].get("bindings", [])]
    variables = list(obj.get("head", {}).get("vars", []))
    for row in rows:
        variables.extend(v for v in row if v not in variables)
    return SelectResult(variables, rows, bool(obj.get("capped", False)))


def _parse_row(row: Any) -> Row:
    if not isinstance(row, dict):
        raise ValueError(f"a SPARQL-JSON row must be an object, got {type(row).__name__}")
    return {var: Binding.from_json(term) for var, term in row.items()}
