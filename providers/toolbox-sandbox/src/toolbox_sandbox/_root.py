"""The minimal root a sandbox sees: the interpreter, its standard library, shared libraries, programs.

Nothing else of the host is mounted: no ``/etc`` (so no ``/etc/shadow``, no
resolver configuration), no home directory, no ``/tmp``, no virtual environment
and no site-packages. The interpreter is asked once where its standard library
is (``python -I -S``, cached per interpreter file), and compiles the init in
the same question (`toolbox_sandbox._init`); its site-packages directory, where
it lies inside the standard library, is hidden by an empty tmpfs.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import subprocess
from dataclasses import dataclass
from typing import final

from toolbox_sandbox._init import COMPILE_INIT, INSIDE_SOURCE

__all__ = ["Interpreter", "RootView", "interpreter", "root_view"]

_ASK = (
    "import json, os, sys, sysconfig\n" + COMPILE_INIT + "v = sysconfig.get_config_var\n"
    "print(json.dumps({'stdlib': os.path.dirname(os.__file__), 'multiarch': v('MULTIARCH') or '',"
    " 'libdir': v('LIBDIR') or '', 'ldlibrary': v('LDLIBRARY') or '', 'shared': bool(v('Py_ENABLE_SHARED')),"
    " 'version': list(sys.version_info[:2]), 'init': init.hex()}))"
)
# A compiled init is a few kilobytes; a .pyc header is 16 bytes.
_INIT_BYTES = (17, 1024 * 1024)
# Library directories the dynamic loader searches, mounted where they exist (a symbolic link is
# recreated as a link: on merged-/usr systems /lib -> usr/lib).
_LIBRARY_DIRS = ("/lib", "/lib64", "/usr/lib64")


class SandboxSetupError(RuntimeError):
    """The profile's interpreter or programs cannot be mounted (message names the path)."""


@final
@dataclass(frozen=True)
class Interpreter:
    """Where an interpreter's parts are on the host."""

    path: str
    real: str
    stdlib: str
    library: str | None
    multiarch: str
    version: tuple[int, int]
    init: bytes = dataclasses.field(repr=False)
    """The init compiled by this interpreter: the bytes of a ``.pyc`` file (`toolbox_sandbox._init`)."""


@functools.lru_cache(maxsize=16)
def _ask(real: str, mtime_ns: int) -> Interpreter:
    try:
        done = subprocess.run(  # noqa: S603 - the operator's interpreter, asked a fixed question
            [real, "-I", "-S", "-c", _ASK],
            input=INSIDE_SOURCE.encode("utf-8"),
            capture_output=True,
            env={},
            timeout=30,
            check=True,
        )
        facts = json.loads(done.stdout)
        init = bytes.fromhex(facts["init"])
        if not _INIT_BYTES[0] <= len(init) <= _INIT_BYTES[1]:
            raise ValueError("unexpected size of the compiled init")
    except (OSError, subprocess.SubprocessError, ValueError, KeyError, TypeError) as exc:
        raise SandboxSetupError(
            f"the interpreter {real} could not be asked where its library is, or compile the init"
        ) from exc
    library = None
    if facts["shared"] and facts["libdir"] and facts["ldlibrary"]:
        candidate = os.path.realpath(os.path.join(facts["libdir"], facts["ldlibrary"]))
        library = candidate if os.path.isfile(candidate) else None
    major, minor = facts["version"]
    return Interpreter(
        path=real,
        real=real,
        stdlib=os.path.realpath(facts["stdlib"]),
        library=library,
        multiarch=str(facts["multiarch"]),
        version=(int(major), int(minor)),
        init=init,
    )


def interpreter(path: str) -> Interpreter:
    """The interpreter at ``path`` (a symbolic link is followed), asked once per file version.

    Raises:
        SandboxSetupError: it does not exist, is not executable or does not answer.
    """
    real = os.path.realpath(path)
    if not os.path.isfile(real) or not os.access(real, os.X_OK):
        raise SandboxSetupError(f"the profile's python {path} is not an executable file")
    return dataclasses.replace(_ask(real, os.stat(real).st_mtime_ns), path=path)


@final
@dataclass(frozen=True)
class RootView:
    """bubblewrap arguments that build the read-only root, and the paths programs may start."""

    arguments: tuple[str, ...]
    programs: frozenset[str]
    masks: tuple[str, ...] = ()
    """Empty tmpfs mounts that hide a directory (site-packages); remounted read-only at the end."""
    init: bytes = dataclasses.field(default=b"", repr=False)
    """The init compiled by the profile's interpreter, mounted at ``/sandbox/init.pyc``."""


def _mount_path(path: str, seen: set[str], arguments: list[str], *, whole_directories: bool = True) -> None:
    """Mount ``path`` read-only at the same place; a link becomes a link to its (mounted) target.

    A path already visible (mounted, or inside a mounted directory) is left alone.
    With ``whole_directories`` False a link to a directory is recreated without
    mounting the directory: on merged-/usr systems ``/lib -> usr/lib``, and only
    the library directories below ``/usr/lib`` are mounted, not all of it.
    """
    if any(path == done or path.startswith(done.rstrip("/") + "/") for done in seen):
        return
    if os.path.islink(path):
        seen.add(path)
        target = os.readlink(path)
        arguments += ["--symlink", target, path]
        resolved = os.path.normpath(os.path.join(os.path.dirname(path), target))
        if whole_directories or not os.path.isdir(resolved):
            _mount_path(resolved, seen, arguments, whole_directories=whole_directories)
    elif os.path.exists(path):
        seen.add(path)
        arguments += ["--ro-bind", path, path]


def root_view(python: str, programs: tuple[str, ...], read_only: tuple[str, ...]) -> RootView:
    """The root for a profile: libraries, interpreter, standard library, programs, extra paths.

    Raises:
        SandboxSetupError: the interpreter or a program is missing or not executable, or a
            read-only path does not exist.
    """
    found = interpreter(python)
    arguments: list[str] = []
    seen: set[str] = set()
    library_dirs = [*_LIBRARY_DIRS]
    if found.multiarch:
        library_dirs.append(f"/usr/lib/{found.multiarch}")
    for directory in library_dirs:
        _mount_path(directory, seen, arguments, whole_directories=False)
    _mount_path(found.stdlib, seen, arguments)
    masked = []
    for hidden in ("site-packages", "dist-packages"):
        inside = os.path.join(found.stdlib, hidden)
        if os.path.isdir(inside):
            arguments += ["--size", "4096", "--tmpfs", inside]
            masked.append(inside)
    if found.library is not None:
        _mount_path(found.library, seen, arguments)
    allowed = {python, found.real}
    _mount_path(python, seen, arguments)
    for program in programs:
        if not os.path.isfile(program) or not os.access(program, os.X_OK):
            raise SandboxSetupError(f"the profile's program {program} is not an executable file")
        _mount_path(program, seen, arguments)
        allowed.add(program)
    for path in read_only:
        if not os.path.exists(path):
            raise SandboxSetupError(f"the profile's read_only path {path} does not exist")
        _mount_path(path, seen, arguments)
    return RootView(tuple(arguments), frozenset(allowed), tuple(masked), found.init)
