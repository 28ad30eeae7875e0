"""Which checkpoint covers a trace: the line the console's trace page shows.

Read from the store's own copy of the checkpoints, so it says what the store claims; the
proof that holds against the owner is ``toolbox audit verify`` with the witnesses and the key.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import final

from toolbox.audit._log import MerkleLog
from toolbox.audit._note import Checkpoint, CheckpointError
from toolbox.audit._sink import AuditSink, AuditSinkError
from toolbox.audit.sinks._sql import SqlSink

__all__ = ["TraceInclusion", "trace_inclusion"]


@final
@dataclass(frozen=True)
class TraceInclusion:
    """The first checkpoint that covers every event of a trace (``tree_size`` 0: none yet)."""

    tree_size: int
    signed_at: str
    signers: tuple[str, ...]

    def __str__(self) -> str:
        if not self.tree_size:
            return "not in a signed checkpoint yet"
        signers = ", ".join(self.signers)
        return f"included in checkpoint {self.tree_size}, signed by {signers} at {self.signed_at}"


def _signers(note: str) -> tuple[str, ...]:
    lines = note[note.rfind("\n\n") + 2 :].splitlines()
    return tuple(line.split(" ")[1] for line in lines if line.startswith("\u2014 ") and line.count(" ") == 2)


def trace_inclusion(sink: AuditSink, event_ids: Sequence[str]) -> TraceInclusion | None:
    """The checkpoint covering ``event_ids`` (None: the store keeps no Merkle log, or cannot say)."""
    if not isinstance(sink, SqlSink) or not event_ids:
        return None
    log = MerkleLog(sink)
    try:
        indexes = [log.index_of(event_id) for event_id in event_ids]
        if any(index is None for index in indexes):
            return TraceInclusion(0, "", ())
        covering = log.checkpoint_covering(max(i for i in indexes if i is not None))
        if covering is None:
            return TraceInclusion(0, "", ())
        size, note = covering
        checkpoint = Checkpoint.parse(note[: note.rfind("\n\n") + 1])
    except (AuditSinkError, CheckpointError):
        return None
    return TraceInclusion(size, checkpoint.timestamp, _signers(note))
