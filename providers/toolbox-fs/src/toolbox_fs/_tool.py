"""`FsTool`: files inside the configured roots, one intent per operation."""

from __future__ import annotations

import builtins
import codecs
import hashlib
import os
from collections.abc import Callable
from typing import TypeVar, final

from toolbox import ReadIntent, ToolRuntime, WriteIntent
from toolbox.errors import PathOutsideRootsError
from toolbox_fs._io import delete_file, list_dir, read_file, require_single_link, write_file
from toolbox_fs._options import FsOptions, parse_options
from toolbox_fs._paths import Resolved, resolve

__all__ = ["FsTool", "data_digest"]

R = TypeVar("R")


@final
class FsTool:
    """Read, list, write and delete files inside the configured roots.

    ``PRIVILEGED``: it needs an explicit policy allow and the deployment
    acknowledgement ``TOOLBOX_FS_ACK=allow-fs-within-roots``. Relative paths
    resolve against the first root; absolute paths must lie inside a root.
    Symbolic links are followed only while they stay inside a root. A path
    outside raises `toolbox.errors.PathOutsideRootsError` when the operation is
    called, before anything is opened. So does a read of a file with several
    hard links (rule ``fs:hardlinks``), unless the ``allow_hardlinks`` option
    is set: a hard link cannot be told apart from the file it links to.
    Writes and deletes replace or remove the name only, never a linked file.
    """

    __slots__ = ("_options", "_runtime")

    def __init__(self, runtime: ToolRuntime) -> None:
        """Build the tool from ``runtime.options``.

        Raises:
            ValueError: the options are missing or invalid; the message says what to pass.
        """
        self._runtime = runtime
        self._options = parse_options(runtime.options)

    @property
    def options(self) -> FsOptions:
        """The validated options, roots resolved."""
        return self._options

    def read_text(self, path: str, *, encoding: str = "utf-8") -> ReadIntent[str]:
        """Intent to read the text file at ``path``.

        Raises:
            PathOutsideRootsError: ``path`` leads outside the roots.
            ValueError: ``path`` is not a file path or ``encoding`` is unknown.
        """
        where = self._readable(path)
        codec = _codec(encoding)
        limit, links = self._options.max_read_bytes, self._options.allow_hardlinks
        return self._read(
            "read_text", where, lambda: read_file(where, limit, allow_hardlinks=links).decode(codec)
        )

    def read_bytes(self, path: str) -> ReadIntent[bytes]:
        """Intent to read the file at ``path`` as bytes.

        Raises:
            PathOutsideRootsError: ``path`` leads outside the roots.
            ValueError: ``path`` is not a file path.
        """
        where = self._readable(path)
        limit, links = self._options.max_read_bytes, self._options.allow_hardlinks
        return self._read("read_bytes", where, lambda: read_file(where, limit, allow_hardlinks=links))

    def list(self, path: str = ".") -> ReadIntent[builtins.list[str]]:
        """Intent to list the entry names of the directory at ``path``, sorted.

        Raises:
            PathOutsideRootsError: ``path`` leads outside the roots.
            ValueError: ``path`` is not a non-empty string.
        """
        where = self._resolve(path)
        return self._read("list", where, lambda: list_dir(where))

    def write(self, path: str, data: str | bytes) -> WriteIntent[int]:
        """Intent to create or atomically replace the file at ``path``; returns the bytes written.

        A ``str`` is written as UTF-8. The parent directory must exist.

        Raises:
            PathOutsideRootsError: ``path`` leads outside the roots.
            ValueError: ``path`` is not a file path, or ``data`` is not str or bytes or is
                larger than ``max_write_bytes``.
        """
        where = self._file(path)
        payload = self._payload(data)
        return self._write("write", where, lambda: write_file(where, payload), payload)

    def delete(self, path: str) -> WriteIntent[None]:
        """Intent to delete the file at ``path`` (directories are refused).

        Raises:
            PathOutsideRootsError: ``path`` leads outside the roots.
            ValueError: ``path`` is not a file path.
        """
        where = self._file(path)
        return self._write("delete", where, lambda: delete_file(where))

    # -- helpers --------------------------------------------------------------

    def _deny(self, exc: PathOutsideRootsError) -> None:
        self._runtime.record_denial(exc)

    def _resolve(self, path: str) -> Resolved:
        try:
            return resolve(path, self._options.roots, tool=self._runtime.descriptor.name)
        except PathOutsideRootsError as exc:
            self._deny(exc)
            raise

    def _file(self, path: str) -> Resolved:
        where = self._resolve(path)
        if not where.parts:
            raise ValueError(f"fs path {path!r} is a root directory; name a file inside it")
        return where

    def _readable(self, path: str) -> Resolved:
        """``path`` resolved for a read: a file with several hard links is denied now, unopened."""
        where = self._file(path)
        if self._options.allow_hardlinks:
            return where
        try:
            info = os.stat(os.path.join(where.root, *where.parts), follow_symlinks=False)
        except OSError:
            return where  # missing or unreadable: the read itself reports it
        try:
            require_single_link(info, where)
        except PathOutsideRootsError as exc:
            self._deny(exc)
            raise
        return where

    def _payload(self, data: object) -> bytes:
        if isinstance(data, str):
            payload = data.encode("utf-8")
        elif isinstance(data, (bytes, bytearray, memoryview)):
            payload = bytes(data)  # a copy: later changes by the caller must not alter what is written
        else:
            raise ValueError(f"fs write data must be str or bytes, got {type(data).__name__}")
        limit = self._options.max_write_bytes
        if len(payload) > limit:
            raise ValueError(
                f"fs write data is {len(payload)} bytes, over max_write_bytes={limit}; "
                "write less or raise max_write_bytes in the fs options"
            )
        return payload

    def _guard(self, call: Callable[[], R]) -> Callable[[], R]:
        # A path that left its root between check and use is a denial too: put it in the trace.
        def guarded() -> R:
            try:
                return call()
            except PathOutsideRootsError as exc:
                self._deny(exc)
                raise

        return guarded

    def _read(self, operation: str, where: Resolved, call: Callable[[], R]) -> ReadIntent[R]:
        arguments = {"path": where.display}
        return self._runtime.read_intent(
            operation, self._guard(call), target=where.display, arguments=arguments
        )

    def _write(
        self, operation: str, where: Resolved, call: Callable[[], R], data: bytes | None = None
    ) -> WriteIntent[R]:
        # The data is represented by its digest, so an approval binds the exact content.
        digest = hashlib.sha256(data).hexdigest() if data is not None else None
        arguments = {"path": where.display, "data_sha256": digest}
        return self._runtime.write_intent(
            operation, self._guard(call), target=where.display, arguments=arguments
        )

    def __repr__(self) -> str:
        return f"FsTool(roots={list(self._options.roots)!r})"


def data_digest(data: object) -> str:
    """``sha256:<hex>`` of what a write writes (a ``str`` as UTF-8): how a write's data is bound."""
    payload = data.encode("utf-8") if isinstance(data, str) else bytes(data)  # type: ignore[call-overload]
    return "sha256:" + hashlib.sha256(payload).hexdigest()


def _codec(encoding: object) -> str:
    if not isinstance(encoding, str):
        raise ValueError(f"encoding must be a str, got {type(encoding).__name__}")
    try:
        return codecs.lookup(encoding).name
    except LookupError:
        raise ValueError(f"unknown encoding {encoding!r}; pass a codec name such as 'utf-8'") from None
