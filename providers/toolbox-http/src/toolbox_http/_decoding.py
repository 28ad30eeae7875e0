"""Bounded decoding of ``Content-Encoding``: a small body can never inflate in one step.

httpx decodes each network read completely, so a few kilobytes of stacked gzip
(``Content-Encoding: gzip, gzip``) become gigabytes before any size check runs.
`BodyDecoder` instead decodes layer by layer and hands out decoded bytes in
pieces of about `STEP` bytes; the caller counts them against
``max_response_bytes`` and stops reading the moment the limit is passed.

Supported codings: ``gzip`` (and ``x-gzip``), ``deflate``, ``identity``, and
``br`` / ``zstd`` when the ``brotli`` (1.2 or later) / ``zstandard`` package is
installed. Anything else, more than `MAX_CODINGS` codings, or a corrupt or
truncated stream is a `ResponseEncodingError`, never garbage.
"""

from __future__ import annotations

import importlib
import zlib
from collections.abc import Iterator
from typing import Any, Protocol, final

from toolbox_http._errors import ResponseEncodingError

__all__ = ["MAX_CODINGS", "STEP", "BodyDecoder", "supported_codings"]

#: Most decoded bytes one layer hands on per step (zstd: see `_ZSTD_SLICE`).
STEP = 64 * 1024
#: Most content codings one response may stack; real servers use one.
MAX_CODINGS = 2
#: RFC 9659: a zstd content coding uses a window of at most 8 MiB; a larger one could cost 2 GiB.
_ZSTD_WINDOW = 8 * 1024 * 1024
# zstandard has no output limit, so input goes in slices: one RLE block of 4 bytes can
# expand to 128 KiB, so 64 bytes yield at most about 2 MiB.
_ZSTD_SLICE = 64


def _optional(module: str) -> Any:
    """An optional codec package, or None when it is not installed."""
    try:
        return importlib.import_module(module)
    except ImportError:  # pragma: no cover - br and zstd are optional
        return None


_brotli = _optional("brotli")
# Only brotli 1.2+ can bound its output (output_buffer_limit); an older one is not used.
if _brotli is not None and not hasattr(_brotli.Decompressor, "can_accept_more_data"):  # pragma: no cover
    _brotli = None
_zstandard = _optional("zstandard")


class _Layer(Protocol):
    """One content coding being undone."""

    def feed(self, data: bytes) -> None:
        """Queue encoded input; `pull` decodes it."""

    def pull(self) -> bytes:
        """At most about `STEP` decoded bytes; empty only when more input is needed."""

    def finish(self) -> None:
        """Raise `ResponseEncodingError` if the stream stopped before its end."""


@final
class _ZlibLayer:
    """gzip (possibly several members) or deflate (zlib-wrapped or raw, as servers send it)."""

    __slots__ = ("_decompressor", "_gzip", "_pending", "_seen")

    def __init__(self, *, gzip: bool) -> None:
        self._gzip = gzip
        self._pending = b""
        self._seen = False
        self._decompressor: Any = zlib.decompressobj(zlib.MAX_WBITS | 16) if gzip else None

    def feed(self, data: bytes) -> None:
        self._pending += data
        self._seen = self._seen or bool(data)

    def _choose_deflate(self) -> bool:
        """Pick the zlib or the raw form from the first two bytes (RFC 1950 header check)."""
        if len(self._pending) < 2:
            return False
        cmf, flg = self._pending[0], self._pending[1]
        wrapped = cmf & 0x0F == 8 and (cmf << 8 | flg) % 31 == 0
        self._decompressor = zlib.decompressobj(zlib.MAX_WBITS if wrapped else -zlib.MAX_WBITS)
        return True

    def pull(self) -> bytes:
        if self._decompressor is None and not self._choose_deflate():
            return b""
        while True:
            decompressor = self._decompressor
            if decompressor.eof:
                leftover = decompressor.unused_data + self._pending
                if not self._gzip or not leftover:
                    # deflate is one stream: bytes after it are ignored, as httpx does.
                    self._pending = b""
                    return b""
                # Another gzip member follows (RFC 1952 allows several).
                self._pending = leftover
                self._decompressor = zlib.decompressobj(zlib.MAX_WBITS | 16)
                continue
            try:
                # max_length bounds this step; input it could not use stays in unconsumed_tail.
                out: bytes = decompressor.decompress(self._pending, STEP)
            except zlib.error:
                raise ResponseEncodingError(f"{self._name()} data is corrupt") from None
            self._pending = decompressor.unconsumed_tail
            if out:
                return out
            if not self._pending and not decompressor.eof:
                return b""  # everything queued is used: more input is needed

    def finish(self) -> None:
        if self._seen and (self._decompressor is None or not self._decompressor.eof):
            raise ResponseEncodingError(f"the body ends inside its {self._name()} data")

    def _name(self) -> str:
        return "gzip" if self._gzip else "deflate"


