"""Doors of the conformance matrix: one adapter per way a caller reaches a governed tool.

Each door makes one call of a logical operation (`conformance.styles`) as its
callers do and reports an `Outcome` in one vocabulary: the status, the reason
code (or the error code of invalid arguments), the approval request a refusal
carries, and ``shown``: everything the caller (a model) gets to read.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import anyio
import httpx
from mcp import Client, ClientSession
from mcp.server.stdio import stdio_server

from conformance.world import APPROVER, TENANT, World
from toolbox import ApprovalRequired, ExecutionContext, ToolDeniedError, ToolResult, ToolUnavailableError
from toolbox.auth import ApiKeyFile, CredentialAuthenticator
from toolbox.errors import AuditIncompleteError, InvalidArgumentsError
from toolbox.governance._mcp_table import MCP_KEY, McpConfig
from toolbox.mcp import ERROR_META_KEY, serve_stdio, server
from toolbox.mcp._server import session_context
from toolbox.provider import to_wire_name
from toolbox.service import create_app
from toolbox.testing.credentials import write_api_keys

#: The intent text every call declares unless a check says otherwise.
INTENT = "Conformance check"
NO_INTENT: Any = object()


@dataclass
class Outcome:
    """One call's result, in the matrix's vocabulary."""

    status: str
    reason: str | None = None
    approval: Any = None
    shown: str = ""

    @staticmethod
    def of(result: ToolResult) -> Outcome:
        return Outcome(
            result.status.value,
            result.reason_code if result.status.value != "INVALID_ARGUMENTS" else result.error_code,
            result.approval,
            repr(result.as_dict()),
        )


def _with_intent(world: World, logical: str, arguments: Mapping[str, Any], intent: object) -> dict[str, Any]:
    """The by-name arguments of a logical call: the style's own, with the declared intent."""
    given = world.style.wire(logical, arguments)
    if intent is NO_INTENT:
        return given
    return {**given, "purpose" if logical in world.style.reads else "audit_as": intent}


class Door:
    """A door: ``call`` one logical operation; ``grant`` turns an approval request into what resumes."""

    name = ""
    #: Whether a caller of this door can resume a call with a grant.
    grants = True

    def call(
        self,
        world: World,
        context: Any,
        logical: str,
        arguments: Mapping[str, Any],
        *,
        intent: object = INTENT,
        grant: Any = None,
    ) -> Outcome:
        raise NotImplementedError

    def grant(self, world: World, request: Any) -> Any:
        """A grant for ``request``, signed by the application's approver."""
        return APPROVER.grant(request, approved_by="conformance-approver")


class Typed(Door):
    name = "typed"

    def call(self, world, context, logical, arguments, *, intent=INTENT, grant=None):  # type: ignore[no-untyped-def]
        style = world.style
        tools = world.gateway.tools_for(context)
        try:
            instance = tools.get(style.tool(logical))
            built = style.typed(instance, style.names[logical][1], style.wire(logical, arguments))
            if intent is NO_INTENT:
                try:
                    built.execute()
                except AttributeError as missing:  # the intent phase: no execute() before an intent
                    return Outcome("INVALID_ARGUMENTS", "missing_intent", shown=str(missing))
                raise AssertionError("an intent without a declared intent executed")
            ready = built.purpose(intent) if logical in style.reads else built.audit_as(intent)
            if style.is_async:
                content = world.run(ready.aexecute(approval=grant))
            else:
                content = ready.execute(approval=grant)
        except ApprovalRequired as asked:
            return Outcome("APPROVAL_REQUIRED", "APPROVAL_REQUIRED", asked.request, repr(asked.request))
        except AuditIncompleteError as incomplete:
            return Outcome("SUCCESS", "AUDIT_INCOMPLETE", shown=str(incomplete))
        except ToolDeniedError as denied:
            return Outcome("DENIED", denied.reason_code, shown=str(denied))
        except ToolUnavailableError as missing:
            return Outcome("DENIED", missing.reason_code, shown=str(missing))
        except InvalidArgumentsError as invalid:
            return Outcome("INVALID_ARGUMENTS", invalid.error_code, shown=str(invalid))
        return Outcome("SUCCESS", shown=repr(content))


