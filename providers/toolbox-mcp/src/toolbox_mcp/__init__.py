"""toolbox-mcp: the tools of remote MCP servers as governed toolbox tools.

Installing the package registers, through the ``toolbox.providers`` entry
point, one tool ``mcp.NAME`` per server configured under
``[tools.mcp.servers.NAME]`` whose operations are pinned in the lock file
(``toolbox mcp lock NAME``). A `toolbox.ToolPolicy` must still allow each one.
"""

from __future__ import annotations

from toolbox_mcp._config import CredentialConfig, McpConfig, OperationConfig, ServerConfig
from toolbox_mcp._connection import McpProtocolError, SessionLost
from toolbox_mcp._lockfile import LockFileError
from toolbox_mcp._result import McpResult, McpToolError
from toolbox_mcp._server import DRIFT, DriftError, effective_effect
from toolbox_mcp._tool import McpTool

__all__ = [
    "DRIFT",
    "CredentialConfig",
    "DriftError",
    "LockFileError",
    "McpConfig",
    "McpProtocolError",
    "McpResult",
    "McpTool",
    "McpToolError",
    "OperationConfig",
    "ServerConfig",
    "SessionLost",
    "effective_effect",
]
