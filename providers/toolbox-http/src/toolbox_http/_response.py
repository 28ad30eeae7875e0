"""`HttpResponse`: a fully read, size-bounded response."""

from __future__ import annotations

import codecs
import json
from dataclasses import dataclass, field
from email.message import Message
from typing import Any, final

import httpx

from toolbox_http._errors import HttpStatusError

__all__ = ["HttpResponse"]


def _charset(content_type: str | None) -> str | None:
    if not content_type:
        return None
    message = Message()
    message["content-type"] = content_type
    charset = message.get_content_charset()
    if charset is None:
        return None
    try:
        return codecs.lookup(charset).name
    except LookupError:
        return None


@final
@dataclass(frozen=True, slots=True)
class HttpResponse:
    """The response to one request. Non-2xx statuses are returned, not raised.

    Its ``repr`` shows neither headers nor body, so it is safe to log.
    """

    status_code: int
    """The HTTP status, e.g. 200."""
    headers: httpx.Headers = field(repr=False)
    """Response headers (case-insensitive, multi-valued)."""
    content: bytes = field(repr=False)
    """The body, decoded from any content encoding, at most ``max_response_bytes`` long."""
    url: str
    """The URL of the final response, redacted: no userinfo, token-like query values masked."""
    data: Any = field(default=None, repr=False)
    """The body validated by ``json_model``, when that option is set; else None."""
    redirects: int = field(default=0, repr=False)
    """How many redirect hops were followed to reach this response."""

    @property
    def is_success(self) -> bool:
        """Whether the status is 2xx."""
        return 200 <= self.status_code < 300

    def __toolbox_transient__(self) -> bool:
        """A 5xx status is a transient failure: the governed chain retries idempotent calls."""
        return self.status_code >= 500

    @property
    def encoding(self) -> str:
        """The charset declared by ``Content-Type``, else ``utf-8``."""
        return _charset(self.headers.get("content-type")) or "utf-8"

    @property
    def text(self) -> str:
        """The body as text in `encoding`; undecodable bytes become U+FFFD."""
        return self.content.decode(self.encoding, errors="replace")

    def json(self) -> Any:
        """The body parsed as JSON.

        Raises:
            ValueError: the body is not valid JSON.
        """
        # Without a declared charset, json.loads detects UTF-8/16/32 from the bytes.
        if _charset(self.headers.get("content-type")) is None:
            return json.loads(self.content)
        return json.loads(self.text)

    def raise_for_status(self) -> HttpResponse:
        """Return ``self`` if the status is 2xx.

        Raises:
            HttpStatusError: any other status; the message holds the status and redacted URL only.
        """
        if self.is_success:
            return self
        reason = httpx.codes.get_reason_phrase(self.status_code)
        status = f"{self.status_code} {reason}" if reason else str(self.status_code)
        raise HttpStatusError(
            f"HTTP {status} for {self.url}",
            status_code=self.status_code,
            url=self.url,
        )
