"""`CedarAuthorizer`: authorization decided by Cedar policies (cedarpy, the ``cedar`` extra).

The policies are validated against a Cedar schema when they are loaded, so a
misspelt attribute, action or type is a load error, not a silent non-match.
Every call becomes one Cedar request:

- principal ``Toolbox::Principal::"<principal>"`` with attribute ``tenant``,
  member of one ``Toolbox::Role::"<role>"`` per role of the context;
- action ``Toolbox::Action::"<tool>.<operation>"``;
- resource ``Toolbox::Operation::"<tool>.<operation>"`` with attributes
  ``effect`` and ``tool``, member of ``Toolbox::Tool::"<tool>"`` (attribute
  ``risk``);
- context ``{arguments: <the validated arguments>, intent: <the declared intent>}``.

Cedar denies unless a policy permits, and a ``forbid`` beats every
``permit``. This authorizer also denies when Cedar could not evaluate a
policy (an erroring ``forbid`` would otherwise be skipped) and when an
argument has no Cedar value. The determining policies (their ``@id``, else
Cedar's ``policy<N>``) go into the decision and the audit event.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, final

from pydantic import BaseModel

from toolbox.errors import PolicyFileError
from toolbox.pipeline.checks._authorization import Decision
from toolbox.pipeline.checks._cedar_source import Statement, check_nesting, line_of, order, statements
from toolbox.pipeline.checks._cedar_values import CedarValueError, cedar_record

if TYPE_CHECKING:
    import cedarpy

    from toolbox.pipeline._invocation import Invocation

__all__ = ["CEDAR_NAMESPACE", "CedarAuthorizer"]

#: The namespace of the entity types and actions toolbox builds its requests from.
CEDAR_NAMESPACE = "Toolbox"
INSTALL_HINT = "CedarAuthorizer needs cedarpy: pip install 'toolbox-registry[cedar]'"

_PRINCIPAL = f"{CEDAR_NAMESPACE}::Principal"
_ROLE = f"{CEDAR_NAMESPACE}::Role"
_TOOL = f"{CEDAR_NAMESPACE}::Tool"
_OPERATION = f"{CEDAR_NAMESPACE}::Operation"
_ACTION = f"{CEDAR_NAMESPACE}::Action"

SchemaFormat = Literal["cedar", "json"]
_FAILING_POLICY = re.compile(r"evaluating policy `([A-Za-z0-9_]+)`")


def _cedarpy() -> Any:
    try:
        import cedarpy
    except ImportError as exc:
        raise ImportError(INSTALL_HINT) from exc
    return cedarpy


@final
class CedarAuthorizer:
    """Authorizes every attempt with Cedar policies validated against a Cedar schema.

    Args:
        policies: Cedar policy text. Give each policy an ``@id("...")``: that is
            the id the decision and the audit event name.
        schema: the Cedar schema, in Cedar syntax or as Cedar JSON.
        schema_format: ``"cedar"`` or ``"json"``; by default JSON when the text starts with ``{``.
        policies_source: where the policy text came from, for error messages.
        schema_source: where the schema text came from, for error messages.

    Raises:
        PolicyFileError: a policy does not parse, breaks the schema, repeats an
            ``@id``, or the schema does not parse or lacks the entity types
            toolbox sends (the message names the source and, for policies, the line).
        ImportError: cedarpy is not installed (with the install hint).
    """

    rule = "cedar"
    __slots__ = ("_cedarpy", "_ids", "_policies", "_schema", "_sources")

    def __init__(
        self,
        policies: str,
        schema: str,
        *,
        schema_format: SchemaFormat | None = None,
        policies_source: str = "<policies>",
        schema_source: str = "<schema>",
    ) -> None:
        cedar = _cedarpy()
        self._cedarpy = cedar
        self._sources = (policies_source, schema_source)
        self._schema = _parse_schema(cedar, schema, schema_format, schema_source)
        check_nesting(policies, policies_source)
        found = statements(policies)
        _check_syntax(cedar, found, policies_source)
        self._ids = _policy_ids(cedar, policies, found, policies_source)
        result = cedar.validate_policies(policies, self._schema)
        if not result.validation_passed:
            raise PolicyFileError(_validation_message(result.errors, found, self._ids, policies_source))
        self._policies = cedar.PolicySet.from_str(policies)

    @classmethod
    def from_files(cls, policies: str | os.PathLike[str], schema: str | os.PathLike[str]) -> CedarAuthorizer:
        """Load the policies from a ``.cedar`` file, the schema from a ``.cedarschema`` or ``.json`` file."""
        schema_path = Path(schema)
        return cls(
            _read(Path(policies), "Cedar policies"),
            _read(schema_path, "Cedar schema"),
            schema_format="json" if schema_path.suffix.lower() == ".json" else "cedar",
            policies_source=str(policies),
            schema_source=str(schema),
        )

    @property
    def policies_source(self) -> str:
        """Where the policies came from (a path, or ``<policies>``)."""
        return self._sources[0]

    @property
    def schema_source(self) -> str:
        """Where the schema came from (a path, or ``<schema>``)."""
        return self._sources[1]

    @property
    def policy_ids(self) -> tuple[str, ...]:
        """The ids of the loaded policies, in file order (``@id`` when given)."""
        return tuple(self._ids.values())

    def authorize(self, invocation: Invocation, /) -> Decision:
        """Decide one attempt of ``invocation`` (the `InvocationAuthorizer` protocol)."""
        name = f"{invocation.tool}.{invocation.operation}"
        try:
            arguments = cedar_record(_plain(invocation.arguments))
        except CedarValueError as exc:
            return Decision.deny(f"{name}: {exc}; Cedar cannot judge the call, so it is denied")
        descriptor = invocation.descriptor
        risk = descriptor.risk.value if descriptor is not None else "UNKNOWN"
        request = {
            "principal": {"type": _PRINCIPAL, "id": invocation.context.principal},
            "action": {"type": _ACTION, "id": name},
            "resource": {"type": _OPERATION, "id": name},
            "context": {"arguments": arguments, "intent": invocation.intent_text},
        }
        entities = _entities(invocation.context.principal, invocation, risk)
        answer = self._cedarpy.is_authorized(request, self._policies, entities, schema=self._schema)
        return self._decision(name, answer)

    def _decision(self, name: str, answer: Any) -> Decision:
        diagnostics = answer.diagnostics
        policies = tuple(sorted(self._shown(p) for p in diagnostics.reasons))
        errors: list[str] = list(diagnostics.errors)
        if errors:
            # Cedar skips a policy that fails to evaluate; a skipped forbid must not let the call through.
            # The error texts can quote argument values, so only the failing policies' ids are kept.
            failing = sorted({self._shown(p) for error in errors for p in _FAILING_POLICY.findall(error)})
            return Decision.deny(_error_reason(name, errors), policies=failing)
        if answer.allowed:
            return Decision.allow(policies=policies)
        if policies:
            return Decision.deny(
                f"{name} is forbidden by Cedar policy {', '.join(policies)}", policies=policies
            )
        return Decision.deny(f"no Cedar policy permits {name} for this principal")

    def _shown(self, policy_id: str) -> str:
        return self._ids.get(policy_id, policy_id)

    def __repr__(self) -> str:
        return f"CedarAuthorizer({len(self._ids)} policies)"


def _error_reason(name: str, errors: list[str]) -> str:
    text = " ".join(errors)
    if "does not exist in the supplied schema" in text:
        return f"{name} is not declared as an action in the Cedar schema"
    if "failed to build request" in text:
        return f"the arguments or principal of {name} do not match the Cedar schema"
    return f"a Cedar policy failed to evaluate for {name}; denied (fail closed)"


def _plain(arguments: Mapping[str, Any]) -> Mapping[str, Any]:
    """Pydantic models and enums as the plain values Cedar records are made of."""
    return {key: _plain_value(value) for key, value in arguments.items()}


def _plain_value(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="python")
    if isinstance(value, Enum):
        return value.value
    return value


def _entities(principal: str, invocation: Invocation, risk: str) -> list[dict[str, Any]]:
    """The principal with its roles and tenant, the tool with its risk, the operation with its effect."""
    tool = {"type": _TOOL, "id": invocation.tool}
    name = f"{invocation.tool}.{invocation.operation}"
    roles = sorted(invocation.context.roles)
    return [
        {
            "uid": {"type": _PRINCIPAL, "id": principal},
            "attrs": {"tenant": invocation.context.tenant},
            "parents": [{"type": _ROLE, "id": role} for role in roles],
        },
        *({"uid": {"type": _ROLE, "id": role}, "attrs": {}, "parents": []} for role in roles),
        {"uid": tool, "attrs": {"risk": risk}, "parents": []},
        {
            "uid": {"type": _OPERATION, "id": name},
            "attrs": {"effect": invocation.effect.value, "tool": {"__entity": tool}},
            "parents": [tool],
        },
    ]


# -- loading ----------------------------------------------------------------------


def _read(path: Path, what: str) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise PolicyFileError(f"{what} file {str(path)!r} does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise PolicyFileError(f"cannot read {what} file {str(path)!r}: {type(exc).__name__}") from None


def _parse_schema(cedar: Any, text: str, schema_format: SchemaFormat | None, source: str) -> cedarpy.Schema:
    as_json = text.lstrip().startswith("{") if schema_format is None else schema_format == "json"
    check_nesting(text, source)
    try:
        schema: cedarpy.Schema = cedar.Schema.from_json_str(text) if as_json else cedar.Schema.from_str(text)
    except ValueError as exc:
        raise PolicyFileError(f"{source}: not a valid Cedar schema: {exc}") from None
    # The schema must accept the entities every request carries, or every call would be denied.
    sample = [
        {"uid": {"type": _ROLE, "id": "r"}, "attrs": {}, "parents": []},
        {
            "uid": {"type": _PRINCIPAL, "id": "p"},
            "attrs": {"tenant": "t"},
            "parents": [{"type": _ROLE, "id": "r"}],
        },
        {"uid": {"type": _TOOL, "id": "t"}, "attrs": {"risk": "MEMORY_ONLY"}, "parents": []},
        {
            "uid": {"type": _OPERATION, "id": "t.o"},
            "attrs": {"effect": "READ_ONLY", "tool": {"__entity": {"type": _TOOL, "id": "t"}}},
            "parents": [{"type": _TOOL, "id": "t"}],
        },
    ]
    try:
        cedar.Entities.from_json_str(json.dumps(sample), schema)
    except ValueError as exc:
        raise PolicyFileError(
            f"{source}: the schema must declare the entity types toolbox sends "
            f"(see docs/rules.md#cedar-policies): {exc}"
        ) from None
    return schema


def _check_syntax(cedar: Any, found: list[Statement], source: str) -> None:
    for number, (line, column, statement) in enumerate(found, start=1):
        try:
            cedar.PolicySet.from_str(statement)
        except ValueError as exc:
            raise PolicyFileError(
                f"{source}:{line}:{column}: policy {number} does not parse: {exc}"
            ) from None


def _policy_ids(cedar: Any, text: str, found: list[Statement], source: str) -> dict[str, str]:
    """Cedar's positional ids (``policy<N>``) mapped to the ids shown: ``@id`` when given."""
    try:
        parsed = json.loads(cedar.policies_to_json_str(text))
    except ValueError as exc:  # already parsed one by one; kept for a clear message all the same
        raise PolicyFileError(f"{source}: the policies do not parse: {exc}") from None
    shown: dict[str, str] = {}
    seen: dict[str, str] = {}
    for group in ("staticPolicies", "templates"):
        for policy_id, policy in (parsed.get(group) or {}).items():
            annotation = (policy.get("annotations") or {}).get("id")
            label = annotation if isinstance(annotation, str) and annotation else policy_id
            if label in seen:
                line = line_of(policy_id, found)
                raise PolicyFileError(f"{source}:{line}: policy id {label!r} is used twice")
            seen[label] = policy_id
            shown[policy_id] = label
    return dict(sorted(shown.items(), key=lambda item: order(item[0])))


def _validation_message(
    errors: list[Any], found: list[Statement], ids: Mapping[str, str], source: str
) -> str:
    lines = []
    for error in errors[:5]:
        policy_id = error.policy_id
        if policy_id:
            shown = ids.get(policy_id, policy_id)
            where = f"{source}:{line_of(policy_id, found)}: policy {shown}"
        else:
            where = source
        lines.append(f"{where} breaks the schema: {error.error}")
    more = f" (and {len(errors) - 5} more)" if len(errors) > 5 else ""
    return "; ".join(lines) + more
