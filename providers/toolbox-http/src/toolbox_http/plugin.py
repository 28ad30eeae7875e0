"""The ``toolbox.providers`` entry point of toolbox-http."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from toolbox import ToolProvider, hookimpl
from toolbox_http._descriptor import HTTP_DESCRIPTOR
from toolbox_http._tool import HttpTool

__all__ = ["toolbox_providers"]


@hookimpl
def toolbox_providers() -> Sequence[ToolProvider[Any]]:
    """The ``http`` tool."""
    return [ToolProvider(tool_type=HttpTool, descriptor=HTTP_DESCRIPTOR)]
