"""Old import paths (before the one-package-per-layer layout) keep working for one release.

`toolbox/__init__` installs `LegacyPaths` on ``sys.meta_path``: importing an old
path (``toolbox.cli_audit``, ``toolbox.gateway``, ``toolbox.audit.trail``, ...) warns
with a `DeprecationWarning` naming the new path and gives the same module object
as the new path, so patches and ``isinstance`` checks agree. No shim files: the table
below is the whole mechanism (the CHANGELOG lists it). Removed in the next release.
"""

from __future__ import annotations

import importlib
import sys
import warnings
from collections.abc import Sequence
from importlib.abc import Loader, MetaPathFinder
from importlib.machinery import ModuleSpec
from types import ModuleType

__all__ = ["MOVED", "PUBLIC", "LegacyPaths", "install"]

#: Old dotted path -> new dotted path. (``toolbox.pipeline.checks`` is a package now: its
#: ``__getattr__`` serves the old module's names.)
MOVED: dict[str, str] = {
    "toolbox.audit.batch": "toolbox.audit._batch",
    "toolbox.audit.config": "toolbox.audit._config",
    "toolbox.audit.events": "toolbox.audit._events",
    "toolbox.audit.fallback": "toolbox.audit._fallback",
    "toolbox.audit.fanout": "toolbox.audit._fanout",
    "toolbox.audit.filtering": "toolbox.audit._filtering",
    "toolbox.audit.group": "toolbox.audit._group",
    "toolbox.audit.handoff": "toolbox.audit._handoff",
    "toolbox.audit.held": "toolbox.audit._held",
    "toolbox.audit.jsonl": "toolbox.audit.sinks._jsonl",
    "toolbox.audit.memory": "toolbox.audit.sinks._memory",
    "toolbox.audit.otel": "toolbox.audit.sinks._otel",
    "toolbox.audit.postgres": "toolbox.audit.sinks._postgres",
    "toolbox.audit.queued": "toolbox.audit._queued",
    "toolbox.audit.redaction": "toolbox.audit._redaction",
    "toolbox.audit.runs": "toolbox.audit._runs",
    "toolbox.audit.sink": "toolbox.audit._sink",
    "toolbox.audit.sql": "toolbox.audit.sinks._sql",
    "toolbox.audit.sql_schema": "toolbox.audit.sinks._sql_schema",
    "toolbox.audit.sqlite": "toolbox.audit.sinks._sqlite",
    "toolbox.audit.trail": "toolbox.audit._trail",
    "toolbox.audit.verify": "toolbox.audit._verify",
    "toolbox.auth_config": "toolbox.auth._config",
    "toolbox.auth_identity": "toolbox.auth._identity",
    "toolbox.auth_jwt": "toolbox.auth._jwt",
    "toolbox.auth_keys": "toolbox.auth._keys",
    "toolbox.binding": "toolbox.foundations._binding",
    "toolbox.budget": "toolbox.foundations._budget",
    "toolbox.calculator": "toolbox.registry._calculator",
    "toolbox.catalog": "toolbox.doors._catalog",
    "toolbox.cli_audit": "toolbox.cli._audit",
    "toolbox.cli_audit_replay": "toolbox.cli._audit_replay",
    "toolbox.cli_audit_store": "toolbox.cli._audit_store",
    "toolbox.cli_auth": "toolbox.cli._auth",
    "toolbox.cli_common": "toolbox.cli._common",
    "toolbox.cli_format": "toolbox.cli._format",
    "toolbox.cli_inspect": "toolbox.cli._inspect",
    "toolbox.cli_kill": "toolbox.cli._kill",
    "toolbox.cli_mcp": "toolbox.cli._mcp",
    "toolbox.cli_mcp_lock": "toolbox.cli._mcp_lock",
    "toolbox.cli_serve": "toolbox.cli._serve",
    "toolbox.context": "toolbox.foundations._context",
    "toolbox.definition_formats": "toolbox.doors._definition_formats",
    "toolbox.delegation": "toolbox.foundations._delegation",
    "toolbox.descriptor": "toolbox.foundations._descriptor",
    "toolbox.discovery": "toolbox.registry._discovery",
    "toolbox.dispatch": "toolbox.foundations._dispatch",
    "toolbox.function_tool": "toolbox.registry._function_tool",
    "toolbox.gateway": "toolbox.doors._gateway",
    "toolbox.intent": "toolbox.registry._intent",
    "toolbox.intent_text": "toolbox.foundations._intent_text",
    "toolbox.line_text": "toolbox.foundations._line_text",
    "toolbox.mcp.http": "toolbox.mcp._http",
    "toolbox.mcp.listing": "toolbox.mcp._listing",
    "toolbox.mcp.output": "toolbox.mcp._output",
    "toolbox.mcp.results": "toolbox.mcp._results",
    "toolbox.mcp.server": "toolbox.mcp._server",
    "toolbox.mcp.stdio": "toolbox.mcp._stdio",
    "toolbox.mcp.toolsets": "toolbox.doors._toolsets",
    "toolbox.mcp_config": "toolbox.governance._mcp_table",
    "toolbox.namespace": "toolbox.registry._namespace",
    "toolbox.operations": "toolbox.foundations._operations",
    "toolbox.pipeline.approval": "toolbox.pipeline.checks._approval",
    "toolbox.pipeline.approval_display": "toolbox.pipeline.checks._approval_display",
    "toolbox.pipeline.arguments": "toolbox.pipeline.checks._arguments",
    "toolbox.pipeline.attempts": "toolbox.pipeline._attempts",
    "toolbox.pipeline.audit_hooks": "toolbox.pipeline._audit_hooks",
    "toolbox.pipeline.authorization": "toolbox.pipeline.checks._authorization",
    "toolbox.pipeline.cedar": "toolbox.pipeline.checks._cedar",
    "toolbox.pipeline.cedar_source": "toolbox.pipeline.checks._cedar_source",
    "toolbox.pipeline.cedar_values": "toolbox.pipeline.checks._cedar_values",
    "toolbox.pipeline.chain": "toolbox.pipeline._chain",
    "toolbox.pipeline.fingerprint": "toolbox.pipeline.checks._fingerprint",
    "toolbox.pipeline.grants": "toolbox.pipeline._grants",
    "toolbox.pipeline.guardrails": "toolbox.pipeline.checks._guardrails",
    "toolbox.pipeline.interceptor": "toolbox.pipeline._interceptor",
    "toolbox.pipeline.invocation": "toolbox.pipeline._invocation",
    "toolbox.pipeline.offload": "toolbox.pipeline._offload",
    "toolbox.pipeline.outcomes": "toolbox.pipeline._outcomes",
    "toolbox.pipeline.paths": "toolbox.pipeline._paths",
    "toolbox.pipeline.ports": "toolbox.pipeline._ports",
    "toolbox.pipeline.result": "toolbox.pipeline._result",
    "toolbox.pipeline.result_summary": "toolbox.pipeline._result_summary",
    "toolbox.pipeline.retry": "toolbox.pipeline._retry",
    "toolbox.pipeline.shared_limits": "toolbox.pipeline.checks._shared_limits",
    "toolbox.pipeline.shown": "toolbox.pipeline._shown",
    "toolbox.pipeline.state_ports": "toolbox.pipeline._state_ports",
    "toolbox.pipeline.timed": "toolbox.pipeline._timed",
    "toolbox.pipeline.used_grants": "toolbox.pipeline.checks._used_grants",
    "toolbox.policy": "toolbox.registry._policy",
    "toolbox.policy_file": "toolbox.governance._policy_file",
    "toolbox.redact": "toolbox.foundations._redact",
    "toolbox.route": "toolbox.doors._route",
    "toolbox.route_method": "toolbox.doors._route_method",
    "toolbox.runtime": "toolbox.registry._runtime",
    "toolbox.selection": "toolbox.doors._selection",
    "toolbox.service.access": "toolbox.service._access",
    "toolbox.service.app": "toolbox.service._app",
    "toolbox.service.approvals": "toolbox.service._approvals",
    "toolbox.service.audit_log": "toolbox.service._audit_log",
    "toolbox.service.audit_reads": "toolbox.service._audit_reads",
    "toolbox.service.body": "toolbox.service._body",
    "toolbox.service.calls": "toolbox.service._calls",
    "toolbox.service.console": "toolbox.service._console",
    "toolbox.service.console_session": "toolbox.service._console_session",
    "toolbox.service.console_views": "toolbox.service._console_views",
    "toolbox.service.identity": "toolbox.service._identity",
    "toolbox.service.kill_switch": "toolbox.service._kill_switch",
    "toolbox.service.metrics": "toolbox.service._metrics",
    "toolbox.service.problems": "toolbox.service._problems",
    "toolbox.service.routes_approvals": "toolbox.service._routes_approvals",
    "toolbox.service.routes_audit": "toolbox.service._routes_audit",
    "toolbox.service.routes_health": "toolbox.service._routes_health",
    "toolbox.service.routes_kill": "toolbox.service._routes_kill",
    "toolbox.service.routes_tools": "toolbox.service._routes_tools",
    "toolbox.service.routes_turns": "toolbox.service._routes_turns",
    "toolbox.service.service": "toolbox.service._service",
    "toolbox.service.serving": "toolbox.service._serving",
    "toolbox.service.settings": "toolbox.service._settings",
    "toolbox.service.startup": "toolbox.service._startup",
    "toolbox.service.statuses": "toolbox.service._statuses",
    "toolbox.service.toolsets": "toolbox.service._toolset_gate",
    "toolbox.service.turns": "toolbox.service._turns",
    "toolbox.state.approval_rules": "toolbox.state._approval_rules",
    "toolbox.state.config": "toolbox.state._config",
    "toolbox.state.kill": "toolbox.state._kill",
    "toolbox.state.memory": "toolbox.state._memory",
    "toolbox.state.redis_async": "toolbox.state._redis_async",
    "toolbox.state.redis_backend": "toolbox.state._redis_backend",
    "toolbox.state.redis_codec": "toolbox.state._redis_codec",
    "toolbox.state.redis_scripts": "toolbox.state._redis_scripts",
    "toolbox.state.sql_backend": "toolbox.state._sql_backend",
    "toolbox.state.sql_limits": "toolbox.state._sql_limits",
    "toolbox.table_reader": "toolbox.foundations._table_reader",
    "toolbox.testing.clock": "toolbox.testing._clock",
    "toolbox.tool_calls": "toolbox.doors.tool_calls",
    "toolbox.tools": "toolbox.doors._tools",
    "toolbox.toolsets": "toolbox.doors._toolsets",
    "toolbox.wire_names": "toolbox.foundations._wire_names",
}


