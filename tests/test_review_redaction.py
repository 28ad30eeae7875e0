"""Security review: a secret named inside free text (``api_key=...``) is masked in the trail and approvals."""

from __future__ import annotations

import pytest

from toolbox import Effect, ExecutionContext, Gateway, Governance, RiskClass, Status, tool
from toolbox.audit import AuditTrail, MemorySink, Redaction
from toolbox.governance import HmacApprover

SECRET = "sk-live-Q7XKZP4R2M9W"
RUNS: list[str] = []


@tool(risk=RiskClass.MEMORY_ONLY, effect=Effect.UNSAFE, name="ops.run", requires_approval=True)
def run(command: str) -> str:
    """Run a command (a human approves each one)."""
    RUNS.append(command)
    return "ran"


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        (f"please use api_key={SECRET} now", "please use api_key=[REDACTED] now"),
        (f"api_key={SECRET} ", "api_key=[REDACTED] "),
        (f" api_key={SECRET}", " api_key=[REDACTED]"),
        (f"export OPENAI_API_KEY={SECRET}; deploy", "export OPENAI_API_KEY=[REDACTED]; deploy"),
        (f"deploy --api-key={SECRET} --fast", "deploy --api-key=[REDACTED] --fast"),
        (
            f'curl -H "Authorization: Bearer {SECRET}" https://x',
            'curl -H "Authorization: [REDACTED]" https://x',
        ),
        (f"password: {SECRET}, then log in", "password: [REDACTED]"),
        (f'{{"api_key": "{SECRET}", "n": 2}} and more', '{"api_key": "[REDACTED]", "n": 2} and more'),
        (
            f"see https://x.example/p?access_token={SECRET} today",
            "see https://x.example/p?access_token=[REDACTED] today",
        ),
        (f"the header was Bearer {SECRET}", "the header was Bearer [REDACTED]"),
        (f"note: client_secret={SECRET}\nnext line", "note: client_secret=[REDACTED]\nnext line"),
        (f"iban: {SECRET}", "iban: [REDACTED]"),  # a configured key
        (
            f"use \uff41\uff50\uff49_\uff4b\uff45\uff59={SECRET} ok",
            "use \uff41\uff50\uff49_\uff4b\uff45\uff59=[REDACTED] ok",
        ),
        (f"use api%5Fkey={SECRET} ok", "use api%5Fkey=[REDACTED] ok"),
    ],
)
def test_a_named_secret_inside_free_text_is_masked(text: str, shown: str) -> None:
    cleaned = Redaction.of(["iban"]).clean({"note": text})
    assert cleaned == {"note": shown}
    assert SECRET not in repr(cleaned)


@pytest.mark.parametrize(
    "text",
    [
        "the token limit is 5",
        "my password is long",  # no name=value: free text is stored as written (documented)
        "meet at 10:30, ratio a=b",
        "author: Ada; barcode=123",
        "see https://x.example/a?page=2",
    ],
)
def test_prose_without_a_named_secret_is_unchanged(text: str) -> None:
    assert Redaction().clean(text) == text


def test_the_approval_display_and_the_audit_row_mask_it() -> None:
    RUNS.clear()
    sink = MemorySink()
    approver = HmacApprover(b"review-redaction-secret-0123456")
    gateway = Gateway.load(
        providers=[run],
        discover=False,
        env={},
        governance=Governance(audit=AuditTrail(sink), approver=approver),
    )
    context = ExecutionContext(tenant="t", principal="p")
    command = f"deploy --api_key={SECRET} --region eu"
    result = gateway.invoke("ops.run", {"command": command, "audit_as": "Deploy"}, context=context)
    assert (result.status, result.reason_code) == (Status.APPROVAL_REQUIRED, "APPROVAL_REQUIRED")
    assert RUNS == []
    assert result.approval is not None
    assert result.approval.arguments["command"] == "deploy --api_key=[REDACTED] --region eu"
    assert SECRET not in repr(result.approval.as_dict())
    assert sink.records and all(SECRET not in repr(r.payload_summary) for r in sink.records)
    # The grant is bound to the real value: approving the shown request runs exactly that call.
    grant = approver.grant(result.approval, approved_by="bob")
    ran = gateway.invoke(
        "ops.run", {"command": command, "audit_as": "Deploy"}, context=context, approval=grant
    )
    assert ran.status is Status.SUCCESS
    assert [command] == RUNS
