"""`SqlResult`: what a statement returned, bounded, as JSON values; and how rows are taken.

Rows are taken one at a time from a cursor that streams them, each turned
into JSON values and counted (rows and bytes of JSON) as it arrives; taking
stops at the first cap, so rows past it are never fetched. The same bytes
feed a SHA-256, which the audit trail stores with the row count instead of
the rows (`SqlResult.__toolbox_audit_summary__`).
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import json
import math
import uuid
from collections.abc import Callable, Iterable, Sequence
from decimal import Decimal
from typing import Any, Literal, final

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["SqlResult", "collect", "json_value"]

_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def _encoding() -> Callable[[object], str]:
    """``_ENCODER.encode``, with its C encoder made once instead of on every call (3x faster a row).

    The same text: `JSONEncoder.iterencode` makes this encoder with these arguments.
    """
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:  # pragma: no cover - CPython has the C accelerator
        return _ENCODER.encode
    encoder = make(
        None, _ENCODER.default, json.encoder.encode_basestring, None, ":", ",", False, False, False
    )
    return lambda value: "".join(encoder(value, 0))


_ENCODE = _encoding()
_AS_IS = frozenset({int, str, bool, type(None)})  # JSON values already: json_value returns them
_HEADS: dict[tuple[str, ...], Any] = {}  # the digest of each column list seen, copied for each result
_MAX_HEADS = 256


@final
class SqlResult(BaseModel):
    """The rows of a query (or of a write's ``RETURNING``), and what was cut.

    Values are JSON: numbers, text, booleans and null as they are; decimals as
    text (no precision lost); dates and times in ISO 8601; bytes as
    ``base64:...``; anything else as its text.
    """

    model_config = ConfigDict(frozen=True)

    columns: tuple[str, ...] = ()
    """The result's column names, in order."""
    rows: tuple[tuple[Any, ...], ...] = ()
    """The rows taken, at most ``max_rows`` of them and ``max_bytes`` of JSON."""
    row_count: int = 0
    """How many rows are in ``rows``."""
    truncated: Literal["max_rows", "max_bytes"] | None = None
    """Why taking stopped early, or None when every row was taken."""
    rows_affected: int | None = Field(default=None)
    """For ``execute``: how many rows the statement changed (None for a query)."""
    result_sha256: str = Field(default="", exclude=True)
    """SHA-256 of the columns and each row as JSON lines (what the audit trail stores); not sent to models."""
    result_bytes: int = Field(default=0, exclude=True)
    """Bytes of the rows as JSON; not sent to models."""

    def __toolbox_audit_summary__(self) -> tuple[str, str]:
        """``(summary, sha256)`` for the audit trail: counts only, never a value."""
        parts = [f"rows={self.row_count}", f"columns={len(self.columns)}", f"bytes={self.result_bytes}"]
        if self.truncated is not None:
            parts.append(f"truncated={self.truncated}")
        if self.rows_affected is not None:
            parts.append(f"rows_affected={self.rows_affected}")
        return " ".join(parts), self.result_sha256

    def __toolbox_transient__(self) -> bool:
        """Never: a statement that fails raises. (Answered here, the chain's question costs no
        pydantic missing-attribute lookup.)"""
        return False

    def __repr__(self) -> str:
        shown = f"row_count={self.row_count}, columns={list(self.columns)!r}, truncated={self.truncated!r}"
        return f"SqlResult({shown})"

    __str__ = __repr__


def json_value(value: object) -> Any:
    """``value`` from the driver as a JSON value."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, (dt.datetime, dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, (bytes, bytearray, memoryview)):
        return "base64:" + base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, (list, tuple)):
        return [json_value(v) for v in value]
    if isinstance(value, dict):
        return {str(k): json_value(v) for k, v in value.items()}
    if isinstance(value, (uuid.UUID, dt.timedelta)):
        return str(value)
    return str(value)


def collect(
    columns: Sequence[str],
    rows: Iterable[Sequence[object]],
    *,
    max_rows: int,
    max_bytes: int,
    rows_affected: int | None = None,
) -> SqlResult:
    """Take ``rows`` one at a time until ``max_rows`` or ``max_bytes``; the iterator is not read further."""
    names = tuple(columns)
    head = _HEADS.get(names)
    if head is None:
        head = hashlib.sha256(_ENCODE(list(names)).encode("utf-8"))
        if len(_HEADS) < _MAX_HEADS:
            _HEADS[names] = head
    digest = head.copy()
    taken: list[tuple[Any, ...]] = []
    size = 0
    truncated: Literal["max_rows", "max_bytes"] | None = None
    for row in rows:
        if len(taken) >= max_rows:
            truncated = "max_rows"
            break
        values = tuple([v if type(v) in _AS_IS else json_value(v) for v in row])
        encoded = _ENCODE(values).encode("utf-8")
        if size + len(encoded) > max_bytes:
            truncated = "max_bytes"
            break
        size += len(encoded)
        digest.update(b"\n" + encoded)
        taken.append(values)
    return _result(
        {
            "columns": names,
            "rows": tuple(taken),
            "row_count": len(taken),
            "truncated": truncated,
            "rows_affected": rows_affected,
            "result_sha256": digest.hexdigest(),
            "result_bytes": size,
        }
    )


_FIELDS = frozenset(SqlResult.model_fields)
_new = SqlResult.__new__
_set = object.__setattr__


def _result(fields: dict[str, Any]) -> SqlResult:
    """`SqlResult.model_construct` with every field given, as it sets them, without its per-field
    loop (a sixth of a one-row query's own cost); ``tests/test_sql_audit.py`` compares the two."""
    result = _new(SqlResult)
    _set(result, "__dict__", fields)
    _set(result, "__pydantic_fields_set__", set(_FIELDS))
    _set(result, "__pydantic_extra__", None)
    _set(result, "__pydantic_private__", None)
    return result
