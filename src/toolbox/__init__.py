"""toolbox: hand tools to LLM agents safely.

Tools come from provider packages, carry a risk class, are gated by a
`ToolPolicy` and deployment acknowledgements, and are used with a declared
intent that is recorded in the `ExecutionContext` trace.

The public surface is this module, `toolbox.errors` (every error),
`toolbox.governance` (what `Governance` is configured with) and
`toolbox.provider` (what provider packages need); the packages below them are
the layers (docs/architecture.md), their modules private.
"""

from typing import Any as _Any

from toolbox._legacy import install as _install_legacy_paths
from toolbox.doors._catalog import Catalog
from toolbox.doors._gateway import ContextResolver, Gateway
from toolbox.doors._tool_decision import AcknowledgementState, ToolDecision
from toolbox.doors._tools import Tools
from toolbox.errors import (
    AcknowledgementRequiredError,
    ApprovalRequired,
    ToolboxError,
    ToolDeniedError,
    ToolExecutionError,
    ToolPolicyDeniedError,
    ToolUnavailableError,
)
from toolbox.foundations._budget import Budget
from toolbox.foundations._context import DenialRecord, ExecutionContext
from toolbox.foundations._descriptor import (
    Acknowledgement,
    Effect,
    OperationDescriptor,
    RiskClass,
    ToolDescriptor,
)
from toolbox.governance import Governance
from toolbox.governance._policy_file import load_policy_file as _load_policy_file  # noqa: F401 - installs from_file's reader
from toolbox.pipeline._result import Status, ToolResult
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
    "ApprovalRequired",
    "Budget",
    "CalculatorTool",
    "Catalog",
    "ContextResolver",
    "DenialRecord",
    "Effect",
    "ExecutionContext",
    "FunctionTool",
    "Gateway",
    "Governance",
    "OperationDescriptor",
    "ReadIntent",
    "Ready",
    "ReasonCode",
    "RiskClass",
    "Status",
    "ToolDecision",
    "ToolDeniedError",
    "ToolDescriptor",
    "ToolExecutionError",
    "ToolPolicy",
    "ToolPolicyDeniedError",
    "ToolProvider",
    "ToolResult",
    "ToolRuntime",
    "ToolUnavailableError",
    "ToolboxError",
    "Tools",
    "WriteIntent",
    "hookimpl",
    "tool",
]

#: Names that left ``toolbox.__all__`` -> their home; importable here for one release, with a warning.
_MOVED_NAMES = {
    **dict.fromkeys(
        [
            "AuditIncompleteError",
            "AuthenticationError",
            "BusinessFailedError",
            "ConfigurationError",
            "DelegationError",
            "GovernanceBypassError",
            "IntentAlreadyExecutedError",
            "InvalidArgumentsError",
            "InvalidDescriptorError",
            "PathOutsideRootsError",
            "PolicyFileError",
            "ProviderConflictError",
            "ResponseTooLargeError",
            "ToolConnectionError",
            "ToolTimeoutError",
            "UncertainEffectError",
        ],
        "toolbox.errors",
    ),
    **dict.fromkeys(
        [
            "Approval",
            "ApprovalRequest",
            "Approver",
            "ArgumentLimits",
            "Authorizer",
            "BusinessFailure",
            "CedarAuthorizer",
            "Decision",
            "Guardrail",
            "GuardrailAction",
            "GuardrailMode",
            "HmacApprover",
            "Interceptor",
            "InvocationAuthorizer",
            "ReconcileOutcome",
            "Reconciliation",
            "RetryPolicy",
            "RolePolicy",
            "TenantScope",
        ],
        "toolbox.governance",
    ),
    "Invocation": "toolbox.pipeline._invocation",  # not public: the chain's mutable working state
}


def __getattr__(name: str) -> _Any:
    if name == "__version__":
        from importlib.metadata import version

        return version("toolbox-registry")
    home = _MOVED_NAMES.get(name)
    if home is None:
        raise AttributeError(f"module 'toolbox' has no attribute {name!r}")
    import importlib
    import warnings

    warnings.warn(
        f"toolbox.{name} is deprecated and will be removed in the next release; "
        f"import it from {home} instead",
        DeprecationWarning,
        stacklevel=2,
    )
    return getattr(importlib.import_module(home), name)
