"""``toolbox_audit_queue_depth`` reads `AuditTrail.queue_depth`: the ASYNC writer's backlog, live."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from service_support import RUNS, deployment
from toolbox.audit import AuditEvent, AuditTrail, SqliteSink


class GatedSink(SqliteSink):
    """A SQLite sink whose appends wait for ``gate``: the ASYNC writer backs up behind it."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.gate = threading.Event()
        self.waiting = threading.Event()

    def append(self, events: Sequence[AuditEvent]) -> None:
        self.waiting.set()
        self.gate.wait(30)
        super().append(events)


def depth(text: str) -> float:
    found = re.search(r"^toolbox_audit_queue_depth (\S+)$", text, re.MULTILINE)
    assert found, text
    return float(found.group(1))


def test_queue_depth_is_zero_for_trails_that_write_inline(tmp_path: Path) -> None:
    for mode in ("STRICT", "BEST_EFFORT"):
        trail = AuditTrail(SqliteSink(tmp_path / f"{mode}.db"), mode=mode)
        assert trail.queue_depth == 0
        trail.close()


def test_metrics_show_the_async_writers_backlog_and_its_drain(tmp_path: Path) -> None:
    sink = GatedSink(tmp_path / "audit.db")
    with deployment(tmp_path, sink=sink, mode="ASYNC") as service:
        assert depth(service.get("/metrics", "bob").text) == 0.0
        first = service.invoke("alice", "echo", {"text": "0"}, purpose="Greet")
        assert first.status_code == 200, first.text
        assert sink.waiting.wait(10)  # the writer now holds a batch, blocked in the sink
        for index in range(1, 5):
            response = service.invoke("alice", "echo", {"text": str(index)}, purpose="Greet")
            assert response.status_code == 200, response.text
        assert RUNS["echo"] == 5
        # Calls answer at once (ASYNC); their events wait in the queue behind the blocked writer.
        assert depth(service.get("/metrics", "bob").text) >= 4.0
        sink.gate.set()
        deadline = time.monotonic() + 20
        while depth(service.get("/metrics", "bob").text) != 0.0:
            assert time.monotonic() < deadline, "the audit queue never drained"
            time.sleep(0.05)
