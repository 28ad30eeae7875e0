"""What of a call's arguments may be stored: redacted, bounded, optionally only hashed.

Secret-looking keys (Authorization, Cookie, Set-Cookie, Proxy-Authorization,
API keys, tokens, passwords, ...; see `toolbox.foundations._redact.is_secret_name`) and
configured keys are replaced wherever a key can hide a value: mapping keys at
any depth, query parameters of URLs, form-encoded strings and JSON text,
compared case-insensitively after percent-decoding. URLs lose their userinfo
and fragment; bearer-looking strings are masked. The payload hash is taken
over the full canonical (redacted) payload *before* the summary is
truncated, so it proves what was sent; secrets never enter it, so it cannot
be used to guess them.
"""

from __future__ import annotations

import enum
import hashlib
import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, final
from urllib.parse import urlsplit, urlunsplit

from pydantic import SecretBytes, SecretStr

from toolbox.audit._events import canonical, storable_text
from toolbox.errors import ConfigurationError
from toolbox.foundations._redact import MASK, is_secret_name, normalize_name, redact_query, redact_url

__all__ = ["PayloadMode", "Redaction"]

_URL = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*://")
_BEARER = re.compile(r"^(bearer|basic|token)\s+\S+", re.IGNORECASE)
#: ``name=value&name=value`` (or ``;``-separated): a form body or a bare query string.
_FORM = re.compile(r"^[&;]*[^=&;\s]+(?:=[^&;\s]*)?(?:[&;]+[^=&;\s]+(?:=[^&;\s]*)?)*[&;]*$")
#: A name followed by ``=`` or ``:`` inside text (``api_key=...``, ``"password": ...``,
#: ``Authorization: Bearer ...``): where its value is masked when the name is secret.
_NAMED_IN_TEXT = re.compile(r"""(?<![\w.%])((?:[^\W\d]|%)[\w.%-]*)["']?[ \t]*([:=])[ \t]*""")
#: A bearer credential anywhere in text.
_BEARER_IN_TEXT = re.compile(r"(?i)(?<![\w-])(bearer[ \t]+)[\w.~+/=-]+")
_MAX_DEPTH = 32
#: Integers longer than this are stored as their size: CPython refuses to print more than
#: 4300 digits, and an event that cannot be serialised cannot be stored.
_MAX_INT_BITS = 4000 * 10 // 3


