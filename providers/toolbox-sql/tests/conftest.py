"""Fixtures: the same database on both engines (a SQLite file, a PostgreSQL schema of its own)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sql_support import TestDatabase, database_of

import toolbox_sql._tool


@pytest.fixture(params=["sqlite", "postgres"])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[TestDatabase]:
    """The shop database on each engine."""
    folder = tmp_path / "data"
    folder.mkdir()
    with database_of(request.param, folder) as database:
        yield database


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def _module_database(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[TestDatabase]:
    folder = tmp_path_factory.mktemp(f"shop-{request.param}")
    with database_of(request.param, folder) as database:
        yield database


@pytest.fixture
def reads(_module_database: TestDatabase) -> Iterator[TestDatabase]:
    """The shop database on each engine, shared by a module's tests that only read (they check so)."""
    yield _module_database
    _module_database.close_gateways()


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


@pytest.fixture
def runs(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The kind of every statement the tools send to a database from now on, by any door."""
    sent: list[str] = []
    for name in ("run_query", "run_write"):
        real = getattr(toolbox_sql._tool, name)

        def spy(database: Any, plan: Any, *rest: Any, _real: Any = real) -> Any:
            sent.append(plan.kind)
            return _real(database, plan, *rest)

        monkeypatch.setattr(toolbox_sql._tool, name, spy)
    return sent
