"""`McpConfig`: the ``[tools.mcp]`` table, validated when the provider is discovered.

::

    [tools.mcp]
    lock_file = "mcp.lock.json"          # relative to the policy file

    [tools.mcp.servers.notes]            # stdio: the child gets only env and pass_env
    command = "notes-server"
    args = ["--db", "/srv/notes.db"]
    env = { NOTES_MODE = "ro" }
    pass_env = ["PATH"]
    [tools.mcp.servers.notes.operations.search]
    effect = "READ_ONLY"

    [tools.mcp.servers.crm]              # streamable HTTP through toolbox-http's egress guard
    url = "https://crm.example.com/mcp"
    [[tools.mcp.servers.crm.credentials]]
    env = "CRM_TOKEN"                    # or file = "/run/secrets/crm"
    prefix = "Bearer "
    tenant = "acme"                      # optional: only for calls of this tenant (and principal)
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal, final

import httpx
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from toolbox import Acknowledgement, Effect, RiskClass
from toolbox.provider import describe_validation_error
from toolbox_http import Credential, EgressPolicy

__all__ = ["CredentialConfig", "McpConfig", "OperationConfig", "ServerConfig", "read_config"]

KIB = 1024
MIB = 1024 * KIB
Seconds = Annotated[float, Field(gt=0, le=3600, allow_inf_nan=False)]
_SERVER_NAME = re.compile(r"^[a-z][a-z0-9]*(?:[_-][a-z0-9]+)*$")
_ENV_NAME = r"^[A-Za-z_][A-Za-z0-9_]{0,127}$"
_Frozen = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)


@final
class OperationConfig(BaseModel):
    """What the operator declares about one operation: its effect and whether it needs approval."""

    model_config = _Frozen

    effect: Literal["READ_ONLY", "IDEMPOTENT", "UNSAFE"] = "UNSAFE"
    """The effect the operator vouches for; the server's annotations may only make it stricter."""
    requires_approval: bool = False
    """Every call needs a human approval bound to its exact arguments."""


@final
class CredentialConfig(BaseModel):
    """One upstream secret header, bound to the server's host, optionally for one tenant/principal."""

    model_config = _Frozen

    header: str = "Authorization"
    """The header that carries the secret."""
    prefix: str = ""
    """Text before the secret, e.g. ``"Bearer "``."""
    env: Annotated[str, Field(pattern=_ENV_NAME)] | None = None
    """The environment variable holding the secret (read when a session opens)."""
    file: str | None = None
    """A file holding the secret (relative to the policy file; trailing newline removed)."""
    tenant: str | None = None
    """Only calls of this tenant use the credential; None: any tenant."""
    principal: str | None = None
    """Only calls of this principal use the credential; None: any principal."""
    allow_http: bool = False
    """Send it over plain ``http`` too (a loopback server); otherwise only over ``https``."""

    @model_validator(mode="after")
    def _one_source(self) -> CredentialConfig:
        if (self.env is None) == (self.file is None):
            raise ValueError("a credential needs exactly one of env or file")
        return self

    def specificity(self) -> int:
        """How specific the credential is: principal and tenant 3, principal 2, tenant 1, none 0."""
        return (2 if self.principal is not None else 0) + (1 if self.tenant is not None else 0)


