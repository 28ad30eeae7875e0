"""`Server`: one configured MCP server, its pinned operations, its pool of sessions and its drift.

Made once per discovery (no I/O) and shared by every `McpTool` instance of
the catalog, so every context reuses the same sessions. Sessions are opened
per upstream credential (a tenant's token is never used for another tenant's
call) and closed when the last tool instance using the server is closed, or
at interpreter exit.
"""

from __future__ import annotations

import atexit
import threading
import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import final

import httpx
import mcp_types
from jsonschema.protocols import Validator

from toolbox import Effect, ExecutionContext, OperationDescriptor, RiskClass, ToolDescriptor
from toolbox.errors import ToolDeniedError
from toolbox.provider import redact_url
from toolbox_http import Credential
from toolbox_mcp._config import CredentialConfig, ServerConfig
from toolbox_mcp._connection import Connection
from toolbox_mcp._lockfile import Pin, Refused, pin_tools
from toolbox_mcp._schema import local_schema, schema_validator
from toolbox_mcp._transports import Opener, http_opener, read_secret_file, stdio_opener

__all__ = ["DRIFT", "DriftError", "Server", "effective_effect"]

VERSION = "0.1.0"
DRIFT = "MCP_LOCK_DRIFT"
"""The reason code of a call refused because the server's operation differs from the lock."""
_SUMMARY = 500
_live: weakref.WeakSet[Server] = weakref.WeakSet()


class DriftError(ToolDeniedError):
    """The server's operation is not what the lock pinned (changed, removed or new): refused.

    Reason code ``MCP_LOCK_DRIFT``; the rule says which (``mcp:lock:changed``, ``...:removed``,
    ``...:unpinned``). Run ``toolbox mcp lock NAME`` after reviewing the change.
    """

    def __init__(self, message: str, *, tool: str, rule: str) -> None:
        # Decided before anything is sent to the server: the refused call made no attempt.
        super().__init__(message, tool=tool, reason_code=DRIFT, rule=rule, request_sent=False)


def effective_effect(declared: Effect, annotations: Mapping[str, object]) -> Effect:
    """The operator's effect, made stricter (never looser) by the server's pinned hints.

    A server's hints are untrusted: ``readOnlyHint: true`` never makes an
    operation ``READ_ONLY``, but ``readOnlyHint: false`` or ``destructiveHint:
    true`` stops one the operator declared read-only from being treated so, and
    ``idempotentHint: false`` likewise for ``IDEMPOTENT``.
    """
    if declared is Effect.READ_ONLY and (
        annotations.get("readOnlyHint") is False or annotations.get("destructiveHint") is True
    ):
        return Effect.UNSAFE
    if declared is Effect.IDEMPOTENT and annotations.get("idempotentHint") is False:
        return Effect.UNSAFE
    return declared


@final
@dataclass(frozen=True)
class Drift:
    """How a live listing differs from the lock."""

    changed: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    new: tuple[str, ...] = ()
    refused: tuple[Refused, ...] = ()

    def lines(self) -> list[str]:
        found = [
            f"{op}: changed since it was pinned (schema, description or annotations)" for op in self.changed
        ]
        found += [f"{op}: pinned, but the server no longer lists it" for op in self.removed]
        found += [f"{op}: new on the server, not pinned (unusable until locked)" for op in self.new]
        found += [f"{r.remote}: cannot be pinned: {r.reason}" for r in self.refused]
        return found


