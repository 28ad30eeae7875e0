"""Exceptions raised by toolbox.

Every error derives from `ToolboxError`. Denials also derive from the builtin
they mean, so callers that only know the standard library still catch them::

    ToolboxError
    ├── ToolUnavailableError (LookupError)        no provider registered the tool
    ├── ToolDeniedError (PermissionError)         a denial decided before the tool ran
    │   ├── ToolPolicyDeniedError                 the ToolPolicy denies the tool
    │   ├── AcknowledgementRequiredError          the deployment acknowledgement is missing or differs
    │   └── PathOutsideRootsError                 a filesystem path escapes the configured roots
    ├── InvalidDescriptorError (ValueError)       a provider returned an invalid descriptor
    ├── ProviderConflictError                     two providers claim one tool name
    ├── PolicyFileError (ValueError)              a policy file or policy input is malformed
    ├── IntentAlreadyExecutedError (RuntimeError) a ready intent was executed twice
    └── ToolExecutionError                        the tool ran and failed
        ├── ToolTimeoutError (TimeoutError)
        ├── ToolConnectionError (ConnectionError)
        └── ResponseTooLargeError (ValueError)

Error messages never contain secrets: no credentials, headers, bodies or
unrelated environment variables.
"""

from __future__ import annotations

__all__ = [
    "AcknowledgementRequiredError",
    "IntentAlreadyExecutedError",
    "InvalidDescriptorError",
    "PathOutsideRootsError",
    "PolicyFileError",
    "ProviderConflictError",
    "ResponseTooLargeError",
    "ToolConnectionError",
    "ToolDeniedError",
    "ToolExecutionError",
    "ToolPolicyDeniedError",
    "ToolTimeoutError",
    "ToolUnavailableError",
    "ToolboxError",
]


class ToolboxError(Exception):
    """Root of every toolbox error."""


class ToolUnavailableError(ToolboxError, LookupError):
    """No provider registered the requested tool.

    Attributes:
        tool: the tool name (or type name) that was asked for.
        reason_code: always ``"TOOL_UNAVAILABLE"``.
    """

    reason_code = "TOOL_UNAVAILABLE"

    def __init__(self, message: str, *, tool: str) -> None:
        super().__init__(message)
        self.tool = tool


class ToolDeniedError(ToolboxError, PermissionError):
    """A denial decided before the tool's code ran.

    Attributes:
        tool: the tool name.
        reason_code: a stable code such as ``POLICY_DENIED``.
        rule: the rule that produced the decision, e.g. ``default:deny``.
    """

    def __init__(self, message: str, *, tool: str, reason_code: str, rule: str) -> None:
        super().__init__(message)
        self.tool = tool
        self.reason_code = reason_code
        self.rule = rule


class ToolPolicyDeniedError(ToolDeniedError):
    """The `ToolPolicy` denies this tool (reason code ``POLICY_DENIED``)."""


class AcknowledgementRequiredError(ToolDeniedError):
    """The tool needs a deployment acknowledgement that is missing or differs.

    Attributes:
        env: the environment variable to set.
        value: the exact value it must hold.
    """

    def __init__(self, message: str, *, tool: str, rule: str, env: str, value: str) -> None:
        super().__init__(message, tool=tool, reason_code="NOT_ACKNOWLEDGED", rule=rule)
        self.env = env
        self.value = value


class PathOutsideRootsError(ToolDeniedError):
    """A filesystem path escapes the configured roots (reason ``PATH_OUTSIDE_ROOTS``)."""

    def __init__(self, message: str, *, tool: str) -> None:
        super().__init__(message, tool=tool, reason_code="PATH_OUTSIDE_ROOTS", rule="fs:roots")


class InvalidDescriptorError(ToolboxError, ValueError):
    """A provider returned a descriptor that does not validate."""


class ProviderConflictError(ToolboxError):
    """Two providers claim the same tool name; neither is allowed to shadow the other."""


class PolicyFileError(ToolboxError, ValueError):
    """A policy file, or a policy built in code, is malformed."""


class IntentAlreadyExecutedError(ToolboxError, RuntimeError):
    """A ready intent executes once; build a new intent for another call."""


class ToolExecutionError(ToolboxError):
    """The tool ran and its operation failed."""


class ToolTimeoutError(ToolExecutionError, TimeoutError):
    """The operation did not finish within its timeout."""


class ToolConnectionError(ToolExecutionError, ConnectionError):
    """The operation could not reach its remote resource."""


class ResponseTooLargeError(ToolExecutionError, ValueError):
    """A response exceeded the configured maximum size and was dropped."""