class ByName(Door):
    name = "by_name"

    def call(self, world, context, logical, arguments, *, intent=INTENT, grant=None):  # type: ignore[no-untyped-def]
        name = world.style.by_name(logical)
        given = _with_intent(world, logical, arguments, intent)
        return Outcome.of(world.gateway.invoke(name, given, context=context, approval=grant))


class ByNameAsync(Door):
    name = "by_name_async"

    def call(self, world, context, logical, arguments, *, intent=INTENT, grant=None):  # type: ignore[no-untyped-def]
        name = world.style.by_name(logical)
        given = _with_intent(world, logical, arguments, intent)
        return Outcome.of(world.run(world.gateway.ainvoke(name, given, context=context, approval=grant)))


async def _listed_then_called(client: Any, wire: str, given: dict[str, Any]) -> Any:
    """What an MCP client sees: None when ``wire`` is not listed, else the call's result."""
    listed = {tool.name for tool in (await client.list_tools()).tools}
    return None if wire not in listed else await client.call_tool(wire, given)


class _Caller:
    """The context source of a world's shared MCP server: the call being made (calls are sequential)."""

    template: ExecutionContext | None = None

    def __call__(self) -> ExecutionContext:
        assert self.template is not None
        return session_context(self.template)


class Mcp(Door):
    """The MCP server (`toolbox.mcp._server`) through the official client, one session per call."""

    name = "mcp"
    grants = False  # an MCP client resumes through the service's approvals (REST), not here
    toolset: tuple[str, ...] | None = None

    def with_toolset(self, world: World, tools: list[str]) -> Mcp:
        """This door for a caller limited to a toolset of ``tools`` (over HTTP: its credential's)."""
        scoped = type(self)()
        scoped.toolset = tuple(tools)
        return scoped

    def _server(self, world: World, context: Any) -> Any:
        """The world's server for this door's toolset, built once (its listing computes every schema).

        Each connection to it runs as a fresh copy of ``context``, as a server built for ``context`` gives.
        """
        servers: dict[tuple[str, ...] | None, tuple[Any, _Caller]] = world.__dict__.setdefault("_mcp", {})
        if self.toolset not in servers:
            caller = _Caller()
            scoped: dict[str, Any] = {}
            if self.toolset is not None:
                scoped = {"toolset": "scoped", "toolsets": {"scoped": self.toolset}}
            servers[self.toolset] = (server(world.gateway, context=caller, **scoped), caller)
        shared, caller = servers[self.toolset]
        caller.template = context
        return shared

    def call(self, world, context, logical, arguments, *, intent=INTENT, grant=None):  # type: ignore[no-untyped-def]
        assert grant is None
        wire = to_wire_name(world.style.by_name(logical))
        given = _with_intent(world, logical, arguments, intent)

        async def main() -> Any:
            async with Client(self._server(world, context)) as client:
                return await _listed_then_called(client, wire, given)

        return self._outcome(world.run(main()))

    @staticmethod
    def _outcome(result: Any) -> Outcome:
        if result is None:
            return Outcome("DENIED", "NOT_OFFERED", shown="not listed")
        shown = repr(result.model_dump())
        if not result.is_error:
            return Outcome("SUCCESS", shown=shown)
        data = (result.meta or {}).get(ERROR_META_KEY) or {}  # an error result's codes (toolbox.mcp)
        status = str(data.get("status", "ERROR"))
        reason = data.get("error_code") if status == "INVALID_ARGUMENTS" else data.get("reason_code")
        return Outcome(status, reason, data.get("approval"), shown)


def service_app(world: World, toolset: tuple[str, ...] | None = None) -> tuple[Any, dict[str, str]]:
    """The service (`toolbox serve`) over the world's tools and governance, and each principal's API key.

    With ``toolset``, the policy defines it as ``[mcp.toolsets] scoped`` and every key is
    limited to it, as an operator limits a credential.
    """
    Service = tuple[Any, dict[str, str]]
    services: dict[tuple[str, ...] | None, Service] = world.__dict__.setdefault("_services", {})
    if toolset in services:
        return services[toolset]
    key_file = world.directory / f"keys-{len(services)}.toml"
    roles = ["caller", "approver"]
    users: dict[str, dict[str, Any]] = {p: {"tenant": TENANT, "roles": roles} for p in world.principals}
    policy = world.style.policy
    if toolset is not None:
        for user in users.values():
            user["toolset"] = "scoped"
        scoped = McpConfig(toolsets=MappingProxyType({"scoped": toolset}))
        policy = policy._replace(governance={**policy.governance, MCP_KEY: scoped})
    keys = write_api_keys(key_file, users)
    app = create_app(
        policy=policy,
        authenticator=CredentialAuthenticator(api_keys=ApiKeyFile(key_file)),
        providers=world.style.providers,
        discover=False,
        env=world.style.env,
        governance=world.governance(),
        console=False,
    )
    services[toolset] = (app, keys)
    return app, keys


