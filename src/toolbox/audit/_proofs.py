"""Inclusion proofs as documents: what ``toolbox audit prove`` prints and ``check-proof`` verifies.

A proof holds the event (its fields, for people), ``event_text`` (the exact text its chain hash
is the SHA-256 of: a JSON array of the fields in storage order), ``event_hash``, its
``log_index``, the ``tree_size`` and signed ``checkpoint`` of the first checkpoint that covers
it, and the RFC 9162 ``inclusion_path`` (base64). Checking it needs no database: the text gives
the hash, the hash gives the leaf, the path gives the root, and the key verifies the root.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Sequence
from typing import Any

from toolbox.audit._events import chain_text
from toolbox.audit._log import MerkleLog, event_leaf
from toolbox.audit._merkle import verify_inclusion
from toolbox.audit._note import VerifierKey, open_checkpoint
from toolbox.audit.sinks._sql import SqlSink

__all__ = ["ProofError", "check_proof", "inclusion_document"]


class ProofError(ValueError):
    """No proof can be made (the event is unknown or in no checkpoint yet), or a proof fails."""


def inclusion_document(sink: SqlSink, event_id: str) -> dict[str, Any]:
    """The inclusion proof of stored event ``event_id`` in the first checkpoint that covers it."""
    log = MerkleLog(sink)
    trace_id = log.trace_of(event_id)
    records = [] if trace_id is None else [r for r in sink.read_trace(trace_id) if r.event_id == event_id]
    if not records:
        raise ProofError("no such event in the store")
    index = log.index_of(event_id)
    covering = None if index is None else log.checkpoint_covering(index)
    if index is None or covering is None:
        raise ProofError("the event is in no checkpoint yet: run `toolbox audit checkpoint` first")
    size, note = covering
    event = records[0].storage_dict()
    return {
        "log_index": index,
        "tree_size": size,
        "event": event,
        "event_text": chain_text(event),
        "event_hash": records[0].hash,
        "inclusion_path": [base64.b64encode(h).decode("ascii") for h in log.inclusion(index, size)],
        "checkpoint": note,
    }


def check_proof(document: Any, keys: Sequence[VerifierKey]) -> str:
    """What ``document`` proves, once every step holds (raises `ProofError` or `CheckpointError`)."""
    try:
        event, text, digest = document["event"], document["event_text"], document["event_hash"]
        index, size, note = int(document["log_index"]), int(document["tree_size"]), document["checkpoint"]
        path = [base64.b64decode(p, validate=True) for p in document["inclusion_path"]]
    except (KeyError, TypeError, ValueError) as exc:
        raise ProofError(f"not a proof printed by `toolbox audit prove` ({type(exc).__name__})") from None
    if not isinstance(event, dict) or not isinstance(text, str) or not isinstance(note, str):
        raise ProofError("not a proof printed by `toolbox audit prove`")
    try:
        recomputed = chain_text(event)
    except (KeyError, TypeError, ValueError):
        raise ProofError("the proof's event lacks fields or holds values no event has") from None
    if recomputed != text or hashlib.sha256(text.encode("utf-8")).hexdigest() != digest:
        raise ProofError("the event does not give the hash the proof names (edited)")
    checkpoint = open_checkpoint(note, keys)
    if checkpoint.size != size:
        raise ProofError("the proof's tree size is not the checkpoint's")
    if not verify_inclusion(event_leaf(digest), index, size, path, checkpoint.root):
        raise ProofError(f"the event is not at log index {index} of the signed tree (the path fails)")
    return (
        f"OK: event {event.get('event_id')} (trace {event.get('trace_id')} #{event.get('sequence')}) is "
        f"entry {index} of {checkpoint.origin}'s tree of {size}, signed {checkpoint.timestamp}"
    )
