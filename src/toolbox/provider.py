"""What a provider package needs from toolbox, in one public module.

A provider (``providers/toolbox-http`` and the others are written exactly as a
third party would) imports from here and from `toolbox` / `toolbox.errors`, never
from a private module (an import-linter contract holds the built-in ones to it)::

    from toolbox.provider import RiskClass, ToolDescriptor, ToolProvider, ToolRuntime, hookimpl

- Registering: `ToolProvider` (the hook specifications), `hookimpl`, `OperationLock`.
- Describing: `ToolDescriptor`, `OperationDescriptor`, `RiskClass`, `Effect`,
  `Acknowledgement`, `describe_validation_error` (a pydantic error as one safe line).
- Running: `ToolRuntime` (the base class of a tool), `ReadIntent` / `WriteIntent`,
  `ExecutionContext`, `ToolPolicy`, `require_dispatch` (operation methods run only
  through the chain), `ArgumentLimits` / `check_limits` (the chain's size limits on
  arguments a provider parses itself).
- Showing safely: `redact_url`, `MASK`; naming for models: `to_wire_name`, `from_wire_name`, `MAX_WIRE_NAME`.
"""

from toolbox.foundations._context import ExecutionContext
from toolbox.foundations._descriptor import (
    Acknowledgement,
    Effect,
    OperationDescriptor,
    RiskClass,
    ToolDescriptor,
    describe_validation_error,
)
from toolbox.foundations._dispatch import require_dispatch
from toolbox.foundations._operations import OperationLock
from toolbox.foundations._redact import MASK, redact_url
from toolbox.foundations._wire_names import MAX_WIRE_NAME, from_wire_name, to_wire_name
from toolbox.pipeline.checks._arguments import ArgumentLimits, check_limits
from toolbox.registry._intent import ReadIntent, WriteIntent
from toolbox.registry._policy import ToolPolicy
from toolbox.registry._provider import ToolProvider, hookimpl
from toolbox.registry._runtime import ToolRuntime

__all__ = [
    "MASK",
    "MAX_WIRE_NAME",
    "Acknowledgement",
    "ArgumentLimits",
    "Effect",
    "ExecutionContext",
    "OperationDescriptor",
    "OperationLock",
    "ReadIntent",
    "RiskClass",
    "ToolDescriptor",
    "ToolPolicy",
    "ToolProvider",
    "ToolRuntime",
    "WriteIntent",
    "check_limits",
    "describe_validation_error",
    "from_wire_name",
    "hookimpl",
    "redact_url",
    "require_dispatch",
    "to_wire_name",
]
