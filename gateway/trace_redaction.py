"""Secrets out of the gateway's request spans. The page link of the local
launcher carries the caller's token in its query string (`/?token=...`), and
the HTTP instrumentation records the full URL of each request: without this
hook a valid token would sit in every trace backend. Values of query
parameters whose name says they are secret are replaced before the span is
exported."""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

SECRET_PARAMETERS = frozenset({"token", "access_token", "api_key", "apikey", "key", "secret", "password"})
REDACTED = "REDACTED"
# The attributes (old and new HTTP semantic conventions) holding a query.
URL_ATTRIBUTES = ("http.url", "url.full", "http.target", "url.query")


def redact_query(query: str) -> str:
    pairs = parse_qsl(query, keep_blank_values=True)
    if not any(name.lower() in SECRET_PARAMETERS for name, _ in pairs):
        return query
    return urlencode([(n, REDACTED if n.lower() in SECRET_PARAMETERS else v) for n, v in pairs])


def redact_url(url: str) -> str:
    """``url`` (absolute, or a path with a query) with the values of its
    secret query parameters replaced."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(query=redact_query(parts.query)))


def redact_request_span(span: Any, scope: dict[str, Any]) -> None:
    """FastAPIInstrumentor's server_request_hook: runs once the request's
    span holds its URL attributes, before it can be exported."""
    if not span.is_recording() or b"=" not in scope.get("query_string", b""):
        return
    attributes = getattr(span, "attributes", None) or {}
    for name in URL_ATTRIBUTES:
        value = attributes.get(name)
        if isinstance(value, str):
            span.set_attribute(name, redact_query(value) if name == "url.query" else redact_url(value))
