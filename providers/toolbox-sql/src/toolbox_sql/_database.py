"""`Database`: one configured database, shared by the tools of a catalog: URLs, pools, planner.

The URLs are read from the environment the catalog was loaded with (its
``env``) when the first tool is built, never from the policy file, and no
message ever shows one (they hold passwords). A reader pool and, for
``execute``, a writer pool are SQLAlchemy engines made on first use and
disposed when the last tool using them is closed.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from typing import final

from sqlalchemy import create_engine, event
from sqlalchemy.engine import URL, Engine, make_url
from sqlalchemy.exc import ArgumentError
from sqlalchemy.pool import NullPool, QueuePool

from toolbox_sql._config import DatabaseConfig
from toolbox_sql._plan import Planner
from toolbox_sql._sqlite import guard_installer, sqlite_creator

__all__ = ["Database"]

_DIALECTS = {"sqlite": "sqlite", "postgresql": "postgres"}


@final
class Database:
    """A named database of the ``[tools.sql]`` table."""

    __slots__ = ("_lock", "_planner", "_reader", "_urls", "_users", "_writer", "config", "name")

    def __init__(self, name: str, config: DatabaseConfig) -> None:
        self.name = name
        self.config = config
        self._lock = threading.Lock()
        self._urls: tuple[URL, URL] | None = None
        self._planner: Planner | None = None
        self._reader: Engine | None = None
        self._writer: Engine | None = None
        self._users = 0

    @property
    def read_tool(self) -> str:
        """The name of its query tool."""
        return f"sql.{self.name}"

    @property
    def write_tool(self) -> str:
        """The name of its execute tool."""
        return f"sql_write.{self.name}"

    def acquire(self, env: Mapping[str, str]) -> None:
        """A tool starts using the database; the first reads its URLs from ``env``.

        Raises:
            ValueError: a URL variable is missing or does not hold a supported URL (names the variable).
        """
        with self._lock:
            if self._urls is None:
                read = _url(env, self.config.url_env)
                writes = self.config.writes
                write = _url(env, writes.url_env) if writes is not None and writes.url_env else read
                if read.get_backend_name() != write.get_backend_name():
                    raise ValueError(
                        f"sql.{self.name}: the reader's and the writer's URLs name different engines"
                    )
                if read.get_backend_name() == "sqlite":  # named files, or refused now
                    _sqlite_path(read, self.name)
                    _sqlite_path(write, self.name)
                self._urls = (read, write)
                self._planner = Planner(
                    self.config,
                    _DIALECTS[read.get_backend_name()],
                    read_tool=self.read_tool,
                    write_tool=self.write_tool,
                )
            self._users += 1

    def release(self, *, keep_pools: bool = False) -> None:
        """A tool is closed; the last one disposes the pools (a later call opens them again).

        With ``keep_pools`` (a tool whose context is done, the owner not) they stay for the next
        context: a tool closed later disposes them. Without it, a served request would open
        and close the database's connections each time.
        """
        with self._lock:
            self._users = max(0, self._users - 1)
            if self._users or keep_pools:
                return
            engines = [e for e in (self._reader, self._writer) if e is not None]
            self._reader = self._writer = None
        for engine in engines:
            engine.dispose()

    @property
    def planner(self) -> Planner:
        """The planner (after `acquire`)."""
        planner = self._planner
        if planner is None:  # pragma: no cover - tools acquire before they plan
            raise RuntimeError("the database is not acquired")
        return planner

    def reader(self) -> Engine:
        """The reader pool: read-only sessions and transactions."""
        engine = self._reader
        if engine is None:
            with self._lock:
                engine = self._reader = self._reader or self._engine(writer=False)
        return engine

    def writer(self) -> Engine:
        """The writer pool (the writer's URL, when configured)."""
        engine = self._writer
        if engine is None:
            with self._lock:
                engine = self._writer = self._writer or self._engine(writer=True)
        return engine

    def inspector_engine(self) -> Engine:
        """A one-connection engine for reading the catalog (schema()), unguarded, read-only."""
        url = self._url(writer=False)
        if url.get_backend_name() == "sqlite":
            creator = sqlite_creator(_sqlite_path(url, self.name), self.config, writer=False)
            return create_engine("sqlite+pysqlite://", creator=creator, poolclass=NullPool)
        from toolbox_sql._postgres import connect_args

        return create_engine(url, poolclass=NullPool, connect_args=connect_args(self.config, reader=True))

    def _url(self, *, writer: bool) -> URL:
        urls = self._urls
        if urls is None:  # pragma: no cover - tools acquire before they run
            raise RuntimeError("the database is not acquired")
        return urls[1] if writer else urls[0]

    def _engine(self, *, writer: bool) -> Engine:
        url = self._url(writer=writer)
        if url.get_backend_name() == "sqlite":
            creator = sqlite_creator(_sqlite_path(url, self.name), self.config, writer=writer)
            engine = create_engine(
                "sqlite+pysqlite://", creator=creator, poolclass=QueuePool, pool_size=5, max_overflow=5
            )
            event.listen(engine, "connect", guard_installer(self.config, writer=writer))
            return engine
        from toolbox_sql._postgres import connect_args, mark_read_only

        engine = create_engine(url, connect_args=connect_args(self.config, reader=not writer), pool_size=5)
        if not writer:
            event.listen(engine, "connect", mark_read_only)
        return engine

    def __repr__(self) -> str:
        return f"Database({self.name!r})"


def _url(env: Mapping[str, str], variable: str) -> URL:
    value = env.get(variable)
    if not value:
        raise ValueError(f"the database URL variable {variable} is not set; set it to a SQLAlchemy URL")
    try:
        url = make_url(value)
    except (ArgumentError, ValueError, TypeError):
        raise ValueError(f"{variable} does not hold a SQLAlchemy URL") from None
    backend, driver = url.get_backend_name(), url.get_driver_name()
    if backend == "postgresql":
        if url.drivername not in ("postgresql", "postgresql+psycopg"):
            raise ValueError(
                f"{variable}: toolbox-sql reaches PostgreSQL through psycopg 3 (postgresql+psycopg://)"
            )
        return url.set(drivername="postgresql+psycopg")
    if backend == "sqlite" and driver in ("pysqlite", ""):
        return url
    raise ValueError(f"{variable}: toolbox-sql supports sqlite:/// and postgresql:// URLs, not {backend}")


def _sqlite_path(url: URL, name: str) -> str:
    database = url.database
    if not database or database == ":memory:" or database.startswith("file:"):
        raise ValueError(
            f"sql.{name}: a SQLite URL must name a file (sqlite:///path.db); an in-memory database "
            "belongs to one connection"
        )
    return os.path.abspath(database)
