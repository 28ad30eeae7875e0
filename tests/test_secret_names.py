"""Which names count as secret: whole words, not substrings (security finding 3, issue 9)."""

from __future__ import annotations

import pytest

from toolbox.foundations._redact import is_secret_name, normalize_name
from toolbox.provider import redact_url

SECRET = [
    "api_key",
    "apiKey",
    "x-api-key",
    "X-API-Key",
    "apikey",
    "access_key",
    "secret_key",
    "private_key",
    "authorization",
    "Proxy-Authorization",
    "X-Auth-Token",
    "auth",
    "auth_code",
    "password",
    "db_passwd",
    "pwd",
    "token",
    "access_token",
    "refreshToken",
    "secret",
    "client_secret",
    "cookie",
    "Set-Cookie",
    "session_id",
    "sessionId",
    "sessionid",
    "jwt",
    "signature",
    "X-Amz-Signature",
    "sig",
    "code",
    "key",
    "otp",
    "X-CSRF-Token",
    "%61pi_key",  # percent-encoded
]
NOT_SECRET = [
    "barcode",
    "session",
    "author",
    "authority",
    "country_code",
    "zip_code",
    "status_code",
    "sort_key",
    "primary_key",
    "monkey",
    "keyboard",
    "tokenizer",
    "passage",
    "signal",
    "design",
    "iban",
    "amount",
    "",
]


@pytest.mark.parametrize("name", SECRET)
def test_secret_names(name):
    """A credential word, a credential pair of words or a credential name on its own."""
    assert is_secret_name(name)


@pytest.mark.parametrize("name", NOT_SECRET)
def test_names_that_merely_contain_a_credential_word_are_not_secret(name):
    """``barcode`` holds ``code`` and ``session`` is a word of ``session_id``: neither is secret."""
    assert not is_secret_name(name)


@pytest.mark.parametrize(
    "spelling", ["iban", "IBAN", "IbAn", "%69ban", "%2569ban", "\uff49\uff42\uff41\uff4e"]
)
def test_normalize_name_folds_case_encoding_and_width(spelling):
    """Configured keys are compared after percent-decoding, NFKC and case folding."""
    assert normalize_name(spelling) == "iban"


def test_redact_url_masks_configured_keys_however_spelled():
    """Userinfo and fragment go; secret names and configured keys are masked in every spelling."""
    url = "https://u:pw@h/p?%69ban=A&IBAN=B&iban=C&access_token=D&page=2#frag"
    assert redact_url(url, {"iban"}) == (
        "https://h/p?iban=[REDACTED]&IBAN=[REDACTED]&iban=[REDACTED]&access_token=[REDACTED]&page=2"
    )
    assert redact_url(url) == "https://h/p?iban=A&IBAN=B&iban=C&access_token=[REDACTED]&page=2"


def test_redact_url_replaces_an_unparseable_url():
    """A URL that cannot be parsed is not echoed."""
    assert redact_url("http://[::1/x?token=t") == "[REDACTED]"


def test_a_semicolon_separates_only_when_something_is_masked():
    """``;`` may hide a secret from a ``&``-only reading; with nothing to mask the value keeps its ``;``."""
    assert redact_url("https://h/p?q=a;token=t") == "https://h/p?q=a&token=[REDACTED]"
    assert redact_url("https://h/p?q=a;b&n=1") == "https://h/p?q=a%3Bb&n=1"
