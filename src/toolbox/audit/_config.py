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

Several sinks are written through a `FanOutSink`; reads come from the first. An
``[audit.checkpoints]`` table signs the store's Merkle log (`toolbox.audit._checkpointing`).
"""

from __future__ import annotations

import atexit
import json
import os
import re
import threading
from collections.abc import Mapping
from typing import Any

from toolbox.audit._redaction import PayloadMode, Redaction
from toolbox.audit._sink import AuditSink
from toolbox.audit._trail import AuditMode, AuditTrail
from toolbox.errors import ConfigurationError
from toolbox.foundations._table_reader import TableReader

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
    "checkpoints",
}
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_SINK_KEYS = {"memory": set(), "jsonl": {"path"}, "sqlite": {"path"}, "postgres": {"url_env", "schema"}}


def check_config(config: Mapping[str, Any], *, source: str) -> None:
    """Validate the shape of ``[audit]`` without opening anything.

    Raises:
        PolicyFileError: (a `ConfigurationError`) naming the key path.
    """
    _settings(config, source=source)


def _settings(config: Mapping[str, Any], *, source: str) -> dict[str, Any]:
    """The checked keyword arguments of `AuditTrail` (the sink tables aside)."""
    table = TableReader(config, source=source, path="audit")
    table.only(_TRAIL_KEYS)
    modes = AuditMode._value2member_map_
    settings: dict[str, Any] = {
        "mode": table.string("mode", "STRICT", choices=modes, what="mode"),
        "fallback_path": table.string("fallback", "toolbox-audit-fallback.jsonl"),
        "queue_size": table.integer("queue_size", 10_000, minimum=1),
        "auditor_roles": table.strings("auditor_roles", ["auditor"], what="role"),
    }
    keys = table.strings("redact_keys", what="argument name")
    max_summary = table.integer("max_summary", 512, minimum=16)
    payload = table.string("payload", "SUMMARY")
    if payload.upper() not in PayloadMode._value2member_map_:
        raise table.error("payload", f"unknown payload mode {payload!r}; use SUMMARY, HASH or NONE")
    settings["redaction"] = Redaction.of(keys, max_summary, payload)
    if (
        "checkpoints" in config
    ):  # signed checkpoints (toolbox.audit._checkpointing): checked here, used in _build
        from toolbox.audit._checkpointing import checkpoint_settings

        checkpoint_settings(config, source=source)
    sinks = table.tables("sinks")
    if not sinks:
        raise table.error("sinks", "give at least one [[audit.sinks]] table")
    for sink in sinks:
        kind = sink.string("type")
        if kind not in _SINK_KEYS:
            raise sink.error("type", f"type must be one of {', '.join(_SINK_KEYS)}, got {kind!r}")
        sink.only(_SINK_KEYS[kind] | {"type"})
        for key in sorted(_SINK_KEYS[kind]):
            if key == "schema":
                sink.optional_string(key)
            else:
                sink.string(key)
        if kind == "postgres" and not _ENV_NAME.match(sink.string("url_env")):
            # Never echoed: a URL put here by mistake holds the database password.
            raise sink.error(
                "url_env",
                "takes the NAME of an environment variable holding the PostgreSQL URL "
                "(e.g. TOOLBOX_AUDIT_DATABASE_URL), never the URL itself",
            )
    return settings


def sink_from_config(sink: Mapping[str, Any], *, source: str) -> AuditSink:
    """Open the sink one ``[[audit.sinks]]`` table describes."""
    kind = sink["type"]
    if kind == "memory":
        from toolbox.audit.sinks._memory import MemorySink

        return MemorySink()
    if kind == "jsonl":
        from toolbox.audit.sinks._jsonl import JsonlSink

        return JsonlSink(sink["path"])
    if kind == "sqlite":
        from toolbox.audit.sinks._sqlite import SqliteSink

        return SqliteSink(sink["path"])
    url = os.environ.get(sink["url_env"])
    if not url:
        raise ConfigurationError(f"{source}: audit: environment variable {sink['url_env']} is not set")
    from toolbox.audit.sinks._postgres import PostgresSink

    return PostgresSink(url, schema=sink.get("schema"))


_TRAILS: dict[str, AuditTrail] = {}
_TRAILS_LOCK = threading.Lock()


def trail_from_config(config: Mapping[str, Any], *, source: str) -> AuditTrail:
    """The `AuditTrail` ``[audit]`` describes: one per configuration in a process.

    Loading the same policy twice must not open a second writer on the same
    store (a JSON Lines file chained by two writers would fork its chains).
    """
    settings = _settings(config, source=source)
    key = json.dumps(config, sort_keys=True, default=str)
    with _TRAILS_LOCK:
        trail = _TRAILS.get(key)
        if trail is None or trail.closed:
            trail = _TRAILS[key] = _build(config, settings, source=source)
        return trail


def _build(config: Mapping[str, Any], settings: dict[str, Any], *, source: str) -> AuditTrail:
    from toolbox.audit._fanout import FanOutSink

    sinks = [sink_from_config(s, source=source) for s in config["sinks"]]
    trail = AuditTrail(sinks[0] if len(sinks) == 1 else FanOutSink(sinks), **settings)
    if "checkpoints" in config:
        _start_checkpoints(config, sinks, source=source)
    return trail


def _start_checkpoints(config: Mapping[str, Any], sinks: list[AuditSink], *, source: str) -> None:
    """A background `Checkpointer` on the first SQL sink, when ``[audit.checkpoints]`` asks for one."""
    from toolbox.audit._checkpointing import Checkpointer, checkpoint_settings
    from toolbox.audit.sinks._sql import SqlSink

    wanted = checkpoint_settings(config, source=source)
    stores = [s for s in sinks if isinstance(s, SqlSink)]
    if wanted is None or not (wanted.every_seconds or wanted.every_events):
        return
    if not stores:
        raise ConfigurationError(f"{source}: audit.checkpoints needs a sqlite or postgres sink")
    checkpointer = Checkpointer(stores[0], wanted)
    checkpointer.start()
    atexit.register(checkpointer.close)
