"""Exceptions raised by toolbox.

Every error derives from `ToolboxError`. Denials also derive from the builtin
they mean, so callers that only know the standard library still catch them::

    ToolboxError
    ├── ToolUnavailableError (LookupError)        no provider registered the tool
    ├── ToolDeniedError (PermissionError)         a denial decided before the tool ran
    │   ├── ToolPolicyDeniedError                 the ToolPolicy denies the tool
    │   ├── AcknowledgementRequiredError          the deployment acknowledgement is missing or differs
    │   └── PathOutsideRootsError                 a filesystem path escapes the configured roots
    ├── AuthenticationError (PermissionError)     a caller's credentials are missing or not valid
    ├── InvalidArgumentsError (ValueError)        arguments failed validation; has error_code, field_path
    ├── InvalidDescriptorError (ValueError)       a provider returned an invalid descriptor
    ├── ProviderConflictError                     two providers claim one tool name
    ├── ConfigurationError (ValueError)           governance configuration is malformed
    │   └── PolicyFileError                       a policy file or policy input is malformed
    ├── DelegationError (ValueError)              ctx.delegate() asked for more than the parent has
    ├── IntentAlreadyExecutedError (RuntimeError) a ready intent was executed twice
    ├── GovernanceBypassError (RuntimeError)      an operation's effect was entered outside the chain
    └── ToolExecutionError                        the tool ran and failed
        ├── ToolTimeoutError (TimeoutError)
        ├── ToolConnectionError (ConnectionError)
        ├── ResponseTooLargeError (ValueError)
        ├── BusinessFailedError                   the tool ran; a mapper says the business outcome failed
        ├── UncertainEffectError                  the tool may or may not have taken effect
        └── AuditIncompleteError                  the tool ran, but its audit record could not be written

    ApprovalRequired (Exception)                  a control-flow signal, deliberately outside the tree

Error messages never contain secrets: no credentials, headers, bodies or
unrelated environment variables.
"""

from __future__ import annotations

__all__ = [
    "AcknowledgementRequiredError",
    "ApprovalRequired",
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
    "ToolDeniedError",
    "ToolExecutionError",
    "ToolPolicyDeniedError",
    "ToolTimeoutError",
    "ToolUnavailableError",
    "ToolboxError",
    "UncertainEffectError",
]


class ToolboxError(Exception):
    """Root of every toolbox error."""


class ToolUnavailableError(ToolboxError, LookupError):
    """No provider registered the requested tool.

    Attributes:
        tool: the tool name (or type name) that was asked for.
        reason_code: always ``"TOOL_UNAVAILABLE"``.
        rule: always ``"registry"``: no installed provider registered the tool.
    """

    reason_code = "TOOL_UNAVAILABLE"
    rule = "registry"

    def __init__(self, message: str, *, tool: str) -> None:
        super().__init__(message)
        self.tool = tool


class ToolDeniedError(ToolboxError, PermissionError):
    """A denial decided before the tool's code ran.

    Attributes:
        tool: the tool name.
        reason_code: a stable code such as ``POLICY_DENIED``.
        rule: the rule that produced the decision, e.g. ``default:deny``.
        request_sent: for a denial an operation raises while it runs: False when it refused
            before sending anything (the attempt is then not counted: ``attempts`` stays as
            before it), True when something was sent first, None when it does not say (counted).
    """

    def __init__(
        self, message: str, *, tool: str, reason_code: str, rule: str, request_sent: bool | None = None
    ) -> None:
        super().__init__(message)
        self.tool = tool
        self.reason_code = reason_code
        self.rule = rule
        self.request_sent = request_sent


class AuthenticationError(ToolboxError, PermissionError):
    """A caller's credentials are missing, malformed, unknown, expired or for someone else.

    The message says what is wrong in general terms; it never contains the
    presented token, key or any claim value.

    Attributes:
        reason_code: ``MISSING_CREDENTIALS``, ``INVALID_CREDENTIALS``, ``EXPIRED``,
            ``WRONG_AUDIENCE`` or ``WRONG_ISSUER``.
        rule: always ``"auth"``.
    """

    rule = "auth"

    def __init__(self, message: str, *, reason_code: str) -> None:
        super().__init__(message)
        self.reason_code = reason_code


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
    """A filesystem path escapes, or may escape, the configured roots (reason ``PATH_OUTSIDE_ROOTS``).

    The rule is ``fs:roots`` for a path or link leading outside, ``fs:hardlinks`` for a
    file with several hard links (one of them may be outside).
    """

    def __init__(self, message: str, *, tool: str, rule: str = "fs:roots") -> None:
        super().__init__(message, tool=tool, reason_code="PATH_OUTSIDE_ROOTS", rule=rule)