class Rest(Door):
    """The service's REST API (`toolbox serve`), in process through httpx's ASGI transport."""

    name = "rest"
    toolset: tuple[str, ...] | None = None

    def with_toolset(self, world: World, tools: list[str]) -> Rest:
        """This door for a credential limited to a toolset of ``tools`` (the policy's [mcp.toolsets])."""
        scoped = type(self)()
        scoped.toolset = tuple(tools)
        return scoped

    def grant(self, world: World, request: Any) -> Any:
        """The service's flow: a second person approves in the store; the caller names the approval."""
        world.approvals.decide(request["id"], approve=True, decided_by="conformance-approver", reason="ok")
        return request["id"]

    def call(self, world, context, logical, arguments, *, intent=INTENT, grant=None):  # type: ignore[no-untyped-def]
        app, keys = service_app(world, self.toolset)
        body: dict[str, Any] = {"arguments": _with_intent(world, logical, arguments, intent)}
        if grant is not None:
            body["approval_id"] = grant
        headers = {"Authorization": f"Bearer {keys[context.principal]}"}
        path = f"/v1/tools/{world.style.by_name(logical)}/invoke"

        async def main() -> httpx.Response:
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
                return await client.post(path, json=body, headers=headers)

        response = world.run(main())
        data = response.json()
        if response.status_code == 200:
            return Outcome("SUCCESS", shown=response.text)
        if response.status_code == 202:
            return Outcome("APPROVAL_REQUIRED", "APPROVAL_REQUIRED", data["approval"], response.text)
        status = str(data.get("tool_status") or "DENIED")
        reason = data.get("error_code") if status == "INVALID_ARGUMENTS" else data.get("reason_code")
        return Outcome(status, reason, shown=response.text)


class _ClientOut:
    """The client's end of the pipe the server reads, as `stdio_server` writes to it.

    Each message is written and flushed in one worker-thread call, under a lock that `aclose`
    takes too: a message can reach the server whole during ``write`` (a 70 KB line fills the
    pipe's buffer and goes out as it is read), the server answer, and the test close the pipe
    before the SDK's separate ``flush`` ran, which then failed on a closed file.
    """

    def __init__(self, fd: int) -> None:
        self._file = open(fd, "w", encoding="utf-8")  # noqa: SIM115 - closed by aclose
        self._lock = anyio.Lock()

    def _send(self, text: str) -> None:
        if not self._file.closed:  # nothing is sent after the test closed the pipe
            self._file.write(text)
            self._file.flush()

    async def write(self, text: str) -> None:
        async with self._lock:
            await anyio.to_thread.run_sync(self._send, text)

    async def flush(self) -> None:
        """Each write flushed already."""

    async def aclose(self) -> None:
        async with self._lock:
            await anyio.to_thread.run_sync(self._file.close)


