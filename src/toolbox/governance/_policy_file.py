"""Reading a `ToolPolicy` from a TOML file.

Schema (version 1)::

    version = 1                  # required
    base = "standard"            # "standard" (MEMORY_ONLY allowed) or "deny_all"

    [allow]
    tools = ["http"]             # tool names
    risks = ["EXTERNAL_RESOURCE"]

    [deny]
    tools = ["fs"]
    risks = ["PRIVILEGED"]

    [providers]
    block = ["some-distribution"]

    [roles]                      # role -> tools or tool.operation patterns ("*" allowed)
    analyst = ["calculator", "http.get"]

    [tools.http]                 # options for one tool, validated by that tool when it is built
    max_response_bytes = 1048576
    [tools.http.egress]
    hosts = ["api.example.com"]

    [authorization]              # Cedar policies, validated against the schema when the file loads
    cedar_policies = "policies.cedar"          # paths relative to this file
    cedar_schema = "policies.cedarschema"      # Cedar syntax, or Cedar JSON when it ends in .json

    [auth]                       # who may call `toolbox serve` / `toolbox mcp serve` over HTTP
    api_keys = "keys.toml"       # SHA-256 hashes of API keys (toolbox.auth._keys)
    [auth.jwt]                   # JWT bearer tokens (toolbox.auth._jwt)
    issuer = "https://idp.example"
    audience = "toolbox"
    jwks_file = "jwks.json"      # or key_file = "public.pem"

    [guardrails]
    mode = "ENFORCE"             # or "REPORT": DENY becomes WARN
    [[guardrails.rules]]
    id = "NO_DELETE"
    tool = "fs"
    operation = "delete"
    action = "DENY"              # DENY, WARN or REQUIRE_APPROVAL

    [state]                      # fleet state: toolbox.state._config (docs/fleet.md)
    backend = "redis"            # memory (default), sql or redis
    url_env = "TOOLBOX_STATE_URL"

    [mcp.context]                # `toolbox mcp serve` over stdio: who the calls are made for
    tenant = "acme"
    principal = "desktop-user"
    [mcp.toolsets.support]       # a subset an endpoint or a credential is limited to (_mcp_table)
    tools = ["calculator", "http.get"]

Unknown keys, unknown risk classes and a name listed under both allow and
deny are errors; tool names nobody provides are rejected by ``Tools.load``.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

from toolbox.auth._config import read_auth_section
from toolbox.errors import ConfigurationError, PolicyFileError
from toolbox.foundations._descriptor import MAX_NAME_LENGTH, TOOL_NAME_PATTERN, RiskClass
from toolbox.foundations._table_reader import TableReader
from toolbox.registry._policy import ToolPolicy, install_file_reader

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

__all__ = ["load_policy_file", "policy_from_mapping"]

_TOP_KEYS = (
    "version",
    "base",
    "allow",
    "deny",
    "providers",
    "roles",
    "authorization",
    "guardrails",
    "audit",
    "tools",
    "state",
    "auth",
    "mcp",
)
_DISTRIBUTION = r"^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$"
_RISKS = tuple(r.value for r in RiskClass)
_TOOL_NAME = re.compile(TOOL_NAME_PATTERN)


def _rules(table: TableReader) -> tuple[list[str], list[RiskClass]]:
    """The tool names and risk classes of an ``[allow]`` or ``[deny]`` table."""
    table.only(("tools", "risks"))
    tools = table.strings("tools", pattern=TOOL_NAME_PATTERN, max_length=MAX_NAME_LENGTH, what="tool name")
    risks = table.strings("risks", choices=_RISKS, what="risk class")
    return tools, [RiskClass(r) for r in risks]


def policy_from_mapping(data: dict[str, object], *, source: str, directory: Path | None = None) -> ToolPolicy:
    """Build a policy from parsed TOML ``data``; ``source`` names it in errors.

    Relative paths in ``data`` (the Cedar files) are read from ``directory``
    (default: the working directory).

    Raises:
        PolicyFileError: the data breaks the schema; the message names the key path.
    """
    root = TableReader(data, source=source)
    root.only(_TOP_KEYS)
    version = root.integer("version")
    if version != 1:
        raise root.error("version", f"unsupported version {version}; this toolbox reads version 1")
    base = root.string("base", "standard", choices=("standard", "deny_all"), what="base")
    allow_tools, allow_risks = _rules(root.table("allow"))
    deny_tools, deny_risks = _rules(root.table("deny"))
    providers = root.table("providers")
    providers.only(("block",))
    blocked = providers.strings("block", pattern=_DISTRIBUTION, what="distribution name")

    both = set(allow_tools) & set(deny_tools)
    both |= {r.value for r in set(allow_risks) & set(deny_risks)}
    if both:
        raise PolicyFileError(
            f"{source}: {', '.join(sorted(both))} listed under both [allow] and [deny]; "
            "remove it from one of them"
        )
    governance = _governance(root)
    if "auth" in root:
        governance["auth"] = read_auth_section(root.table("auth"), directory or Path())
    if "authorization" in root:
        governance["cedar"] = _cedar(root.table("authorization"), directory or Path())
    file_names = {name: f"allow.tools[{i}]" for i, name in enumerate(allow_tools)}
    file_names.update({name: f"deny.tools[{i}]" for i, name in enumerate(deny_tools)})
    for name in governance.get("tools", {}):
        file_names.setdefault(name, f"tools.{name}")
    return ToolPolicy(
        default_risks=[RiskClass.MEMORY_ONLY] if base == "standard" else [],
        allow=[*allow_tools, *allow_risks],
        deny=[*deny_tools, *deny_risks],
        blocked_distributions=blocked,
        source=source,
        file_names=file_names,
        governance=governance,
    )


def _governance(root: TableReader) -> dict[str, Any]:
    # Validated now, so a bad action or mode fails at load time, not on a call.
    from toolbox.pipeline.checks._authorization import RolePolicy
    from toolbox.pipeline.checks._guardrails import guardrails_from_config

    governance: dict[str, Any] = {}
    source = root.source
    if "roles" in root:
        roles_table = root.table("roles")
        roles = {role: roles_table.strings(role, what="pattern") for role in roles_table}
        try:
            RolePolicy(roles)
        except ConfigurationError as exc:
            raise roles_table.error("", str(exc)) from None
        governance["roles"] = roles
    if "guardrails" in root:
        guardrails = root.table("guardrails").raw()
        guardrails_from_config(guardrails, source=source)
        governance["guardrails"] = guardrails
    if "audit" in root:
        from toolbox.audit._config import check_config

        audit = root.table("audit").raw()
        check_config(audit, source=source)
        governance["audit"] = audit
    if "state" in root:
        from toolbox.state._config import check_state_config

        governance["state"] = check_state_config(root.table("state"))
    if "tools" in root:
        tools = root.table("tools")
        options: dict[str, Any] = {}
        for name in tools:
            if not isinstance(name, str) or len(name) > MAX_NAME_LENGTH or not _TOOL_NAME.fullmatch(name):
                raise tools.error(name, f"not a valid tool name ({TOOL_NAME_PATTERN})")
            options[name] = dict(tools.table(name).raw())
        governance["tools"] = options
    if "mcp" in root:
        from toolbox.governance._mcp_table import MCP_KEY, read_mcp_table

        governance[MCP_KEY] = read_mcp_table(root.table("mcp"))
    return governance


def _cedar(table: TableReader, directory: Path) -> object:
    """The ``[authorization]`` table's CedarAuthorizer, paths relative to the policy file."""
    from toolbox.pipeline.checks._cedar import CedarAuthorizer

    table.only(("cedar_policies", "cedar_schema"))
    policies = table.string("cedar_policies")
    schema = table.string("cedar_schema")
    for key, value in (("cedar_policies", policies), ("cedar_schema", schema)):
        if not value:
            raise table.error(key, "must not be empty")
    try:
        return CedarAuthorizer.from_files(directory / policies, directory / schema)
    except (ImportError, PolicyFileError) as exc:
        raise PolicyFileError(f"{table.source}: [authorization]: {exc}") from None


def load_policy_file(path: Path) -> ToolPolicy:
    """Read and validate the policy file at ``path``.

    Raises:
        PolicyFileError: missing, unreadable, not TOML, or not the schema.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise PolicyFileError(f"policy file {str(path)!r} does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise PolicyFileError(f"cannot read policy file {str(path)!r}: {exc.__class__.__name__}") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise PolicyFileError(f"{path}: not valid TOML: {exc}") from None
    return policy_from_mapping(data, source=str(path), directory=path.parent)


install_file_reader(load_policy_file)
