"""The tree of a run and the runs it delegated to (sub-agents), read back from a sink.

A delegated context's events carry ``parent_run_id``; `run_tree` follows it
downwards with `AuditQuery(parent_run_id=...)`, one query per run, bounded in
depth and size so a hostile or corrupted store cannot make it loop or explode.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from toolbox.audit._events import AuditRecord
from toolbox.audit._sink import AuditQuery, AuditSink

__all__ = ["MAX_DEPTH", "MAX_RUNS", "RunNode", "draw_tree", "run_tree"]

#: How deep the tree is followed (a run, its children, ...), and how many runs it holds at most.
MAX_DEPTH = 16
MAX_RUNS = 500
_PAGE = 100_000


@dataclass
class RunNode:
    """One run: its id, its event count, the runs it delegated to, and whether some were left out."""

    run_id: str
    events: int
    children: list[RunNode] = field(default_factory=list)
    truncated: bool = False

    def document(self) -> dict[str, object]:
        """JSON-ready: ``run_id``, ``events``, ``children`` (nested), ``truncated``."""
        return {
            "run_id": self.run_id,
            "events": self.events,
            "children": [child.document() for child in self.children],
            "truncated": self.truncated,
        }


def _children(sink: AuditSink, run_id: str) -> dict[str, int]:
    """Runs whose events name ``run_id`` as their parent, in order of first event, with event counts."""
    counts: dict[str, int] = {}
    for record in sink.query(AuditQuery(parent_run_id=run_id, limit=_PAGE)):
        counts[record.trace_id] = counts.get(record.trace_id, 0) + 1
    return counts


def run_tree(sink: AuditSink, run_id: str, records: Sequence[AuditRecord]) -> RunNode:
    """The tree under ``run_id`` (whose own events are ``records``)."""
    root = RunNode(run_id, len(records))
    seen = {run_id}
    pending = [(root, 0)]
    while pending:
        node, depth = pending.pop(0)
        children = {k: v for k, v in _children(sink, node.run_id).items() if k not in seen}
        if children and (depth >= MAX_DEPTH or len(seen) + len(children) > MAX_RUNS):
            node.truncated = True
            continue
        for child_id, count in children.items():
            seen.add(child_id)
            child = RunNode(child_id, count)
            node.children.append(child)
            pending.append((child, depth + 1))
    return root


def draw_tree(root: RunNode, clean: Callable[[object], str], parent_run_id: str | None = None) -> list[str]:
    """Lines drawing ``root`` and its descendants; ``clean`` makes ids safe to print."""
    lines = ["Runs:"]
    if parent_run_id:
        lines.append(f"  (delegated by {clean(parent_run_id)})")

    def add(node: RunNode, prefix: str, branch: str) -> None:
        more = " (deeper runs not shown)" if node.truncated else ""
        lines.append(f"  {prefix}{branch}{clean(node.run_id)}  {node.events} event(s){more}")
        extension = "" if not branch else ("    " if branch == "└── " else "│   ")
        for index, child in enumerate(node.children):
            last = index == len(node.children) - 1
            add(child, prefix + extension, "└── " if last else "├── ")

    add(root, "", "")
    return lines
