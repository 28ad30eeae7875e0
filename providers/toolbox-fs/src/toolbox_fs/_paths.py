"""Confinement to the roots: resolve a path when the operation is called, walk it when it runs.

The check resolves ``..`` and symbolic links and denies anything outside every
root before a file is opened. The walk then opens the resolved path one
component at a time from its root, through directory descriptors and with
``O_NOFOLLOW``, so a component swapped for a link after the check is refused
instead of followed.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import final

from toolbox.errors import PathOutsideRootsError

__all__ = ["Resolved", "missing", "open_entry", "resolve", "walk"]

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


@final
@dataclass(frozen=True)
class Resolved:
    """A path checked against the roots: its root and the link-free components below it."""

    tool: str
    root: str
    parts: tuple[str, ...]

    @property
    def display(self) -> str:
        """The path relative to its root, as shown in traces and messages."""
        return "/".join(self.parts) or "."

    def hardlinked(self, links: int) -> PathOutsideRootsError:
        """The denial for a regular file with ``links`` hard links (one may lie outside the roots)."""
        return PathOutsideRootsError(
            f"fs file {self.display!r} has {links} hard links, and a hard link can make a file outside "
            "the roots readable, so it was not read; copy the file into the root, or set "
            "allow_hardlinks=true in the fs options if every link to it is trusted",
            tool=self.tool,
            rule="fs:hardlinks",
        )

    def outside(self, link: str) -> PathOutsideRootsError:
        """The denial for a path in which ``link`` became a symbolic link after the check."""
        return PathOutsideRootsError(
            f"fs path {self.display!r} changed after it was checked: {link!r} is now a symbolic link, "
            "so nothing was accessed through it; make sure no link leads outside the roots and retry",
            tool=self.tool,
        )


def _within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def _root_of(path: str, roots: Sequence[str]) -> str | None:
    return next((root for root in roots if _within(path, root)), None)


def resolve(path: object, roots: Sequence[str], *, tool: str) -> Resolved:
    """Check ``path`` against ``roots`` (real paths, the first anchoring relative paths).

    Raises:
        ValueError: ``path`` is not a non-empty string or contains a NUL byte.
        PathOutsideRootsError: ``path`` lies, or leads through a symbolic link, outside every root.
    """
    if not isinstance(path, str):
        raise ValueError(f"fs path must be a str, got {type(path).__name__}; pass str(path)")
    if not path:
        raise ValueError("fs path is empty; pass a path relative to the root, or '.' for the root itself")
    if "\x00" in path:
        raise ValueError("fs path contains a NUL byte; pass a plain path")
    where = ", ".join(roots)
    # Lexical check first, so an obvious escape is refused without even a stat outside the roots.
    lexical = os.path.normpath(path if os.path.isabs(path) else os.path.join(roots[0], path))
    if _root_of(lexical, roots) is None:
        raise PathOutsideRootsError(
            f"fs path {path!r} is outside the allowed roots ({where}); pass a path relative to "
            f"{roots[0]} without '..' leaving it, or an absolute path inside a root",
            tool=tool,
        )
    real = os.path.realpath(lexical)
    root = _root_of(real, roots)
    if root is None:
        raise PathOutsideRootsError(
            f"fs path {path!r} leads outside the allowed roots ({where}) through a symbolic link "
            f"(it resolves to {real!r}); use a path whose links stay inside a root",
            tool=tool,
        )
    relative = os.path.relpath(real, root)
    parts = () if relative == os.curdir else tuple(relative.split(os.sep))
    return Resolved(tool, root, parts)


def _is_link(name: str, dir_fd: int) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        return False


def missing(where: Resolved) -> FileNotFoundError:
    """The error for a path that does not exist, with a hint on what to do."""
    hint = "No such file or directory inside the fs root; check the name with fs.list(...)"
    return FileNotFoundError(errno.ENOENT, hint, where.display)


def _explain(exc: OSError, where: Resolved) -> OSError:
    if exc.errno == errno.ENOENT:
        return missing(where)
    return OSError(exc.errno, exc.strerror or "Cannot be accessed", where.display)


def open_entry(dir_fd: int, name: str, flags: int, where: Resolved, mode: int = 0o666) -> int:
    """Open ``name`` in ``dir_fd`` without following a symbolic link.

    Raises:
        PathOutsideRootsError: ``name`` is now a symbolic link (the check saw none).
        OSError: the entry cannot be opened; ``filename`` is the path relative to its root.
    """
    try:
        return os.open(name, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=dir_fd)
    except OSError as exc:
        if _is_link(name, dir_fd):
            raise where.outside(name) from None
        raise _explain(exc, where) from None


@contextmanager
def walk(where: Resolved, depth: int | None = None) -> Iterator[int]:
    """Yield a descriptor of the directory ``where.parts[:depth]``, opened link by link from the root.

    Raises:
        PathOutsideRootsError: the root or a component became a symbolic link.
        OSError: a component is missing or not a directory.
    """
    try:
        fd = os.open(where.root, _DIR_FLAGS)
    except OSError as exc:
        if os.path.islink(where.root):
            raise where.outside(where.root) from None
        raise _explain(exc, where) from None
    try:
        for name in where.parts[:depth]:
            child = open_entry(fd, name, _DIR_FLAGS, where)
            os.close(fd)
            fd = child
        yield fd
    finally:
        os.close(fd)
