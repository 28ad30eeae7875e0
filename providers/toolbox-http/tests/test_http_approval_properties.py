"""Property: an HTTP approval fingerprint changes with any argument value (finding 3, issue 9)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import toolbox_http.plugin
from toolbox import ExecutionContext, Gateway, Governance, Status, ToolPolicy
from toolbox.governance import Guardrail, GuardrailAction, HmacApprover
from toolbox_http import HttpTool

#: Header and parameter names, secret-looking ones included: none is left out of the binding.
NAMES = st.sampled_from(
    ["X-Pay-To", "Authorization", "X-Api-Key", "Cookie", "code", "barcode", "session", "page"]
)
HEADER_VALUES = st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=12)
PARAM_VALUES = st.text(max_size=12).filter(lambda v: "\x00" not in v)
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=10,
)


@st.composite
def requests(draw: st.DrawFn) -> dict[str, Any]:
    """The arguments of one ``http.post``."""
    return {
        "url": "https://api.example.com/pay",
        "params": draw(st.dictionaries(NAMES, PARAM_VALUES, max_size=3)),
        "headers": draw(st.dictionaries(NAMES, HEADER_VALUES, max_size=3)),
        "json": draw(st.none() | st.dictionaries(st.text(max_size=5), JSON, min_size=1, max_size=3)),
    }


@pytest.fixture(scope="module")
def gateway() -> Iterator[Gateway]:
    rule = Guardrail(id="ALL", action=GuardrailAction.REQUIRE_APPROVAL, tool="http")
    built = Gateway.load(
        policy=ToolPolicy.standard().allow(HttpTool),
        providers=[toolbox_http.plugin],
        discover=False,
        env={},
        governance=Governance(guardrails=[rule], approver=HmacApprover(b"s" * 32)),
    )
    yield built
    built.close()


CONTEXT = ExecutionContext(tenant="acme", principal="agent-7")


def _fingerprint(gateway: Gateway, arguments: dict[str, Any]) -> str:
    result = gateway.invoke("http.post", {**arguments, "audit_as": "Pay"}, context=CONTEXT)
    assert result.status is Status.APPROVAL_REQUIRED and result.approval is not None, result
    return result.approval.fingerprint


@given(request=requests(), data=st.data())
def test_any_changed_value_changes_the_fingerprint(gateway, request, data):
    """Property: change one header, parameter or body value (or add one) and the grant no longer fits."""
    where = data.draw(st.sampled_from(["params", "headers", "json"]))
    if where == "json":
        body = request["json"] or {}
        key = data.draw(st.sampled_from(sorted(body)) if body else st.text(max_size=5))
        new_value = data.draw(
            JSON.filter(lambda v: body.get(key, object()) != v or type(v) is not type(body[key]))
        )
        changed = {**request, "json": {**body, key: new_value}}
    else:
        name = data.draw(NAMES)
        current = {k.lower(): v for k, v in request[where].items()} if where == "headers" else request[where]
        lookup = name.lower() if where == "headers" else name
        values = HEADER_VALUES if where == "headers" else PARAM_VALUES
        new_value = data.draw(values.filter(lambda v: current.get(lookup) != v))
        kept = {k: v for k, v in request[where].items() if k.lower() != name.lower()}
        changed = {**request, where: {**kept, name: new_value}}
    assert _fingerprint(gateway, changed) != _fingerprint(gateway, request)


@given(request=requests())
def test_the_same_request_has_the_same_fingerprint(gateway, request):
    """Property: the fingerprint is a function of the request (a grant for it can be used)."""
    assert _fingerprint(gateway, request) == _fingerprint(gateway, dict(reversed(list(request.items()))))
