"""Switching a SQLite file to WAL when other connections open it at the same moment.

WAL is a property of the file: once set, ``PRAGMA journal_mode = WAL`` is a read. Setting it
on a new file needs the file to itself, and SQLite answers ``database is locked`` at once,
without its busy handler, while another connection holds a lock. Several sinks, stores or
worker processes opening one new file together hit that (``toolbox serve --workers 2`` on a
fresh audit file): they wait here, within their busy timeout, instead of failing to start.
`retry_locked` is that wait for any statement (the audit sink's ``BEGIN IMMEDIATE``).
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from typing import Any

__all__ = ["WRITER_WAIT", "enter_wal", "is_locked", "retry_locked"]

_FIRST_WAIT = 0.001
_LONGEST_WAIT = 0.05
#: The longest a writer waiting for another connection's write transaction sleeps between tries:
#: those last a millisecond or so, where SQLite's own busy handler sleeps up to 100 ms (the tail
#: latency of several processes on one file).
WRITER_WAIT = 0.002
_BUSY, _LOCKED = 5, 6  # sqlite3.h (extended codes add high bits)


def enter_wal(execute: Callable[[str], Any], busy_timeout: float) -> None:
    """Run ``PRAGMA journal_mode = WAL`` through ``execute``, retrying a locked file for ``busy_timeout`` s.

    Raises:
        sqlite3.OperationalError: the file stayed locked that long, or another error.
    """
    retry_locked(execute, "PRAGMA journal_mode = WAL", busy_timeout)


def retry_locked(
    execute: Callable[[str], Any], statement: str, busy_timeout: float, *, longest_wait: float = _LONGEST_WAIT
) -> None:
    """Run ``statement`` through ``execute``; while the file is locked, retry for ``busy_timeout`` s,
    the waits doubling from 1 ms to ``longest_wait``.

    Raises:
        sqlite3.OperationalError: the file stayed locked that long, or another error.
    """
    deadline = time.monotonic() + busy_timeout
    wait = _FIRST_WAIT
    while True:
        try:
            execute(statement)
            return
        except sqlite3.OperationalError as exc:
            if not is_locked(exc) or time.monotonic() >= deadline:
                raise
        time.sleep(wait)
        wait = min(wait * 2, longest_wait)


def is_locked(exc: sqlite3.OperationalError) -> bool:
    """Whether ``exc`` says another connection holds a lock on the file (SQLITE_BUSY, SQLITE_LOCKED)."""
    code = getattr(exc, "sqlite_errorcode", None)  # Python 3.11 and later
    if code is None:
        return "locked" in str(exc)
    return int(code) & 0xFF in (_BUSY, _LOCKED)
