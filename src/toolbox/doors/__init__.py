"""The front doors: the typed door (`Tools`), the by-name door (`Gateway`), and what they share.

Both doors resolve a tool in the `Catalog` and run every call through the governed
pipeline; routes are the compiled fast paths; `tool_calls` (public) adapts the raw
SDKs' tool-call objects. `Tools`, `Gateway` and `Catalog` are re-exported by `toolbox`;
choosing which tools a turn offers (selection) is exported here.
"""

from toolbox.doors._selection import (
    ActionDecision,
    ActionType,
    AsyncToolSelector,
    KeywordSelector,
    SelectionFailurePolicy,
    SelectionReason,
    StaticSelector,
    ToolChoice,
    ToolSelectionError,
    ToolSelector,
    aselect_tools,
    select_tools,
)

__all__ = [
    "ActionDecision",
    "ActionType",
    "AsyncToolSelector",
    "KeywordSelector",
    "SelectionFailurePolicy",
    "SelectionReason",
    "StaticSelector",
    "ToolChoice",
    "ToolSelectionError",
    "ToolSelector",
    "aselect_tools",
    "select_tools",
]
