"""Checks of a call's inputs, at operation-call time: each refusal names the argument, never its value."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from toolbox_sandbox._options import SandboxOptions

__all__ = ["as_bytes", "check_argv", "check_files", "check_source", "check_stdin"]

# A file name component: letters, digits, '.', '_', '-'; never '.' or '..'. At most 8 deep.
_COMPONENT = re.compile(r"^(?!\.\.?$)[A-Za-z0-9._-]{1,64}$")
_MAX_DEPTH = 8
_MAX_ARGS = 256
_MAX_ARG_CHARS = 4096


def as_bytes(value: object, what: str) -> bytes:
    """``value`` as bytes: a ``str`` as UTF-8, bytes-like as is; anything else is refused, naming ``what``."""
    if isinstance(value, str):
        return value.encode("utf-8", "surrogatepass")
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    raise ValueError(f"{what} must be str or bytes, got {type(value).__name__}")


def check_source(source: object, options: SandboxOptions) -> bytes:
    """``source`` (the code) as UTF-8 bytes, refused when not a str or larger than ``max_code_bytes``."""
    if not isinstance(source, str):
        raise ValueError(f"source must be a str, got {type(source).__name__}")
    data = source.encode("utf-8", "surrogatepass")
    if len(data) > options.max_code_bytes:
        raise ValueError(f"source is {len(data)} bytes, over max_code_bytes={options.max_code_bytes}")
    return data


def check_stdin(stdin: object) -> bytes:
    """``stdin`` as bytes (a str is UTF-8)."""
    return as_bytes(stdin, "stdin")


def _check_name(name: object) -> str:
    if not isinstance(name, str):
        raise ValueError(f"files keys must be str, got {type(name).__name__}")
    parts = name.split("/")
    if len(parts) > _MAX_DEPTH or not all(_COMPONENT.match(p) for p in parts):
        raise ValueError(
            "files keys are relative paths of at most 8 parts, each 1-64 letters, digits, '.', '_' or '-' "
            "(no '..', no leading '/')"
        )
    return name


def check_files(files: object, stdin: bytes, options: SandboxOptions) -> tuple[tuple[str, bytes], ...]:
    """``files`` as sorted ``(name, bytes)`` pairs, refused past the count and size caps."""
    if files is None:
        files = {}
    if not isinstance(files, Mapping):
        raise ValueError(f"files must be a mapping of name to content, got {type(files).__name__}")
    if len(files) > options.max_input_files:
        raise ValueError(f"files holds {len(files)} files, over max_input_files={options.max_input_files}")
    pairs = sorted((_check_name(name), as_bytes(data, "files values")) for name, data in files.items())
    names = {name for name, _ in pairs}
    for name in names:  # a file may not also be a directory of another
        if any(other.startswith(name + "/") for other in names):
            raise ValueError("files keys may not name a file and a path below it")
    total = len(stdin) + sum(len(data) for _, data in pairs)
    if total > options.max_input_bytes:
        raise ValueError(f"stdin and files are {total} bytes, over max_input_bytes={options.max_input_bytes}")
    return tuple(pairs)


def check_argv(argv: object) -> tuple[str, ...]:
    """``argv`` as a tuple of strings: 1 to 256 of them, each at most 4096 characters, no NUL."""
    if isinstance(argv, (str, bytes)) or not isinstance(argv, Sequence):
        raise ValueError("argv must be a list of strings, the program's absolute path first")
    if not 1 <= len(argv) <= _MAX_ARGS:
        raise ValueError(f"argv must hold 1 to {_MAX_ARGS} strings")
    for item in argv:
        if not isinstance(item, str) or "\x00" in item or len(item) > _MAX_ARG_CHARS:
            raise ValueError(f"argv items must be strings of at most {_MAX_ARG_CHARS} characters without NUL")
    return tuple(argv)
