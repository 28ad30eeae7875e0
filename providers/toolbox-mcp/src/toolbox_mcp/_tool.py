"""`McpTool`: the tools of one remote MCP server as one governed toolbox tool, ``mcp.NAME``."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timezone
from typing import Any, ClassVar

from toolbox import ReadIntent, ToolRuntime, WriteIntent
from toolbox.errors import ToolTimeoutError
from toolbox.governance import ArgumentLimits
from toolbox.provider import check_limits
from toolbox_mcp._connection import Connection
from toolbox_mcp._result import McpResult, convert
from toolbox_mcp._schema import local_schema, upstream_arguments, validate
from toolbox_mcp._server import DriftError, Server

__all__ = ["McpTool", "tool_type_for"]

_LIMITS = ArgumentLimits()
_MIN_TIMEOUT = 0.001


class McpTool:
    """The operations of one MCP server, governed (``EXTERNAL_RESOURCE`` unless the operator says
    ``PRIVILEGED``). Each configured server gets its own subclass, registered as ``mcp.NAME``.

    Typed door::

        notes = tools.get("mcp.notes")
        notes.call("search", {"query": "lease"}).purpose("Find the lease").execute()

    By name: ``gateway.invoke("mcp.notes.search", {"query": "lease", "purpose": "..."}, ctx)``.

    An operation's arguments are validated against the schema pinned in the
    lock file (`toolbox.errors.InvalidArgumentsError` before anything is sent). Executing
    returns an `McpResult`, or raises `toolbox_mcp.DriftError` (``MCP_LOCK_DRIFT``:
    the server's operation is not the pinned one), `toolbox.errors.ToolTimeoutError`,
    `toolbox.errors.ToolConnectionError` (the server could not be started or died),
    `toolbox.errors.ResponseTooLargeError`, `toolbox_mcp.McpToolError` (the server
    reported an error) or `toolbox_mcp.McpProtocolError`.
    """

    __slots__ = ("_closed", "_connection", "_runtime")

    #: The server this subclass fronts (set on each per-server subclass).
    server: ClassVar[Server]

    def __init__(self, runtime: ToolRuntime) -> None:
        """Build the tool for one context; the server's sessions are shared, not opened here.

        Raises:
            toolbox_http.CredentialError: the upstream credential cannot be read.
        """
        self._runtime = runtime
        server = type(self).server
        credential = server.credential_for(runtime.context)
        self._connection: Connection = server.connection(credential, runtime.tools.catalog.env)
        server.acquire()
        self._closed = False

    # -- toolbox.foundations._operations.DescribedOperations ------------------------------------------------

    @classmethod
    def operation_parameters(cls, operation: str) -> Mapping[str, Any]:
        """The pinned JSON Schema of ``operation``'s arguments."""
        return local_schema(cls.server.pins[operation].input_schema)

    def operation_intent(self, operation: str, arguments: Mapping[str, Any]) -> Any:
        """The intent of a by-name call (`call`)."""
        return self.call(operation, arguments)

    # -- the typed door ----------------------------------------------------------------------------

    def call(
        self, operation: str, arguments: Mapping[str, Any] | None = None
    ) -> ReadIntent[McpResult] | WriteIntent[McpResult]:
        """Intent to call the server's tool pinned as ``operation`` with ``arguments``.

        A ``READ_ONLY`` operation returns a `ReadIntent` (``purpose`` or
        ``audit_as``), any other a `WriteIntent` (``audit_as``).

        Raises:
            toolbox_mcp.DriftError: ``operation`` is not pinned.
            toolbox.errors.InvalidArgumentsError: ``arguments`` break the pinned schema or the size guards.
        """
        server = type(self).server
        runtime = self._runtime
        pin = server.pins.get(operation)
        if pin is None:
            error = _unpinned(server, operation)
            runtime.record_denial(error)
            raise error
        given: object = {} if arguments is None else arguments
        check_limits(given, _LIMITS)  # an object of bounded size, depth and numbers, or refused
        values = dict(arguments or {})
        validate(server.validator(operation), values)
        remote = pin.remote
        sent = upstream_arguments(values)
        connection = self._connection
        label = f"{server.tool}.{operation}"
        max_bytes = server.config.max_result_bytes

        def check() -> None:
            server.check_pinned(operation)

        def run() -> McpResult:
            result = connection.call(remote, sent, self._timeout(), check)
            return convert(result, max_bytes=max_bytes, label=label)

        async def arun() -> McpResult:
            result = await connection.acall(remote, sent, self._timeout(), check)
            return convert(result, max_bytes=max_bytes, label=label)

        target = f"{server.tool}:{remote}"
        if runtime.effect_of(operation).value == "READ_ONLY":
            return runtime.read_intent(operation, run, target=target, acall=arun, arguments=values)
        return runtime.write_intent(operation, run, target=target, acall=arun, arguments=values)

    def close(self) -> None:
        """Stop using the server's sessions; the last tool closed ends them (`toolbox.Tools.close`)."""
        if not self._closed:
            self._closed = True
            type(self).server.release()

    def release(self) -> None:
        """Stop using the server's sessions, leaving them pooled for other contexts: its context is
        done, not its owner (`toolbox.Tools.release`, after each request of `toolbox serve`)."""
        if not self._closed:
            self._closed = True
            type(self).server.release(keep_sessions=True)

    def _timeout(self) -> float:
        timeout = type(self).server.config.timeout
        deadline = self._runtime.context.deadline
        if deadline is None:
            return timeout
        left = (deadline - datetime.now(timezone.utc)).total_seconds()
        if left <= 0:
            raise ToolTimeoutError("the context's deadline has passed", request_sent=False)
        return max(_MIN_TIMEOUT, min(timeout, left))

    def __repr__(self) -> str:
        return f"McpTool({type(self).server.tool}, context={self._runtime.context.run_id})"


def _unpinned(server: Server, operation: str) -> DriftError:
    return DriftError(
        f"{server.tool} has no pinned operation {operation!r}; review the server's tools and run "
        f"`toolbox mcp lock {server.name}`",
        tool=server.tool,
        rule="mcp:lock:unpinned",
    )


def tool_type_for(server: Server) -> type[McpTool]:
    """A subclass of `McpTool` for ``server`` (tool types are unique per tool)."""
    class_name = "McpTool_" + "".join(part.capitalize() for part in server.name.replace("-", "_").split("_"))
    return type(class_name, (McpTool,), {"__slots__": (), "server": server, "__module__": __name__})
