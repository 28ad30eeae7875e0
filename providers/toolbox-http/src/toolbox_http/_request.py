"""Checking and building a request when the operation is called, before any intent.

Everything here runs at ``tool.get(url)`` time, so a bad argument fails before
an intent is declared and long before anything is sent. Messages name the
redacted URL only, never header values or bodies.
"""

from __future__ import annotations

import base64
import json as jsonlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast, final

import httpx

from toolbox.provider import redact_url

__all__ = ["Headers", "Params", "Prepared", "prepare"]

QueryValue = str | int | float | bool | None
Params = Mapping[str, QueryValue | Sequence[QueryValue]]
Headers = Mapping[str, str]

ALLOWED_SCHEMES = frozenset({"http", "https"})
USER_AGENT = "toolbox-http"
_URL_FORBIDDEN = re.compile(r"[\s\x00-\x1f\x7f-\x9f]")
_HEADER_NAME = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]{1,256}$")
_HEADER_VALUE_FORBIDDEN = re.compile(r"[\r\n\x00]")
_PRIMITIVES = (str, int, float, bool, type(None))


@final
@dataclass(frozen=True, slots=True)
class Prepared:
    """A checked request and its redacted URL, for the trace and for errors."""

    request: httpx.Request
    target: str
    warnings: tuple[str, ...] = ()
    #: Whether the body is the JSON encoding of ``json=`` (governance sees it decoded).
    json_body: bool = False


def _parse_url(url: object, keys: frozenset[str]) -> httpx.URL:
    if not isinstance(url, str):
        raise ValueError(f"url must be a str, got {type(url).__name__}")
    if _URL_FORBIDDEN.search(url):
        raise ValueError("url must not contain whitespace or control characters")
    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL:
        raise ValueError(f"url is not a valid URL: {redact_url(url, keys)}") from None
    if parsed.scheme not in ALLOWED_SCHEMES:
        raise ValueError(
            f"URL scheme {parsed.scheme!r} is not allowed in {redact_url(url, keys)}: "
            "only http and https are allowed"
        )
    if not parsed.host:
        raise ValueError(f"url has no host: {redact_url(url, keys)}")
    return parsed


def _check_params(params: object) -> Params:
    if not isinstance(params, Mapping):
        raise ValueError(f"params must be a mapping, got {type(params).__name__}")
    for name, value in params.items():
        values = value if isinstance(value, (list, tuple)) else (value,)
        if not isinstance(name, str) or not all(isinstance(v, _PRIMITIVES) for v in values):
            raise ValueError("params must map str names to str, int, float, bool or None (or lists of them)")
    return cast("Params", params)


def _check_headers(headers: object) -> dict[str, str]:
    if not isinstance(headers, Mapping):
        raise ValueError(f"headers must be a mapping, got {type(headers).__name__}")
    seen: set[str] = set()
    for name, value in headers.items():
        if not isinstance(name, str) or not _HEADER_NAME.match(name):
            raise ValueError("header names must be non-empty HTTP tokens (letters, digits, '-', ...)")
        if name.lower() in seen:
            # Both would be sent, and servers disagree on which one counts.
            raise ValueError(f"header {name!r} is given twice (header names are case-insensitive)")
        seen.add(name.lower())
        if not isinstance(value, str) or not value.isascii() or _HEADER_VALUE_FORBIDDEN.search(value):
            raise ValueError(f"header {name!r} must have an ASCII str value without CR, LF or NUL")
    return dict(headers)


def _body(json: Any, content: object) -> tuple[bytes | None, str | None]:
    """The body bytes and the content type they imply."""
    if json is not None and content is not None:
        raise ValueError("pass either json or content, not both")
    if json is not None:
        try:
            # The same encoding httpx uses for json=.
            text = jsonlib.dumps(json, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
        except (TypeError, ValueError, RecursionError) as exc:  # RecursionError: absurdly deep nesting
            raise ValueError(f"json body cannot be encoded as JSON: {type(exc).__name__}") from None
        return text.encode("utf-8"), "application/json"
    if content is None:
        return None, None
    if isinstance(content, str):
        return content.encode("utf-8"), None
    if isinstance(content, (bytes, bytearray)):
        return bytes(content), None
    raise ValueError(f"content must be bytes or str, got {type(content).__name__}")


def _basic_auth(url: httpx.URL) -> str:
    userpass = f"{url.username}:{url.password}".encode()
    return "Basic " + base64.b64encode(userpass).decode("ascii")


def prepare(
    method: str,
    url: object,
    *,
    params: object = None,
    headers: object = None,
    json: Any = None,
    content: object = None,
    max_request_bytes: int,
    redaction_keys: frozenset[str] = frozenset(),
) -> Prepared:
    """Check the arguments of one call and build its request.

    Raises:
        ValueError: the URL is not an absolute http(s) URL with a host, or has
            whitespace or control characters; params, headers or body are
            malformed; both json and content are given; the body exceeds
            ``max_request_bytes``.

    ``redaction_keys`` (normalised, see `toolbox.foundations._redact.normalize_name`) are
    masked in the target and in messages, like secret-looking query names.
    """
    parsed = _parse_url(url, redaction_keys)
    # Compressed responses are not asked for unless the caller does: they cost CPU to
    # decode (bounded, see _decoding), and identity keeps the wire size the body size.
    merged = httpx.Headers({"User-Agent": USER_AGENT, "Accept-Encoding": "identity"})
    if headers is not None:
        merged.update(_check_headers(headers))  # case-insensitive: a caller's header replaces ours
    if parsed.userinfo:
        # Credentials move from the URL into a header, so the URL httpx logs has none.
        if "authorization" not in merged:
            merged["Authorization"] = _basic_auth(parsed)
        parsed = parsed.copy_with(userinfo=b"")
    if params is not None:
        parsed = parsed.copy_merge_params(_check_params(params))
    body, content_type = _body(json, content)
    if body is not None:
        if len(body) > max_request_bytes:
            raise ValueError(
                f"request body is {len(body)} bytes, more than max_request_bytes ({max_request_bytes})"
            )
        if content_type is not None and "content-type" not in merged:
            merged["Content-Type"] = content_type
    request = httpx.Request(method, parsed, headers=merged, content=body)
    return Prepared(request, redact_url(str(request.url), redaction_keys), json_body=json is not None)
