"""`JsonlSink`: one JSON object per line, appended and flushed per batch."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import final

from toolbox.audit._events import AuditEvent, AuditRecord
from toolbox.audit._filtering import select
from toolbox.audit._sink import AuditQuery, AuditSinkError, ChainState, chain_rows

__all__ = ["JsonlSink"]


@final
class JsonlSink:
    """Appends events to a JSON Lines file; the chain continues from what the file holds.

    One process should write a file at a time (use SQLite or PostgreSQL for more).
    """

    __slots__ = ("_chain", "_lock", "_path")

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self._path = Path(path)
        self._chain = ChainState()
        self._lock = threading.Lock()
        for record in self._load():
            self._chain.set_head(record.trace_id, record.sequence, record.hash)

    @property
    def path(self) -> Path:
        """The file."""
        return self._path

    def _load(self) -> list[AuditRecord]:
        if not self._path.exists():
            return []
        try:
            with self._path.open(encoding="utf-8") as handle:
                return [AuditRecord.model_validate_json(line) for line in handle if line.strip()]
        except (OSError, ValueError) as exc:
            raise AuditSinkError(
                f"cannot read audit file {str(self._path)!r}: {type(exc).__name__}"
            ) from None

    def append(self, events: Sequence[AuditEvent]) -> None:
        """Append ``events`` and flush them to disk before returning."""
        with self._chain.lock:
            rows, heads = chain_rows(events, self._chain.head)
            text = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
            try:
                with self._path.open("a", encoding="utf-8") as handle:
                    handle.write(text)
                    handle.flush()
                    os.fsync(handle.fileno())
            except OSError as exc:
                raise AuditSinkError(f"cannot write audit file {str(self._path)!r}: {exc.strerror}") from None
            for trace_id, (sequence, digest) in heads.items():
                self._chain.set_head(trace_id, sequence, digest)

    def read_trace(self, trace_id: str) -> list[AuditRecord]:
        """Every event of ``trace_id`` in sequence order (as stored: not re-verified)."""
        return sorted((r for r in self._load() if r.trace_id == trace_id), key=lambda r: r.sequence)

    def query(self, query: AuditQuery) -> list[AuditRecord]:
        """Events matching ``query``."""
        return select(self._load(), query)

    def close(self) -> None:
        """Nothing held open between writes."""
