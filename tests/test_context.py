"""ExecutionContext: trusted, frozen, validated; its trace."""

from datetime import datetime, timedelta, timezone

import pytest
from pydantic import ValidationError

from toolbox import ExecutionContext


def test_ids_generated_when_absent():
    """run_id and correlation_id are generated, unique per context."""
    a = ExecutionContext(tenant="t", principal="p")
    b = ExecutionContext(tenant="t", principal="p")
    assert len(a.run_id) == 32 and a.run_id != b.run_id
    assert a.correlation_id != b.correlation_id


def test_given_ids_kept():
    """Ids the application supplies are kept."""
    ctx = ExecutionContext(tenant="t", principal="p", run_id="run-1", correlation_id="req-9", roles={"admin"})
    assert (ctx.run_id, ctx.correlation_id, ctx.roles) == ("run-1", "req-9", frozenset({"admin"}))


@pytest.mark.parametrize(
    "roles", [{"admin", "ops"}, frozenset({"admin", "ops"}), ["admin", "ops"], ("ops", "admin")]
)
def test_roles_accept_any_set_and_are_kept_frozen(roles):
    """A set, frozenset, list or tuple of roles is accepted (and type-checks) and stored as a frozenset."""
    ctx = ExecutionContext(tenant="t", principal="p", roles=roles)
    assert type(ctx.roles) is frozenset and ctx.roles == {"admin", "ops"}


def test_roles_given_as_one_string_are_rejected():
    """``roles="admin"`` is not the set of its letters."""
    with pytest.raises(ValidationError):
        ExecutionContext(tenant="t", principal="p", roles="admin")  # type: ignore[arg-type]


def test_frozen():
    """A context cannot be changed after it is built."""
    ctx = ExecutionContext(tenant="t", principal="p")
    with pytest.raises(ValidationError):
        ctx.tenant = "other"  # type: ignore[misc]


@pytest.mark.parametrize(
    "fields",
    [
        {"tenant": "", "principal": "p"},
        {"tenant": "t", "principal": "a\nb"},
        {"tenant": "t"},
        {"tenant": "t", "principal": "p", "roles": ["ok", ""]},
        {"tenant": "t", "principal": "p", "extra": 1},
        {"tenant": 5, "principal": "p"},
        {"tenant": "t" * 257, "principal": "p"},
    ],
)
def test_invalid_fields(fields):
    """Empty, multi-line, missing, unknown or non-string references are rejected."""
    with pytest.raises(ValidationError):
        ExecutionContext(**fields)


def test_deadline_must_be_aware():
    """A naive deadline is ambiguous and rejected; an aware one is kept."""
    with pytest.raises(ValidationError, match="timezone-aware"):
        ExecutionContext(tenant="t", principal="p", deadline=datetime.now())
    soon = datetime.now(timezone.utc) + timedelta(seconds=5)
    assert ExecutionContext(tenant="t", principal="p", deadline=soon).deadline == soon


def test_trace_is_per_context_and_not_serialized():
    """Each context has its own trace, and dumping a context does not include it."""
    a = ExecutionContext(tenant="t", principal="p")
    b = ExecutionContext(tenant="t", principal="p")
    assert a.trace is not b.trace
    assert "trace" not in a.model_dump()


def test_every_trace_record_has_a_status():
    """Walking a trace, operation and denial records alike answer ``status`` (denials: DENIED)."""
    from toolbox import DenialRecord
    from toolbox.foundations._context import OperationRecord

    ctx = ExecutionContext(tenant="t", principal="p")
    ctx.trace.append(OperationRecord("calculator", "evaluate", "purpose", "Sum", None))
    ctx.trace.append(DenialRecord("http", "POLICY_DENIED", "default:deny"))
    assert [record.status for record in ctx.trace] == ["DECLARED", "DENIED"]


@pytest.mark.parametrize(
    "text", ["a\nb", "a\x85b", "a\u2028b", "a\u2029b", "a\u202eb", "a\u2067b", "a\u200fb"]
)
def test_tenant_and_principal_are_one_line_without_bidi_controls(text):
    """What names a caller lands in terminals and pages: nothing that breaks or reorders a line."""
    from toolbox.auth._identity import check_reference
    from toolbox.errors import AuthenticationError

    with pytest.raises(ValidationError, match="bidirectional"):
        ExecutionContext(tenant=text, principal="p")
    with pytest.raises(ValidationError, match="bidirectional"):
        ExecutionContext(tenant="t", principal=text)
    with pytest.raises(AuthenticationError):
        check_reference(text, "tenant")
