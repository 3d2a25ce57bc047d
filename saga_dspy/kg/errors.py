"""Errors an endpoint can raise. Messages are short enough to show an LLM."""

from __future__ import annotations

from ..errors import SagaError

MAX_MESSAGE = 400


def _clip(text: str, limit: int = MAX_MESSAGE) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


class SparqlError(SagaError):
    """Base class: the query did not produce a result."""

    kind = "error"

    def __init__(self, message: str):
        super().__init__(_clip(message))

    @property
    def message(self) -> str:
        return str(self)


class QuerySyntaxError(SparqlError):
    """The endpoint's parser rejected the query; the message is the parser's."""

    kind = "syntax"


class QueryRefused(SparqlError):
    """Refused before reaching the endpoint: an update, or a SERVICE call outside the allowlist."""

    kind = "refused"


class QueryTimeout(SparqlError):
    """The query ran past its deadline."""

    kind = "timeout"


class QueryTooCostly(SparqlError):
    """The query itself asked for too much (memory, CPU, a result larger than the cap): the agent's to narrow,
    never the endpoint's fault."""

    kind = "too_costly"


class EndpointUnavailable(SparqlError):
    """The endpoint could not be reached or kept failing (connection, 429, 5xx)."""

    kind = "unavailable"


class MalformedResponse(EndpointUnavailable):
    """The endpoint answered, but not with the SPARQL results the query asks for (HTML, broken JSON,
    a cut-off body, a boolean for a SELECT): the endpoint's fault, never cached."""
