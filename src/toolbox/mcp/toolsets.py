"""`Toolsets`, as the MCP server uses it: defined in `toolbox.toolsets`, shared with the REST service."""

from __future__ import annotations

from toolbox.toolsets import Toolsets

__all__ = ["Toolsets"]
