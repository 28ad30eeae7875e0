"""The shipped tools (calculator, http, fs) are callable by name, with schemas for a model."""

import httpx
import respx

from toolbox import ExecutionContext, Gateway, Status, ToolPolicy
from toolbox_fs import FS_ACKNOWLEDGEMENT, FsTool
from toolbox_http import HttpTool


def make(tmp_path):
    env = {FS_ACKNOWLEDGEMENT.env: FS_ACKNOWLEDGEMENT.value}
    return Gateway.load(
        policy=ToolPolicy.standard().allow(HttpTool, FsTool),
        env=env,
        options={"fs": {"roots": [str(tmp_path)]}},
    )


def test_definitions_for_every_shipped_operation(tmp_path):
    """Each operation exports a schema; parameters shadowing pydantic names keep their public name."""
    definitions = {d["name"]: d["parameters"] for d in make(tmp_path).definitions()}
    assert {"calculator__evaluate", "fs__write", "fs__delete", "http__get", "http__post"} <= set(definitions)
    assert "json" in definitions["http__post"]["properties"]
    assert definitions["http__post"]["required"] == ["url", "audit_as"]


def test_by_name_calls(tmp_path):
    """Calculator, fs and http work by name; the http body travels under its public name."""
    gateway, ctx = make(tmp_path), ExecutionContext(tenant="t", principal="p")
    assert (
        gateway.invoke("calculator.evaluate", {"expression": "6*7", "purpose": "Math"}, context=ctx).content
        == 42
    )
    written = gateway.invoke("fs.write", {"path": "n.txt", "data": "hi", "audit_as": "Save"}, context=ctx)
    assert (written.status, (tmp_path / "n.txt").read_text()) == (Status.SUCCESS, "hi")
    escape = gateway.invoke("fs.read_text", {"path": "../x", "purpose": "Read"}, context=ctx)
    assert (escape.status, escape.reason_code, escape.attempts) == (Status.DENIED, "PATH_OUTSIDE_ROOTS", 0)
    with respx.mock:
        route = respx.post("https://api.example.test/items").mock(
            return_value=httpx.Response(201, json={"id": 1})
        )
        posted = gateway.invoke(
            "http.post",
            {"url": "https://api.example.test/items", "json": {"sku": "A"}, "audit_as": "Create"},
            context=ctx,
        )
    assert (posted.status, posted.content.status_code) == (Status.SUCCESS, 201)
    assert route.calls[0].request.content == b'{"sku":"A"}'
