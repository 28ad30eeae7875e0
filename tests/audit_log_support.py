"""Shared by the Merkle log tests: fixed times, a key on disk, a store's log and witnesses, and the
attacker: someone with full access to the audit database (not to the signing key or witnesses)."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from audit_sql_support import Store, event
from toolbox.audit import AuditEvent, AuditQuery, verify_chain, verify_heads
from toolbox.audit._events import GENESIS_HASH, chain_hash
from toolbox.audit._log import MerkleLog
from toolbox.audit._log_verify import LogProblem, WitnessedNote, verify_log
from toolbox.audit._note import KeyFileSigner, VerifierKey, generate_key
from toolbox.audit._witness import DirectoryWitness, SqlWitness, Witness
from toolbox.audit.sinks._sql import SqlSink

ORIGIN = "audit.example.com/prod"
T0 = datetime(2026, 1, 1, 10, 0, tzinfo=timezone.utc).timestamp()
NOON = datetime(2026, 1, 1, 12, 0, tzinfo=timezone.utc)


def at(seconds: float, trace_id: str, **fields: Any) -> AuditEvent:
    """An event of ``trace_id`` made ``seconds`` after 10:00 UTC on 2026-01-01."""
    made = event(trace_id, **fields)
    made.timestamp = T0 + seconds
    return made


def signing_key(tmp_path: Path, name: str = "audit-log") -> tuple[KeyFileSigner, VerifierKey]:
    pem, verifier = generate_key(name)
    path = tmp_path / f"{name}.pem"
    path.write_bytes(pem)
    path.chmod(0o600)
    return KeyFileSigner(path, name=name), verifier


class Log:
    """A store with its Merkle log, a signing key and two witnesses (a directory and a SQL table)."""

    def __init__(self, store: Store, tmp_path: Path) -> None:
        self.store = store
        self.sink: SqlSink = store.sink()
        self.log = MerkleLog(self.sink)
        self.signer, self.key = signing_key(tmp_path)
        self.sql_witness = SqlWitness(f"sqlite:///{tmp_path / 'witness.db'}", origin=ORIGIN)
        self.witnesses = [
            Witness(DirectoryWitness(tmp_path / "witness"), [self.key]),
            Witness(self.sql_witness, [self.key]),
        ]

    def checkpoint(self, now: datetime = NOON) -> str:
        note = self.log.checkpoint(self.signer, ORIGIN, now=now)
        self.log.publish(note, self.witnesses)
        return note

    def notes(self) -> list[WitnessedNote]:
        return [WitnessedNote(w.name, note) for w in self.witnesses for note in w.notes()]

    def problems(self) -> list[LogProblem]:
        records = self.sink.query(AuditQuery(limit=2**31 - 1))
        return verify_log(records, self.log.entries(), self.notes(), [self.key], origin=ORIGIN)

    def chain_problems(self) -> list[Any]:
        """What the keyless per-trace chain and heads alone find."""
        records = self.sink.query(AuditQuery(limit=2**31 - 1))
        return [*verify_chain(records), *verify_heads(records, self.sink.trace_heads())]


def _event_tables(store: Store) -> list[str]:
    return ["audit_events", "audit_pending"] if store.kind == "sqlite" else ["audit_events"]


def rewrite_trace(
    store: Store, sink: SqlSink, trace_id: str, change: Callable[[list[dict[str, Any]]], list[dict[str, Any]]]
) -> None:
    """The attacker: rewrite a trace's events with ``change``, then recompute every sequence, hash and
    the head, so the trace's chain and head verify again (a trace left with no event loses its head)."""
    rows = change([r.storage_dict() for r in sink.read_trace(trace_id)])
    previous = GENESIS_HASH
    for sequence, row in enumerate(rows, start=1):
        row["sequence"], row["previous_hash"] = sequence, previous
        row["hash"] = previous = chain_hash(row)
    statements = [f"DELETE FROM {table} WHERE trace_id = :t" for table in _event_tables(store)]
    statements.append("DELETE FROM audit_trace_heads WHERE trace_id = :t")
    store.execute(*statements, t=trace_id)
    for row in rows:
        values = {**row, "rule_ids": json.dumps(row["rule_ids"])}
        columns = ", ".join(values)
        store.execute(
            f"INSERT INTO audit_events ({columns}) VALUES ({', '.join(':' + c for c in values)})", **values
        )
    if rows:
        store.execute(
            "INSERT INTO audit_trace_heads (trace_id, last_sequence, last_hash) VALUES (:t, :s, :h)",
            t=trace_id,
            s=len(rows),
            h=previous,
        )


def rebuild_log(store: Store, log: MerkleLog) -> None:
    """The attacker covers the tracks: the log is built again from the rewritten events (every
    leaf hash right, no gap) and the store's own checkpoint copies are deleted."""
    store.execute("DELETE FROM audit_log", "DELETE FROM audit_checkpoints")
    log.sequence()