@final
class _BrotliLayer:
    """br, with brotli's own output limit."""

    __slots__ = ("_decompressor", "_pending", "_seen")

    def __init__(self) -> None:
        assert _brotli is not None  # only built when supported
        self._decompressor = _brotli.Decompressor()
        self._pending = b""
        self._seen = False

    def feed(self, data: bytes) -> None:
        self._pending += data
        self._seen = self._seen or bool(data)

    def pull(self) -> bytes:
        assert _brotli is not None
        decompressor = self._decompressor
        stalled = False
        while True:
            if decompressor.is_finished():
                self._pending = b""  # bytes after the stream are ignored
                return b""
            data = b""
            # New input only once the decoder has handed out what it holds (brotli's rule);
            # an empty call hands out held output, so output is drawn until one comes back empty.
            if self._pending and decompressor.can_accept_more_data():
                data, self._pending = self._pending, b""
            try:
                out: bytes = decompressor.process(data, output_buffer_limit=STEP)
            except _brotli.error:
                raise ResponseEncodingError("br data is corrupt") from None
            if out or not self._pending:
                return out
            if stalled:  # pragma: no cover - brotli refuses input yet has nothing to give
                raise ResponseEncodingError("br decoder made no progress")
            stalled = True

    def finish(self) -> None:
        if self._seen and not self._decompressor.is_finished():
            raise ResponseEncodingError("the body ends inside its br data")


@final
class _ZstdLayer:
    """zstd (possibly several frames), fed in small slices because zstandard cannot cap output."""

    __slots__ = ("_decompressor", "_offset", "_pending", "_seen")

    def __init__(self) -> None:
        self._decompressor = self._new()
        self._pending = b""
        self._offset = 0
        self._seen = False

    @staticmethod
    def _new() -> Any:
        assert _zstandard is not None  # only built when supported
        return _zstandard.ZstdDecompressor(max_window_size=_ZSTD_WINDOW).decompressobj()

    def feed(self, data: bytes) -> None:
        self._pending = self._pending[self._offset :] + data
        self._offset = 0
        self._seen = self._seen or bool(data)

    def pull(self) -> bytes:
        assert _zstandard is not None
        while True:
            if self._decompressor.eof:
                # Another frame may follow: it starts with what the last one left over.
                leftover = bytes(self._decompressor.unused_data)
                if not leftover and self._offset >= len(self._pending):
                    return b""
                self._pending = leftover + self._pending[self._offset :]
                self._offset = 0
                self._decompressor = self._new()
            if self._offset >= len(self._pending):
                return b""
            piece = memoryview(self._pending)[self._offset : self._offset + _ZSTD_SLICE]
            self._offset += len(piece)
            try:
                out: bytes = self._decompressor.decompress(piece)
            except _zstandard.ZstdError:
                raise ResponseEncodingError("zstd data is corrupt (or needs a window over 8 MiB)") from None
            if out:
                return out

    def finish(self) -> None:
        if self._seen and not self._decompressor.eof:
            raise ResponseEncodingError("the body ends inside its zstd data")


def supported_codings() -> tuple[str, ...]:
    """The content codings this installation decodes."""
    codings = ["gzip", "deflate"]
    if _brotli is not None:
        codings.append("br")
    if _zstandard is not None:
        codings.append("zstd")
    return tuple(codings)


def _layer(coding: str) -> _Layer:
    if coding in ("gzip", "x-gzip"):
        return _ZlibLayer(gzip=True)
    if coding == "deflate":
        return _ZlibLayer(gzip=False)
    if coding == "br" and _brotli is not None:
        return _BrotliLayer()
    if coding == "zstd" and _zstandard is not None:
        return _ZstdLayer()
    shown = coding if coding.isascii() and coding.isprintable() and len(coding) <= 20 else "(unreadable)"
    raise ResponseEncodingError(
        f"content coding {shown!r} is not supported (supported: {', '.join(supported_codings())})"
    )


@final
class BodyDecoder:
    """Undoes a response's ``Content-Encoding``, one bounded piece at a time.

    Raises (when built or while decoding):
        ResponseEncodingError: an unsupported coding, more than `MAX_CODINGS`, or bad data.
    """

    __slots__ = ("_layers",)

    def __init__(self, content_encoding: str | None) -> None:
        names = [c.strip().lower() for c in (content_encoding or "").split(",")]
        codings = [c for c in names if c and c != "identity"]
        if len(codings) > MAX_CODINGS:
            raise ResponseEncodingError(
                f"{len(codings)} stacked content codings; at most {MAX_CODINGS} are accepted"
            )
        # Codings are listed in the order applied, so they are undone from the last.
        self._layers = [_layer(c) for c in reversed(codings)]

    def decode(self, raw: bytes) -> Iterator[bytes]:
        """The decoded pieces ``raw`` yields, each at most about `STEP` bytes (zstd: ~2 MiB)."""
        if not self._layers:
            if raw:
                yield raw
            return
        self._layers[0].feed(raw)
        yield from self._drain(0)

    def _drain(self, index: int) -> Iterator[bytes]:
        layer, last = self._layers[index], index == len(self._layers) - 1
        while piece := layer.pull():
            if last:
                yield piece
            else:
                self._layers[index + 1].feed(piece)
                yield from self._drain(index + 1)

    def finish(self) -> None:
        """Check that every layer reached its end (call after the last `decode`).

        Raises:
            ResponseEncodingError: the body was truncated inside a coding.
        """
        for layer in self._layers:
            layer.finish()
