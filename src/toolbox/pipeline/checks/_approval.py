"""Human approval bound to the exact call.

A call that needs approval returns APPROVAL_REQUIRED with an `ApprovalRequest`
whose fingerprint is a keyed hash over tool, operation, every argument value,
tenant and principal. It resumes only with an `Approval` that the
application's `Approver` verifies, for the same fingerprint, before it
expires, once. Approval never replaces authorization, which still runs.

What is *shown* (the request's ``arguments``) is redacted like the audit
trail; what is *bound* (the fingerprint) is every value, secrets included
through the HMAC, so masking for display never weakens the binding.

With an `ApprovalStore` (``[state]`` in the policy file), every
APPROVAL_REQUIRED request is submitted to it, for a human to decide in the
service's console (four eyes: never the requesting principal). The call is
then resumed with ``Approval.of_request(request_id, fingerprint)``; the store
consumes the grant atomically, so exactly one of the processes racing with it
runs the call. Grants signed by an `Approver` keep working; with a shared
`LimitStore` they are single-use across the fleet too.

A request is submitted only after the audit trail recorded it (a STRICT
trail that cannot record it refuses the call as AUDIT_UNAVAILABLE and
nothing waits in the store), and a grant is consumed by `GrantRedemption`,
which spends after every other check and after the audit trail stored the
call's request: a call refused anywhere else keeps its grant.

A model retrying an APPROVAL_REQUIRED call in a loop does not fill the store:
the identical request still pending is answered with its existing id, and a
principal with ``max_pending`` requests waiting is DENIED/APPROVAL_QUEUE_FULL
(the tool runs zero times). On the async door (`ApprovalCheck.acall`) the
store's operations run on a worker thread, never on the event loop.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import secrets
import time
import uuid
from typing import Protocol, final

from toolbox.errors import ConfigurationError
from toolbox.pipeline._audit_hooks import audit_unavailable
from toolbox.pipeline._grants import Approval, ApprovalRequest, PendingApproval
from toolbox.pipeline._invocation import Invocation
from toolbox.pipeline._offload import blocks, off_loop
from toolbox.pipeline._result import Status, ToolResult
from toolbox.pipeline._state_ports import (
    DEFAULT_MAX_PENDING,
    ApprovalQueueFullError,
    ApprovalStore,
    Clock,
    LimitStore,
    Quota,
    StateUnavailableError,
)
from toolbox.pipeline.checks._approval_display import Cleaner
from toolbox.pipeline.checks._approval_display import canonical_text as _canonical
from toolbox.pipeline.checks._approval_display import shown_arguments as _redact
from toolbox.pipeline.checks._fingerprint import keyed_fingerprint
from toolbox.pipeline.checks._guardrails import GuardrailAction, Guardrails
from toolbox.pipeline.checks._used_grants import USED, UsedGrants

__all__ = [
    "Approval",
    "ApprovalCheck",
    "ApprovalRequest",
    "Approver",
    "GrantRedemption",
    "HmacApprover",
    "fingerprint",
]

_MAX_ID = 256
_NO_REQUEST = "the approval names no approval request"


def fingerprint(invocation: Invocation, key: bytes) -> str:
    """HMAC-SHA256 under ``key`` over tool, operation, every argument value, tenant and principal.

    The arguments are the call's bound arguments, every declared parameter
    (`toolbox.foundations._binding`; never a redacted copy), in
    `toolbox.pipeline.checks._fingerprint.canonical_encoding`.
    """
    ctx = invocation.context
    return keyed_fingerprint(
        key, invocation.tool, invocation.operation, invocation.bound_arguments(), ctx.tenant, ctx.principal
    )


class Approver(Protocol):
    """Verifies that a grant is authentic (issued by you, not echoed by a client).

    An approver may also have a ``fingerprint_key`` attribute (bytes, at least
    16): the key of the fingerprint HMAC. Every process that redeems grants
    must use the same key; without one, each chain draws a random key, so a
    grant can be redeemed only by the chain that asked for it.
    """

    def verify(self, approval: Approval) -> bool:
        """True when ``approval`` was really granted."""


@final
class HmacApprover:
    """Issues and verifies HMAC-signed grants with a secret only the application holds."""

    __slots__ = ("_clock", "_fingerprint_key", "_secret")

    def __init__(self, secret: bytes, *, clock: Clock = time.time) -> None:
        """Args:
        secret: at least 16 random bytes, held by the application only.
        clock: wall-clock seconds a grant's expiry counts from (tests: `toolbox.testing.ManualClock`).
        """
        if not isinstance(secret, bytes) or len(secret) < 16:
            raise ValueError("the approval secret must be at least 16 random bytes")
        self._secret = secret
        self._clock = clock
        self._fingerprint_key = hmac.new(secret, b"toolbox approval fingerprint", hashlib.sha256).digest()

    @property
    def fingerprint_key(self) -> bytes:
        """The key of the fingerprint HMAC: derived from the secret, never the signing key itself."""
        return self._fingerprint_key

    def _sign(self, request_id: str, fp: str, approved_by: str, expires_at: float) -> str:
        message = _canonical([request_id, fp, approved_by, repr(expires_at)]).encode("utf-8")
        return hmac.new(self._secret, message, hashlib.sha256).hexdigest()

    def grant(self, request: ApprovalRequest, *, approved_by: str, ttl_seconds: float = 900.0) -> Approval:
        """Approve ``request`` on behalf of ``approved_by`` for ``ttl_seconds``."""
        expires_at = self._clock() + ttl_seconds
        signature = self._sign(request.id, request.fingerprint, approved_by, expires_at)
        return Approval(request.id, request.fingerprint, approved_by, expires_at, signature)

    def verify(self, approval: Approval) -> bool:
        """True when the signature is ours."""
        expected = self._sign(
            approval.request_id, approval.fingerprint, approval.approved_by, approval.expires_at
        )
        return hmac.compare_digest(expected, approval.signature)


@final
class ApprovalCheck:
    """Asks for approval where a guardrail or the descriptor requires it; verifies grants."""

    name = "approval"
    per_attempt = False
    __slots__ = (
        "_approver",
        "_clock",
        "_deferred",
        "_guardrails",
        "_key",
        "_limits",
        "_max_pending",
        "_redaction",
        "_store",
        "_ttl",
        "_used",
        "blocks",
    )

    def __init__(
        self,
        approver: Approver | None,
        *,
        guardrails: Guardrails | None = None,
        redaction: Cleaner | None = None,
        remember: int = 10_000,
        store: ApprovalStore | None = None,
        limits: LimitStore | None = None,
        request_ttl: float = 3600.0,
        max_pending: int = DEFAULT_MAX_PENDING,
        clock: Clock = time.time,
    ) -> None:
        """Args:
        approver: verifies signed grants (`HmacApprover`); None: only the store's grants.
        guardrails: the guardrails that may require approval.
        redaction: masks the arguments a request shows (default: the audit trail's).
        remember: signed grants remembered as used until they expire, without a shared
            ``limits`` store; when that many are still valid, a new one is refused (fail closed).
        store: where requests wait for a decision and grants are consumed.
        limits: counts signed grants once fleet-wide (`LimitStore`); None: once per process.
        request_ttl: seconds a submitted request waits for a decision.
        max_pending: requests one principal may have pending in the ``store`` at once (0: no bound).
        clock: wall-clock seconds grants and requests expire by (`Governance(clock=...)`).
        """
        self._approver = approver
        self._clock = clock
        self._guardrails = guardrails
        # None: the redaction installed by toolbox.governance (use_cleaner), read per request.
        self._redaction = redaction
        key = getattr(approver, "fingerprint_key", None)
        if key is not None and (not isinstance(key, bytes) or len(key) < 16):
            raise ConfigurationError("an approver's fingerprint_key must be bytes, at least 16 of them")
        self._key: bytes = key if key is not None else secrets.token_bytes(32)
        # Grants are single-use: a used id is remembered until its grant expires.
        self._used = UsedGrants(remember)
        self._store = store
        self._limits = limits
        self._ttl = request_ttl
        if not isinstance(max_pending, int) or isinstance(max_pending, bool) or max_pending < 0:
            raise ConfigurationError("max_pending must be a non-negative integer")
        self._max_pending = max_pending
        # True once `redemption` was taken: grants are then spent there, after the limits.
        self._deferred = False
        #: Whether the async door runs the store's operations off the event loop.
        self.blocks = blocks(store) or blocks(limits)

    def applies(self, invocation: Invocation) -> bool:
        """Whether the descriptor or a guardrail can ever require approval of this operation."""
        if self._required_by(invocation):
            return True
        guardrails = self._guardrails
        return guardrails is not None and any(
            rule.action is GuardrailAction.REQUIRE_APPROVAL and guardrails.could_match(rule, invocation)
            for rule in guardrails.rules
        )

    def _required_by(self, invocation: Invocation) -> tuple[str, ...]:
        rules = list(invocation.approval_rules)
        descriptor = invocation.descriptor
        if descriptor is not None:
            for op in descriptor.operations:
                if op.name == invocation.operation and op.requires_approval:
                    rules.append("descriptor")
        return tuple(rules)

    def __call__(self, invocation: Invocation) -> ToolResult | None:
        rules = self._required_by(invocation)
        if not rules:
            return None
        fp = fingerprint(invocation, self._key)
        grant = invocation.approval
        if grant is None:
            return self._ask(invocation, rules, fp)
        try:
            problem = self._problem(grant, fp)
        except StateUnavailableError:
            return _unavailable(invocation)
        return None if problem is None else invocation.denied("APPROVAL_INVALID", "approval", problem)

    async def acall(self, invocation: Invocation) -> ToolResult | None:
        """The async door: the store's reads (and a consume, without a redemption step) off the loop."""
        rules = self._required_by(invocation)
        if not rules:
            return None
        fp = fingerprint(invocation, self._key)
        grant = invocation.approval
        if grant is None:
            return self._ask(invocation, rules, fp)
        try:
            problem = await off_loop(self._problem, grant, fp)
        except StateUnavailableError:
            return _unavailable(invocation)
        return None if problem is None else invocation.denied("APPROVAL_INVALID", "approval", problem)

    def _ask(self, invocation: Invocation, rules: tuple[str, ...], fp: str) -> ToolResult:
        """APPROVAL_REQUIRED; the request is submitted once the audit trail recorded it (`_Submission`)."""
        request = self._request(invocation, rules, fp)
        invocation.commit = _Submission(self, self._pending(invocation, request) if self._store else None)
        return self._required(invocation, request, rules)

    def _request(self, invocation: Invocation, rules: tuple[str, ...], fp: str) -> ApprovalRequest:
        ctx = invocation.context
        return ApprovalRequest(
            id=uuid.uuid4().hex,
            tool=invocation.tool,
            operation=invocation.operation,
            arguments=_redact(invocation.bound_arguments(), self._redaction),
            fingerprint=fp,
            rules=rules,
            tenant=ctx.tenant,
            principal=ctx.principal,
            created_at=self._clock(),
        )

    def _submit(self, pending: PendingApproval) -> str:
        store = self._store
        assert store is not None
        return store.submit(pending, max_pending=self._max_pending)

    @staticmethod
    def _required(invocation: Invocation, request: ApprovalRequest, rules: tuple[str, ...]) -> ToolResult:
        # An identical request already waiting renames this one once it is submitted (`_naming`).
        return invocation.result(
            Status.APPROVAL_REQUIRED,
            reason_code="APPROVAL_REQUIRED",
            rule=f"approval:{','.join(rules)}",
            message="this call needs a human approval for exactly these arguments",
            approval=request,
        )

    def _pending(self, invocation: Invocation, request: ApprovalRequest) -> PendingApproval:
        return PendingApproval(
            request=request,
            intent_kind=invocation.intent_kind,
            intent_text=invocation.intent_text,
            run_id=invocation.context.run_id,
            created_at=request.created_at,
            expires_at=request.created_at + self._ttl,
        )

    def redemption(self) -> GrantRedemption:
        """The step that spends grants, to run after the budget and limit checks.

        Once taken, this check only verifies a grant (signature, fingerprint,
        expiry, not yet used); the returned step consumes it, so a call then
        refused as RATE_LIMITED or BUDGET_EXHAUSTED keeps its grant.
        """
        self._deferred = True
        return GrantRedemption(self)

    def _problem(self, grant: object, fp: str) -> str | None:
        problem = self._verify(grant, fp)
        if problem is None and not self._deferred:
            assert isinstance(grant, Approval)
            problem = self._consume(grant, fp)
        return problem

    def _verify(self, grant: object, fp: str) -> str | None:
        """Why ``grant`` cannot resume this call, or None; spends nothing."""
        if not isinstance(grant, Approval):
            return "the approval is not a toolbox Approval"
        if not grant.signature and self._store is not None:
            return self._inspect(grant, fp)
        if self._approver is None:
            return "no approver is configured to verify approvals"
        if not self._approver.verify(grant):
            return "the approval was not granted by the configured approver"
        if not hmac.compare_digest(grant.fingerprint, fp):
            return "the approval was granted for other arguments, another tool or another principal"
        if not grant.expires_at > self._clock():  # NaN is expired too
            return "the approval has expired"
        if self._limits is None and self._used.used(grant.request_id):
            return USED
        return None

    def _consume(self, grant: Approval, fp: str) -> str | None:
        """Spend the verified ``grant``, atomically: None exactly once, else why not."""
        if not grant.signature and self._store is not None:
            return self._redeem(grant, fp)
        if self._limits is not None:
            # Once across the fleet: a counter of one, kept until the grant has expired.
            ttl = max(grant.expires_at - self._clock(), 0.001) + 60.0
            used = Quota(f"grant:{hashlib.sha256(grant.request_id.encode()).hexdigest()}", 1, ttl, "approval")
            return None if self._limits.admit([used], []) is None else "the approval was already used"
        return self._used.spend(grant.request_id, expires_at=grant.expires_at, now=self._clock())

    def _inspect(self, grant: Approval, fp: str) -> str | None:
        """Whether the store holds an approved, unexpired grant for this call; consumes nothing."""
        store = self._store
        assert store is not None
        if _names_no_request(grant):
            return _NO_REQUEST
        pending = store.get(grant.request_id)
        return _why_not(pending, fp, self._clock(), approved_ok=True)

    def _redeem(self, grant: Approval, fp: str) -> str | None:
        """Consume the store's grant for this call: None exactly once, else why not."""
        store = self._store
        assert store is not None
        if _names_no_request(grant):  # `_inspect` refused it already; kept for a direct `_consume`
            return _NO_REQUEST
        if store.consume(grant.request_id, fp):
            return None
        return _why_not(store.get(grant.request_id), fp, self._clock(), approved_ok=False)


def _names_no_request(grant: Approval) -> bool:
    """Whether ``grant``'s id cannot name a stored request (not text, or longer than any id)."""
    return not isinstance(grant.request_id, str) or len(grant.request_id) > _MAX_ID


def _why_not(pending: PendingApproval | None, fp: str, now: float, *, approved_ok: bool) -> str | None:
    if pending is None:
        return _NO_REQUEST
    if not hmac.compare_digest(pending.request.fingerprint, fp):
        return "the approval was granted for other arguments, another tool or another principal"
    if approved_ok and pending.state == "approved" and pending.expires_at > now:
        return None
    return {
        "pending": "the approval request has not been decided yet",
        "denied": "the approval request was denied",
        "expired": "the approval has expired",
        "used": "the approval was already used",
    }.get(
        pending.state,
        "the approval has expired" if pending.state == "approved" else "the approval was already used",
    )


@final
class GrantRedemption:
    """Spends the grant `ApprovalCheck` verified, once every other check has passed.

    It runs last in the chain, so a grant is consumed only by a call that is
    dispatched; the consume is the store's atomic one, so of processes racing
    with one grant exactly one runs the call.
    """

    name = "approval_redemption"
    per_attempt = False
    #: Consumed after the audit request: a call refused by any other check keeps its grant.
    spends = True
    __slots__ = ("_check", "blocks")

    def __init__(self, check: ApprovalCheck) -> None:
        self._check = check
        #: Whether the async door runs the consume off the event loop.
        self.blocks = check.blocks

    def applies(self, invocation: Invocation) -> bool:
        """Wherever the approval check applies."""
        return self._check.applies(invocation)

    def _spend(self, invocation: Invocation) -> tuple[Approval, str] | None:
        grant = invocation.approval
        if not isinstance(grant, Approval) or not self._check._required_by(invocation):
            return None
        return grant, fingerprint(invocation, self._check._key)

    def __call__(self, invocation: Invocation) -> ToolResult | None:
        spend = self._spend(invocation)
        if spend is None:
            return None
        try:
            problem = self._check._consume(*spend)
        except StateUnavailableError:
            return _unavailable(invocation)
        return None if problem is None else invocation.denied("APPROVAL_INVALID", "approval", problem)

    async def acall(self, invocation: Invocation) -> ToolResult | None:
        """The async door: the consume runs on a worker thread."""
        spend = self._spend(invocation)
        if spend is None:
            return None
        try:
            problem = await off_loop(self._check._consume, *spend)
        except StateUnavailableError:
            return _unavailable(invocation)
        return None if problem is None else invocation.denied("APPROVAL_INVALID", "approval", problem)


@final
class _Submission:
    """An approval request's pending-queue slot, taken once the audit trail recorded the request.

    Under a STRICT (or ASYNC) trail a request that could not be recorded is
    refused as AUDIT_UNAVAILABLE and never submitted: nobody can be asked to
    approve what the trail does not show. The store's refusals (queue full,
    unavailable) replace the result too.
    """

    __slots__ = ("_check", "_pending")

    def __init__(self, check: ApprovalCheck, pending: PendingApproval | None) -> None:
        self._check = check
        self._pending = pending

    def settle(self, invocation: Invocation, result: ToolResult) -> ToolResult:
        """Submit the request (without a store, nothing to submit); the result to return."""
        if result.audit_failed:
            return audit_unavailable(invocation)
        if self._pending is None:
            return result
        try:
            stored = self._check._submit(self._pending)
        except (StateUnavailableError, ApprovalQueueFullError) as exc:
            return _refused(invocation, exc)
        return _naming(result, stored)

    async def asettle(self, invocation: Invocation, result: ToolResult) -> ToolResult:
        """`settle` with the store's submit on a worker thread."""
        if result.audit_failed:
            return audit_unavailable(invocation)
        if self._pending is None:
            return result
        try:
            stored = await off_loop(self._check._submit, self._pending)
        except (StateUnavailableError, ApprovalQueueFullError) as exc:
            return _refused(invocation, exc)
        return _naming(result, stored)


def _naming(result: ToolResult, stored: str) -> ToolResult:
    """``result``, its request renamed ``stored`` when the identical request already waits under that id."""
    request = result.approval
    if request is not None and stored != request.id:
        result.approval = dataclasses.replace(request, id=stored)
    return result


def _refused(invocation: Invocation, exc: StateUnavailableError | ApprovalQueueFullError) -> ToolResult:
    if isinstance(exc, ApprovalQueueFullError):
        return invocation.denied("APPROVAL_QUEUE_FULL", "approval:queue_full", str(exc))
    return _unavailable(invocation)


def _unavailable(invocation: Invocation) -> ToolResult:
    return invocation.denied(
        "STATE_UNAVAILABLE", "state:approvals", "the governance state store is unavailable"
    )
