"""PostgreSQL through psycopg 3: session settings at connect, rows streamed, errors described.

Every connection starts with the statement timeout and
``standard_conforming_strings`` (so a backslash in a literal is never an
escape) set for its session; a reader's sessions and transactions are also
read-only (``default_transaction_read_only`` and psycopg's ``read_only``,
so each ``BEGIN`` is ``BEGIN READ ONLY``). None of it costs a round trip per
call. Queries are read with psycopg's ``Cursor.stream`` (single-row or
chunked mode, no server-side cursor): closing it early cancels the rest.
"""

from __future__ import annotations

import math
from collections.abc import Generator, Mapping
from typing import Any, Final, cast

import psycopg
from psycopg import capabilities

from toolbox_sql._config import DatabaseConfig

__all__ = ["CHUNK", "connect_args", "mark_read_only", "stream_rows"]

#: Rows per chunk when libpq can stream in chunks (17+); else rows come one at a time.
CHUNK: Final = 64 if capabilities.has_stream_chunked() else 1


def connect_args(profile: DatabaseConfig, *, reader: bool) -> dict[str, Any]:
    """psycopg's connection arguments: the session settings above, and a connect timeout."""
    timeout_ms = int(profile.statement_timeout * 1000)
    options = [
        f"-c statement_timeout={timeout_ms}",
        f"-c lock_timeout={timeout_ms}",
        f"-c idle_in_transaction_session_timeout={max(timeout_ms * 4, 10_000)}",
        "-c standard_conforming_strings=on",
    ]
    if reader:
        options.append("-c default_transaction_read_only=on")
    return {
        "options": " ".join(options),
        "application_name": "toolbox-sql",
        "connect_timeout": max(2, math.ceil(profile.statement_timeout)),
    }


def mark_read_only(connection: psycopg.Connection[Any], _record: object) -> None:
    """The pool's ``connect`` listener of a reader: every transaction begins READ ONLY."""
    connection.read_only = True


def stream_rows(
    cursor: psycopg.Cursor[Any], text: str, parameters: Mapping[str, Any]
) -> tuple[list[str], Generator[Any, None, None]]:
    """The column names and the rows of ``text``, streamed; close the generator to cancel the rest."""
    rows = cast("Generator[Any, None, None]", cursor.stream(text, parameters, size=CHUNK))
    first = next(rows, None)
    columns = [column.name for column in cursor.description or ()]

    def all_rows() -> Generator[Any, None, None]:
        try:
            if first is not None:
                yield first
                yield from rows
        finally:
            rows.close()

    return columns, all_rows()
