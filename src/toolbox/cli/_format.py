"""What ``toolbox list`` and ``toolbox check`` say about operations and authorization.

Kept apart from `toolbox.cli._inspect`, which parses arguments and prints; these
functions only turn descriptors and policies into rows and documents.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from toolbox.foundations._descriptor import ToolDescriptor
from toolbox.registry._policy import ToolPolicy

__all__ = [
    "OPERATION_HEADERS",
    "authorization_document",
    "authorization_text",
    "operation_rows",
    "operations_of",
]

OPERATION_HEADERS = ("OPERATION", "EFFECT", "RISK", "APPROVAL", "SUMMARY")
_SUMMARY_WIDTH = 60


def operations_of(descriptor: ToolDescriptor) -> list[dict[str, Any]]:
    """The JSON form of a tool's operations: name (``tool.operation``), effect, approval, summary."""
    return [
        {
            "name": f"{descriptor.name}.{op.name}",
            "effect": op.effect.value,
            "requires_approval": op.requires_approval,
            "summary": op.summary,
        }
        for op in descriptor.operations
    ]


def operation_rows(descriptors: Iterable[ToolDescriptor]) -> list[list[str]]:
    """One row per operation of every tool: the by-name name, its effect and its tool's risk."""
    return [
        [
            f"{desc.name}.{op.name}",
            op.effect.value,
            desc.risk.value,
            "required" if op.requires_approval else "-",
            _shorten(op.summary) or "-",
        ]
        for desc in descriptors
        for op in desc.operations
    ]


def authorization_document(policy: ToolPolicy) -> dict[str, Any] | None:
    """The policy file's Cedar authorizer: its files and policy ids; None without one."""
    cedar = policy.governance.get("cedar")
    if cedar is None:
        return None
    return {
        "engine": "cedar",
        "policies": cedar.policies_source,
        "schema": cedar.schema_source,
        "policy_ids": list(cedar.policy_ids),
    }


def authorization_text(policy: ToolPolicy) -> str:
    """One line for people: which Cedar policies judge every call, or that the file sets none."""
    document = authorization_document(policy)
    if document is None:
        return "none from the policy file (authorizers given in code are not shown)"
    count = len(document["policy_ids"])
    return (
        f"Cedar, {count} {'policy' if count == 1 else 'policies'} from {document['policies']} "
        f"(validated against {document['schema']}): {', '.join(document['policy_ids'])}"
    )


def _shorten(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= _SUMMARY_WIDTH else line[: _SUMMARY_WIDTH - 3] + "..."
