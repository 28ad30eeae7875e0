"""Prometheus metrics of one app: calls by tool and status, latency, audit queue depth.

Each app has its own registry (two apps in one process never share counters).
Label values come from the catalog, never from the request: an unknown name
is counted as ``unknown``, so an attacker cannot grow the label set.
"""

from __future__ import annotations

from typing import final

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from toolbox.audit._trail import AuditTrail

__all__ = ["CONTENT_TYPE", "ServiceMetrics"]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


def _queue_depth(trail: AuditTrail | None) -> float:
    # ASYNC trails queue events for their writer; the other modes write inline (depth 0).
    return float(trail.queue_depth) if trail is not None else 0.0


@final
class ServiceMetrics:
    """The app's collectors."""

    __slots__ = ("_calls", "_children", "_latency", "registry")

    def __init__(self, trail: AuditTrail | None) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self._calls = Counter(
            "toolbox_calls", "Governed calls by tool and status", ("tool", "status"), registry=self.registry
        )
        self._latency = Histogram(
            "toolbox_call_seconds",
            "Latency of governed calls",
            ("tool",),
            buckets=_BUCKETS,
            registry=self.registry,
        )
        depth = Gauge(
            "toolbox_audit_queue_depth",
            "Batches of audit events waiting for the ASYNC writer",
            registry=self.registry,
        )
        depth.set_function(lambda: _queue_depth(trail))
        # (tool, status) -> the two children it counts in: `labels` takes a lock and builds a key on
        # every call. Bounded: the names are the catalog's (or ``unknown``), the statuses an enum's.
        self._children: dict[tuple[str, str], tuple[Counter, Histogram]] = {}

    def observe(self, tool: str, status: str, seconds: float) -> None:
        """Count one call of ``tool`` (a registered name or ``unknown``) and its latency."""
        children = self._children.get((tool, status))
        if children is None:
            children = self._children[(tool, status)] = (
                self._calls.labels(tool, status),
                self._latency.labels(tool),
            )
        children[0].inc()
        children[1].observe(seconds)

    def render(self) -> bytes:
        """The exposition text."""
        return generate_latest(self.registry)
