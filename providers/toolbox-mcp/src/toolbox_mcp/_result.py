"""`McpResult`: what a remote tool returned, as text and structured content, size-capped."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, final

import mcp_types

from toolbox.errors import ResponseTooLargeError, ToolExecutionError

__all__ = ["McpResult", "McpToolError", "convert"]

_MAX_ERROR_TEXT = 500


class McpToolError(ToolExecutionError):
    """The server ran the tool and reported an error (``isError``); its text is in the message."""


@final
@dataclass(frozen=True)
class McpResult:
    """A remote tool's successful result.

    Attributes:
        text: the text content blocks joined by newlines; other blocks (images, audio,
            resources) are named, never passed on as bytes.
        structured: the structured content, if the server gave any (any JSON value).
    """

    text: str
    structured: Any = None

    def __str__(self) -> str:
        return self.text

    def __toolbox_json__(self) -> Any:
        """What every door shows as JSON (`toolbox.pipeline._shown`): the structured content, else the text.

        MCP asks a server that returns structured content to send the same value as JSON text,
        so the structured content is the whole result when there is one.
        """
        return self.structured if self.structured is not None else self.text


def _block_text(block: object) -> str:
    if isinstance(block, mcp_types.TextContent):
        return block.text
    if isinstance(block, mcp_types.EmbeddedResource):
        resource = block.resource
        if isinstance(resource, mcp_types.TextResourceContents):
            return resource.text
        return f"[resource {str(resource.uri)[:200]}]"
    if isinstance(block, mcp_types.ResourceLink):
        return f"[resource link {str(block.uri)[:200]}]"
    kind = getattr(block, "type", type(block).__name__)
    mime = getattr(block, "mime_type", "") or ""
    return f"[{kind} {mime}]".replace(" ]", "]")


def convert(result: mcp_types.CallToolResult, *, max_bytes: int, label: str) -> McpResult:
    """The `McpResult` of ``result``.

    Raises:
        McpToolError: the server reported ``isError`` (the call ran).
        ResponseTooLargeError: text and structured content together exceed ``max_bytes``.
    """
    size = 0
    parts: list[str] = []
    for block in result.content:
        text = _block_text(block)
        size += len(text.encode("utf-8", "replace"))
        if size > max_bytes:
            raise ResponseTooLargeError(
                f"{label} returned more than max_result_bytes ({max_bytes})", request_sent=True
            )
        parts.append(text)
    text = "\n".join(parts)
    structured = result.structured_content
    if structured is not None:
        try:
            size += len(json.dumps(structured, ensure_ascii=False, allow_nan=False).encode("utf-8"))
        except (TypeError, ValueError):
            raise McpToolError(
                f"{label} returned structured content that is not JSON", request_sent=True
            ) from None
        if size > max_bytes:
            raise ResponseTooLargeError(
                f"{label} returned more than max_result_bytes ({max_bytes})", request_sent=True
            )
    if result.is_error:
        shown = text if len(text) <= _MAX_ERROR_TEXT else text[: _MAX_ERROR_TEXT - 3] + "..."
        raise McpToolError(f"{label} reported an error: {shown}", request_sent=True)
    return McpResult(text, structured)
