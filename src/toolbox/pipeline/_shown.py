"""What every door shows of a tool's content: JSON values, never an object's hidden attributes.

A tool may return anything. The doors that hand a result on as JSON (the REST
service, MCP's text and structured content, the raw tool-call messages and the
agent frameworks' tool output) all turn it into JSON values here, so every
result reaches every door the same way:

- JSON values (``str``, numbers, booleans, None, lists and dicts of them) pass;
- a pydantic model gives its fields (``model_dump(mode="json")``);
- an object with a ``__toolbox_json__()`` method gives what that returns (a result
  type's own JSON form: `toolbox_mcp.McpResult` gives the remote structured content,
  else its text);
- anything else becomes its text (``str``), never its attributes: a result object's
  ``repr`` is what its author made safe to show (``HttpResponse`` leaves out
  headers, cookies and body).

NaN and the infinities are not JSON: they become the strings ``"NaN"``,
``"Infinity"`` and ``"-Infinity"``.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel
from pydantic_core import to_jsonable_python

__all__ = ["JSON_HOOK", "json_content", "shown"]

#: The method a result type defines to give its own JSON form.
JSON_HOOK = "__toolbox_json__"


def shown(value: Any) -> Any:
    """The JSON-ready stand-in of a value `json` cannot encode (the ``default`` of an encoder)."""
    if isinstance(value, BaseModel):
        return to_jsonable_python(value)
    hook = getattr(type(value), JSON_HOOK, None)
    if hook is not None:
        return hook(value)
    return str(value)


#: Contents that are strict JSON values as they are (ints within 64 bits: see `json_content`).
_PLAIN = frozenset({str, bool, type(None)})
_INT_BOUND = 2**63


def json_content(content: Any) -> Any:
    """``content`` as strict JSON values (see the module): what a door may serialise as it is."""
    kind = type(content)
    if kind in _PLAIN or (kind is int and -_INT_BOUND < content < _INT_BOUND):
        return content  # what the round trip below gives back, without it (most tools' results)
    try:
        return json.loads(json.dumps(content, default=shown), parse_constant=str)
    except (ValueError, TypeError, RecursionError):  # a cycle, or a hook that fails
        return str(content)
