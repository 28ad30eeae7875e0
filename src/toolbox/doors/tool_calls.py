"""Run one raw model tool call (OpenAI ``tool_calls`` item, Anthropic ``tool_use`` block).

The application passes the call exactly as the API returned it (a dict, or the
OpenAI / Anthropic SDK's own object) plus the trusted context; the call runs
through `Gateway.invoke` and the answer is the message to send back: an OpenAI
``tool`` message or an Anthropic ``tool_result`` block.
Nothing raises for bad model output: a wrong call shape, malformed or oversized
JSON text, duplicate keys or a non-object become an audited INVALID_ARGUMENTS
result, and the tool's code never runs.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Coroutine, Mapping
from typing import Any

from toolbox.doors._definition_formats import strip_optional_nulls
from toolbox.doors._gateway import Gateway
from toolbox.foundations._context import ExecutionContext
from toolbox.pipeline._result import Status, ToolResult
from toolbox.pipeline._shown import shown
from toolbox.pipeline.checks._approval import Approval
from toolbox.pipeline.checks._arguments import ArgumentLimits, ArgumentValidation

__all__ = [
    "aanthropic_tool_result",
    "ainvoke_arguments",
    "anthropic_tool_result",
    "aopenai_tool_result",
    "invoke_arguments",
    "openai_tool_result",
    "result_text",
    "without_optional_nulls",
]

Context = ExecutionContext | str | None


class _Refused(Exception):
    """Model output that cannot become a call; ``code`` names why."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _refuse_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found = dict(pairs)
    if len(found) == len(pairs):
        return found  # no key repeated: the dict built in C is the object
    seen: set[str] = set()
    for key, _ in pairs:
        if key in seen:
            raise _Refused("duplicate_key", f"the arguments repeat the key {key[:100]!r}")
        seen.add(key)
    raise AssertionError("unreachable: a shorter dict has a repeated key")  # pragma: no cover


# One decoder and one encoder for every call: json.loads / json.dumps with options build a new one.
_DECODER = json.JSONDecoder(object_pairs_hook=_refuse_duplicates)
#: The decoder's scanner, called as `JSONDecoder.decode` does, without its two regex passes.
_SCAN: Callable[[str, int], tuple[object, int]] = _DECODER.scan_once  # type: ignore[attr-defined]
_JSON_SPACE = " \t\n\r"  # what JSON allows around a value (json's own WHITESPACE)


def _decode(text: str) -> object:
    """`JSONDecoder.decode` of ``text``: one JSON value with only JSON whitespace around it."""
    start = len(text) - len(text.lstrip(_JSON_SPACE))
    try:
        value, end = _SCAN(text, start)
    except StopIteration:
        raise ValueError("no JSON value") from None
    # A JSON value never ends in whitespace: the text ends there, but for trailing whitespace.
    if end != len(text.rstrip(_JSON_SPACE)):
        raise ValueError("extra data after the JSON value")
    return value


# Content that is not JSON is shown as every door shows it (toolbox.pipeline._shown).
_ENCODER = json.JSONEncoder(default=shown)
# The limits of a pipeline, found once: its interceptors never change after it is built.
_LIMITS: dict[int, tuple[tuple[object, ...], ArgumentLimits]] = {}


def _limits(gateway: Gateway) -> ArgumentLimits:
    interceptors = gateway.catalog.pipeline.interceptors
    cached = _LIMITS.get(id(interceptors))
    if cached is not None and cached[0] is interceptors:
        return cached[1]
    limits = next(
        (step.limits for step in interceptors if isinstance(step, ArgumentValidation)), ArgumentLimits()
    )
    if len(_LIMITS) >= 64:
        _LIMITS.clear()
    _LIMITS[id(interceptors)] = (interceptors, limits)
    return limits


def parse_arguments(text: object, limits: ArgumentLimits) -> dict[str, Any]:
    """JSON argument text as an object: size checked before parsing, duplicate keys refused.

    Depth and item counts are checked afterwards by the gateway's own argument guards.
    """
    if type(text) is not str:
        raise _Refused("bad_call", "function.arguments must be a string of JSON text")
    length = len(text)
    # UTF-8 takes at most 4 bytes a character: a text that short is not encoded to be measured.
    if length > limits.max_bytes or (
        length * 4 > limits.max_bytes and len(text.encode("utf-8", "surrogatepass")) > limits.max_bytes
    ):
        raise _Refused("too_large", f"arguments are larger than {limits.max_bytes} bytes")
    try:
        parsed = _decode(text)
    except _Refused:
        raise
    except RecursionError:
        raise _Refused("too_deep", f"arguments nest deeper than {limits.max_depth} levels") from None
    except ValueError:
        raise _Refused("malformed_json", "the arguments are not valid JSON") from None
    if type(parsed) is not dict:
        raise _Refused("not_an_object", "the arguments must be a JSON object")
    return parsed


