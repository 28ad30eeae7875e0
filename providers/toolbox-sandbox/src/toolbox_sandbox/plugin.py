"""The ``toolbox.providers`` entry point of toolbox-sandbox.

The operations' effect comes from the policy's ``[tools.sandbox]`` table: they
are ``IDEMPOTENT`` only when every profile there is declared
``read_only_world``, else ``UNSAFE``. Reading the table is the hook's only work.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from toolbox import Effect, ToolPolicy, ToolProvider, hookimpl
from toolbox_sandbox._descriptor import descriptor_for
from toolbox_sandbox._options import all_read_only_world
from toolbox_sandbox._tool import SandboxTool

__all__ = ["toolbox_providers"]


@hookimpl
def toolbox_providers(policy: ToolPolicy) -> Sequence[ToolProvider[Any]]:
    """The sandbox tool. Registering it grants nothing: the policy must allow it."""
    tools = policy.governance.get("tools") or {}
    table = tools.get("sandbox") if isinstance(tools, dict) else None
    declared = isinstance(table, dict) and "profiles" in table and all_read_only_world(table)
    effect = Effect.IDEMPOTENT if declared else Effect.UNSAFE
    return [ToolProvider(tool_type=SandboxTool, descriptor=descriptor_for(effect))]
