"""The ``toolbox.providers`` entry point of toolbox-sandbox.

The descriptor comes from the policy's ``[tools.sandbox]`` table: the
operations are ``IDEMPOTENT`` only when every profile there is declared
``read_only_world`` (else ``UNSAFE``), and need an approval when it says
``require_approval = true``. Reading the table is the hook's only work.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from toolbox import Effect, ToolPolicy, ToolProvider, hookimpl
from toolbox_sandbox._binding import SANDBOX_BIND
from toolbox_sandbox._descriptor import descriptor_for
from toolbox_sandbox._options import declared
from toolbox_sandbox._tool import SandboxTool

__all__ = ["toolbox_providers"]


@hookimpl
def toolbox_providers(policy: ToolPolicy) -> Sequence[ToolProvider[Any]]:
    """The sandbox tool. Registering it grants nothing: the policy must allow it."""
    tools = policy.governance.get("tools") or {}
    table = tools.get("sandbox") if isinstance(tools, dict) else None
    read_only, approval = declared(table) if isinstance(table, dict) else (False, False)
    effect = Effect.IDEMPOTENT if read_only else Effect.UNSAFE
    descriptor = descriptor_for(effect, requires_approval=approval)
    # The code and argv are bound as written, stdin and files by digest (approvals, audit payloads).
    return [ToolProvider(tool_type=SandboxTool, descriptor=descriptor, bind=SANDBOX_BIND)]