def _plain(call: object) -> object:
    """A call as the SDKs return it (a pydantic model) or as a dict: a dict either way.

    The OpenAI SDK's ``ChatCompletionMessageFunctionToolCall`` and the Anthropic SDK's
    ``ToolUseBlock`` are pydantic models; their ``model_dump()`` is the dict of the API's
    JSON. Anything else passes unchanged and is refused as a bad call if it is not a dict.
    """
    if isinstance(call, dict):
        return call
    if isinstance(call, Mapping):
        return dict(call)
    dump = getattr(call, "model_dump", None)
    if callable(dump):
        try:
            dumped = dump()
        except Exception:  # noqa: BLE001 - an object that cannot dump itself is a bad call
            return call
        return dumped if isinstance(dumped, dict) else call
    return call


def _openai_call(gateway: Gateway, call: object) -> tuple[str, str, dict[str, Any]]:
    """(id, name, arguments) of an OpenAI ``tool_calls`` item."""
    if not isinstance(call, dict):
        raise _Refused("bad_call", "a tool call must be an object")
    call_id, function = call.get("id"), _plain(call.get("function"))
    if type(call_id) is not str or not call_id or call.get("type", "function") != "function":
        raise _Refused("bad_call", "a tool call needs a string id and type 'function'")
    if not isinstance(function, dict) or type(function.get("name")) is not str or not function["name"]:
        raise _Refused("bad_call", "a tool call needs function.name")
    return call_id, function["name"], _parsed(gateway, function["name"], function.get("arguments"))


def _parsed(gateway: Gateway, name: str, text: object) -> dict[str, Any]:
    """OpenAI-style argument text as the arguments to call ``name`` with (raises `_Refused`)."""
    return without_optional_nulls(gateway, name, parse_arguments(text, _limits(gateway)))


