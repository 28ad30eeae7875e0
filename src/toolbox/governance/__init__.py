"""Governance configuration, and the assembly that builds it (above audit, state and auth).

`Governance` composes the pipeline's checks with an audit trail and fleet state;
the policy file (``ToolPolicy.from_file``) reads the ``[audit]``, ``[state]``,
``[auth]`` and ``[mcp]`` tables into them. Everything you pass to `Governance`
is importable from here::

    from toolbox.governance import Governance, HmacApprover, RetryPolicy, RolePolicy
"""

from toolbox.governance._governance import Governance
from toolbox.pipeline._interceptor import Interceptor
from toolbox.pipeline._outcomes import BusinessFailure
from toolbox.pipeline._retry import ReconcileOutcome, Reconciliation, RetryPolicy
from toolbox.pipeline.checks._approval import Approval, ApprovalCheck, ApprovalRequest, Approver, HmacApprover
from toolbox.pipeline.checks._arguments import ArgumentLimits, ArgumentValidation
from toolbox.pipeline.checks._authorization import (
    Authorizer,
    Decision,
    InvocationAuthorizer,
    RolePolicy,
    TenantScope,
)
from toolbox.pipeline.checks._cedar import CedarAuthorizer
from toolbox.pipeline.checks._guardrails import Guardrail, GuardrailAction, GuardrailMode, Guardrails

__all__ = [
    "Approval",
    "ApprovalCheck",
    "ApprovalRequest",
    "Approver",
    "ArgumentLimits",
    "ArgumentValidation",
    "Authorizer",
    "BusinessFailure",
    "CedarAuthorizer",
    "Decision",
    "Governance",
    "Guardrail",
    "GuardrailAction",
    "GuardrailMode",
    "Guardrails",
    "HmacApprover",
    "Interceptor",
    "InvocationAuthorizer",
    "ReconcileOutcome",
    "Reconciliation",
    "RetryPolicy",
    "RolePolicy",
    "TenantScope",
]