class InvalidDescriptorError(ToolboxError, ValueError):
    """A provider returned a descriptor that does not validate."""


class ProviderConflictError(ToolboxError):
    """Two providers claim the same tool name; neither is allowed to shadow the other."""


class ConfigurationError(ToolboxError, ValueError):
    """Governance configuration (guardrails, roles, retries, ...) is malformed."""


class PolicyFileError(ConfigurationError):
    """A policy file, or a policy built in code, is malformed."""


class InvalidArgumentsError(ToolboxError, ValueError):
    """Arguments failed validation before the tool ran.

    Attributes:
        error_code: a stable code such as ``missing`` or ``too_deep``.
        field_path: where, e.g. ``items.3.sku`` (empty for the whole object).
    """

    reason_code = "INVALID_ARGUMENTS"

    def __init__(self, message: str, *, error_code: str, field_path: str) -> None:
        super().__init__(message)
        self.error_code = error_code
        self.field_path = field_path


class IntentAlreadyExecutedError(ToolboxError, RuntimeError):
    """A ready intent executes once; build a new intent for another call."""


class DelegationError(ToolboxError, ValueError):
    """`ExecutionContext.delegate` was asked to widen the parent's scope (tools, operations,
    budget, deadline or roles); a child context can only narrow it.
    """


class GovernanceBypassError(ToolboxError, RuntimeError):
    """An operation's effect was entered outside the governed chain: nothing ran.

    Raised by the operation calls a tool hands to its intents (and by providers'
    internals that check, e.g. HttpTool's clients) when no dispatch of that tool
    is in progress: a direct call of an internal, a ``@tool`` object called
    directly, or a tool reaching another tool's internals from inside its own
    dispatch. Go through the intent or the gateway instead.

    Attributes:
        tool: the tool whose operation was entered.
    """

    def __init__(self, message: str, *, tool: str) -> None:
        super().__init__(message)
        self.tool = tool


class ToolExecutionError(ToolboxError):
    """The tool ran and its operation failed.

    Attributes:
        request_sent: False when the tool knows nothing reached the remote side (e.g. the
            connection was never established), so even an ``UNSAFE`` operation did not take
            effect; None when it cannot tell.
    """

    def __init__(self, message: str, *, request_sent: bool | None = None) -> None:
        super().__init__(message)
        self.request_sent = request_sent


class ToolTimeoutError(ToolExecutionError, TimeoutError):
    """The operation did not finish within its timeout."""


class ToolConnectionError(ToolExecutionError, ConnectionError):
    """The operation could not reach its remote resource."""


class ResponseTooLargeError(ToolExecutionError, ValueError):
    """A response exceeded the configured maximum size and was dropped."""


class BusinessFailedError(ToolExecutionError):
    """The tool ran, and a registered outcome mapper says the business outcome failed.

    Attributes:
        error_code: the mapper's code, e.g. ``CARD_DECLINED``.
        content: the tool's payload.
    """

    def __init__(self, message: str, *, error_code: str, content: object) -> None:
        super().__init__(message, request_sent=True)
        self.error_code = error_code
        self.content = content


class UncertainEffectError(ToolExecutionError):
    """The operation may have taken effect (e.g. a write timed out); check before repeating it."""


class AuditIncompleteError(ToolExecutionError):
    """The operation ran (its effect happened), but its audit record could not be stored.

    The record was kept in the audit trail's fallback file for replay.

    Attributes:
        status: the operation's real status, e.g. ``SUCCESS``.
        content: what the operation returned, if it succeeded.
    """

    def __init__(self, message: str, *, status: str, content: object) -> None:
        super().__init__(message, request_sent=True)
        self.status = status
        self.content = content


class ApprovalRequired(Exception):
    """A control-flow signal: the call needs a human approval bound to its exact arguments.

    Deliberately not a `ToolboxError`, so ``except ToolboxError`` cannot swallow it.

    Attributes:
        request: the approval request (id, tool, operation, redacted arguments, fingerprint).
    """

    def __init__(self, request: object) -> None:
        super().__init__(f"approval required: {request}")
        self.request = request

    def __reduce__(self) -> tuple[type[ApprovalRequired], tuple[object]]:
        return (type(self), (self.request,))
