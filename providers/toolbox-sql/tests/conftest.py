"""Fixtures: the same database on both engines (a SQLite file, a PostgreSQL schema of its own)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from .sql_support import TestDatabase, database_of


@pytest.fixture(params=["sqlite", "postgres"])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[TestDatabase]:
    """The shop database on each engine."""
    folder = tmp_path / "data"
    folder.mkdir()
    with database_of(request.param, folder) as database:
        yield database


@pytest.fixture
def sqlite_db(tmp_path: Path) -> Iterator[TestDatabase]:
    """The shop database on SQLite only (for what only SQLite has: its authorizer, files)."""
    folder = tmp_path / "data"
    folder.mkdir()
    with database_of("sqlite", folder) as database:
        yield database


@pytest.fixture
def pg_db(tmp_path: Path) -> Iterator[TestDatabase]:
    """The shop database on PostgreSQL only (roles, sessions)."""
    with database_of("postgres", tmp_path) as database:
        yield database
