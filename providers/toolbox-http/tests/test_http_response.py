"""HttpResponse: decoding, status helpers, immutability and a safe repr."""

from __future__ import annotations

import dataclasses

import httpx
import pytest

from toolbox import ToolExecutionError
from toolbox_http import HttpResponse, HttpStatusError

URL = "https://api.example.com/x?token=[REDACTED]"


def _response(status=200, content=b"", content_type=None):
    headers = httpx.Headers({"Content-Type": content_type} if content_type else {})
    return HttpResponse(status, headers, content, URL)


def test_text_uses_the_declared_charset():
    """text decodes with the Content-Type charset, else UTF-8."""
    assert (
        _response(content="café".encode("latin-1"), content_type="text/plain; charset=latin-1").text == "café"
    )
    assert _response(content="café".encode()).text == "café"
    assert _response(content=b"\xff", content_type="text/plain; charset=bogus").text == "\ufffd"


def test_json():
    """json() parses the body; invalid JSON raises ValueError."""
    assert _response(content=b'{"a": [1, 2]}').json() == {"a": [1, 2]}
    assert _response(content='{"a": "é"}'.encode("utf-16"), content_type="application/json").json() == {
        "a": "é"
    }
    with pytest.raises(ValueError):
        _response(content=b"not json").json()


@pytest.mark.parametrize(
    ("status", "success"), [(199, False), (200, True), (204, True), (299, True), (301, False)]
)
def test_is_success(status, success):
    """is_success means 2xx."""
    assert _response(status).is_success is success


def test_raise_for_status():
    """2xx returns the response; other statuses raise HttpStatusError with status and redacted URL."""
    ok = _response(200)
    assert ok.raise_for_status() is ok
    with pytest.raises(HttpStatusError) as info:
        _response(503, b"secret body", "text/plain").raise_for_status()
    error = info.value
    assert isinstance(error, ToolExecutionError)
    assert str(error) == f"HTTP 503 Service Unavailable for {URL}"
    assert (error.status_code, error.url) == (503, URL)
    with pytest.raises(HttpStatusError, match=r"^HTTP 599 for"):
        _response(599).raise_for_status()


def test_frozen_and_slotted():
    """Fields cannot be reassigned and there is no instance __dict__."""
    response = _response()
    with pytest.raises(dataclasses.FrozenInstanceError):
        response.status_code = 500  # type: ignore[misc]
    assert not hasattr(response, "__dict__")


def test_repr_hides_headers_and_body():
    """repr shows status and URL only."""
    response = HttpResponse(200, httpx.Headers({"Set-Cookie": "sid=s3cret"}), b"body-s3cret", URL)
    assert repr(response) == f"HttpResponse(status_code=200, url={URL!r})"
