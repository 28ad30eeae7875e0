"""toolbox: hand tools to LLM agents safely.

Tools come from provider packages, carry a risk class, are gated by a
`ToolPolicy` and deployment acknowledgements, and are used with a declared
intent that is recorded in the `ExecutionContext` trace.
"""

from toolbox.budget import Budget
from toolbox.calculator import CalculatorTool
from toolbox.catalog import Catalog
from toolbox.context import ExecutionContext
from toolbox.descriptor import Acknowledgement, Effect, OperationDescriptor, RiskClass, ToolDescriptor
from toolbox.errors import (
    AcknowledgementRequiredError,
    ApprovalRequired,
    AuditIncompleteError,
    AuthenticationError,
    BusinessFailedError,
    ConfigurationError,
    DelegationError,
    GovernanceBypassError,
    IntentAlreadyExecutedError,
    InvalidArgumentsError,
    InvalidDescriptorError,
    PathOutsideRootsError,
    PolicyFileError,
    ProviderConflictError,
    ResponseTooLargeError,
    ToolboxError,
    ToolConnectionError,
    ToolDeniedError,
    ToolExecutionError,
    ToolPolicyDeniedError,
    ToolTimeoutError,
    ToolUnavailableError,
    UncertainEffectError,
)
from toolbox.function_tool import FunctionTool, tool
from toolbox.gateway import ContextResolver, Gateway
from toolbox.governance import Governance
from toolbox.intent import ReadIntent, Ready, WriteIntent
from toolbox.pipeline.approval import Approval, ApprovalRequest, Approver, HmacApprover
from toolbox.pipeline.arguments import ArgumentLimits
from toolbox.pipeline.authorization import Authorizer, Decision, InvocationAuthorizer, RolePolicy, TenantScope
from toolbox.pipeline.cedar import CedarAuthorizer
from toolbox.pipeline.guardrails import Guardrail, GuardrailAction, GuardrailMode
from toolbox.pipeline.interceptor import Interceptor
from toolbox.pipeline.invocation import Invocation
from toolbox.pipeline.outcomes import BusinessFailure
from toolbox.pipeline.result import Status, ToolResult
from toolbox.pipeline.retry import ReconcileOutcome, Reconciliation, RetryPolicy
from toolbox.policy import ReasonCode, ToolPolicy
from toolbox.policy_file import load_policy_file as _load_policy_file  # noqa: F401 - installs from_file's reader
from toolbox.provider import ToolProvider, hookimpl
from toolbox.runtime import ToolRuntime
from toolbox.tools import AcknowledgementState, ToolDecision, Tools

__all__ = [
    "Acknowledgement",
    "AcknowledgementRequiredError",
    "AcknowledgementState",
    "Approval",
    "ApprovalRequest",
    "ApprovalRequired",
    "Approver",
    "ArgumentLimits",
    "AuditIncompleteError",
    "AuthenticationError",
    "Authorizer",
    "Budget",
    "BusinessFailedError",
    "BusinessFailure",
    "CalculatorTool",
    "Catalog",
    "CedarAuthorizer",
    "ConfigurationError",
    "ContextResolver",
    "Decision",
    "DelegationError",
    "Effect",
    "ExecutionContext",
    "FunctionTool",
    "Gateway",
    "Governance",
    "GovernanceBypassError",
    "Guardrail",
    "GuardrailAction",
    "GuardrailMode",
    "HmacApprover",
    "IntentAlreadyExecutedError",
    "Interceptor",
    "InvalidArgumentsError",
    "InvalidDescriptorError",
    "Invocation",
    "InvocationAuthorizer",
    "OperationDescriptor",
    "PathOutsideRootsError",
    "PolicyFileError",
    "ProviderConflictError",
    "ReadIntent",
    "Ready",
    "ReasonCode",
    "ReconcileOutcome",
    "Reconciliation",
    "ResponseTooLargeError",
    "RetryPolicy",
    "RiskClass",
    "RolePolicy",
    "Status",
    "TenantScope",
    "ToolConnectionError",
    "ToolDecision",
    "ToolDeniedError",
    "ToolDescriptor",
    "ToolExecutionError",
    "ToolPolicy",
    "ToolPolicyDeniedError",
    "ToolProvider",
    "ToolResult",
    "ToolRuntime",
    "ToolTimeoutError",
    "ToolUnavailableError",
    "ToolboxError",
    "Tools",
    "UncertainEffectError",
    "WriteIntent",
    "hookimpl",
    "tool",
]


def __getattr__(name: str) -> str:
    if name == "__version__":
        from importlib.metadata import version

        return version("toolbox-registry")
    raise AttributeError(f"module 'toolbox' has no attribute {name!r}")
