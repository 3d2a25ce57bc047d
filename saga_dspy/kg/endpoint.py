"""Where an endpoint comes from: `open_endpoint(settings)` opens the bundled store (embedded) or a SPARQL HTTP
server; the classes live in `kg.base` (the shared interface), `kg.embedded` and `kg.http_endpoint`."""

from __future__ import annotations

from ..config import Settings
from .base import Endpoint, result_bytes, too_large
from .embedded import EmbeddedEndpoint, _Worker
from .errors import QueryRefused
from .http_endpoint import HttpEndpoint, proxy_for, retry_after_seconds


def open_endpoint(settings: Settings) -> Endpoint:
    """'embedded' → the bundled store; a URL → that SPARQL server."""
    if settings.is_embedded:
        return EmbeddedEndpoint(settings)
    if settings.endpoint.startswith(("http://", "https://")):
        return HttpEndpoint(settings, settings.endpoint)
    raise ValueError(f"endpoint must be 'embedded' or an http(s) URL, not {settings.endpoint!r}")


__all__ = [
    "Endpoint",
    "EmbeddedEndpoint",
    "HttpEndpoint",
    "open_endpoint",
    "proxy_for",
    "QueryRefused",
    "result_bytes",
    "retry_after_seconds",
    "too_large",
    "_Worker",
]
