"""Switching a SQLite file to WAL when other connections open it at the same moment.

WAL is a property of the file: once set, ``PRAGMA journal_mode = WAL`` is a read. Setting it
on a new file needs the file to itself, and SQLite answers ``database is locked`` at once,
without its busy handler, while another connection holds a lock. Several sinks, stores or
worker processes opening one new file together hit that (``toolbox serve --workers 2`` on a
fresh audit file): they wait here, within their busy timeout, instead of failing to start.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from typing import Any

__all__ = ["enter_wal"]

_FIRST_WAIT = 0.001
_LONGEST_WAIT = 0.05


def enter_wal(execute: Callable[[str], Any], busy_timeout: float) -> None:
    """Run ``PRAGMA journal_mode = WAL`` through ``execute``, retrying a locked file for ``busy_timeout`` s.

    Raises:
        sqlite3.OperationalError: the file stayed locked that long, or another error.
    """
    deadline = time.monotonic() + busy_timeout
    wait = _FIRST_WAIT
    while True:
        try:
            execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() >= deadline:
                raise
        time.sleep(wait)
        wait = min(wait * 2, _LONGEST_WAIT)
