"""Configured redaction keys reach every place a key can hide a value (security finding 7, issue 9)."""

from __future__ import annotations

import json
from urllib.parse import quote

import pytest
from hypothesis import given
from hypothesis import strategies as st

from toolbox.audit import Redaction

SECRET_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"
#: A distinctive value, so finding it anywhere means it leaked.
SECRETS = st.text(SECRET_ALPHABET, min_size=12, max_size=24).map(lambda s: "Q7X" + s)
KEYS = st.sampled_from(["iban", "ssn", "x-pay-to", "account_number"])


def _fullwidth(text: str) -> str:
    return "".join(chr(ord(c) + 0xFEE0) if c.isascii() and c.isalpha() else c for c in text)


@st.composite
def spellings(draw: st.DrawFn, key: str) -> str:
    """``key`` as a model or an attacker might spell it: any case, percent-encoded letters, full width."""
    cased = "".join(c.upper() if draw(st.booleans()) else c for c in key)
    form = draw(st.sampled_from(["plain", "percent", "fullwidth"]))
    if form == "percent":
        return "".join(f"%{ord(c):02X}" if c.isalpha() and draw(st.booleans()) else c for c in cased)
    return _fullwidth(cased) if form == "fullwidth" else cased


@st.composite
def placements(draw: st.DrawFn, key: str, secret: str, depth: int = 0) -> object:
    """``secret`` under ``key``: nested data, a query, a form, JSON text, userinfo, or one inside another."""
    name = draw(spellings(key))
    kinds = ["mapping", "url", "url-duplicate", "form", "json-text", "userinfo"]
    if depth < 2:
        kinds += ["nested", "url-in-query", "url-in-form", "json-in-form"]
    kind = draw(st.sampled_from(kinds))
    query_name = name if "%" in name else quote(name)
    sep = draw(st.sampled_from(["&", ";", "&&"]))  # some servers split at ";" too
    if kind == "mapping":
        return {name: secret}
    if kind == "url":
        return f"https://api.example.com/pay?page=2{sep}{query_name}={secret}"
    if kind == "url-duplicate":
        return f"https://api.example.com/pay?{query_name}=ok{sep}{query_name}={secret}"
    if kind == "form":
        return f"amount{sep}{query_name}={quote(secret)}"
    if kind == "json-text":
        return json.dumps({"to": [{name: secret}]})
    if kind == "userinfo":
        return f"https://user:{secret}@api.example.com/"
    inner = draw(placements(key, secret, depth + 1))
    if kind == "nested":
        wrap = draw(st.sampled_from(["list", "dict"]))
        return [1, inner] if wrap == "list" else {"outer": {"deeper": inner}}
    encoded = quote(inner if isinstance(inner, str) else json.dumps(inner), safe="")
    if kind == "url-in-query":
        return f"https://api.example.com/redirect?next={encoded}"
    if kind == "url-in-form":
        return f"next={encoded}&x=1"
    return f"payload={encoded}"


@given(data=st.data(), key=KEYS, secret=SECRETS)
def test_a_configured_keys_value_never_reaches_the_summary(data, key, secret):
    """Property: wherever the key sits and however it is spelled, its value is not stored."""
    arguments = {"request": data.draw(placements(key, secret)), "note": "kept"}
    summary, digest = Redaction.of([key], max_summary=100_000).payload_fields(arguments)
    assert summary is not None and digest is not None
    assert secret not in summary
    assert quote(secret) not in summary
    assert '"note":"kept"' in summary


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        ({"IBAN": "DE89"}, {"IBAN": "[REDACTED]"}),
        ("https://h/p?%69ban=DE89&a=1", "https://h/p?iban=[REDACTED]&a=1"),
        ("https://h/p?iban=DE89&iban=DE90", "https://h/p?iban=[REDACTED]&iban=[REDACTED]"),
        ("iban=DE89&amount=5", "iban=[REDACTED]&amount=5"),
        ('{"a": [{"Iban": "DE89"}]}', '{"a":[{"Iban":"[REDACTED]"}]}'),
        ("https://alice:DE89@h/", "https://h/"),
        ("amount=5&note=hello", "amount=5&note=hello"),  # untouched text keeps its spelling
        ('{"amount": 5}', '{"amount": 5}'),
        ("not json {", "not json {"),
        ("a=1;iban=DE89", "a=1&iban=[REDACTED]"),
        ("flag;iban=DE89&&x=1", "flag=&iban=[REDACTED]&x=1"),
        ("a = b", "a = b"),
    ],
)
def test_redaction_examples(value, shown):
    """One example per placement; strings without a masked key are stored as written."""
    assert Redaction.of(["iban"]).clean(value) == shown


def test_token_based_names_keep_innocent_values():
    """``barcode`` and ``session`` are stored; ``session_id`` and ``x-api-key`` are not."""
    cleaned = Redaction().clean({"barcode": "400", "session": "s1", "session_id": "s2", "X-Api-Key": "k"})
    assert cleaned == {
        "barcode": "400",
        "session": "s1",
        "session_id": "[REDACTED]",
        "X-Api-Key": "[REDACTED]",
    }


def test_json_text_with_a_huge_number_is_still_looked_into():
    """A number too long for int() does not make the JSON text unparseable, and so stored as written."""
    text = '{"iban": "DE89", "n": ' + "9" * 5000 + "}"
    assert "DE89" not in str(Redaction.of(["iban"]).clean({"content": text}))


def test_json_text_nested_beyond_the_depth_limit_is_not_echoed():
    """JSON text too deep to parse is replaced, not stored as written."""
    deep = "[" * 100_000 + "]" * 100_000
    assert Redaction.of(["iban"]).clean({"content": deep}) == {"content": "[TOO DEEP]"}


def test_scalars_keep_their_value_and_huge_or_too_deep_ones_are_replaced() -> None:
    """The exact-type shortcut for scalars changes nothing: subclasses, huge ints, depth still handled."""
    import enum

    class Level(enum.IntEnum):
        HIGH = 3

    redaction = Redaction()
    values = {"i": 7, "f": 1.5, "b": True, "n": None, "e": Level.HIGH, "big": 10**5000}
    cleaned = redaction.clean(values)
    assert cleaned == {"i": 7, "f": 1.5, "b": True, "n": None, "e": 3, "big": "<int of 16610 bits>"}
    assert type(cleaned["b"]) is bool
    assert redaction.clean(1, depth=33) == "[TOO DEEP]"
    assert redaction.clean({"token": 12345}) == {"token": "[REDACTED]"}
