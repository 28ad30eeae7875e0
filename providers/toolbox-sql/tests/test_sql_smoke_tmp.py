from toolbox import Status

from .sql_support import ACME


def test_smoke(db):
    before = db.checksum()
    gateway = db.gateway()
    result = gateway.invoke(
        "sql.shop.query",
        {"sql": "SELECT customer, total FROM orders ORDER BY id", "purpose": "p"},
        context=ACME,
    )
    assert result.status is Status.SUCCESS, result.message
    print(result.content.rows)
    assert db.checksum() == before
