"""toolbox: hand tools to LLM agents safely.

Tools come from provider packages, carry a risk class, are gated by a
`ToolPolicy` and deployment acknowledgements, and are used with a declared
intent that is recorded in the `ExecutionContext` trace.
"""

from toolbox._legacy import install as _install_legacy_paths
from toolbox.doors._catalog import Catalog
from toolbox.doors._gateway import ContextResolver, Gateway
from toolbox.doors._tools import AcknowledgementState, ToolDecision, Tools
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
from toolbox.foundations._budget import Budget
from toolbox.foundations._context import ExecutionContext
from toolbox.foundations._descriptor import (
    Acknowledgement,
    Effect,
    OperationDescriptor,
    RiskClass,
    ToolDescriptor,
)
from toolbox.governance import Governance
from toolbox.governance._policy_file import load_policy_file as _load_policy_file  # noqa: F401 - installs from_file's reader
from toolbox.pipeline._interceptor import Interceptor
from toolbox.pipeline._invocation import Invocation
from toolbox.pipeline._outcomes import BusinessFailure
from toolbox.pipeline._result import Status, ToolResult
from toolbox.pipeline._retry import ReconcileOutcome, Reconciliation, RetryPolicy
from toolbox.pipeline.checks._approval import Approval, ApprovalRequest, Approver, HmacApprover
from toolbox.pipeline.checks._arguments import ArgumentLimits
from toolbox.pipeline.checks._authorization import (
    Authorizer,
    Decision,
    InvocationAuthorizer,
    RolePolicy,
    TenantScope,
)
from toolbox.pipeline.checks._cedar import CedarAuthorizer
from toolbox.pipeline.checks._guardrails import Guardrail, GuardrailAction, GuardrailMode
from toolbox.registry._calculator import CalculatorTool
from toolbox.registry._function_tool import FunctionTool, tool
from toolbox.registry._intent import ReadIntent, Ready, WriteIntent
from toolbox.registry._policy import ReasonCode, ToolPolicy
from toolbox.registry._provider import ToolProvider, hookimpl
from toolbox.registry._runtime import ToolRuntime

_install_legacy_paths()  # old import paths (toolbox.gateway, toolbox.cli_audit, ...) warn for one release

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
