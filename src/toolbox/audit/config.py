"""Building an `AuditTrail` from the ``[audit]`` table of a policy file.

::

    [audit]
    mode = "STRICT"                    # STRICT, ASYNC or BEST_EFFORT
    fallback = "toolbox-audit-fallback.jsonl"
    payload = "SUMMARY"                # SUMMARY, HASH or NONE
    max_summary = 512
    redact_keys = ["ssn", "iban"]
    auditor_roles = ["auditor"]
    queue_size = 10000                 # ASYNC only

    [[audit.sinks]]
    type = "sqlite"                    # memory, jsonl, sqlite or postgres
    path = "audit.db"

    [[audit.sinks]]
    type = "postgres"
    url_env = "TOOLBOX_AUDIT_DATABASE_URL"   # the URL is read from this variable, never from the file
    schema = "audit"

Several sinks are written through a `FanOutSink`; reads come from the first.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Mapping
from typing import Any

from toolbox.audit.redaction import Redaction
from toolbox.audit.sink import AuditSink
from toolbox.audit.trail import AuditMode, AuditTrail
from toolbox.errors import ConfigurationError

__all__ = ["check_config", "sink_from_config", "trail_from_config"]

_TRAIL_KEYS = {
    "mode",
    "fallback",
    "payload",
    "max_summary",
    "redact_keys",
    "auditor_roles",
    "queue_size",
    "sinks",
}
_SINK_KEYS = {"memory": set(), "jsonl": {"path"}, "sqlite": {"path"}, "postgres": {"url_env", "schema"}}


def check_config(config: Mapping[str, Any], *, source: str) -> None:
    """Validate the shape of ``[audit]`` without opening anything.

    Raises:
        ConfigurationError: naming the key.
    """
    if not isinstance(config, Mapping):
        raise ConfigurationError(f"{source}: [audit] must be a table")
    unknown = set(config) - _TRAIL_KEYS
    if unknown:
        raise ConfigurationError(f"{source}: audit: unknown key(s) {', '.join(sorted(unknown))}")
    if config.get("mode", "STRICT") not in AuditMode._value2member_map_:
        raise ConfigurationError(
            f"{source}: audit.mode: unknown mode {config.get('mode')!r}; use STRICT, ASYNC or BEST_EFFORT"
        )
    Redaction.of(
        config.get("redact_keys", ()), config.get("max_summary", 512), config.get("payload", "SUMMARY")
    )
    roles = config.get("auditor_roles", ["auditor"])
    if not isinstance(roles, list) or not all(isinstance(r, str) and r for r in roles):
        raise ConfigurationError(
            f'{source}: audit.auditor_roles must be a list of role names, e.g. ["auditor"]'
        )
    sinks = config.get("sinks", [])
    if not isinstance(sinks, list) or not sinks:
        raise ConfigurationError(f"{source}: audit.sinks: give at least one [[audit.sinks]] table")
    for index, sink in enumerate(sinks):
        where = f"{source}: audit.sinks[{index}]"
        if not isinstance(sink, Mapping) or sink.get("type") not in _SINK_KEYS:
            raise ConfigurationError(f"{where}: type must be one of {', '.join(_SINK_KEYS)}")
        extra = set(sink) - _SINK_KEYS[sink["type"]] - {"type"}
        if extra:
            raise ConfigurationError(f"{where}: unknown key(s) {', '.join(sorted(extra))}")
        missing = _SINK_KEYS[sink["type"]] - {"schema"} - set(sink)
        if missing:
            raise ConfigurationError(f"{where}: missing {', '.join(sorted(missing))}")


def sink_from_config(sink: Mapping[str, Any], *, source: str) -> AuditSink:
    """Open the sink one ``[[audit.sinks]]`` table describes."""
    kind = sink["type"]
    if kind == "memory":
        from toolbox.audit.memory import MemorySink

        return MemorySink()
    if kind == "jsonl":
        from toolbox.audit.jsonl import JsonlSink

        return JsonlSink(sink["path"])
    if kind == "sqlite":
        from toolbox.audit.sqlite import SqliteSink

        return SqliteSink(sink["path"])
    url = os.environ.get(sink["url_env"])
    if not url:
        raise ConfigurationError(f"{source}: audit: environment variable {sink['url_env']} is not set")
    from toolbox.audit.postgres import PostgresSink

    return PostgresSink(url, schema=sink.get("schema"))


_TRAILS: dict[str, AuditTrail] = {}
_TRAILS_LOCK = threading.Lock()


def trail_from_config(config: Mapping[str, Any], *, source: str) -> AuditTrail:
    """The `AuditTrail` ``[audit]`` describes: one per configuration in a process.

    Loading the same policy twice must not open a second writer on the same
    store (a JSON Lines file chained by two writers would fork its chains).
    """
    check_config(config, source=source)
    key = json.dumps(config, sort_keys=True, default=str)
    with _TRAILS_LOCK:
        trail = _TRAILS.get(key)
        if trail is None or trail.closed:
            trail = _TRAILS[key] = _build(config, source=source)
        return trail


def _build(config: Mapping[str, Any], *, source: str) -> AuditTrail:
    from toolbox.audit.fanout import FanOutSink

    sinks = [sink_from_config(s, source=source) for s in config["sinks"]]
    return AuditTrail(
        sinks[0] if len(sinks) == 1 else FanOutSink(sinks),
        mode=config.get("mode", "STRICT"),
        fallback_path=config.get("fallback", "toolbox-audit-fallback.jsonl"),
        redaction=Redaction.of(
            config.get("redact_keys", ()), config.get("max_summary", 512), config.get("payload", "SUMMARY")
        ),
        queue_size=config.get("queue_size", 10_000),
        auditor_roles=config.get("auditor_roles", ("auditor",)),
    )