@final
class ServerConfig(BaseModel):
    """One MCP server: ``command`` (stdio) or ``url`` (streamable HTTP), and how it is governed."""

    model_config = _Frozen

    command: str | None = None
    """The executable of a stdio server (a name looked up on ``PATH``, or a path)."""
    args: tuple[str, ...] = ()
    """Its arguments."""
    env: dict[str, str] = Field(default_factory=dict)
    """Environment variables the child gets, with their values; it gets no other variable..."""
    pass_env: tuple[Annotated[str, Field(pattern=_ENV_NAME)], ...] = ()
    """...except these, copied from this process's environment when set."""
    cwd: str | None = None
    """The child's working directory."""
    url: str | None = None
    """The endpoint of a streamable-HTTP server."""
    egress: EgressPolicy = EgressPolicy()
    """toolbox-http's egress policy for ``url``: hosts, ports and the non-public networks allowed."""
    credentials: tuple[CredentialConfig, ...] = ()
    """Upstream secrets; the most specific one matching the call's tenant/principal is used."""
    risk: Literal["EXTERNAL_RESOURCE", "PRIVILEGED"] = "EXTERNAL_RESOURCE"
    """The operator's risk class for the server (the server has no say)."""
    acknowledgement: Acknowledgement | None = None
    """A deployment acknowledgement (``{env, value}``); required for ``PRIVILEGED``."""
    operations: dict[str, OperationConfig] = Field(default_factory=dict)
    """Per operation (by its toolbox name): effect and approval. Others are ``UNSAFE``."""
    timeout: Seconds = 30.0
    """Seconds for one call (the context's deadline may cut it shorter)."""
    connect_timeout: Seconds = 10.0
    """Seconds to start the server (or reach it) and read its tools."""
    max_result_bytes: Annotated[int, Field(gt=0, le=256 * MIB)] = 1 * MIB
    """Largest result (text plus structured content) passed back; larger results are refused."""
    max_schema_bytes: Annotated[int, Field(gt=0, le=MIB)] = 64 * KIB
    """Largest input schema pinned, as canonical JSON."""
    max_schema_depth: Annotated[int, Field(gt=0, le=64)] = 16
    """Deepest nesting of an input schema pinned."""

    @field_validator("env")
    @classmethod
    def _env_names(cls, value: dict[str, str]) -> dict[str, str]:
        for name, text in value.items():
            if not re.fullmatch(_ENV_NAME, name):
                raise ValueError(f"{name!r} is not an environment variable name")
            if "\x00" in text:
                raise ValueError(f"the value of {name} contains NUL")
        return value

    @model_validator(mode="after")
    def _transport(self) -> ServerConfig:
        if (self.command is None) == (self.url is None):
            raise ValueError("a server needs exactly one of command (stdio) or url (streamable HTTP)")
        if self.command is not None:
            if not self.command or "\x00" in self.command or "=" in Path(self.command).name:
                raise ValueError("command must be a program name or path")
            if self.credentials:
                raise ValueError("credentials are for url servers; give a stdio server env instead")
        if self.url is not None:
            self._check_url(self.url)
        if self.risk == "PRIVILEGED" and self.acknowledgement is None:
            raise ValueError("a PRIVILEGED server needs an acknowledgement = {env = ..., value = ...}")
        return self

    def _check_url(self, url: str) -> None:
        try:
            parsed = httpx.URL(url)
        except (httpx.InvalidURL, TypeError) as exc:
            raise ValueError(f"url is not a valid URL: {exc}") from None
        if parsed.scheme not in ("http", "https") or not parsed.host or parsed.userinfo:
            raise ValueError("url must be an http(s) URL with a host and no user information")
        violation = self.egress.violation("POST", parsed)
        if violation is not None:
            raise ValueError(f"url is outside the server's egress policy: {violation[1]}")
        if parsed.scheme == "http" and any(not c.allow_http for c in self.credentials):
            raise ValueError("credentials go only over https; set allow_http = true for a plain-http server")
        host = parsed.raw_host.decode("ascii")
        for index, credential in enumerate(self.credentials):
            try:  # toolbox-http's own rules for a header and its prefix
                Credential(hosts=(host,), header=credential.header, prefix=credential.prefix, env="CHECK")
            except ValidationError as exc:
                raise ValueError(f"credentials.{index}: {describe_validation_error(exc)}") from None

    @property
    def transport(self) -> str:
        """``stdio`` or ``http``."""
        return "stdio" if self.command is not None else "http"

    @property
    def risk_class(self) -> RiskClass:
        """The risk class of the server's tool."""
        return RiskClass(self.risk)

    def declared_effect(self, operation: str) -> Effect:
        """The operator's effect for ``operation`` (``UNSAFE`` unless declared)."""
        declared = self.operations.get(operation)
        return Effect(declared.effect) if declared is not None else Effect.UNSAFE


@final
class McpConfig(BaseModel):
    """The ``[tools.mcp]`` table."""

    model_config = _Frozen

    lock_file: str = "mcp.lock.json"
    """The lock file pinning every server's operations (relative to the policy file)."""
    servers: dict[str, ServerConfig] = Field(default_factory=dict)
    """The servers, by name; server ``NAME`` becomes tool ``mcp.NAME``."""

    @field_validator("servers")
    @classmethod
    def _names(cls, value: dict[str, ServerConfig]) -> dict[str, ServerConfig]:
        for name in value:
            if len(name) > 40 or not _SERVER_NAME.fullmatch(name):
                raise ValueError(f"server name {name!r} must be lowercase letters, digits, - and single _")
        return value


def read_config(table: Mapping[str, Any] | None, *, source: str) -> McpConfig:
    """Validate the ``[tools.mcp]`` table (``source`` names the policy file in errors).

    Raises:
        ValueError: a key is unknown or a value invalid; names the key path, never the value.
    """
    try:
        return McpConfig.model_validate(dict(table or {}))
    except ValidationError as exc:
        raise ValueError(f"{source}: invalid [tools.mcp]: {describe_validation_error(exc)}") from None