class McpStdio(Mcp):
    """toolbox's stdio serving (`toolbox.mcp.serve_stdio`, what ``toolbox mcp serve`` runs) over real
    OS pipes, newline-delimited JSON-RPC both ways, the official client's session on the other end."""

    name = "mcp_stdio"

    def call(self, world, context, logical, arguments, *, intent=INTENT, grant=None):  # type: ignore[no-untyped-def]
        assert grant is None
        wire = to_wire_name(world.style.by_name(logical))
        given = _with_intent(world, logical, arguments, intent)
        mcp_server = self._server(world, context)

        def pipe() -> tuple[anyio.AsyncFile[str], anyio.AsyncFile[str]]:
            read_end, write_end = os.pipe()
            return (
                anyio.wrap_file(open(read_end, encoding="utf-8")),  # both closed in main()
                anyio.wrap_file(open(write_end, "w", encoding="utf-8")),
            )

        def pipe_from_client() -> tuple[anyio.AsyncFile[str], int]:
            read_end, write_end = os.pipe()
            return anyio.wrap_file(open(read_end, encoding="utf-8")), write_end  # closed in main()

        async def main() -> Any:
            server_in, client_fd = pipe_from_client()
            client_out = _ClientOut(client_fd)
            client_in, server_out = pipe()

            async def serve() -> None:
                try:
                    await serve_stdio(mcp_server, server_in, server_out)
                finally:
                    await server_out.aclose()  # the client's end of file
                    await server_in.aclose()

            async with anyio.create_task_group() as tasks:
                tasks.start_soon(serve)
                async with stdio_server(client_in, client_out) as (read, write):  # type: ignore[arg-type]
                    async with ClientSession(read, write) as session:
                        await session.initialize()
                        result = await _listed_then_called(session, wire, given)
                    await client_out.aclose()  # the server's end of file: it returns
            await client_in.aclose()
            return result

        return self._outcome(world.run(main()))


class McpHttp(Mcp):
    """The service's ``/mcp`` endpoint on a live loopback server, the official client over streamable HTTP."""

    name = "mcp_http"

    def call(self, world, context, logical, arguments, *, intent=INTENT, grant=None):  # type: ignore[no-untyped-def]
        import httpx2
        from mcp.client.streamable_http import streamable_http_client

        from service_support import LiveServer

        assert grant is None
        lives: dict[tuple[str, ...] | None, str] = world.__dict__.setdefault("_lives", {})
        if self.toolset not in lives:
            live = LiveServer(service_app(world, self.toolset)[0])
            world.closers.append(live.stop)
            lives[self.toolset] = live.url
        url = lives[self.toolset]
        key = service_app(world, self.toolset)[1][context.principal]
        wire = to_wire_name(world.style.by_name(logical))
        given = _with_intent(world, logical, arguments, intent)

        async def main() -> Any:
            headers = {"Authorization": f"Bearer {key}"}
            async with (
                httpx2.AsyncClient(headers=headers, timeout=30) as http,
                Client(streamable_http_client(url + "/mcp", http_client=http)) as client,
            ):
                return await _listed_then_called(client, wire, given)

        return self._outcome(world.run(main()))


def _text_outcome(text: str) -> Outcome:
    """A framework's tool answer: the content, or the refusal `toolbox.doors.tool_calls.result_text` wrote."""
    try:
        data = json.loads(text)
    except ValueError:
        return Outcome("SUCCESS", shown=text)
    if not isinstance(data, dict) or "status" not in data:
        return Outcome("SUCCESS", shown=text)
    status = str(data["status"])
    reason = data.get("error_code") if status == "INVALID_ARGUMENTS" else data.get("reason_code")
    return Outcome(status, reason, shown=text)


class LangChain(Door):
    """`GovernedLangChainTools`: the StructuredTool invoked with a model's tool call."""

    name = "langchain"

    def call(self, world, context, logical, arguments, *, intent=INTENT, grant=None):  # type: ignore[no-untyped-def]
        from toolbox.integrations.langchain import APPROVALS_KEY, CONTEXT_KEY, GovernedLangChainTools

        wire = to_wire_name(world.style.by_name(logical))
        offered = {t.name: t for t in GovernedLangChainTools(world.gateway).tools}
        if wire not in offered:
            return Outcome("DENIED", "NOT_OFFERED", shown="not offered")
        configurable: dict[str, Any] = {CONTEXT_KEY: context}
        if grant is not None:
            configurable[APPROVALS_KEY] = {"call-1": grant}
        call = {
            "type": "tool_call",
            "id": "call-1",
            "name": wire,
            "args": _with_intent(world, logical, arguments, intent),
        }
        message = world.run(offered[wire].ainvoke(call, config={"configurable": configurable}))
        artifact = getattr(message, "artifact", None)
        if isinstance(artifact, dict):
            status = str(artifact["status"])
            reason = (
                artifact.get("error_code") if status == "INVALID_ARGUMENTS" else artifact.get("reason_code")
            )
            request = artifact.get("approval")
            return Outcome(status, reason, request, repr(message.content))
        return Outcome("SUCCESS", shown=repr(getattr(message, "content", message)))

    def grant(self, world: World, request: Any) -> Any:
        from toolbox.governance import ApprovalRequest

        shown = request if isinstance(request, ApprovalRequest) else ApprovalRequest(**request)
        return APPROVER.grant(shown, approved_by="conformance-approver")