#: Old dotted path -> the public module(s) that export its public names (the better import).
PUBLIC: dict[str, str] = {
    "toolbox.audit.events": "toolbox.audit",
    "toolbox.audit.fallback": "toolbox.audit",
    "toolbox.audit.fanout": "toolbox.audit",
    "toolbox.audit.jsonl": "toolbox.audit",
    "toolbox.audit.memory": "toolbox.audit",
    "toolbox.audit.otel": "toolbox.audit",
    "toolbox.audit.postgres": "toolbox.audit",
    "toolbox.audit.redaction": "toolbox.audit",
    "toolbox.audit.sink": "toolbox.audit",
    "toolbox.audit.sqlite": "toolbox.audit",
    "toolbox.audit.trail": "toolbox.audit",
    "toolbox.audit.verify": "toolbox.audit",
    "toolbox.auth_identity": "toolbox.auth",
    "toolbox.auth_keys": "toolbox.auth",
    "toolbox.budget": "toolbox",
    "toolbox.calculator": "toolbox",
    "toolbox.catalog": "toolbox",
    "toolbox.context": "toolbox",
    "toolbox.descriptor": "toolbox or toolbox.provider",
    "toolbox.dispatch": "toolbox.provider",
    "toolbox.function_tool": "toolbox",
    "toolbox.gateway": "toolbox",
    "toolbox.intent": "toolbox",
    "toolbox.mcp.http": "toolbox.mcp",
    "toolbox.mcp.results": "toolbox.mcp",
    "toolbox.mcp.server": "toolbox.mcp",
    "toolbox.mcp.stdio": "toolbox.mcp",
    "toolbox.mcp.toolsets": "toolbox.mcp",
    "toolbox.operations": "toolbox.provider",
    "toolbox.pipeline.approval": "toolbox.governance",
    "toolbox.pipeline.arguments": "toolbox.governance or toolbox.provider",
    "toolbox.pipeline.authorization": "toolbox.governance",
    "toolbox.pipeline.cedar": "toolbox.governance",
    "toolbox.pipeline.guardrails": "toolbox.governance",
    "toolbox.pipeline.interceptor": "toolbox.governance",
    "toolbox.pipeline.outcomes": "toolbox.governance",
    "toolbox.pipeline.result": "toolbox",
    "toolbox.pipeline.retry": "toolbox.governance",
    "toolbox.policy": "toolbox",
    "toolbox.redact": "toolbox.provider",
    "toolbox.runtime": "toolbox",
    "toolbox.selection": "toolbox.doors",
    "toolbox.service.app": "toolbox.service",
    "toolbox.service.settings": "toolbox.service",
    "toolbox.service.startup": "toolbox.service",
    "toolbox.service.statuses": "toolbox.service",
    "toolbox.state.config": "toolbox.state",
    "toolbox.state.kill": "toolbox.state",
    "toolbox.state.memory": "toolbox.state",
    "toolbox.testing.clock": "toolbox.testing",
    "toolbox.tools": "toolbox",
    "toolbox.toolsets": "toolbox.mcp",
    "toolbox.wire_names": "toolbox.provider",
}


