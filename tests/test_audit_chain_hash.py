"""`chain_hash` encodes with a C encoder built once: the same text, so the same hashes, as before.

Every stored chain depends on these bytes: the encoder built once must give
exactly what ``json.JSONEncoder(separators=(",", ":"), ensure_ascii=False,
default=str).encode`` gives, for any value a row can hold, in any thread,
and with or without the C accelerator.
"""

from __future__ import annotations

import hashlib
import json
import random
import threading
from decimal import Decimal
from typing import Any

import pytest

from toolbox.audit import _events as events
from toolbox.audit._events import FIELDS, chain_hash

ODD_TEXTS = [
    "",
    "plain",
    'quote " and backslash \\',
    "control \x00\x01\x1f\x7f and tab\t newline\n",
    "héllo ✓ 日本 \U0001f600",
    "\u2028\u2029",
    "x" * 10_000,
]
ODD_NUMBERS = [0, -1, 2**63, 10**40, 0.1, -0.0, 1e300, 5e-324, float("nan"), float("inf"), True, False]


def reference(data: dict[str, Any]) -> str:
    """The chain hash as the JSON module encodes it (what every stored chain was hashed with)."""
    values: list[Any] = [data[name] for name in FIELDS[: FIELDS.index("hash")]]
    for optional in ("parent_run_id", "credential"):  # the fields of later schema versions, when set
        if data.get(optional) is not None:
            values.append([optional, data[optional]])
    text = json.dumps(values, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def row(rng: random.Random) -> dict[str, Any]:
    data: dict[str, Any] = {}
    for name in FIELDS:
        kind = rng.randrange(4)
        if kind == 0:
            data[name] = rng.choice(ODD_TEXTS)
        elif kind == 1:
            data[name] = rng.choice(ODD_NUMBERS)
        elif kind == 2:
            data[name] = None
        else:
            data[name] = rng.choice([(), ("warn:a", "é"), ["x", "y"], Decimal("1.10")])
    return data


def test_a_known_event_keeps_its_hash() -> None:
    data = dict.fromkeys(FIELDS)
    data |= {"event_id": "e1", "trace_id": "t1", "sequence": 1, "type": "INTENT_DECLARED", "rule_ids": ()}
    data |= {"timestamp": "2026-12-03T00:00:00.000000+00:00", "previous_hash": "0" * 64, "duration": 0.25}
    assert chain_hash(data) == reference(data)
    assert chain_hash(data) == "e28db20912fe1a0fecea53ac7117d347d9c0af2033a50d27ddfc1e6f939f9b1f"
    data["parent_run_id"] = "parent"
    assert chain_hash(data) == reference(data)
    with_parent = chain_hash(data)
    data["credential"] = "api-key:ci-bot"  # schema version 5: hashed when set, after the parent
    assert chain_hash(data) == reference(data) != with_parent


def test_random_rows_hash_as_the_json_module_encodes_them() -> None:
    rng = random.Random(13)
    for _ in range(5_000):
        data = row(rng)
        assert chain_hash(data) == reference(data)


def test_without_the_c_accelerator_the_hashes_are_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(7)
    rows = [row(rng) for _ in range(500)]
    built_once = [chain_hash(data) for data in rows]
    monkeypatch.setattr(events, "_ENCODE_CHUNKS", None)
    assert [chain_hash(data) for data in rows] == built_once == [reference(data) for data in rows]


def test_threads_hashing_the_same_rows_at_once_agree() -> None:
    """No state is shared between encodes: a shared tuple encoded by 8 threads at once is no cycle."""
    rng = random.Random(3)
    shared = ("warn:a", "warn:b")
    rows = [row(rng) | {"rule_ids": shared} for _ in range(300)]
    wanted = [reference(data) for data in rows]
    results: list[list[str]] = []
    barrier = threading.Barrier(8)

    def work() -> None:
        barrier.wait()
        results.append([chain_hash(data) for data in rows for _ in range(5)][::5])

    threads = [threading.Thread(target=work) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == [wanted] * 8
