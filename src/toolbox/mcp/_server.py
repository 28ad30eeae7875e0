"""`server`: a `Gateway`'s governed tools as the `mcp` SDK's low-level `Server`.

Two handlers: ``tools/list`` shows what the caller may use now
(`toolbox.mcp._listing`) and ``tools/call`` runs `Gateway.ainvoke`, whose
`ToolResult` becomes a `CallToolResult` (`toolbox.mcp._results`), where
`toolbox.doors._placement` runs it: a call whose STRICT trail writes to a SQL
sink awaits its commits on the loop, to its end even if the client cancels,
so concurrent sessions share the sink's commits and the loop keeps serving
while one waits for the disk; a sink that writes only on the calling thread
has the call run whole on a worker thread (`Gateway.invoke`). Who the
caller is never comes from the client: a `CallerSource` says, per request.
For stdio and in-memory connections it is the operator's context, a fresh
run (new ``run_id``) per connection; over HTTP it is the authenticated
credential's (`toolbox.mcp._http`).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from contextlib import asynccontextmanager
from typing import Any, Protocol, final

import anyio.to_thread
from mcp import types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server

from toolbox.doors._gateway import Gateway
from toolbox.doors._placement import CallPlacement
from toolbox.doors._toolsets import Toolsets, in_toolset, not_in_toolset
from toolbox.foundations._context import ExecutionContext
from toolbox.mcp._listing import ServedTools
from toolbox.mcp._output import NO_SCHEMA, OutputShape
from toolbox.mcp._results import call_result
from toolbox.pipeline._result import Status, ToolResult

__all__ = ["Caller", "CallerSource", "ContextSource", "build_server", "server"]

logger = logging.getLogger("toolbox.mcp")

_CALLER_KEY = "toolbox.caller"


@final
class Caller:
    """Who calls, as the server trusts it: the context its calls run in and its toolset."""

    __slots__ = ("allowed", "context", "toolset")

    def __init__(
        self, context: ExecutionContext, allowed: frozenset[str] | None = None, toolset: str | None = None
    ) -> None:
        self.context = context
        #: The dotted operations the caller may see and call; None: every served one.
        self.allowed = allowed
        #: The toolset's name, for messages (None without one).
        self.toolset = toolset


class CallerSource(Protocol):
    """Says who sends one request; None means nobody trusted (every call is refused)."""

    def caller(self, request: ServerRequestContext[Any, Any]) -> Caller | None:
        """The trusted caller of ``request``."""


ContextSource = ExecutionContext | Callable[[], ExecutionContext]
"""A template context (each connection gets a copy with a new ``run_id``), or a factory."""


def session_context(source: ContextSource) -> ExecutionContext:
    """A fresh context for one connection: a new run (``run_id``, trace) with the template's limits.

    Tenant, principal, roles, correlation id, deadline, budget (shared by every connection),
    parent run and delegation scope are the template's: a copy never widens what it allowed.
    """
    if isinstance(source, ExecutionContext):
        return ExecutionContext(
            tenant=source.tenant,
            principal=source.principal,
            roles=source.roles,
            correlation_id=source.correlation_id,
            deadline=source.deadline,
            budget=source.budget,
            parent_run_id=source.parent_run_id,
            scope=source.scope,
            credential=source.credential,
        )
    made = source()
    if not isinstance(made, ExecutionContext):
        raise TypeError(f"the context factory returned {type(made).__name__}, not an ExecutionContext")
    return made


@final
class _Lifespan:
    """`CallerSource` of stdio and in-memory servers: the caller made when the connection opened."""

    __slots__ = ()

    def caller(self, request: ServerRequestContext[Any, Any]) -> Caller | None:
        state = request.lifespan_context
        found = state.get(_CALLER_KEY) if isinstance(state, Mapping) else None
        return found if isinstance(found, Caller) else None


def build_server(
    gateway: Gateway,
    callers: CallerSource,
    *,
    name: str = "toolbox",
    instructions: str | None = None,
    lifespan: Callable[[Server[Any]], Any] | None = None,
) -> Server[Any]:
    """The low-level `Server` over ``gateway``, with ``callers`` deciding who each request is from."""
    served = ServedTools(gateway)
    pipeline = gateway.catalog.pipeline
    placement = CallPlacement()

    async def list_tools(
        request: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        caller = callers.caller(request)
        if caller is None:
            return types.ListToolsResult(tools=[])
        return types.ListToolsResult(tools=await served.listed(caller.context, caller.allowed))

    async def call_tool(
        request: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        name = params.name
        try:
            caller = callers.caller(request)
            if caller is None:
                pipeline.report_untrusted(name[:200])
                return call_result(_untrusted(name))
            refused = _outside_toolset(gateway, caller, name)
            if refused is not None:
                return call_result(refused)
            arguments: object = params.arguments if params.arguments is not None else {}
            # A call with a durable trail runs to its end even if the client cancels: its audit stays whole.
            result, _ = await placement.invoke(
                gateway, name, arguments, context=caller.context, offload=_on_thread
            )
            found = served.by_wire(name)
            shape = found.shape if found is not None else _shape_of(served, result)
            return call_result(result, shape)
        except Exception as exc:  # noqa: BLE001 - a model sees a status, never a stack trace
            logger.error("tools/call %r failed inside toolbox.mcp: %s", name[:200], type(exc).__name__)
            return call_result(
                ToolResult(Status.ERROR, name=name[:200], message="the MCP server failed to handle the call")
            )

    def input_schema(tool: str) -> Mapping[str, Any] | None:
        found = served.by_wire(tool)
        return found.definition.input_schema if found is not None else None

    options: dict[str, Any] = {}
    if lifespan is not None:
        options["lifespan"] = lifespan
    return Server(
        name,
        version=_version(),
        instructions=instructions,
        get_tool_input_schema=input_schema,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        **options,
    )


def server(
    gateway: Gateway,
    *,
    context: ContextSource,
    toolset: str | None = None,
    toolsets: Mapping[str, Iterable[str]] | None = None,
    name: str = "toolbox",
    instructions: str | None = None,
) -> Server[Any]:
    """The MCP server of ``gateway`` for stdio and in-memory connections (one trusted caller).

    Args:
        gateway: the governed tools; its audit trail records every call.
        context: the operator's trusted context: a template (each connection gets a new run
            with its tenant, principal, roles and limits) or a factory called once per
            connection. Never taken from the client.
        toolset: limit the endpoint to this toolset (``[mcp.toolsets.NAME]``, or ``toolsets``).
        toolsets: toolsets defined in code instead of the policy file's.
        name: the server name clients show.
        instructions: the server's instructions for the model.

    Raises:
        ConfigurationError: an unknown toolset, or one naming unregistered tools.
    """
    sets = Toolsets(gateway.catalog, toolsets)
    allowed = sets.get(toolset) if toolset is not None else None
    if not isinstance(context, ExecutionContext) and not callable(context):
        raise TypeError("context must be an ExecutionContext or a callable returning one")

    @asynccontextmanager
    async def per_connection(_: Server[Any]) -> AsyncIterator[dict[str, Any]]:
        # Entered once per stdio process and per in-memory client: one run per connection.
        yield {_CALLER_KEY: Caller(session_context(context), allowed, toolset)}

    return build_server(gateway, _Lifespan(), name=name, instructions=instructions, lifespan=per_connection)


async def _on_thread(call: Callable[[], ToolResult]) -> ToolResult:
    """A call whose trail writes on the calling thread, whole on a worker thread (not cancellable)."""
    return await anyio.to_thread.run_sync(call)


def _untrusted(name: str) -> ToolResult:
    return ToolResult(
        Status.DENIED,
        name=name[:200],
        reason_code="NO_TRUSTED_CONTEXT",
        rule="context",
        message="no trusted execution context: the server has no authenticated caller for this request",
    )


def _outside_toolset(gateway: Gateway, caller: Caller, name: str) -> ToolResult | None:
    """DENIED/NOT_IN_TOOLSET (recorded and audited) when ``name`` is outside the caller's toolset.

    `toolbox.doors._toolsets.not_in_toolset` answers every such name alike, registered or not.
    """
    if caller.allowed is None or in_toolset(gateway.catalog, caller.allowed, name):
        return None
    rule = f"mcp:toolset:{caller.toolset}" if caller.toolset else "mcp:toolset"
    return not_in_toolset(gateway.catalog, caller.context, name, rule)


def _shape_of(served: ServedTools, result: ToolResult) -> OutputShape:
    """The output shape of a call made by its dotted name (or any spelling but the wire name)."""
    for operation in served.operations():
        if operation.tool == result.tool and operation.operation == result.operation:
            return operation.shape
    return NO_SCHEMA


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("toolbox-registry")
    except PackageNotFoundError:  # a source tree that was never installed
        return "0"