def _json_int(text: str) -> object:
    # int() refuses more than 4300 digits; such text must still be parsed, so keys inside are seen.
    return int(text) if len(text) <= 4000 else text


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
    """Extra argument keys to mask, on top of secret-looking ones; held in `normalize_name` form."""
    max_summary: int = 512
    """Summaries longer than this are truncated (the hash covers the full payload)."""
    payload: PayloadMode = PayloadMode.SUMMARY

    def __post_init__(self) -> None:
        if not isinstance(self.max_summary, int) or self.max_summary < 16:
            raise ConfigurationError("max_summary must be an integer of at least 16")
        object.__setattr__(self, "keys", frozenset(normalize_name(k) for k in self.keys))
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

    def masks(self, name: str) -> bool:
        """Whether the value under ``name`` is masked: a secret-looking or configured name."""
        return is_secret_name(name) or (bool(self.keys) and normalize_name(name) in self.keys)

    def clean(self, value: object, depth: int = 0) -> object:
        """``value`` with secrets masked, URLs redacted and odd types replaced by a placeholder."""
        if depth > _MAX_DEPTH:
            return "[TOO DEEP]"
        # Scalars first: most arguments are, and these checks are cheap where ``Mapping``'s (an ABC) is not.
        if isinstance(value, int) and value.bit_length() > _MAX_INT_BITS:
            return f"<int of {value.bit_length()} bits>"
        if value is None or isinstance(value, (bool, int, float)):
            return value
        if isinstance(value, Mapping):
            return {
                storable_text(str(k)): MASK if self.masks(str(k)) else self.clean(v, depth + 1)
                for k, v in value.items()
            }
        if isinstance(value, (list, tuple)):
            return [self.clean(v, depth + 1) for v in value]
        if isinstance(value, bytes):
            return f"<{len(value)} bytes>"
        if isinstance(value, (SecretStr, SecretBytes)):
            return MASK
        if isinstance(value, str):
            if not value.isascii():
                value = storable_text(value)
            return self._text(value, depth)
        return f"<{type(value).__name__}>"

    def _text(self, value: str, depth: int) -> object:
        """A string, looked into where it can carry named values: URLs, JSON text, forms."""
        if depth > _MAX_DEPTH:
            return "[TOO DEEP]"
        if _BEARER.match(value):
            return MASK
        if _URL.match(value):
            return self._url(value, depth)
        if value.lstrip().startswith(("{", "[")):
            try:
                parsed = json.loads(value, parse_int=_json_int)
            except ValueError:
                pass
            except RecursionError:
                return "[TOO DEEP]"
            else:
                cleaned = self.clean(parsed, depth + 1)
                return value if cleaned == parsed else canonical(cleaned)  # type: ignore[arg-type]
        if "=" in value and _FORM.match(value):
            return redact_query(value, self.masks, lambda v: str(self._text(v, depth + 1)))
        return self._free_text(value)

    def _free_text(self, value: str) -> str:
        """Free text with the values of secret names in it masked (``... api_key=sk-1 ...``).

        After ``=`` the value is one word; after ``:`` it is the rest of the line
        (``Authorization: Basic ...``); a quoted value ends at its closing quote.
        """
        if "=" in value or ":" in value:
            value = _mask_named(value, self.masks)
        if "earer" in value:
            value = _BEARER_IN_TEXT.sub(lambda m: m.group(1) + MASK, value)
        return value

    def _url(self, value: str, depth: int) -> str:
        """``value`` redacted; query values that hold URLs, forms or JSON are looked into too."""
        redacted = redact_url(value, self.keys)
        parts = urlsplit(redacted)
        if not parts.query:
            return redacted
        query = redact_query(parts.query, lambda _: False, lambda v: str(self._text(v, depth + 1)))
        return redacted if query == parts.query else urlunsplit(parts._replace(query=query))

    def summary_fields(self, summary: str, digest: str) -> tuple[str | None, str | None]:
        """(summary, hash) to store for a result that summarised itself, under these settings."""
        if self.payload is PayloadMode.NONE:
            return None, None
        if self.payload is PayloadMode.HASH:
            return None, digest
        text = storable_text(summary)
        return (text if len(text) <= self.max_summary else text[: self.max_summary - 1] + "\u2026"), digest

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


def _mask_named(text: str, masks: Callable[[str], bool]) -> str:
    """``text`` with the value after each secret ``name=`` / ``name:`` replaced by `MASK`."""
    pieces: list[str] = []
    done = 0
    for match in _NAMED_IN_TEXT.finditer(text):
        start = match.end()
        if match.start() < done or not masks(match.group(1)):
            continue
        before = text[match.start() - 1] if match.start() else ""
        end = _value_end(text, start, match.group(2), before if before in "\"'" else "")
        if end == start:
            continue
        quote = text[start] if text[start] in "\"'" else ""
        pieces += [text[done:start], quote, MASK, quote if end - start > 1 and text[end - 1] == quote else ""]
        done = end
    return "".join([*pieces, text[done:]]) if pieces else text


def _value_end(text: str, start: int, separator: str, enclosing: str) -> int:
    """Where the value that begins at ``start`` ends (exclusive).

    ``enclosing`` is the quote the name opened with (``-H "Authorization: ..."``):
    it closes a header-like value.
    """
    if start >= len(text):
        return start
    quote = text[start]
    if quote in "\"'":
        index = start + 1
        while index < len(text) and text[index] not in (quote, "\n"):
            index += 2 if text[index] == "\\" else 1
        return min(index + 1, len(text))
    end = start
    if separator == ":":  # a header-like line: the rest of it is the value
        while end < len(text) and text[end] not in "\r\n" and text[end] != enclosing:
            end += 1
        return end
    while end < len(text) and not text[end].isspace() and text[end] not in "&;,\"'":
        end += 1
    return end
