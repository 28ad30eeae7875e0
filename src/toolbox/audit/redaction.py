"""What of a call's arguments may be stored: redacted, bounded, optionally only hashed.

Secret-looking keys (Authorization, Cookie, Set-Cookie, Proxy-Authorization,
API keys, tokens, passwords, ...) and configured keys are replaced; URLs lose
their userinfo and token-like query values; bearer-looking strings are
masked. The payload hash is taken over the full canonical (redacted) payload
*before* the summary is truncated, so it proves what was sent; secrets never
enter it, so it cannot be used to guess them.
"""

from __future__ import annotations

import enum
import hashlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, final

from toolbox.audit.events import canonical, storable_text
from toolbox.errors import ConfigurationError
from toolbox.redact import MASK, is_secret_name, redact_url

__all__ = ["PayloadMode", "Redaction"]

_URL = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*://")
_BEARER = re.compile(r"^(bearer|basic|token)\s+\S+", re.IGNORECASE)
_MAX_DEPTH = 32
#: Integers longer than this are stored as their size: CPython refuses to print more than
#: 4300 digits, and an event that cannot be serialised cannot be stored.
_MAX_INT_BITS = 4000 * 10 // 3


class PayloadMode(str, enum.Enum):
    """How much of the arguments is stored."""

    SUMMARY = "SUMMARY"
    """A redacted, truncated summary and its hash."""
    HASH = "HASH"
    """Only the hash of the redacted payload."""
    NONE = "NONE"
    """Nothing."""


@final
@dataclass(frozen=True)
class Redaction:
    """Redaction settings. Immutable."""

    keys: frozenset[str] = field(default_factory=frozenset)
    """Extra argument keys to mask (case-insensitive), on top of secret-looking ones."""
    max_summary: int = 512
    """Summaries longer than this are truncated (the hash covers the full payload)."""
    payload: PayloadMode = PayloadMode.SUMMARY

    def __post_init__(self) -> None:
        if not isinstance(self.max_summary, int) or self.max_summary < 16:
            raise ConfigurationError("max_summary must be an integer of at least 16")
        object.__setattr__(self, "keys", frozenset(k.lower() for k in self.keys))
        object.__setattr__(self, "payload", PayloadMode(self.payload))

    @classmethod
    def of(cls, keys: Iterable[str] = (), max_summary: int = 512, payload: str = "SUMMARY") -> Redaction:
        """Build from configuration values."""
        if isinstance(keys, str) or not all(isinstance(k, str) and k for k in keys):
            raise ConfigurationError('redact_keys must be a list of argument names, e.g. ["ssn"]')
        try:
            mode = PayloadMode(str(payload).upper())
        except ValueError:
            raise ConfigurationError(f"unknown payload mode {payload!r}; use SUMMARY, HASH or NONE") from None
        return cls(frozenset(keys), max_summary, mode)

    def clean(self, value: object, depth: int = 0) -> object:
        """``value`` with secrets masked, URLs redacted and odd types replaced by a placeholder."""
        if depth > _MAX_DEPTH:
            return "[TOO DEEP]"
        if isinstance(value, Mapping):
            return {
                storable_text(str(k)): MASK
                if is_secret_name(str(k)) or str(k).lower() in self.keys
                else self.clean(v, depth + 1)
                for k, v in value.items()
            }
        if isinstance(value, (list, tuple)):
            return [self.clean(v, depth + 1) for v in value]
        if isinstance(value, bytes):
            return f"<{len(value)} bytes>"
        if isinstance(value, str):
            if not value.isascii():
                value = storable_text(value)
            if _BEARER.match(value):
                return MASK
            if _URL.match(value):
                return redact_url(value)
            return value
        if isinstance(value, int) and value.bit_length() > _MAX_INT_BITS:
            return f"<int of {value.bit_length()} bits>"
        if value is None or isinstance(value, (bool, int, float)):
            return value
        return f"<{type(value).__name__}>"

    def payload_fields(self, arguments: Mapping[str, Any]) -> tuple[str | None, str | None]:
        """(summary, hash) to store for ``arguments`` under these settings."""
        if self.payload is PayloadMode.NONE:
            return None, None
        text = canonical(self.clean(arguments))  # type: ignore[arg-type]
        digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
        if self.payload is PayloadMode.HASH:
            return None, digest
        if len(text) > self.max_summary:
            text = text[: self.max_summary - 1] + "\u2026"
        return text, digest
