"""Reading what the sandbox's init wrote to the export descriptor: untrusted, so parsed with caps.

The stream starts with ``S`` (written by the init before anything else: the
sandbox was built and started), then a sequence of records: ``F`` (a file: a 2-byte name length, the
name, an 8-byte size, the content), ``M`` (the code ended with a MemoryError),
``T`` (the export caps were reached) and ``E`` (the end). Anything else, or a
file that breaks the caps or names a path outside the scratch directory, makes
the whole stream invalid: no files are returned from it.
"""

from __future__ import annotations

import hashlib
import posixpath
import struct
from dataclasses import dataclass, field
from typing import final

from toolbox_sandbox._result import ExportedFile

__all__ = ["MAX_NAME_BYTES", "Exports", "parse_exports"]

#: The longest exported path, in UTF-8 bytes (the init skips longer ones).
MAX_NAME_BYTES = 1024


@final
@dataclass
class Exports:
    """The parsed stream."""

    files: list[ExportedFile] = field(default_factory=list)
    started: bool = False
    memory_error: bool = False
    truncated: bool = False
    complete: bool = False
    valid: bool = True


def _safe_name(raw: bytes) -> str | None:
    try:
        name = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
    normal = posixpath.normpath(name)
    if not name or normal != name or name.startswith(("/", "../")) or name == ".." or "\x00" in name:
        return None
    return name


def parse_exports(data: bytes, *, max_files: int, max_bytes: int) -> Exports:
    """Parse ``data``; an invalid stream yields no files and ``valid=False``."""
    out = Exports()
    out.started = data[:1] == b"S"
    at, total = (1, 0) if out.started else (0, 0)
    while at < len(data):
        kind = data[at : at + 1]
        at += 1
        if kind == b"E":
            out.complete = at == len(data)
            out.valid = out.complete
            break
        if kind == b"M":
            out.memory_error = True
            continue
        if kind == b"T":
            out.truncated = True
            continue
        if kind != b"F" or at + 2 > len(data):
            out.valid = False
            break
        (length,) = struct.unpack_from(">H", data, at)
        at += 2
        if length > MAX_NAME_BYTES:
            out.valid = False
            break
        name = _safe_name(data[at : at + length])
        at += length
        if name is None or at + 8 > len(data):
            out.valid = False
            break
        (size,) = struct.unpack_from(">Q", data, at)
        at += 8
        total += size
        if len(out.files) >= max_files or total > max_bytes or at + size > len(data):
            out.valid = False
            break
        content = data[at : at + size]
        at += size
        digest = hashlib.sha256(content).hexdigest()
        out.files.append(ExportedFile(path=name, size=size, sha256=digest, content=content))
    if not out.valid:
        out.files = []
    return out