def without_optional_nulls(gateway: Gateway, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """``arguments`` for ``name`` without the ``null`` of optional parameters (strict mode's "absent")."""
    for value in arguments.values():
        if value is None or isinstance(value, (dict, list)):
            break
    else:
        return arguments  # nothing to strip, at any depth: the common flat call skips the schema walk
    try:
        _, tool, operation, _ = gateway.catalog.resolve_name(name)
        schema = gateway.catalog.schema(tool, operation).json_schema()
    except Exception:  # noqa: BLE001 - an unknown name is refused by the gateway itself
        return arguments
    return strip_optional_nulls(arguments, schema)


def _anthropic_call(block: object) -> tuple[str, str, object]:
    """(id, name, input) of an Anthropic ``tool_use`` block."""
    if not isinstance(block, dict) or block.get("type") != "tool_use":
        raise _Refused("bad_call", "a tool call must be a tool_use block")
    call_id, name = block.get("id"), block.get("name")
    if type(call_id) is not str or not call_id or type(name) is not str or not name:
        raise _Refused("bad_call", "a tool_use block needs a string id and name")
    return call_id, name, block.get("input")


def _call_id(call: object, *keys: str) -> str:
    """The id to answer under, even for a malformed call (empty when there is none)."""
    if isinstance(call, dict):
        value: object = call
        for key in keys:
            value = value.get(key) if isinstance(value, dict) else None
        if type(value) is str:
            return value[:200]
    return ""


def _name_of(call: object, *keys: str) -> str:
    return _call_id(call, *keys) or "unknown"


def result_text(result: ToolResult) -> str:
    """What the model reads: the content on success, else a refusal without internals."""
    if result.status is Status.SUCCESS:
        content = result.content
        if isinstance(content, str):
            return content
        if type(content) is int:
            return str(content)
        try:
            return _ENCODER.encode(content)
        except (ValueError, TypeError, RecursionError):  # a cycle, or a result type's hook that fails
            return str(content)
    refusal = {
        "status": result.status.value,
        "reason_code": result.reason_code,
        "error_code": result.error_code,
        "field_path": result.field_path,
        "message": result.message,
    }
    return json.dumps({key: value for key, value in refusal.items() if value not in (None, "")})


# A malformed call still goes through the chain, with a non-object for arguments, so it is
# governed and audited like any bad call (INVALID_ARGUMENTS, or DENIED for an unknown name) and
# never dispatched; the model reads why its call was malformed.


def _refused(gateway: Gateway, name: str, context: Context, refused: _Refused) -> ToolResult:
    return _malformed(gateway.invoke(name, None, context=context), refused)


async def _arefused(gateway: Gateway, name: str, context: Context, refused: _Refused) -> ToolResult:
    return _malformed(await gateway.ainvoke(name, None, context=context), refused)


def _malformed(recorded: ToolResult, refused: _Refused) -> ToolResult:
    return ToolResult(
        Status.INVALID_ARGUMENTS,
        name=recorded.name,
        reason_code="INVALID_ARGUMENTS",
        error_code=refused.code,
        field_path="",
        message=refused.message,
        trace_id=recorded.trace_id,
        audit_failed=recorded.audit_failed,
    )


def invoke_arguments(
    gateway: Gateway,
    name: str,
    text: object,
    *,
    context: Context,
    approval: Approval | None = None,
    call_id: str | None = None,
) -> ToolResult:
    """Run ``name`` with arguments given as JSON text, as OpenAI's ``function.arguments`` are.

    The text is parsed under the gateway's size guard with duplicate keys refused, and a
    ``null`` for an optional parameter means absent. Text that cannot be arguments is an
    audited INVALID_ARGUMENTS result; the tool's code never runs. Agent frameworks that
    hand a tool the model's raw argument text (the OpenAI Agents SDK) call this.
    ``call_id`` is the model's id of the call (see `Gateway.invoke`).
    """
    try:
        arguments = _parsed(gateway, name, text)
    except _Refused as refused:
        return _refused(gateway, name, context, refused)
    return gateway.invoke(name, arguments, context=context, approval=approval, call_id=call_id)


def ainvoke_arguments(
    gateway: Gateway,
    name: str,
    text: object,
    *,
    context: Context,
    approval: Approval | None = None,
    call_id: str | None = None,
) -> Coroutine[Any, Any, ToolResult]:
    """Async twin of `invoke_arguments`: await what it returns.

    A plain function handing back the gateway's own coroutine: awaiting one more
    coroutine layer would cost every call of the OpenAI Agents SDK's tools.
    """
    try:
        arguments = _parsed(gateway, name, text)
    except _Refused as refused:
        return _arefused(gateway, name, context, refused)
    return gateway.ainvoke(name, arguments, context=context, approval=approval, call_id=call_id)


def _openai_message(call_id: str, result: ToolResult) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": result_text(result)}


def _anthropic_block(call_id: str, result: ToolResult) -> dict[str, Any]:
    return {
        "type": "tool_result",
        "tool_use_id": call_id,
        "content": result_text(result),
        "is_error": result.status is not Status.SUCCESS,
    }


def openai_tool_result(
    gateway: Gateway, call: object, *, context: Context, approval: Approval | None = None
) -> dict[str, Any]:
    """Run one OpenAI ``tool_calls`` item; the ``{"role": "tool", ...}`` message to send back.

    ``call`` is the item as a dict or as the OpenAI SDK's own object
    (``ChatCompletionMessageFunctionToolCall``). A ``null`` for a parameter that is optional
    (nullable in the strict schema) means absent.
    """
    call = _plain(call)
    try:
        call_id, name, arguments = _openai_call(gateway, call)
    except _Refused as refused:
        name = _name_of(call, "function", "name")
        return _openai_message(_call_id(call, "id"), _refused(gateway, name, context, refused))
    result = gateway.invoke(name, arguments, context=context, approval=approval, call_id=call_id)
    return _openai_message(call_id, result)


async def aopenai_tool_result(
    gateway: Gateway, call: object, *, context: Context, approval: Approval | None = None
) -> dict[str, Any]:
    """Async twin of `openai_tool_result`."""
    call = _plain(call)
    try:
        call_id, name, arguments = _openai_call(gateway, call)
    except _Refused as refused:
        name = _name_of(call, "function", "name")
        return _openai_message(_call_id(call, "id"), await _arefused(gateway, name, context, refused))
    result = await gateway.ainvoke(name, arguments, context=context, approval=approval, call_id=call_id)
    return _openai_message(call_id, result)


def anthropic_tool_result(
    gateway: Gateway, block: object, *, context: Context, approval: Approval | None = None
) -> dict[str, Any]:
    """Run one Anthropic ``tool_use`` block; the ``tool_result`` block to send back.

    ``block`` is the block as a dict or as the Anthropic SDK's own ``ToolUseBlock``.
    """
    block = _plain(block)
    try:
        call_id, name, arguments = _anthropic_call(block)
    except _Refused as refused:
        refusal = _refused(gateway, _name_of(block, "name"), context, refused)
        return _anthropic_block(_call_id(block, "id"), refusal)
    result = gateway.invoke(name, arguments, context=context, approval=approval, call_id=call_id)
    return _anthropic_block(call_id, result)


async def aanthropic_tool_result(
    gateway: Gateway, block: object, *, context: Context, approval: Approval | None = None
) -> dict[str, Any]:
    """Async twin of `anthropic_tool_result`."""
    block = _plain(block)
    try:
        call_id, name, arguments = _anthropic_call(block)
    except _Refused as refused:
        refusal = await _arefused(gateway, _name_of(block, "name"), context, refused)
        return _anthropic_block(_call_id(block, "id"), refusal)
    result = await gateway.ainvoke(name, arguments, context=context, approval=approval, call_id=call_id)
    return _anthropic_block(call_id, result)
