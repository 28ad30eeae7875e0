"""Response checks: expected content types and a pydantic model for the JSON body."""

from __future__ import annotations

import httpx
import pydantic
import pytest

import toolbox_http.plugin
from toolbox import ExecutionContext, Gateway, Status, ToolPolicy
from toolbox_http import HttpTool, ResponseSchemaError, UnexpectedContentTypeError

URL = "https://api.example.com/rates"


class Rates(pydantic.BaseModel):
    base: str
    rates: dict[str, float]


def test_expected_content_type_passes(respx_mock, http_tools):
    """application/json; charset=utf-8 matches application/json; text/* matches text/csv."""
    respx_mock.get(URL).mock(return_value=httpx.Response(200, json={}))
    respx_mock.get(f"{URL}.csv").mock(return_value=httpx.Response(200, headers={"Content-Type": "text/csv"}))
    tool = http_tools(expect_content_types=["application/json", "text/*"]).get(HttpTool)
    assert tool.get(URL).purpose("Read").execute().status_code == 200
    assert tool.get(f"{URL}.csv").purpose("Read").execute().status_code == 200


def test_unexpected_content_type_is_an_error(respx_mock, http_tools):
    """An HTML body where JSON is expected raises UnexpectedContentTypeError (code RESPONSE_CONTENT_TYPE)."""
    respx_mock.get(URL).mock(return_value=httpx.Response(200, html="<p>login</p>"))
    ready = http_tools(expect_content_types=["application/json"]).get(HttpTool).get(URL).purpose("Read")
    with pytest.raises(UnexpectedContentTypeError, match="text/html") as info:
        ready.execute()
    assert info.value.code == "RESPONSE_CONTENT_TYPE"
    assert (ready.record.status, ready.record.error_type) == ("ERROR", "UnexpectedContentTypeError")
    assert ready.record.attempts == 1


def test_non_2xx_is_not_checked(respx_mock, http_tools):
    """A 404 error page is returned as is: checks describe successful bodies."""
    respx_mock.get(URL).mock(return_value=httpx.Response(404, html="nope"))
    tool = http_tools(expect_content_types=["application/json"], json_model=Rates).get(HttpTool)
    assert tool.get(URL).purpose("Read").execute().status_code == 404


def test_json_model_validates_and_exposes_data(respx_mock, http_tools):
    """A matching body is validated; response.data is the model instance."""
    respx_mock.get(URL).mock(return_value=httpx.Response(200, json={"base": "USD", "rates": {"EUR": 0.9}}))
    response = http_tools(json_model=Rates).get(HttpTool).get(URL).purpose("Read").execute()
    assert response.data == Rates(base="USD", rates={"EUR": 0.9})


@pytest.mark.parametrize(
    ("body", "match"),
    [
        (b"not json", "body is not JSON"),
        (b'{"base": "USD", "rates": {"EUR": "secret-value"}}', "field 'rates.EUR'"),
        (b'{"rates": {}}', "field 'base'"),
    ],
)
def test_json_model_mismatch(respx_mock, http_tools, body, match):
    """A body that is not JSON or does not match is ResponseSchemaError; values are not echoed."""
    respx_mock.get(URL).mock(return_value=httpx.Response(200, content=body))
    with pytest.raises(ResponseSchemaError, match=match) as info:
        http_tools(json_model=Rates).get(HttpTool).get(URL).purpose("Read").execute()
    assert info.value.code == "RESPONSE_SCHEMA"
    assert "secret-value" not in str(info.value)


def test_by_name_door_reports_error_code(respx_mock):
    """On the by-name door a mismatch is status ERROR with error_code ResponseSchemaError."""
    respx_mock.get(URL).mock(return_value=httpx.Response(200, json=[1, 2]))
    gateway = Gateway.load(
        policy=ToolPolicy.standard().allow(HttpTool),
        providers=[toolbox_http.plugin],
        discover=False,
        env={},
        options={"http": {"json_model": Rates}},
    )
    try:
        result = gateway.invoke(
            "http.get", {"url": URL, "purpose": "Read"}, context=ExecutionContext(tenant="t", principal="p")
        )
    finally:
        gateway.close()
    assert result.status is Status.ERROR
    assert result.error_code == "ResponseSchemaError"
    assert "does not match Rates" in (result.message or "")