class LegacyPaths(MetaPathFinder, Loader):
    """Finds the old paths only; loading one imports the new module and warns."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if fullname not in MOVED:
            return None
        parent, _, child = fullname.rpartition(".")
        if not isinstance(getattr(sys.modules.get(parent), child, sys), ModuleType):
            # The package exports something else under that name (toolbox.mcp.server is a
            # function): importing the old module would overwrite it on the package.
            return None
        return ModuleSpec(fullname, self)

    def create_module(self, spec: ModuleSpec) -> ModuleType | None:
        return None  # a placeholder; exec_module puts the real module in its place

    def exec_module(self, module: ModuleType) -> None:
        old = module.__name__
        new = MOVED[old]
        # stacklevel 2 skips importlib's own frames: the warning names the importing line.
        public = PUBLIC.get(old)
        hint = f" (its public names: from {public} import ...)" if public else ""
        warnings.warn(
            f"{old} is deprecated and will be removed in the next release; import {new} instead{hint}",
            DeprecationWarning,
            stacklevel=2,
        )
        # The import system returns whatever sys.modules holds under the old name after this.
        sys.modules[old] = importlib.import_module(new)


def install() -> None:
    """Put the finder first on sys.meta_path, once."""
    if not any(isinstance(finder, LegacyPaths) for finder in sys.meta_path):
        sys.meta_path.insert(0, LegacyPaths())
