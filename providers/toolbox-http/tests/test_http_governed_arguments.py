"""What guardrails, authorizers and approvals see of an HTTP call, and what a grant binds.

Regression tests for security findings 2 and 3 (issue 9): by-name and typed
calls expose the request as it will be sent (URL with its query, every query
parameter, every header, the body), and an approval grant is bound to all of it.
Each scenario runs on both doors, over respx and over a real loopback server.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

import toolbox_http.plugin
from toolbox import (
    ApprovalRequired,
    ExecutionContext,
    Gateway,
    Governance,
    Status,
    ToolDeniedError,
    ToolPolicy,
    ToolResult,
)
from toolbox.audit import AuditTrail, MemorySink
from toolbox.governance import Approval, ApprovalRequest, Guardrail, GuardrailAction, HmacApprover
from toolbox_http import HttpTool

LOOPBACK_EGRESS = {"allow_networks": ["127.0.0.0/8", "::1/128"]}

REMOTE = "https://api.example.com"
APPROVER = HmacApprover(b"approval-secret-0123456789abcdef")


@dataclass
class Harness:
    """One gateway (audit in memory) and a way to call http by name or typed, and to see what was sent."""

    gateway: Gateway
    sink: MemorySink
    context: ExecutionContext
    base: str
    sent: Callable[[], list[httpx.Request | dict[str, str]]]

    def by_name(
        self, operation: str, arguments: dict[str, Any], approval: Approval | None = None
    ) -> ToolResult:
        intent = "purpose" if operation in {"get", "head"} else "audit_as"
        return self.gateway.invoke(
            f"http.{operation}",
            {**arguments, intent: "Pay a supplier"},
            context=self.context,
            approval=approval,
        )

    def typed(self, operation: str, arguments: dict[str, Any], approval: Approval | None = None) -> object:
        tool = self.gateway.tools_for(self.context).get(HttpTool)
        intent = getattr(tool, operation)(**arguments)
        ready = intent.purpose("Pay a supplier") if operation in {"get", "head"} else intent.audit_as("Pay")
        return ready.execute(approval=approval)

    @property
    def executions(self) -> int:
        return self.gateway.tools_for(self.context).executions(HttpTool)

    def decisions(self) -> list[tuple[str | None, str | None]]:
        """(decision, reason code) of every GOVERNANCE_DECISION event of this context."""
        return [
            (event.decision, event.reason_code)
            for event in self.sink.read_trace(self.context.run_id)
            if event.type == "GOVERNANCE_DECISION"
        ]


@pytest.fixture(params=["respx", "loopback"])
def harness_factory(request, respx_mock) -> Iterator[Callable[..., Harness]]:
    """Build a `Harness` over respx or a real server on 127.0.0.1, with the given governance."""
    built: list[Gateway] = []
    server: Any = None
    if request.param == "loopback":
        server = request.getfixturevalue("loopback")
        respx_mock.route(host="127.0.0.1").pass_through()
    else:
        route = respx_mock.route(host="api.example.com").mock(return_value=httpx.Response(200, json={}))

    def factory(**governance: Any) -> Harness:
        sink = MemorySink()
        gateway = Gateway.load(
            policy=ToolPolicy.standard().allow(HttpTool),
            providers=[toolbox_http.plugin],
            discover=False,
            env={},
            options={"http": {"egress": LOOPBACK_EGRESS}},
            governance=Governance(audit=AuditTrail(sink), **governance),
        )
        built.append(gateway)
        context = ExecutionContext(tenant="acme", principal="agent-7")
        if server is not None:
            loop = server

            def sent() -> list[httpx.Request | dict[str, str]]:
                return [
                    {"path": path, **headers}
                    for (_, path, _), headers in zip(loop.requests, loop.received_headers, strict=True)
                ]

            return Harness(gateway, sink, context, loop.url, sent)
        return Harness(gateway, sink, context, REMOTE, lambda: [call.request for call in route.calls])

    yield factory
    for gateway in built:
        gateway.close()


def _deny_when(predicate: Callable[[Mapping[str, Any]], bool]) -> Governance | dict[str, Any]:
    return {"guardrails": [Guardrail(id="VICTIM", action=GuardrailAction.DENY, tool="http", when=predicate)]}


def _approval_for_post() -> dict[str, Any]:
    rule = Guardrail(id="PAYMENTS", action=GuardrailAction.REQUIRE_APPROVAL, tool="http", operation="post")
    return {"guardrails": [rule], "approver": APPROVER}


def _assert_guardrail_denied(h: Harness, door: str, operation: str, arguments: dict[str, Any]) -> None:
    if door == "by_name":
        result = h.by_name(operation, arguments)
        assert (result.status, result.reason_code) == (Status.DENIED, "GUARDRAIL_VICTIM"), result
    else:
        with pytest.raises(ToolDeniedError) as info:
            h.typed(operation, arguments)
        assert info.value.reason_code == "GUARDRAIL_VICTIM"
    assert h.executions == 0
    assert h.sent() == []
    assert h.decisions() == [("DENY", "GUARDRAIL_VICTIM")]


DOORS = ["by_name", "typed"]


@pytest.mark.parametrize("door", DOORS)
def test_guardrail_sees_params(harness_factory, door):
    """Finding 2: a DENY guardrail on params matches; the request is never sent."""
    h = harness_factory(**_deny_when(lambda a: "victim" in repr(a.get("params"))))
    _assert_guardrail_denied(h, door, "get", {"url": f"{h.base}/accounts", "params": {"account": "victim"}})


@pytest.mark.parametrize("door", DOORS)
@pytest.mark.parametrize(
    "query",
    [
        "?account=victim",  # in the URL, not in params
        "?%61ccount=victim",  # a percent-encoded name
        "?account=alice&account=victim",  # a duplicate name: every value is seen
        "?account=vic%74im",  # a percent-encoded value
    ],
)
def test_guardrail_sees_the_query_however_it_is_spelled(harness_factory, door, query):
    """The view holds every query parameter as sent, decoded, from the URL and params together."""
    h = harness_factory(**_deny_when(lambda a: "victim" in a["params"].get("account", [])))
    _assert_guardrail_denied(h, door, "get", {"url": f"{h.base}/accounts{query}", "params": {"page": 2}})


@pytest.mark.parametrize("door", DOORS)
@pytest.mark.parametrize("name", ["X-Pay-To", "x-pay-to", "X-PAY-TO"])
def test_guardrail_sees_headers_under_lowercase_names(harness_factory, door, name):
    """Header names are lower-cased in the view, so a rule cannot be dodged by case."""
    h = harness_factory(**_deny_when(lambda a: a["headers"].get("x-pay-to") == "victim"))
    _assert_guardrail_denied(h, door, "post", {"url": f"{h.base}/pay", "headers": {name: "victim"}})


@pytest.mark.parametrize("door", DOORS)
def test_guardrail_sees_nested_json_body(harness_factory, door):
    """The JSON body is presented as data: a rule can look inside it."""
    h = harness_factory(**_deny_when(lambda a: a["json"] and a["json"]["to"][0]["name"] == "victim"))
    _assert_guardrail_denied(h, door, "post", {"url": f"{h.base}/pay", "json": {"to": [{"name": "victim"}]}})


def test_authorizer_sees_params_and_headers(harness_factory):
    """Authorizers receive the same view as guardrails."""
    from toolbox.governance import Decision

    seen: list[Mapping[str, Any]] = []

    def authorizer(tool, operation, context, arguments):
        seen.append(arguments)
        return Decision.allow()

    h = harness_factory(authorizers=[authorizer])
    result = h.by_name(
        "get", {"url": f"{h.base}/a?x=1", "params": {"account": "alice"}, "headers": {"X-A": "b"}}
    )
    assert result.status is Status.SUCCESS, result
    (view,) = seen
    assert view["params"] == {"x": ["1"], "account": ["alice"]}
    assert view["headers"]["x-a"] == "b"
    assert view["url"] == f"{h.base}/a?x=1&account=alice"
    assert view["method"] == "GET"


# --- Finding 3: grants are bound to every argument value ---------------------------------------------


def _pending(h: Harness, door: str, operation: str, arguments: dict[str, Any]) -> ApprovalRequest:
    if door == "by_name":
        result = h.by_name(operation, arguments)
        assert result.status is Status.APPROVAL_REQUIRED, result
        assert result.approval is not None
        return result.approval
    with pytest.raises(ApprovalRequired) as info:
        h.typed(operation, arguments)
    request = info.value.request
    assert isinstance(request, ApprovalRequest)
    return request


def _replay_refused(
    h: Harness, door: str, operation: str, arguments: dict[str, Any], grant: Approval
) -> None:
    if door == "by_name":
        result = h.by_name(operation, arguments, approval=grant)
        assert (result.status, result.reason_code) == (Status.DENIED, "APPROVAL_INVALID"), result
    else:
        with pytest.raises(ToolDeniedError) as info:
            h.typed(operation, arguments, approval=grant)
        assert info.value.reason_code == "APPROVAL_INVALID"
    assert h.executions == 0
    assert h.sent() == []
    assert h.decisions() == [("APPROVAL_REQUIRED", "APPROVAL_REQUIRED"), ("DENY", "APPROVAL_INVALID")]


REBINDINGS = {
    "header": ({"headers": {"X-Pay-To": "alice"}}, {"headers": {"X-Pay-To": "mallory"}}),
    "query in url": ({"url": "/pay?code=111"}, {"url": "/pay?code=999"}),
    "query in params": ({"params": {"code": "111"}}, {"params": {"code": "999"}}),
    "duplicate query": ({"url": "/pay?code=111"}, {"url": "/pay?code=111&code=999"}),
    "secret-looking header": ({"headers": {"X-Api-Key": "k-1"}}, {"headers": {"X-Api-Key": "k-2"}}),
    "barcode": ({"params": {"barcode": "4006381333931"}}, {"params": {"barcode": "4006381333948"}}),
    "session": ({"params": {"session": "a"}}, {"params": {"session": "b"}}),
    "userinfo": ({"url": "/pay", "userinfo": "alice:pw"}, {"url": "/pay", "userinfo": "mallory:pw"}),
    "nested json": ({"json": {"to": [{"iban": "DE89"}]}}, {"json": {"to": [{"iban": "DE90"}]}}),
    "form body": ({"content": "to=alice&amount=5"}, {"content": "to=mallory&amount=5"}),
    "unicode": ({"json": {"to": "\u00e9ve"}}, {"json": {"to": "e\u0301ve"}}),
}


def _arguments(h: Harness, spec: dict[str, Any]) -> dict[str, Any]:
    spec = dict(spec)
    path = spec.pop("url", "/pay")
    userinfo = spec.pop("userinfo", None)
    base = h.base if userinfo is None else h.base.replace("://", f"://{userinfo}@")
    return {"url": base + path, **spec}


@pytest.mark.parametrize("door", DOORS)
@pytest.mark.parametrize("change", sorted(REBINDINGS))
def test_grant_is_bound_to_every_value(harness_factory, door, change):
    """Finding 3: a grant for one value does not unlock the call with another; nothing is sent."""
    h = harness_factory(**_approval_for_post())
    granted, other = (_arguments(h, spec) for spec in REBINDINGS[change])
    request = _pending(h, door, "post", granted)
    grant = APPROVER.grant(request, approved_by="manager-1")
    _replay_refused(h, door, "post", other, grant)


@pytest.mark.parametrize("door", DOORS)
def test_grant_for_the_same_request_succeeds_once(harness_factory, door):
    """The grant unlocks exactly the approved request; the server receives alice, once."""
    h = harness_factory(**_approval_for_post())
    arguments = _arguments(h, {"url": "/pay?code=111", "headers": {"X-Pay-To": "alice"}})
    grant = APPROVER.grant(_pending(h, door, "post", arguments), approved_by="manager-1")
    if door == "by_name":
        assert h.by_name("post", arguments, approval=grant).status is Status.SUCCESS
    else:
        h.typed("post", arguments, approval=grant)
    (sent,) = h.sent()
    headers = sent.headers if isinstance(sent, httpx.Request) else {k.lower(): v for k, v in sent.items()}
    assert headers["x-pay-to"] == "alice"


def test_grant_from_one_door_is_bound_to_the_other_doors_request(harness_factory):
    """Both doors present the same view, so the fingerprint of a request is the same on both."""
    h = harness_factory(**_approval_for_post())
    arguments = _arguments(h, {"headers": {"X-Pay-To": "alice"}, "json": {"amount": 5}})
    assert (
        _pending(h, "by_name", "post", arguments).fingerprint
        == _pending(h, "typed", "post", arguments).fingerprint
    )


def test_approval_display_masks_secrets_but_binds_them(harness_factory):
    """The request shows no secret value; a changed secret still changes the fingerprint."""
    h = harness_factory(**_approval_for_post())
    first = _pending(h, "by_name", "post", _arguments(h, {"headers": {"Authorization": "Bearer tok-1"}}))
    second = _pending(h, "by_name", "post", _arguments(h, {"headers": {"Authorization": "Bearer tok-2"}}))
    assert "tok-1" not in repr(first.as_dict())
    assert first.arguments["headers"] == {"Authorization": "[REDACTED]"}  # as the call gave it, masked
    assert first.fingerprint != second.fingerprint


@pytest.mark.parametrize("door", DOORS)
def test_one_header_in_two_spellings_is_refused(harness_factory, door):
    """Both spellings would be sent and servers disagree on which counts: the call is invalid."""
    h = harness_factory()
    arguments = {"url": f"{h.base}/pay", "headers": {"X-Pay-To": "alice", "x-pay-to": "mallory"}}
    if door == "by_name":
        result = h.by_name("post", arguments)
        assert (result.status, result.error_code) == (Status.INVALID_ARGUMENTS, "rejected_by_tool")
        assert "mallory" not in repr(result.as_dict())
    else:
        with pytest.raises(ValueError, match="given twice"):
            h.typed("post", arguments)
    assert h.executions == 0
    assert h.sent() == []


def test_a_grant_redeemed_concurrently_runs_once(harness_factory):
    """Eight threads racing with one grant: one request is sent, seven are APPROVAL_INVALID."""
    from concurrent.futures import ThreadPoolExecutor

    h = harness_factory(**_approval_for_post())
    arguments = _arguments(h, {"headers": {"X-Pay-To": "alice"}})
    grant = APPROVER.grant(_pending(h, "by_name", "post", arguments), approved_by="manager-1")
    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda _: h.by_name("post", arguments, approval=grant), range(8)))
    statuses = sorted(r.reason_code or r.status.value for r in results)
    assert statuses == ["APPROVAL_INVALID"] * 7 + ["SUCCESS"]
    assert len(h.sent()) == 1


def test_approval_display_uses_the_trails_redact_keys(harness_factory):
    """A configured key is masked in the approval request too, and still bound."""
    from toolbox.audit import Redaction

    trail = AuditTrail(MemorySink(), redaction=Redaction.of(["x-pay-to"]))
    h = harness_factory(**_approval_for_post())
    h.gateway = Gateway.load(
        policy=ToolPolicy.standard().allow(HttpTool),
        providers=[toolbox_http.plugin],
        discover=False,
        env={},
        options={"http": {"egress": LOOPBACK_EGRESS}},
        governance=Governance(audit=trail, **_approval_for_post()),
    )
    first = _pending(h, "by_name", "post", _arguments(h, {"url": "/pay?x-pay-to=alice"}))
    second = _pending(h, "by_name", "post", _arguments(h, {"url": "/pay?x-pay-to=mallory"}))
    assert "alice" not in repr(first.as_dict())
    # Shown: the call's own arguments (foundations._binding), the configured key masked in the URL's query.
    assert first.arguments["url"].endswith("/pay?x-pay-to=[REDACTED]")
    assert first.fingerprint != second.fingerprint
    h.gateway.close()


@pytest.mark.parametrize("door", DOORS)
@pytest.mark.parametrize(
    "arguments",
    [
        {"url": "/accounts?account=victim"},
        {"url": "/accounts?%61ccount=alice&account=victim"},
        {"url": "/accounts", "params": {"account": ["alice", "victim"]}},
    ],
)
def test_policy_file_rules_read_params_by_path(harness_factory, door, arguments):
    """An operator's file rule on ``["params", "account"]`` holds however the query is spelled."""
    from toolbox.pipeline.checks._guardrails import guardrails_from_config

    rule = {
        "id": "VICTIM",
        "action": "DENY",
        "tool": "http",
        "argument": ["params", "account"],
        "equals": "victim",
    }
    h = harness_factory(guardrails=guardrails_from_config({"rules": [rule]}).rules)
    _assert_guardrail_denied(h, door, "get", _arguments(h, arguments))


def test_absurdly_deep_json_is_a_clear_error(harness_factory):
    """A typed body nested thousands deep is a ValueError at call time; nothing is sent."""
    h = harness_factory()
    body: dict[str, object] = {}
    cursor = body
    for _ in range(5000):
        cursor["a"] = cursor = {}
    with pytest.raises(ValueError, match="cannot be encoded as JSON: RecursionError"):
        h.typed("post", {"url": f"{h.base}/pay", "json": body})
    assert h.executions == 0
    assert h.sent() == []
