"""The lock file: each server's operations pinned by name, schema and description digests.

::

    {"version": 1, "servers": {"notes": {"operations": {"search": {
        "remote": "search", "description": "...", "input_schema": {...},
        "annotations": {...}, "description_sha256": "sha256:...",
        "input_schema_sha256": "sha256:...", "annotations_sha256": "sha256:..."}}}}}

The schema and description are stored beside their digests so that
definitions are offline (discovery never starts a server) and the operator
can review exactly what was pinned. The digests are what a live server is
compared with. ``toolbox mcp lock NAME`` rewrites one server's entry.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, final

import mcp_types

from toolbox.provider import MAX_WIRE_NAME, to_wire_name
from toolbox_mcp._schema import check_schema, digest, operation_name

__all__ = ["LockFileError", "Pin", "Refused", "pin_tools", "read_lock", "write_server"]

VERSION = 1
_MAX_LOCK_BYTES = 16 * 1024 * 1024


class LockFileError(ValueError):
    """The lock file cannot be read or written (the message names the file and the problem)."""


@final
@dataclass(frozen=True)
class Pin:
    """One pinned operation."""

    operation: str
    remote: str
    description: str
    input_schema: Mapping[str, Any]
    annotations: Mapping[str, Any]

    @property
    def digests(self) -> tuple[str, str, str]:
        """The schema, description and annotations digests, compared with a live listing."""
        return digest(self.input_schema), digest(self.description), digest(dict(self.annotations))

    def as_json(self) -> dict[str, Any]:
        schema, description, annotations = self.digests
        return {
            "remote": self.remote,
            "description": self.description,
            "input_schema": dict(self.input_schema),
            "annotations": dict(self.annotations),
            "input_schema_sha256": schema,
            "description_sha256": description,
            "annotations_sha256": annotations,
        }


@final
@dataclass(frozen=True)
class Refused:
    """A remote tool that cannot be pinned, and why."""

    remote: str
    reason: str


def _annotations(tool: mcp_types.Tool) -> dict[str, Any]:
    found = tool.annotations
    if found is None:
        return {}
    hints = {
        "readOnlyHint": found.read_only_hint,
        "destructiveHint": found.destructive_hint,
        "idempotentHint": found.idempotent_hint,
        "openWorldHint": found.open_world_hint,
    }
    return {key: value for key, value in hints.items() if isinstance(value, bool)}


def pin_tools(
    tools: Sequence[mcp_types.Tool], *, max_bytes: int, max_depth: int, tool: str
) -> tuple[dict[str, Pin], list[Refused]]:
    """Pins for a live listing of tool ``tool``'s server; tools that cannot be pinned are refused."""
    pins: dict[str, Pin] = {}
    refused: list[Refused] = []
    owners: dict[str, str] = {}
    for listed in tools:
        name = operation_name(listed.name)
        if name is None:
            refused.append(Refused(listed.name[:80], "the name cannot be a toolbox operation name"))
            continue
        if len(to_wire_name(f"{tool}.{name}")) > MAX_WIRE_NAME:
            too_long = f"{tool}.{name} is longer than {MAX_WIRE_NAME} characters as a wire name"
            refused.append(Refused(listed.name[:80], too_long))
            continue
        if name in owners:
            refused.append(
                Refused(listed.name[:80], f"its operation name {name!r} is also {owners[name]!r}'s")
            )
            pins.pop(name, None)
            continue
        owners[name] = listed.name
        problem = check_schema(listed.input_schema, max_bytes=max_bytes, max_depth=max_depth)
        if problem is not None:
            refused.append(Refused(listed.name[:80], problem))
            continue
        description = listed.description or ""
        pins[name] = Pin(name, listed.name, description, listed.input_schema, _annotations(listed))
    return pins, refused


def _pin(operation: str, raw: object, where: str) -> Pin:
    if not isinstance(raw, dict):
        raise LockFileError(f"{where}: not an object")
    try:
        pin = Pin(
            operation,
            str(raw["remote"]),
            str(raw["description"]),
            dict(raw["input_schema"]),
            dict(raw.get("annotations") or {}),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise LockFileError(f"{where}: missing or malformed {exc}") from None
    stored = (raw.get("input_schema_sha256"), raw.get("description_sha256"), raw.get("annotations_sha256"))
    if stored != pin.digests:
        raise LockFileError(f"{where}: the stored digests do not match the pinned content (edited by hand?)")
    return pin


def read_lock(path: Path) -> dict[str, dict[str, Pin]]:
    """Server name -> operation -> pin; an absent file pins nothing.

    Raises:
        LockFileError: unreadable, not JSON, another version, or digests that do not match.
    """
    try:
        with path.open("rb") as handle:
            data = handle.read(_MAX_LOCK_BYTES + 1)
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise LockFileError(f"cannot read lock file {str(path)!r}: {type(exc).__name__}") from None
    if len(data) > _MAX_LOCK_BYTES:
        raise LockFileError(f"lock file {str(path)!r} is larger than {_MAX_LOCK_BYTES} bytes")
    try:
        document = json.loads(data)
    except (ValueError, UnicodeDecodeError):
        raise LockFileError(f"lock file {str(path)!r} is not JSON") from None
    if not isinstance(document, dict) or document.get("version") != VERSION:
        raise LockFileError(
            f"lock file {str(path)!r}: unsupported version (this toolbox-mcp writes {VERSION})"
        )
    servers = document.get("servers", {})
    if not isinstance(servers, dict):
        raise LockFileError(f"lock file {str(path)!r}: servers is not an object")
    found: dict[str, dict[str, Pin]] = {}
    for server, entry in servers.items():
        operations = entry.get("operations") if isinstance(entry, dict) else None
        if not isinstance(operations, dict):
            raise LockFileError(f"lock file {str(path)!r}: servers.{server}.operations is not an object")
        found[str(server)] = {
            str(op): _pin(str(op), raw, f"lock file {str(path)!r}: servers.{server}.operations.{op}")
            for op, raw in operations.items()
        }
    return found


def write_server(path: Path, server: str, pins: Mapping[str, Pin]) -> None:
    """Replace ``server``'s entry in the lock file (atomically: a temporary file renamed over it).

    Raises:
        LockFileError: the file cannot be read or written.
    """
    try:
        current = json.loads(path.read_bytes()) if path.exists() else {"version": VERSION, "servers": {}}
    except (OSError, ValueError):
        raise LockFileError(f"cannot read lock file {str(path)!r} to update it") from None
    if not isinstance(current, dict) or current.get("version") != VERSION:
        raise LockFileError(f"lock file {str(path)!r}: unsupported version")
    servers = current.setdefault("servers", {})
    servers[server] = {"operations": {name: pins[name].as_json() for name in sorted(pins)}}
    text = json.dumps(current, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(prefix=".mcp-lock-", dir=path.parent)
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
        os.replace(temporary, path)
    except OSError as exc:
        raise LockFileError(f"cannot write lock file {str(path)!r}: {type(exc).__name__}") from None
