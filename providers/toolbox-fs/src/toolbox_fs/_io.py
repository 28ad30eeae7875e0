"""The fs operations themselves, each on an already resolved path and through `walk`.

Each one first checks that the governed chain is dispatching an operation of
the fs tool (`toolbox.foundations._dispatch.require_dispatch`): called any other way, it
raises `toolbox.errors.GovernanceBypassError` before touching the file system.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat

from toolbox.errors import ResponseTooLargeError
from toolbox.provider import require_dispatch
from toolbox_fs._paths import Resolved, missing, open_entry, walk

__all__ = ["delete_file", "list_dir", "read_file", "require_single_link", "write_file"]

_CHUNK = 1024 * 1024


def _too_large(where: Resolved, size: str, limit: int) -> ResponseTooLargeError:
    return ResponseTooLargeError(
        f"fs file {where.display!r} is {size} bytes, over max_read_bytes={limit}; "
        "read a smaller file or raise max_read_bytes in the fs options"
    )


def _lstat(dir_fd: int, where: Resolved) -> os.stat_result | None:
    """The final entry's own metadata, or None if it does not exist; a link means it changed."""
    try:
        info = os.stat(where.parts[-1], dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(info.st_mode):
        raise where.outside(where.parts[-1])
    if stat.S_ISDIR(info.st_mode):
        raise IsADirectoryError(errno.EISDIR, "Is a directory; name a file instead", where.display)
    return info


def _require_file(info: os.stat_result, where: Resolved) -> None:
    if not stat.S_ISREG(info.st_mode):
        raise ValueError(f"fs path {where.display!r} is not a regular file; only files can be read")


def require_single_link(info: os.stat_result, where: Resolved) -> None:
    """Refuse a regular file with several hard links: one of them may lie outside the roots."""
    if stat.S_ISREG(info.st_mode) and info.st_nlink > 1:
        raise where.hardlinked(info.st_nlink)


def read_file(where: Resolved, limit: int, *, allow_hardlinks: bool = False) -> bytes:
    """The file's content, refused unread if it is larger than ``limit`` bytes.

    Unless ``allow_hardlinks``, a file with several hard links is refused unread,
    both before it is opened and on the opened descriptor.
    """
    require_dispatch(where.tool)
    with walk(where, -1) as dir_fd:
        info = _lstat(dir_fd, where)
        if info is None:
            raise missing(where)
        _require_file(info, where)  # before opening: opening a device or FIFO can have effects of its own
        if not allow_hardlinks:
            require_single_link(info, where)
        # O_NONBLOCK: should a FIFO be swapped in meanwhile, opening it must not hang.
        fd = open_entry(dir_fd, where.parts[-1], os.O_RDONLY | os.O_NONBLOCK, where)
    try:
        info = os.fstat(fd)
        _require_file(info, where)
        if not allow_hardlinks:
            require_single_link(info, where)  # a link made between the two checks
        if info.st_size > limit:
            raise _too_large(where, str(info.st_size), limit)
        chunks: list[bytes] = []
        remaining = limit + 1  # the file may grow after fstat: read one byte past the limit to notice
        while remaining > 0:
            chunk = os.read(fd, min(remaining, _CHUNK))
            if not chunk:
                break
            chunks.append(chunk)
            remaining -= len(chunk)
        if remaining <= 0:
            raise _too_large(where, f"more than {limit}", limit)
        return b"".join(chunks)
    finally:
        os.close(fd)


def list_dir(where: Resolved) -> list[str]:
    """The directory's entry names, sorted."""
    require_dispatch(where.tool)
    with walk(where) as fd:
        return sorted(os.listdir(fd))


def write_file(where: Resolved, data: bytes) -> int:
    """Create or replace the file atomically: a temporary file in the same directory, then a rename."""
    require_dispatch(where.tool)
    name = where.parts[-1]
    with walk(where, -1) as dir_fd:
        existing = _lstat(dir_fd, where)
        temp = f".{secrets.token_hex(8)}.toolbox-fs.tmp"
        fd = open_entry(dir_fd, temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, where)
        try:
            try:
                if existing is not None:
                    os.fchmod(fd, stat.S_IMODE(existing.st_mode))
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(temp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temp, dir_fd=dir_fd)
            raise
        # Durability of the rename is best effort: some filesystems refuse fsync on a directory.
        with contextlib.suppress(OSError):
            os.fsync(dir_fd)
    return len(data)


def delete_file(where: Resolved) -> None:
    """Delete the file (directories are refused)."""
    require_dispatch(where.tool)
    with walk(where, -1) as dir_fd:
        if _lstat(dir_fd, where) is None:
            raise missing(where)
        os.unlink(where.parts[-1], dir_fd=dir_fd)
