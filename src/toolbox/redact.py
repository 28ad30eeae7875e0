"""Redaction of targets before they reach a trace, a log or an error."""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

__all__ = ["MASK", "is_secret_name", "redact_url"]

MASK = "[REDACTED]"

# Query parameter names that usually carry credentials.
_SECRET_NAME = re.compile(
    r"(token|secret|passw(or)?d|pwd|api[-_]?key|apikey|access[-_]?key|auth|credential|"
    r"session|signature|sig|jwt|bearer|code|key|cookie)",
    re.IGNORECASE,
)


def is_secret_name(name: str) -> bool:
    """Whether a parameter or header name looks like it carries a secret."""
    return bool(_SECRET_NAME.search(name))


def redact_url(url: str) -> str:
    """``url`` without userinfo or fragment, with token-like query values masked.

    An unparseable URL is replaced entirely rather than echoed.
    """
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = parts.port
    except ValueError:
        return MASK
    if ":" in host:
        host = f"[{host}]"
    netloc = host if port is None else f"{host}:{port}"
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        query = urlencode([(k, MASK if is_secret_name(k) else v) for k, v in pairs], safe="[]")
    return urlunsplit((parts.scheme, netloc, parts.path, query, ""))
