"""The sandbox's own errors: a refused program (a denial) and a sandbox that cannot be built."""

from __future__ import annotations

from toolbox import ToolDeniedError, ToolExecutionError

__all__ = ["SandboxDeniedError", "SandboxUnavailableError"]


class SandboxDeniedError(ToolDeniedError):
    """The call asks for something its profile does not allow (``SANDBOX_DENIED``).

    Attributes:
        rule: ``sandbox:programs`` (``run`` of a program the profile does not list).
    """

    def __init__(self, message: str, *, rule: str, tool: str = "sandbox") -> None:
        super().__init__(message, tool=tool, reason_code="SANDBOX_DENIED", rule=rule)


class SandboxUnavailableError(ToolExecutionError):
    """The sandbox could not be built here; nothing of the code ran.

    The message says what is missing (bubblewrap, user namespaces, the profile's
    interpreter or a mounted path) and how to provide it.
    """

    def __init__(self, message: str) -> None:
        super().__init__(message, request_sent=False)
