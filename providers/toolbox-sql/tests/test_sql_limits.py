"""Row and byte caps taken while rows stream in, and statement timeouts, on the governed path.

The caps stop the fetch: a test counts the rows pulled from the driver's
cursor and finds one past the cap, not the thousands the statement would
return. A statement that runs out of time is cancelled and not retried.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from sql_support import ACME, TestDatabase

import toolbox_sql._run
from toolbox import ExecutionContext, Status


@pytest.fixture
def pulled(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many rows each statement's result pulled from the driver."""
    counts: list[int] = []
    real = toolbox_sql._run.collect

    def counting(columns: Any, rows: Iterable[Any], **options: Any) -> Any:
        counts.append(0)

        def each() -> Iterator[Any]:
            for row in rows:
                counts[-1] += 1
                yield row

        return real(columns, each(), **options)

    monkeypatch.setattr(toolbox_sql._run, "collect", counting)
    return counts


def _query(db: TestDatabase, sql: str, params: dict[str, Any] | None = None, **profile: Any) -> Any:
    gateway = db.gateway(policy=db.policy(**profile))
    return gateway.invoke(
        "sql.shop.query", {"sql": sql, "params": params or {}, "purpose": "Scan"}, context=ACME
    )


def test_row_cap_stops_the_fetch(reads: TestDatabase, pulled: list[int]) -> None:
    """LIMIT :n asks for 2,000 rows; max_rows = 5 takes 5 and pulls one more, no further."""
    result = _query(reads, "SELECT n FROM big ORDER BY n LIMIT :n", {"n": 2000}, max_rows=5)
    assert result.status is Status.SUCCESS
    assert result.content.rows == ((1,), (2,), (3,), (4,), (5,))
    assert result.content.truncated == "max_rows" and pulled == [6]


def test_row_cap_is_also_asked_of_the_database(reads: TestDatabase, pulled: list[int]) -> None:
    """Without a LIMIT of its own, the statement runs with LIMIT max_rows + 1."""
    result = _query(reads, "SELECT a.n FROM big a, big b", max_rows=10)  # 4,000,000 rows if unbounded
    assert result.content.row_count == 10 and result.content.truncated == "max_rows" and pulled == [11]


def test_byte_cap_stops_the_fetch(reads: TestDatabase, pulled: list[int]) -> None:
    """Rows of about 110 bytes with max_bytes = 1,024: the rows that fit, then the fetch stops."""
    pad = "x" * 100
    result = _query(reads, f"SELECT n, '{pad}' AS pad FROM big ORDER BY n", max_bytes=1024)
    assert result.status is Status.SUCCESS and result.content.truncated == "max_bytes"
    assert 1 <= result.content.row_count < 11 and pulled == [result.content.row_count + 1]
    assert result.content.result_bytes <= 1024


def test_a_statement_past_its_timeout_is_cancelled_not_retried(reads: TestDatabase) -> None:
    """8e9 rows to count, statement_timeout = 0.3 s: ERROR SqlTimeoutError, one attempt, nothing retried."""
    before = reads.checksum()
    result = _query(reads, "SELECT count(*) AS n FROM big a, big b, big c", statement_timeout=0.3)
    assert (result.status, result.error_code, result.attempts) == (Status.ERROR, "SqlTimeoutError", 1)
    assert "ran longer than" in (result.message or "")
    assert reads.checksum() == before


def test_the_contexts_deadline_shortens_the_timeout(reads: TestDatabase) -> None:
    """A context with a near deadline cuts the statement to it, below the profile's 5 seconds."""
    gateway = reads.gateway()
    soon = ExecutionContext(
        tenant="acme", principal="ann", deadline=datetime.now(timezone.utc) + timedelta(seconds=0.5)
    )
    result = gateway.invoke(
        "sql.shop.query",
        {"sql": "SELECT count(*) AS n FROM big a, big b, big c", "purpose": "Scan"},
        context=soon,
    )
    assert result.status in (Status.ERROR, Status.DENIED)
    assert result.error_code == "SqlTimeoutError" or result.reason_code == "DEADLINE_EXCEEDED"
