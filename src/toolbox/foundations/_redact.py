"""Redaction of targets before they reach a trace, a log or an error; which names are secret.

A name is secret when one of its *words* is a credential word, not when it
merely contains one: ``api_key``, ``X-Auth-Token`` and ``sessionId`` are
secret, ``barcode``, ``author`` and ``session`` are not. See `is_secret_name`.
"""

from __future__ import annotations

import functools
import itertools
import re
import unicodedata
from collections.abc import Callable, Collection
from urllib.parse import parse_qsl, unquote, unquote_plus, urlencode, urlsplit, urlunsplit

__all__ = ["MASK", "is_secret_name", "normalize_name", "query_pairs", "redact_query", "redact_url"]

MASK = "[REDACTED]"

#: A name holding one of these words is secret (``x-auth-token``, ``client_secret``).
SECRET_WORDS = frozenset(
    {
        "token",
        "secret",
        "password",
        "passwd",
        "passphrase",
        "passcode",
        "pwd",
        "auth",
        "authorization",
        "credential",
        "credentials",
        "cookie",
        "jwt",
        "bearer",
        "signature",
        "otp",
        "csrf",
        "xsrf",
        "apikey",
        "accesskey",
        "secretkey",
        "privatekey",
        "sessionid",
        "sessiontoken",
    }
)
#: Two adjacent words that together are secret (``api_key``, ``session-id``, ``privateKey``).
SECRET_PAIRS = frozenset(
    {
        ("api", "key"),
        ("access", "key"),
        ("secret", "key"),
        ("private", "key"),
        ("session", "id"),
        ("session", "key"),
        ("client", "secret"),
    }
)
#: Names that are secret only on their own (``?code=`` of OAuth, ``?key=``, ``?sig=``).
SECRET_WHOLE_NAMES = frozenset({"code", "key", "sig", "pin"})

_WORD_BOUNDARY = re.compile(r"[^0-9a-zA-Z]+|(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")


@functools.lru_cache(maxsize=4096)
def is_secret_name(name: str) -> bool:
    """Whether a parameter, header or key name says that its value is a credential.

    The name is split into words at non-alphanumerics and camelCase boundaries,
    lower-cased. It is secret when a word is in `SECRET_WORDS`, two adjacent
    words are in `SECRET_PAIRS`, or the whole name is in `SECRET_WHOLE_NAMES`.
    """
    words = [w.lower() for w in _WORD_BOUNDARY.split(normalize_name(name, fold=False)) if w]
    if not words:
        return False
    if len(words) == 1 and words[0] in SECRET_WHOLE_NAMES:
        return True
    return any(w in SECRET_WORDS for w in words) or any(
        pair in SECRET_PAIRS for pair in itertools.pairwise(words)
    )


@functools.lru_cache(maxsize=4096)
def normalize_name(name: str, *, fold: bool = True) -> str:
    """``name`` percent-decoded (repeatedly) and NFKC-normalised; case-folded when ``fold``.

    ``%69ban``, ``IBAN`` and its full-width spelling all become ``iban``: the form a configured
    key is compared in.
    """
    for _ in range(3):
        decoded = unquote(name)
        if decoded == name:
            break
        name = decoded
    name = unicodedata.normalize("NFKC", name)
    return name.casefold() if fold else name


_QUERY_SEPARATOR = re.compile(r"[&;]")


def query_pairs(query: str) -> list[tuple[str, str]]:
    """``query``'s (name, value) pairs, decoded, split at ``&`` *and* ``;``.

    Some servers also split at ``;``; for masking, the wider reading is the safe one.
    """
    pairs = []
    for segment in _QUERY_SEPARATOR.split(query):
        if segment:
            name, _, value = segment.partition("=")
            pairs.append((unquote_plus(name), unquote_plus(value)))
    return pairs


def redact_query(
    query: str,
    masked: Callable[[str], bool] = is_secret_name,
    clean_value: Callable[[str], str] | None = None,
) -> str:
    """``query`` with the values of ``masked`` names replaced by `MASK`; others through ``clean_value``.

    Returns ``query`` itself when nothing changed, so an untouched query keeps its spelling.
    """
    pairs = query_pairs(query)
    changed = False
    out: list[tuple[str, str]] = []
    for key, value in pairs:
        new = MASK if masked(key) else value if clean_value is None else clean_value(value)
        changed = changed or new != value
        out.append((key, new))
    return urlencode(out, safe="[]") if changed else query


def redact_url(url: str, keys: Collection[str] = ()) -> str:
    """``url`` without userinfo or fragment, with secret-named and ``keys`` query values masked.

    ``keys`` are compared after `normalize_name`. An unparseable URL is replaced
    entirely rather than echoed.
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
        masked = (
            (lambda name: is_secret_name(name) or normalize_name(name) in keys) if keys else is_secret_name
        )
        pairs = query_pairs(query)
        if any(masked(k) for k, _ in pairs):
            query = urlencode([(k, MASK if masked(k) else v) for k, v in pairs], safe="[]")
        else:  # nothing to mask: keep the standard reading, so a ";" in a value stays in it
            query = urlencode(parse_qsl(query, keep_blank_values=True), safe="[]")
    return urlunsplit((parts.scheme, netloc, parts.path, query, ""))
