"""Redaction at its edges: how far names are decoded, how queries split, what a URL keeps.

A secret that slips past these functions reaches a trace, a log or an error. Written from
`scripts/mutation src/toolbox/foundations/_redact.py` (docs/testing.md, "Mutation testing"): each test pins
a behaviour whose change no other test noticed.
"""

from __future__ import annotations

import pytest

from toolbox.foundations._redact import is_secret_name, normalize_name, query_pairs, redact_query
from toolbox.provider import MASK, redact_url


def test_the_mask_is_one_fixed_marker() -> None:
    assert MASK == "[REDACTED]"


# -- names ------------------------------------------------------------------------------------


def test_a_name_is_percent_decoded_three_times_and_no_more() -> None:
    """``%25`` decodes to ``%``: three layers of encoding are undone, a fourth is left as it is."""
    assert normalize_name("%252569ban") == "iban"
    assert normalize_name("%25252569ban") == "%69ban"
    assert is_secret_name("%252574oken")  # "token", encoded three times


def test_without_folding_the_case_is_kept_but_width_is_normalised() -> None:
    assert normalize_name("\uff34oken", fold=False) == "Token"
    assert normalize_name("\uff34oken") == "token"


@pytest.mark.parametrize("name", ["code", "KEY", "Sig", "pin", "%6Bey"])
def test_whole_names_are_secret_alone(name: str) -> None:
    assert is_secret_name(name)


@pytest.mark.parametrize("name", ["zip_code", "key_id", "sig_alg", "pin_count", "", "--", "_"])
def test_whole_names_are_not_secret_as_one_word_of_several(name: str) -> None:
    assert not is_secret_name(name)


@pytest.mark.parametrize(
    ("name", "secret"),
    [
        ("HTTPAuthHeader", True),  # an acronym, then a capitalised word
        ("myApiKey", True),
        ("apiKEY", True),
        ("session.id", True),
        ("id_session", False),  # a pair counts in its order only
        ("key_api", False),
        ("private-key-file", True),
        ("privateer", False),
    ],
)
def test_words_are_split_at_case_and_punctuation(name: str, secret: bool) -> None:
    assert is_secret_name(name) is secret


# -- queries ----------------------------------------------------------------------------------


def test_query_pairs_split_at_both_separators_and_decode_both_sides() -> None:
    assert query_pairs("a+b=c%20d;e=&&f;g=h=i") == [("a b", "c d"), ("e", ""), ("f", ""), ("g", "h=i")]
    assert query_pairs("") == []


def test_redact_query_masks_secret_values_and_cleans_the_others() -> None:
    query = "token=abc&page=2;q=x%20y"
    assert redact_query(query) == "token=[REDACTED]&page=2&q=x+y"
    cleaned = redact_query(query, lambda name: name == "q", lambda value: value.upper())
    assert cleaned == "token=ABC&page=2&q=[REDACTED]"


def test_redact_query_returns_an_untouched_query_as_it_was_spelled() -> None:
    query = "page=2;q=a%20b"
    assert redact_query(query) is query
    assert redact_query(query, clean_value=lambda value: value) is query


# -- URLs -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("https://user:pw@example.test:8443/p?x=1#frag", "https://example.test:8443/p?x=1"),
        ("http://u@[::1]:8080/p", "http://[::1]:8080/p"),
        ("http://[::1]/p?token=t", "http://[::1]/p?token=[REDACTED]"),
        ("https://h/p", "https://h/p"),
        ("https://h/p?", "https://h/p"),
        ("https://h/p?a=&b", "https://h/p?a=&b="),
        ("https://h/p?key=1&keys=2", "https://h/p?key=[REDACTED]&keys=2"),
    ],
)
def test_redact_url_keeps_scheme_host_port_path_and_query_only(url: str, expected: str) -> None:
    assert redact_url(url) == expected


def test_a_url_with_a_bad_port_is_replaced_whole() -> None:
    assert redact_url("https://h:99999/p?token=t") == MASK
    assert redact_url("https://h:port/p") == MASK


def test_configured_keys_mask_only_their_own_names() -> None:
    url = "https://h/p?account=1&page=2&Account=3"
    assert redact_url(url, {"account"}) == "https://h/p?account=[REDACTED]&page=2&Account=[REDACTED]"
    assert redact_url(url, {"other"}) == "https://h/p?account=1&page=2&Account=3"


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("/relative/p?token=t&page=1", "/relative/p?token=[REDACTED]&page=1"),
        ("file:///etc/app.conf", "file:///etc/app.conf"),
        ("https://h/p?filter[]=a&filter[]=b", "https://h/p?filter[]=a&filter[]=b"),
        ("https://h/p?filter[]=a&token=t", "https://h/p?filter[]=a&token=[REDACTED]"),
    ],
)
def test_a_url_without_a_host_or_with_brackets_keeps_its_spelling(url: str, expected: str) -> None:
    """No host is invented for a relative URL, and ``[]`` in query names stays readable."""
    assert redact_url(url) == expected