class OpenAIAgents(Door):
    """`GovernedAgentTools`: the SDK's FunctionTool invoked as its runner does."""

    name = "openai_agents"
    grants = False  # grants resume through the SDK's RunState interruptions (test_integration_openai_agents)

    def call(self, world, context, logical, arguments, *, intent=INTENT, grant=None):  # type: ignore[no-untyped-def]
        from agents import RunContextWrapper
        from agents.tool_context import ToolContext

        from toolbox.integrations._offered import context_key
        from toolbox.integrations.openai_agents import GovernedAgentTools

        assert grant is None
        wire = to_wire_name(world.style.by_name(logical))
        governed = GovernedAgentTools(world.gateway)
        offered = {t.name: t for t in governed.tools}
        if wire not in offered:
            return Outcome("DENIED", "NOT_OFFERED", shown="not offered")
        tool = offered[wire]
        given = _with_intent(world, logical, arguments, intent)
        text = json.dumps(given)

        async def main() -> Outcome:
            needs = getattr(tool, "needs_approval", False)
            if callable(needs) and await needs(RunContextWrapper(context), given, "call-1"):
                held = governed._requests.get((context_key(context), "call-1"))
                return Outcome("APPROVAL_REQUIRED", "APPROVAL_REQUIRED", held, repr(held))
            tool_context = ToolContext(context, tool_name=wire, tool_call_id="call-1", tool_arguments=text)
            return _text_outcome(await tool.on_invoke_tool(tool_context, text))

        return world.run(main())


class PydanticAI(Door):
    """`GovernedToolset`: pydantic-ai's toolset call, as an agent run makes it."""

    name = "pydantic_ai"

    def call(self, world, context, logical, arguments, *, intent=INTENT, grant=None):  # type: ignore[no-untyped-def]
        from pydantic_ai import RunContext
        from pydantic_ai.exceptions import ApprovalRequired as Deferred
        from pydantic_ai.exceptions import ModelRetry, ToolFailed
        from pydantic_ai.models.test import TestModel
        from pydantic_ai.usage import RunUsage

        from toolbox.integrations.pydantic_ai import GRANT_KEY, REQUEST_KEY, GovernedToolset

        wire = to_wire_name(world.style.by_name(logical))
        toolset: GovernedToolset[Any] = GovernedToolset(world.gateway)
        extra: dict[str, Any] = {}
        if grant is not None:
            extra = {"tool_call_approved": True, "tool_call_metadata": {GRANT_KEY: grant}}
        run = RunContext(deps=context, model=TestModel(), usage=RunUsage(), max_retries=1, **extra)

        async def main() -> Outcome:
            tools = await toolset.get_tools(run)
            if wire not in tools:
                return Outcome("DENIED", "NOT_OFFERED", shown="not offered")
            try:
                content = await toolset.call_tool(
                    wire, _with_intent(world, logical, arguments, intent), run, tools[wire]
                )
            except Deferred as asked:
                request = (asked.metadata or {}).get(REQUEST_KEY)
                return Outcome("APPROVAL_REQUIRED", "APPROVAL_REQUIRED", request, repr(request))
            except ModelRetry as retry:
                return Outcome("INVALID_ARGUMENTS", _code_in(str(retry)), shown=str(retry))
            except ToolFailed as failed:
                return _text_outcome(str(failed))
            return Outcome("SUCCESS", shown=repr(content))

        return world.run(main())

    def grant(self, world: World, request: Any) -> Any:
        from toolbox.governance import ApprovalRequest

        return APPROVER.grant(ApprovalRequest(**request), approved_by="conformance-approver")


def _code_in(retry: str) -> str | None:
    """The error code in pydantic-ai's retry text: ``invalid arguments at 'x' (code): ...``."""
    start, end = retry.find("("), retry.find(")")
    return retry[start + 1 : end] if 0 <= start < end else None