@final
class Server:
    """One configured server (``[tools.mcp.servers.NAME]``) and everything shared about it."""

    __slots__ = (
        "__weakref__",
        "_connections",
        "_drift",
        "_lock",
        "_users",
        "_validators",
        "config",
        "directory",
        "lock_path",
        "name",
        "pins",
        "tool",
    )

    def __init__(
        self, name: str, config: ServerConfig, pins: Mapping[str, Pin], *, lock_path: Path, directory: Path
    ) -> None:
        self.name = name
        self.tool = f"mcp.{name}"
        self.config = config
        self.pins = dict(pins)
        self.lock_path = lock_path
        self.directory = directory
        self._connections: dict[int | None, Connection] = {}
        self._drift = Drift()
        self._lock = threading.Lock()
        self._users = 0
        self._validators: dict[str, Validator] = {}
        _live.add(self)

    # -- the descriptor ------------------------------------------------------------------------

    def effect_of(self, operation: str) -> Effect:
        """The effect ``operation`` is governed with."""
        pin = self.pins.get(operation)
        annotations = pin.annotations if pin is not None else {}
        return effective_effect(self.config.declared_effect(operation), annotations)

    def descriptor(self) -> ToolDescriptor:
        """``mcp.NAME``: the operator's risk, one operation per pinned remote tool."""
        config = self.config
        operations = tuple(
            OperationDescriptor(
                name=name,
                effect=self.effect_of(name),
                summary=_summary(pin.description),
                requires_approval=bool(
                    config.operations.get(name) and config.operations[name].requires_approval
                ),
            )
            for name, pin in sorted(self.pins.items())
        )
        where = redact_url(config.url) if config.url is not None else config.command
        return ToolDescriptor(
            name=self.tool,
            version=VERSION,
            summary=_summary(f"Tools of the MCP server {self.name!r} ({config.transport}: {where})"),
            risk=RiskClass(config.risk),
            acknowledgement=config.acknowledgement,
            operations=operations,
        )

    def validator(self, operation: str) -> Validator:
        """The argument validator of pinned ``operation`` (built once)."""
        found = self._validators.get(operation)
        if found is None:
            schema = local_schema(self.pins[operation].input_schema)
            found = self._validators[operation] = schema_validator(schema)
        return found

    # -- sessions --------------------------------------------------------------------------------

    def acquire(self) -> None:
        """A tool instance starts using the server's sessions."""
        with self._lock:
            self._users += 1

    def release(self, *, keep_sessions: bool = False) -> None:
        """A tool instance is closed; the last one closes the sessions (a later call reopens them).

        With ``keep_sessions`` (an instance whose context is done, the owner not) they stay
        pooled for the next context: a tool closed later, `close` or the interpreter's exit
        ends them. Without it, a served request would start and kill a stdio server each time.
        """
        with self._lock:
            self._users = max(0, self._users - 1)
            if self._users or keep_sessions:
                return
            connections = list(self._connections.values())
            self._connections.clear()
        for connection in connections:
            connection.close()

    def close(self) -> None:
        """Close every session now (at interpreter exit)."""
        with self._lock:
            connections = list(self._connections.values())
            self._connections.clear()
        for connection in connections:
            connection.close()

    def credential_for(self, context: ExecutionContext | None) -> int | None:
        """The index of the most specific credential matching ``context``, or None."""
        best: tuple[int, int] | None = None
        for index, credential in enumerate(self.config.credentials):
            if credential.tenant is not None and (context is None or credential.tenant != context.tenant):
                continue
            if credential.principal is not None and (
                context is None or credential.principal != context.principal
            ):
                continue
            rank = credential.specificity()
            if best is None or rank > best[0]:
                best = (rank, index)
        return None if best is None else best[1]

    def connection(self, credential: int | None, env: Mapping[str, str]) -> Connection:
        """The pooled connection for ``credential`` (started lazily on its first call).

        Raises:
            toolbox_http.CredentialError: the credential's secret cannot be read.
        """
        with self._lock:
            found = self._connections.get(credential)
            if found is not None:
                return found
        made = Connection(
            self.opener(credential, env),
            label=f"MCP server {self.name!r}",
            connect_timeout=self.config.connect_timeout,
            on_listing=self._compare,
        )
        with self._lock:
            found = self._connections.setdefault(credential, made)
        if found is not made:
            made.close()
        return found

    def opener(self, credential: int | None, env: Mapping[str, str]) -> Opener:
        config = self.config
        if config.command is not None:
            return stdio_opener(config, env)
        bound = None if credential is None else self._bound(config.credentials[credential])

        def headers() -> dict[str, str]:
            return {} if bound is None else {bound.header: bound.value(env)}

        return http_opener(config, headers, tool=self.tool)

    def _bound(self, credential: CredentialConfig) -> Credential:
        """The toolbox-http `Credential` of ``credential``: bound to this server's host only."""
        assert self.config.url is not None
        host = httpx.URL(self.config.url).raw_host.decode("ascii")
        source: dict[str, object] = {"env": credential.env} if credential.env else {}
        if credential.file is not None:
            path = self.directory / credential.file
            source = {"value_from": lambda: read_secret_file(path)}
        return Credential(
            hosts=(host,),
            http_hosts=(host,) if credential.allow_http else (),
            header=credential.header,
            prefix=credential.prefix,
            **source,  # type: ignore[arg-type]
        )

    # -- drift -----------------------------------------------------------------------------------

    def _compare(self, tools: list[mcp_types.Tool]) -> None:
        """Compare a live listing with the lock (called on the session's loop)."""
        self._drift = self.drift_of(tools)

    def drift_of(self, tools: list[mcp_types.Tool]) -> Drift:
        """How ``tools`` (a live listing) differ from the pinned operations."""
        live, refused = pin_tools(
            tools,
            max_bytes=self.config.max_schema_bytes,
            max_depth=self.config.max_schema_depth,
            tool=self.tool,
        )
        changed = tuple(
            sorted(op for op, pin in self.pins.items() if op in live and live[op].digests != pin.digests)
        )
        changed += tuple(
            sorted(op for op, pin in self.pins.items() if op in live and live[op].remote != pin.remote)
        )
        refused_names = {r.remote for r in refused}
        removed = tuple(
            sorted(op for op, pin in self.pins.items() if op not in live and pin.remote not in refused_names)
        )
        changed += tuple(
            sorted(op for op, pin in self.pins.items() if op not in live and pin.remote in refused_names)
        )
        new = tuple(sorted(op for op in live if op not in self.pins))
        return Drift(tuple(dict.fromkeys(changed)), removed, new, tuple(refused))

    @property
    def drift(self) -> Drift:
        """The drift seen by the latest listing of any session (empty before the first)."""
        return self._drift

    def check_pinned(self, operation: str) -> Pin:
        """The pin of ``operation``, if the latest listing still matches it.

        Raises:
            DriftError: it changed or disappeared on the server, or was never pinned.
        """
        pin = self.pins.get(operation)
        if pin is None:
            raise DriftError(
                f"{self.tool}.{operation} is not pinned in {self.lock_path.name}; review the server's tools "
                f"and run `toolbox mcp lock {self.name}`",
                tool=self.tool,
                rule="mcp:lock:unpinned",
            )
        drift = self._drift
        if operation in drift.changed:
            raise DriftError(
                f"{self.tool}.{operation} changed on the server since it was pinned (schema, description or "
                f"annotations); review it and run `toolbox mcp lock {self.name}`",
                tool=self.tool,
                rule="mcp:lock:changed",
            )
        if operation in drift.removed:
            raise DriftError(
                f"{self.tool}.{operation} is pinned but the server no longer lists it; review the "
                f"server's tools and run `toolbox mcp lock {self.name}`",
                tool=self.tool,
                rule="mcp:lock:removed",
            )
        return pin

    def __repr__(self) -> str:
        return f"Server({self.tool}, {self.config.transport}, pinned={sorted(self.pins)})"


def _summary(text: str) -> str:
    # Descriptor summaries are one bounded line; the full description stays in the lock file.
    line = " ".join(text.split())
    return line if len(line) <= _SUMMARY else line[: _SUMMARY - 3] + "..."


@atexit.register
def _close_all() -> None:  # pragma: no cover - runs at interpreter exit
    for server in list(_live):
        server.close()
