"""Whose fault a failed question is: the infrastructure's (the endpoint or the LM could not be reached or
timed out) or the agent's (a query it wrote: too costly, malformed, too slow). An infrastructure failure
stops the question at once (retrying the next step would fail the same way), is recorded as such, and
counts toward stopping the run."""

from __future__ import annotations

from dspy.utils.exceptions import LMRateLimitError, LMServerError, LMTimeoutError, LMTransportError

from saga_dspy.kg.errors import EndpointUnavailable

INFRASTRUCTURE = "infrastructure"  # the `error_kind` of a question the infrastructure failed
PROGRAM = "program"  # any other error the program raised
QUERY = "query"  # no error of the program's: the agent's own final query failed (too costly, syntax, timeout)

_INFRASTRUCTURE_TYPES = (
    EndpointUnavailable,
    LMTransportError,
    LMTimeoutError,
    LMServerError,
    LMRateLimitError,
    ConnectionError,
    TimeoutError,
)


class InfrastructureError(RuntimeError):
    """The endpoint or the LM failed under the agent: the question stops here."""


def is_infrastructure_error(exc: BaseException | None) -> bool:
    """True for the endpoint or the LM being unreachable / timing out, also when wrapped as a cause."""
    seen = 0
    while exc is not None and seen < 5:
        if isinstance(exc, (InfrastructureError, *_INFRASTRUCTURE_TYPES)):
            return True
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return False
