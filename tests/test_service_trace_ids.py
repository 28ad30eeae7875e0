"""The service's trace ids: version-7 UUIDs, time-ordered (an audit store files new traces in order)."""

from __future__ import annotations

import time
import uuid

from toolbox.service._identity import new_trace_id


def test_a_trace_id_is_a_version_7_uuid_of_its_millisecond() -> None:
    before = time.time_ns() // 1_000_000
    trace_id = new_trace_id()
    after = time.time_ns() // 1_000_000
    assert len(trace_id) == 32 and trace_id == trace_id.lower()
    parsed = uuid.UUID(hex=trace_id)
    assert parsed.version == 7 and parsed.variant == uuid.RFC_4122
    assert before <= int(trace_id[:12], 16) <= after  # its first 48 bits: the time in milliseconds


def test_trace_ids_made_in_the_same_millisecond_still_differ() -> None:
    ids = [new_trace_id() for _ in range(5000)]  # many per millisecond: 74 random bits tell them apart
    assert len(set(ids)) == len(ids)
