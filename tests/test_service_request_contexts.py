"""Each invoke's context lives for its request only, and nothing about a credential is kept between requests.

The service builds one `ExecutionContext` per request and releases it after the call
(`Gateway.release`): its tools are closed and freed at once, so no context, tool or
runtime waits for the garbage collector, and none outlives its request in the gateway's
recent contexts; a turn's context likewise. Attacks: a key revoked or its toolset
changed between two requests, concurrent requests of many credentials, every kind of
answer (success, denial, approval, failure, a name outside the toolset).
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from starlette.testclient import TestClient

from service_support import RUNS, USERS, Deployment, deployment, echo, write_keys_again
from toolbox import Governance, ToolPolicy
from toolbox.audit import AuditTrail, SqliteSink
from toolbox.auth import ApiKeyFile, CredentialAuthenticator
from toolbox.auth._keys import hash_api_key
from toolbox.doors._gateway import Gateway
from toolbox.doors._tools import Tools
from toolbox.foundations._context import ExecutionContext
from toolbox.registry._runtime import ToolRuntime
from toolbox.service import create_app
from toolbox.testing.credentials import write_api_keys
from toolbox_test_support.heap import collector_sees_only_new_objects

TOOLSETS = {"echoes": ("echo",)}


@pytest.fixture
def service(tmp_path: Path) -> Iterator[Deployment]:
    with deployment(tmp_path, toolsets=TOOLSETS) as deployed:
        yield deployed


def gateway_of(service: Deployment) -> Gateway:
    gateway: Gateway = service.server.server.config.app.state.service.served.gateway
    return gateway


def held_contexts(gateway: Gateway) -> int:
    return len(gateway._tools) + (gateway._last is not None)


def test_no_context_outlives_its_request_whatever_the_answer(service: Deployment) -> None:
    answers = [
        service.invoke("alice", "echo", {"text": "hi"}, purpose="Greet"),
        service.invoke("bob", "echo", {"text": "hi"}, purpose="Greet"),
        service.invoke("alice-echo", "echo", {"text": "hi"}, purpose="Greet"),  # scoped: full chain
        service.invoke("alice-echo", "transfer", {"amount": 1, "to": "x"}, audit_as="Pay"),
        service.invoke("alice", "transfer", {"amount": 1, "to": "x"}, audit_as="Pay"),
        service.invoke("alice", "broken", {"text": "x"}, purpose="Fail"),
        service.invoke("alice", "limited", {"text": "x"}, purpose="Refused"),
        service.invoke("alice", "echo", {"text": 7}, purpose="Bad"),
        service.invoke("alice", "nosuch", {}, purpose="Unknown"),
    ]
    assert [a.status_code for a in answers] == [200, 200, 200, 403, 202, 502, 429, 422, 404]
    assert RUNS == {"echo": 3, "broken": 1}
    assert held_contexts(gateway_of(service)) == 0


_COUNTED = frozenset({ExecutionContext, Tools, ToolRuntime})


def _alive() -> int:
    # By exact type: isinstance would ask every object in the heap for its class, and some
    # libraries' lazy proxies import optional dependencies when asked (anthropic's, at its
    # lowest release).
    return sum(type(o) in _COUNTED for o in gc.get_objects())


def _freed_at_once(invoke: Callable[[str], int]) -> None:
    """``invoke`` 30 times with the collector off: no context, tools or runtime is left, nor any cycle."""
    for _ in range(3):  # the name's route compiled (where it can be), the connection open
        assert invoke("alice") == 200
    # Counted and collected: what the 30 calls made (the heap before them is frozen).
    with collector_sees_only_new_objects():
        gc.disable()
        gc.set_debug(gc.DEBUG_SAVEALL)
        try:
            before = _alive()
            for user in ("alice", "bob", "viewer") * 10:
                assert invoke(user) == 200
            after = _alive()
            gc.collect()
            cyclic = [o for o in gc.garbage if type(o) in _COUNTED]
        finally:
            gc.set_debug(0)
            gc.garbage.clear()
            gc.enable()
    assert after <= before and cyclic == []


def test_a_full_chain_call_is_freed_at_once_without_the_collector(service: Deployment) -> None:
    """A request's context, tools and runtime go by reference counting when the request ends.

    (A memory audit sink keeps each call's context for its events: these are SQLite trails.)
    """
    _freed_at_once(lambda user: service.invoke(user, "echo", {"text": "hi"}, purpose="Greet").status_code)
    assert held_contexts(gateway_of(service)) == 0


def test_a_routed_call_is_freed_at_once_without_the_collector(tmp_path: Path) -> None:
    """The compiled by-name route's request too (no interceptor, mapper or timeout here)."""
    keys = write_api_keys(tmp_path / "keys.toml", {u: USERS[u] for u in ("alice", "bob", "viewer")})
    app = create_app(
        policy=ToolPolicy.standard(),
        authenticator=CredentialAuthenticator(api_keys=ApiKeyFile(tmp_path / "keys.toml")),
        providers=[echo],
        discover=False,
        env={},
        governance=Governance(audit=AuditTrail(SqliteSink(tmp_path / "audit.db"))),
        console=False,
    )
    gateway: Gateway = app.state.service.served.gateway
    body = {"arguments": {"text": "hi"}, "purpose": "Greet"}
    with TestClient(app) as client:
        _freed_at_once(
            lambda user: (
                client.post(
                    "/v1/tools/echo/invoke", json=body, headers={"Authorization": f"Bearer {keys[user]}"}
                ).status_code
            )
        )
        assert "echo" in gateway._routes and gateway._routes["echo"] is not None
    assert held_contexts(gateway) == 0


def test_a_key_revoked_between_two_requests_is_refused_at_once(service: Deployment) -> None:
    old = dict(service.keys)
    assert service.invoke("alice", "echo", {"text": "one"}, purpose="Greet").status_code == 200
    write_keys_again(service)
    refused = service.post(
        "/v1/tools/echo/invoke",
        headers={"Authorization": f"Bearer {old['alice']}"},
        json={"arguments": {"text": "two"}, "purpose": "Greet"},
    )
    assert refused.status_code == 401 and refused.json()["reason_code"] == "INVALID_CREDENTIALS"
    assert RUNS["echo"] == 1
    # Refused before anyone was authenticated: the shared trace, correlated by the answer's trace id.
    events = [e for e in service.events("unauthenticated") if e.correlation_id == refused.json()["trace_id"]]
    assert [(e.reason_code, list(e.rule_ids)) for e in events] == [("INVALID_CREDENTIALS", ["auth"])]
    assert service.invoke("alice", "echo", {"text": "three"}, purpose="Greet").status_code == 200


def _rewrite_entry(service: Deployment, user: str, **changes: Any) -> None:
    """The key file again with ``user``'s key unchanged and its entry changed (an operator's edit)."""
    lines = []
    for key_id, entry in USERS.items():
        fields = {**entry, **changes} if key_id == user else entry
        lines += [f"[keys.{key_id}]", f'sha256 = "{hash_api_key(service.keys[key_id])}"']
        lines.append(f'tenant = "{fields["tenant"]}"')
        lines.append(f'principal = "{fields.get("principal", key_id)}"')
        lines.append("roles = [" + ", ".join(f'"{r}"' for r in fields.get("roles", ())) + "]")
        if fields.get("toolset") is not None:
            lines.append(f'toolset = "{fields["toolset"]}"')
        if "expires" in fields:
            lines.append(f"expires = {fields['expires']}")
    staging = service.key_file.with_name("keys.toml.new")
    staging.write_text("\n".join(lines) + "\n", encoding="utf-8")
    staging.replace(service.key_file)


def test_a_toolset_changed_between_two_requests_applies_at_once(service: Deployment) -> None:
    assert service.invoke("alice", "transfer", {"amount": 1, "to": "x"}, audit_as="Pay").status_code == 202
    _rewrite_entry(service, "alice", toolset="echoes")  # the same key, now limited
    refused = service.invoke("alice", "transfer", {"amount": 1, "to": "x"}, audit_as="Pay")
    assert refused.status_code == 403 and refused.json()["reason_code"] == "NOT_IN_TOOLSET"
    assert [e.reason_code for e in service.events(refused.json()["trace_id"])] == ["NOT_IN_TOOLSET"]
    _rewrite_entry(service, "alice", toolset="nowhere")  # a toolset the policy does not define
    unknown = service.invoke("alice", "echo", {"text": "hi"}, purpose="Greet")
    assert unknown.status_code == 403 and unknown.json()["reason_code"] == "UNKNOWN_TOOLSET"
    assert [e.reason_code for e in service.events(unknown.json()["trace_id"])] == ["UNKNOWN_TOOLSET"]
    _rewrite_entry(service, "alice", roles=["auditor"])  # the caller role taken away
    no_role = service.invoke("alice", "echo", {"text": "hi"}, purpose="Greet")
    assert no_role.status_code == 403 and no_role.json()["reason_code"] == "ROLE_REQUIRED"
    assert [e.reason_code for e in service.events(no_role.json()["trace_id"])] == ["ROLE_REQUIRED"]
    assert RUNS["transfer"] == 0 and RUNS["echo"] == 0


def test_concurrent_requests_of_many_credentials_keep_their_own_identity(service: Deployment) -> None:
    callers = {"alice": "acme", "bob": "acme", "viewer": "acme", "mallory": "evil", "alice-echo": "acme"}
    principal = {user: USERS[user].get("principal", user) for user in callers}

    def call(user: str) -> tuple[str, Any]:
        answer = service.invoke(user, "echo", {"text": user}, purpose="Greet")
        return user, answer

    with ThreadPoolExecutor(16) as pool:
        results = list(pool.map(call, [user for user in callers for _ in range(8)]))
    traces = set()
    for user, answer in results:
        assert answer.status_code == 200 and answer.json()["content"] == user
        trace_id = answer.json()["trace_id"]
        traces.add(trace_id)
        events = service.events(trace_id)
        assert events and {(e.tenant, e.principal) for e in events} == {(callers[user], principal[user])}
    assert len(traces) == len(results) and RUNS["echo"] == len(results)
    assert held_contexts(gateway_of(service)) == 0


def test_a_turns_context_is_released_after_the_turn(tmp_path: Path) -> None:
    """A turn's calls share one context, released once the turn is answered, success or failure."""
    steps = [[ToolCallPart("echo", {"text": "hi", "purpose": "Answer"}, "c1")], [TextPart("done")]]

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if not steps:
            raise RuntimeError("the model is gone")
        return ModelResponse(parts=steps.pop(0))

    with deployment(tmp_path, turn_model=FunctionModel(model)) as service:
        answered = service.post("/v1/turns", "alice", json={"message": "say hi"})
        assert answered.status_code == 200 and answered.json()["tool_calls"] == 1
        assert held_contexts(gateway_of(service)) == 0
        failed = service.post("/v1/turns", "alice", json={"message": "again"})
        assert failed.status_code == 502 and failed.json()["reason_code"] == "MODEL_ERROR"
        assert held_contexts(gateway_of(service)) == 0
        assert RUNS["echo"] == 1
