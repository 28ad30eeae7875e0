"""toolbox: hand tools to LLM agents safely.

Tools come from provider packages, carry a risk class, are gated by a
`ToolPolicy` and deployment acknowledgements, and are used with a declared
intent that is recorded in the `ExecutionContext` trace.
"""

from toolbox.calculator import CalculatorTool
from toolbox.context import ExecutionContext
from toolbox.descriptor import Acknowledgement, Effect, OperationDescriptor, RiskClass, ToolDescriptor
from toolbox.errors import (
    AcknowledgementRequiredError,
    IntentAlreadyExecutedError,
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
)
from toolbox.intent import ReadIntent, Ready, WriteIntent
from toolbox.policy import ReasonCode, ToolPolicy
from toolbox.provider import ToolProvider, hookimpl
from toolbox.runtime import ToolRuntime
from toolbox.tools import AcknowledgementState, ToolDecision, Tools

__all__ = [
    "Acknowledgement",
    "AcknowledgementRequiredError",
    "AcknowledgementState",
    "CalculatorTool",
    "Effect",
    "ExecutionContext",
    "IntentAlreadyExecutedError",
    "InvalidDescriptorError",
    "OperationDescriptor",
    "PathOutsideRootsError",
    "PolicyFileError",
    "ProviderConflictError",
    "ReadIntent",
    "Ready",
    "ReasonCode",
    "ResponseTooLargeError",
    "RiskClass",
    "ToolConnectionError",
    "ToolDecision",
    "ToolDeniedError",
    "ToolDescriptor",
    "ToolExecutionError",
    "ToolPolicy",
    "ToolPolicyDeniedError",
    "ToolProvider",
    "ToolRuntime",
    "ToolTimeoutError",
    "ToolUnavailableError",
    "ToolboxError",
    "Tools",
    "WriteIntent",
    "hookimpl",
]


def __getattr__(name: str) -> str:
    if name == "__version__":
        from importlib.metadata import version

        return version("toolbox-registry")
    raise AttributeError(f"module 'toolbox' has no attribute {name!r}")
