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

    [guardrails]
    mode = "ENFORCE"             # or "REPORT": DENY becomes WARN
    [[guardrails.rules]]
    id = "NO_DELETE"
    tool = "fs"
    operation = "delete"
    action = "DENY"              # DENY, WARN or REQUIRE_APPROVAL

Unknown keys, unknown risk classes and a name listed under both allow and
deny are errors; tool names nobody provides are rejected by ``Tools.load``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from toolbox.descriptor import TOOL_NAME_PATTERN, RiskClass, describe_validation_error
from toolbox.errors import ConfigurationError, PolicyFileError
from toolbox.policy import ToolPolicy, install_file_reader

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

__all__ = ["load_policy_file", "policy_from_mapping"]

_Strict = ConfigDict(extra="forbid", frozen=True, strict=True)
_ToolName = Annotated[str, Field(pattern=TOOL_NAME_PATTERN)]


class RuleTable(BaseModel):
    model_config = _Strict
    tools: list[_ToolName] = []
    risks: list[RiskClass] = []


class ProvidersTable(BaseModel):
    model_config = _Strict
    block: list[Annotated[str, Field(pattern=r"^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$")]] = []


class _PolicyFile(BaseModel):
    model_config = _Strict
    version: Literal[1]
    base: Literal["standard", "deny_all"] = "standard"
    allow: RuleTable = RuleTable()
    deny: RuleTable = RuleTable()
    providers: ProvidersTable = ProvidersTable()
    roles: dict[str, list[Annotated[str, Field(min_length=1)]]] | None = None
    guardrails: dict[str, Any] | None = None
    audit: dict[str, Any] | None = None
    tools: dict[_ToolName, dict[str, Any]] | None = None


def _risks(values: object, where: str, source: str) -> None:
    valid = {r.value for r in RiskClass}
    for index, value in enumerate(values if isinstance(values, list) else []):
        if value not in valid:
            raise PolicyFileError(
                f"{source}: {where}[{index}]: unknown risk class {value!r}; "
                f"use one of {', '.join(sorted(valid))}"
            )


def policy_from_mapping(data: dict[str, object], *, source: str) -> ToolPolicy:
    """Build a policy from parsed TOML ``data``; ``source`` names it in errors.

    Raises:
        PolicyFileError: the data breaks the schema.
    """
    for section in ("allow", "deny"):
        rules = data.get(section)
        if isinstance(rules, dict):
            _risks(rules.get("risks"), f"{section}.risks", source)
    try:
        parsed = _PolicyFile.model_validate(_risk_enums(data))
    except ValidationError as exc:
        raise PolicyFileError(f"{source}: {describe_validation_error(exc)}") from None

    both = set(parsed.allow.tools) & set(parsed.deny.tools)
    both |= {r.value for r in set(parsed.allow.risks) & set(parsed.deny.risks)}
    if both:
        raise PolicyFileError(
            f"{source}: {', '.join(sorted(both))} listed under both [allow] and [deny]; "
            "remove it from one of them"
        )
    governance = _governance(parsed, source)
    file_names = {name: f"allow.tools[{i}]" for i, name in enumerate(parsed.allow.tools)}
    file_names.update({name: f"deny.tools[{i}]" for i, name in enumerate(parsed.deny.tools)})
    for name in parsed.tools or {}:
        file_names.setdefault(name, f"tools.{name}")
    return ToolPolicy(
        default_risks=[RiskClass.MEMORY_ONLY] if parsed.base == "standard" else [],
        allow=[*parsed.allow.tools, *parsed.allow.risks],
        deny=[*parsed.deny.tools, *parsed.deny.risks],
        blocked_distributions=parsed.providers.block,
        source=source,
        file_names=file_names,
        governance=governance,
    )


def _governance(parsed: _PolicyFile, source: str) -> dict[str, Any]:
    # Validated now, so a bad action or mode fails at load time, not on a call.
    from toolbox.pipeline.authorization import RolePolicy
    from toolbox.pipeline.guardrails import guardrails_from_config

    governance: dict[str, Any] = {}
    try:
        if parsed.roles is not None:
            RolePolicy(parsed.roles)
            governance["roles"] = parsed.roles
        if parsed.guardrails is not None:
            guardrails_from_config(parsed.guardrails, source=source)
            governance["guardrails"] = parsed.guardrails
        if parsed.audit is not None:
            from toolbox.audit.config import check_config

            check_config(parsed.audit, source=source)
            governance["audit"] = parsed.audit
        if parsed.tools is not None:
            governance["tools"] = parsed.tools
    except ConfigurationError as exc:
        message = str(exc)
        raise PolicyFileError(message if message.startswith(source) else f"{source}: {message}") from None
    return governance


def _risk_enums(data: dict[str, object]) -> dict[str, object]:
    # Strict mode rejects plain strings for enums; convert the already-checked values.
    converted = dict(data)
    for section in ("allow", "deny"):
        rules = converted.get(section)
        if isinstance(rules, dict) and isinstance(rules.get("risks"), list):
            converted[section] = {**rules, "risks": [RiskClass(r) for r in rules["risks"]]}
    return converted


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
    return policy_from_mapping(data, source=str(path))


install_file_reader(load_policy_file)
