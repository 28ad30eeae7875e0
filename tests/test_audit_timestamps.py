"""`iso_timestamp`: the text every event stores and hashes, formatted once per second.

It must be exactly what ``datetime.fromtimestamp(t, timezone.utc).isoformat(
timespec="microseconds")`` gives: stored events from before the cache verify
only if their timestamps read the same.
"""

from __future__ import annotations

import random
import threading
import time
from datetime import datetime, timezone

import pytest

from toolbox.audit._events import iso_timestamp


def reference(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, tz=timezone.utc).isoformat(timespec="microseconds")


EDGES = [
    0.0,
    1.5,
    -0.5,
    -1.0000005,
    1_000_000_000.9999995,  # rounds up into the next second
    1_000_000_000.0000005,  # half a microsecond: to even
    1_000_000_000.0000015,
    1_764_000_000.9999999,
    1_764_000_000.4999995,
    1_764_000_000.0,
    253_402_300_799.0,  # 9999-12-31T23:59:59
]


@pytest.mark.parametrize("timestamp", EDGES)
def test_edges_read_as_datetime_formats_them(timestamp: float) -> None:
    assert iso_timestamp(timestamp) == reference(timestamp)


def test_random_and_half_microsecond_timestamps_read_as_datetime_formats_them() -> None:
    chosen = random.Random(7)
    now = time.time()
    cases = [now + chosen.uniform(-1e6, 1e6) for _ in range(50_000)]
    cases += [int(now) + k / 1e6 + 5e-7 for k in range(0, 1_000_000, 101)]  # every tie region
    assert [iso_timestamp(t) for t in cases] == [reference(t) for t in cases]


def test_alternating_seconds_from_many_threads_never_mix_their_dates() -> None:
    """The one-entry cache is replaced whole: a thread never sees another second's date text."""
    stamps = [1_700_000_000.25, 1_800_000_000.75, 1_600_000_000.5]
    wrong: list[str] = []

    def work(offset: int) -> None:
        for index in range(5_000):
            stamp = stamps[(index + offset) % len(stamps)]
            if iso_timestamp(stamp) != reference(stamp):
                wrong.append(reference(stamp))

    threads = [threading.Thread(target=work, args=(n,)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert wrong == []
