"""The ``toolbox.providers`` entry point of toolbox-fs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from toolbox import ToolProvider, hookimpl
from toolbox_fs._descriptor import FS_DESCRIPTOR
from toolbox_fs._tool import FsTool, data_digest

__all__ = ["toolbox_providers"]


@hookimpl
def toolbox_providers() -> Sequence[ToolProvider[Any]]:
    """The fs tool. Registering it grants nothing: the policy must allow it."""
    # A write binds (approvals, audit payloads) its data by digest: file contents are never shown.
    bind = {"write": {"path": None, "data": data_digest}}
    return [ToolProvider(tool_type=FsTool, descriptor=FS_DESCRIPTOR, bind=bind)]
