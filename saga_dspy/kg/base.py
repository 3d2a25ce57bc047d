"""The endpoint interface every store and server shares: each query parsed and checked read-only (the text sent
is the text checked: `kg.guard`), with the flavour's prefixes, one deadline, a result cache, the result byte
cap, and the answer parsed once into `SelectResult` / `AskResult` of the form the query asked for."""

from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path

from ..config import Settings
from .cache import ResultCache
from .check_memo import CheckMemo
from .errors import (
    MalformedResponse,
    QueryRefused,
    QuerySyntaxError,
    QueryTooCostly,
)
from .flavours import flavour_for
from .guard import EMULATED_SERVICES, SERVICE_ALLOWLIST, check_read_only
from .label_service import rewrite_label_service
from .prefixes import expand_dotted_names
from .results import AskResult, QueryResult, SelectResult
from .sparql_parse import SparqlParse, hand_off, parse_sparql

RESULT_TYPES = {"SELECT": SelectResult, "CONSTRUCT": SelectResult, "DESCRIBE": SelectResult, "ASK": AskResult}


class Endpoint(ABC):
    """A SPARQL endpoint: `query(sparql) -> SelectResult | AskResult` or a SparqlError."""

    name: str
    native_label_service = False

    def __init__(self, settings: Settings):
        self.settings = settings
        self.flavour = flavour_for(settings.kg)
        self.prefixes = self.flavour.prefixes
        self.cache = (
            ResultCache(Path(settings.cache_dir) / "results.sqlite", max_entry_bytes=2 * settings.max_result_bytes)
            if settings.result_cache
            else None
        )
        self.check_memo = CheckMemo()

    @property
    def cache_id(self) -> str:
        return self.name

    @property
    def service_allowlist(self) -> frozenset[str]:
        """What a query may name in SERVICE: everything WDQS serves itself, else only what is emulated."""
        return SERVICE_ALLOWLIST if self.native_label_service else EMULATED_SERVICES

    def _checked(self, sparql: str) -> tuple[str, str]:
        """(text to send, query form), remembered by the exact text (`kg.check_memo`)."""
        if len(sparql) > self.settings.max_query_chars:
            return self._check(sparql)  # refused with the reason
        return self.check_memo.checked(sparql, self._check)

    def _check(self, sparql: str) -> tuple[str, str]:
        """Every text returned is the `.text` of a parse that passed the guard (`kg.guard`): a rewrite (the
        label-service emulation, Freebase's dotted names, the prefix declarations) is parsed and checked as
        it will be sent."""
        parsed = check_read_only(self._parse(sparql), self.service_allowlist, self.prefixes)
        hand_off(parsed)
        after = self.service_allowlist if self.native_label_service else frozenset()
        text = parsed.text if self.native_label_service else rewrite_label_service(parsed, self.prefixes)
        text = expand_dotted_names(text, self.prefixes)
        sent = parsed
        if text != parsed.text:
            sent = check_read_only(self._parse(text, len(text)), after, self.prefixes)
            if sent.form != parsed.form:
                raise QueryRefused("refused: rewriting the query changed its form")
        sent = check_read_only(self._finish(sent), after, self.prefixes)
        return sent.text, sent.form

    def _parse(self, text: str, max_chars: int = 0) -> SparqlParse:
        return parse_sparql(text, self.prefixes, max(max_chars, self.settings.max_query_chars))

    def _finish(self, parsed: SparqlParse) -> SparqlParse:
        """The parse of the text as this endpoint sends it."""
        return parsed

    def prepare(self, sparql: str) -> str:
        return self._checked(sparql)[0]

    def query(self, sparql: str, timeout: float | None = None) -> QueryResult:
        prepared, form = self._checked(sparql)
        row_cap = self.settings.row_cap
        cache = self.cache
        key = ResultCache.key(self.cache_id, prepared, row_cap) if cache is not None else None
        if cache is not None and key and (hit := cache.get(key)) is not None:
            return hit
        result = self._run(prepared, form, timeout or self.settings.query_timeout, row_cap)
        if not isinstance(result, RESULT_TYPES[form]):
            raise MalformedResponse(f"{self.name}: a {form} query was answered with a {type(result).__name__}")
        if cache is not None and key:
            cache.put(key, result)
        return result

    def select(self, sparql: str, timeout: float | None = None) -> SelectResult:
        result = self.query(sparql, timeout)
        if not isinstance(result, SelectResult):
            raise QuerySyntaxError("expected a SELECT query")
        return result

    def ask(self, sparql: str, timeout: float | None = None) -> bool:
        result = self.query(sparql, timeout)
        if not isinstance(result, AskResult):
            raise QuerySyntaxError("expected an ASK query")
        return result.value

    @abstractmethod
    def _run(self, sparql: str, form: str, timeout: float, row_cap: int) -> QueryResult:
        """Answer the checked text `sparql` (of the guard's query `form`) within `timeout` seconds."""

    def close(self) -> None:  # noqa: B027 - a default: most endpoints hold nothing to close
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def too_large(size: int, rows: int, cap: int) -> QueryTooCostly:
    """The agent's observation for a result over the byte cap."""
    return QueryTooCostly(
        f"result too large: add LIMIT (or select fewer or shorter values): {rows:,} rows hold "
        f"{size_text(size)} of values, over the {size_text(cap)} cap (max_result_bytes)"
    )


def size_text(n: int) -> str:
    return f"{n / 2**20:,.1f} MB" if n >= 2**20 else f"{n / 1024:,.0f} KB"


def result_bytes(result: QueryResult) -> int:
    """The bytes of text a result's values carry (rows x text)."""
    if not isinstance(result, SelectResult):
        return 0
    return sum(len(b.value) + len(b.datatype or "") + len(b.lang or "") for row in result.rows for b in row.values())
