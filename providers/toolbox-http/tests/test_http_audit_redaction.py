"""``redact_keys`` reach URLs, params, headers and bodies in every sink and trace (finding 7, issue 9).

One gateway writes to memory, JSONL, SQLite and PostgreSQL (127.0.0.1:5432,
database ``test``) at once, with an OpenTelemetry hook; after each call the
bytes of every store, the spans, the context's trace and the result are
searched for the secret.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
import respx
from hypothesis import given
from hypothesis import strategies as st
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from sqlalchemy import text

import toolbox_http.plugin
from audit_sql_support import POSTGRES_URL, postgres_admin
from toolbox import ExecutionContext, Gateway, Governance, ToolPolicy, ToolResult
from toolbox.audit import (
    AuditTrail,
    FanOutSink,
    JsonlSink,
    MemorySink,
    OtelHook,
    PostgresSink,
    Redaction,
    SqliteSink,
)
from toolbox_http import HttpTool

HOST = "https://api.example.com"
KEYS = ["iban", "X-Pay-To"]


@dataclass
class Stores:
    """A gateway auditing to four sinks at once, and the means to read every byte they hold."""

    gateway: Gateway
    memory: MemorySink
    jsonl: Path
    sqlite: Path
    postgres: PostgresSink
    schema: str
    spans: InMemorySpanExporter

    def everything(self, context: ExecutionContext, result: object) -> dict[str, str]:
        """What each place holds after a call, as text."""
        engine = self.postgres.engine
        with engine.connect() as conn:
            rows = conn.execute(text(f'SELECT * FROM "{self.schema}".audit_events')).fetchall()
        sqlite_bytes = b"".join(p.read_bytes() for p in self.sqlite.parent.glob(self.sqlite.name + "*"))
        return {
            "memory": json.dumps([r.model_dump() for r in self.memory.read_trace(context.run_id)]),
            "jsonl": self.jsonl.read_text(encoding="utf-8"),
            "sqlite": sqlite_bytes.decode("latin-1"),
            # Plain tuples: a Row's repr shortens long values (and costs more than the query).
            "postgres": repr([tuple(row) for row in rows]),
            "spans": repr([dict(span.attributes or {}) for span in self.spans.get_finished_spans()]),
            "trace": repr([record.as_dict() for record in context.trace]),
            "result": repr(result.as_dict() if isinstance(result, ToolResult) else result),
        }


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stores]:
    folder = tmp_path_factory.mktemp("redaction")
    admin = postgres_admin()
    schema = f"toolbox_test_{uuid.uuid4().hex}"
    memory, jsonl, sqlite = MemorySink(), folder / "audit.jsonl", folder / "audit.db"
    postgres = PostgresSink(POSTGRES_URL, schema=schema)
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    redaction = Redaction.of(KEYS, max_summary=100_000)
    trail = AuditTrail(
        FanOutSink([memory, JsonlSink(jsonl), SqliteSink(sqlite), postgres]), redaction=redaction
    )
    hook = OtelHook(tracer=provider.get_tracer("test"), redaction=redaction)
    gateway = Gateway.load(
        policy=ToolPolicy.standard().allow(HttpTool),
        providers=[toolbox_http.plugin],
        discover=False,
        env={},
        governance=Governance(audit=trail, audit_hooks=[hook]),
    )
    try:
        yield Stores(gateway, memory, jsonl, sqlite, postgres, schema, exporter)
    finally:
        gateway.close()
        trail.close()
        with admin.begin() as conn:
            conn.execute(text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
        admin.dispose()


def _call(
    stores: Stores, door: str, operation: str, arguments: dict[str, Any]
) -> tuple[ExecutionContext, object]:
    context = ExecutionContext(tenant="acme", principal="agent-7")
    with respx.mock:
        respx.route(host="api.example.com").mock(return_value=httpx.Response(200, json={"ok": True}))
        if door == "by_name":
            intent = {"purpose": "Read"} if operation == "get" else {"audit_as": "Pay"}
            result: object = stores.gateway.invoke(
                f"http.{operation}", {**arguments, **intent}, context=context
            )
        else:
            tool = stores.gateway.tools_for(context).get(HttpTool)
            made = getattr(tool, operation)(**arguments)
            result = (made.purpose("Read") if operation == "get" else made.audit_as("Pay")).execute()
    return context, result


def _assert_nowhere(stores: Stores, context: ExecutionContext, result: object, secret: str) -> None:
    found = {place: secret in content for place, content in stores.everything(context, result).items()}
    assert not any(found.values()), f"{secret!r} leaked into {[p for p, hit in found.items() if hit]}"


def _placements(secret: str) -> dict[str, tuple[str, dict[str, Any]]]:
    return {
        "params": ("get", {"url": f"{HOST}/pay", "params": {"iban": secret}}),
        "params, upper case": ("get", {"url": f"{HOST}/pay", "params": {"IBAN": secret}}),
        "url query": ("get", {"url": f"{HOST}/pay?iban={secret}"}),
        "url, percent-encoded key": ("get", {"url": f"{HOST}/pay?%69ban={secret}"}),
        "url, duplicate key": ("get", {"url": f"{HOST}/pay?iban=x&iban={secret}"}),
        "url and params": ("get", {"url": f"{HOST}/pay?iban={secret}", "params": {"iban": "other"}}),
        "userinfo": ("get", {"url": f"https://user:{secret}@api.example.com/pay"}),
        "header name": ("post", {"url": f"{HOST}/pay", "headers": {"x-pay-to": secret}}),
        "nested json": ("post", {"url": f"{HOST}/pay", "json": {"to": [{"account": {"Iban": secret}}]}}),
        "form body": ("post", {"url": f"{HOST}/pay", "content": f"amount=5&iban={secret}"}),
        "json text body": ("post", {"url": f"{HOST}/pay", "content": json.dumps({"a": {"iban": secret}})}),
        "url in a form": (
            "post",
            {"url": f"{HOST}/pay", "content": "next=" + quote(f"{HOST}/?iban={secret}", safe="")},
        ),
    }


def _secret() -> str:
    """A value no earlier call wrote: the stores are shared by the whole module."""
    return "DE89" + uuid.uuid4().hex.upper()


@pytest.mark.parametrize("door", ["by_name", "typed"])
@pytest.mark.parametrize("placement", sorted(_placements("")))
def test_configured_key_never_stored(stores, door, placement):
    """Finding 7: the value under a configured key is in no sink, span, trace record or result."""
    secret = _secret()
    operation, arguments = _placements(secret)[placement]
    context, result = _call(stores, door, operation, arguments)
    assert stores.gateway.tools_for(context).executions(HttpTool) == 1, "the call itself went through"
    _assert_nowhere(stores, context, result, secret)


def test_the_summary_still_shows_what_is_not_secret(stores):
    """Redaction masks values, not the call: the URL and the other parameters stay readable.

    The payload is the call's own arguments (`toolbox.foundations._binding`), as the operation was called.
    """
    context, _ = _call(stores, "by_name", "get", {"url": f"{HOST}/pay?page=2", "params": {"iban": _secret()}})
    (request,) = [r for r in stores.memory.read_trace(context.run_id) if r.type == "INTENT_DECLARED"]
    summary = json.loads(request.payload_summary or "{}")
    assert summary["params"] == {"iban": "[REDACTED]"}
    assert summary["url"] == f"{HOST}/pay?page=2"


SECRETS = st.text("ABCDEFGHJKLMNPQRSTUVWXYZ23456789", min_size=4, max_size=12).map(lambda s: "Q7X" + s)
CASED = st.sampled_from(KEYS).flatmap(
    lambda key: st.lists(st.booleans(), min_size=len(key), max_size=len(key)).map(
        lambda flips: "".join(c.upper() if up else c.lower() for c, up in zip(key, flips, strict=True))
    )
)


@st.composite
def http_calls(draw: st.DrawFn, secret: str) -> tuple[str, dict[str, Any]]:
    """An http call hiding ``secret`` under a configured key, somewhere a model could put it."""
    key = draw(CASED)
    encoded_key = "".join(f"%{ord(c):02X}" if draw(st.booleans()) else c for c in key)
    where = draw(st.sampled_from(["params", "query", "header", "json", "form", "userinfo"]))
    decoy = draw(
        st.dictionaries(st.sampled_from(["page", "q", "note"]), st.text("abc", max_size=3), max_size=2)
    )
    if where == "params":
        return "get", {"url": f"{HOST}/x", "params": {**decoy, key: secret}}
    if where == "query":
        return "get", {"url": f"{HOST}/x?{encoded_key}={secret}", "params": decoy}
    if where == "header":
        return "post", {"url": f"{HOST}/x", "headers": {key: secret}, "json": decoy}
    if where == "json":
        depth = draw(st.integers(0, 4))
        body: object = {key: secret}
        for _ in range(depth):
            body = draw(st.sampled_from([[body], {"inner": body}]))
        return "post", {"url": f"{HOST}/x", "json": {"payload": body, **decoy}}
    if where == "form":
        return "post", {"url": f"{HOST}/x", "content": f"a=1&{encoded_key}={quote(secret)}"}
    return "get", {"url": f"https://{key}:{secret}@api.example.com/x"}


@given(data=st.data(), secret=SECRETS, door=st.sampled_from(["by_name", "typed"]))
def test_property_configured_key_never_reaches_a_sink(stores, data, secret, door):
    """Property: whatever the nesting or URL placement, the value is in no sink's bytes, span or trace."""
    secret += uuid.uuid4().hex.upper()  # unique: the stores are shared by every example
    operation, arguments = data.draw(http_calls(secret))
    context, result = _call(stores, door, operation, arguments)
    _assert_nowhere(stores, context, result, secret)


@pytest.mark.parametrize(
    "bad",
    [
        {"unexpected": 1},  # refused by the schema: the raw JSON is what is stored
        {"headers": {"X-A": "1", "x-a": "2"}},  # refused by the tool
        {"url": "ftp://api.example.com/"},  # refused by the tool, the URL in the message
    ],
)
def test_refused_calls_store_their_raw_arguments_redacted(stores, bad):
    """A call refused before it becomes a request is recorded with the model's JSON, redacted the same way."""
    secret = _secret()
    arguments = {"url": f"{HOST}/pay?IBAN={secret}", "params": {"iban": secret}, **bad}
    if bad.get("url", "").startswith("ftp"):
        arguments["url"] += f"?iban={secret}"
    context, result = _call(stores, "by_name", "get", arguments)
    assert isinstance(result, ToolResult) and result.status.value == "INVALID_ARGUMENTS"
    _assert_nowhere(stores, context, result, secret)
