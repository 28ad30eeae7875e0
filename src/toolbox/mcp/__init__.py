"""Serve the governed tools over MCP with the official ``mcp`` SDK (``pip install "toolbox-registry[mcp]"``).

- `server`: a `Gateway` as the SDK's low-level ``Server``, for stdio and in-memory
  connections; the operator's context is the trusted caller.
- `McpHttpApp` / `http_app`: the streamable-HTTP endpoint, every request authenticated
  by a `toolbox.auth` `Authenticator`.

See [MCP](../mcp.md).
"""

from __future__ import annotations

try:
    import mcp as _sdk  # noqa: F401 - the SDK this room is built on
except ImportError as _import_error:  # pragma: no cover - exercised without the extra only
    raise ImportError(
        'Please install the MCP SDK to serve tools over MCP: pip install "toolbox-registry[mcp]"'
    ) from _import_error

from toolbox.doors._toolsets import Toolsets
from toolbox.mcp._http import IdentityVerifier, McpHttpApp, http_app, transport_security
from toolbox.mcp._results import ERROR_META_KEY, TRACE_META_KEY, call_result
from toolbox.mcp._server import Caller, CallerSource, server
from toolbox.mcp._stdio import serve_stdio

__all__ = [
    "ERROR_META_KEY",
    "TRACE_META_KEY",
    "Caller",
    "CallerSource",
    "IdentityVerifier",
    "McpHttpApp",
    "Toolsets",
    "call_result",
    "http_app",
    "serve_stdio",
    "server",
    "transport_security",
]
