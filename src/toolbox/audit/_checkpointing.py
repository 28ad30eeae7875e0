"""Checkpoints from the policy file: ``[audit.checkpoints]``, by command or in the background.

::

    [audit.checkpoints]
    origin = "audit.example.com/prod"          # the log's name in its checkpoints
    key_file = "/etc/toolbox/log.key"          # Ed25519, mode 600 (toolbox audit keygen)
    key_name = "audit.example.com/log"
    witness_dirs = ["/mnt/witness-host/audit"] # directory witnesses
    witness_url_envs = ["TOOLBOX_WITNESS_URL"] # SQL witnesses: the NAME of a variable with the URL
    witness_http = [{ url = "https://witness.example.com", key_file = "witness.key.pub" }]
    every_seconds = 60                         # background: a checkpoint a minute (0: none)
    every_events = 10000                       # background: or as soon as this many are new

``toolbox audit checkpoint --policy FILE`` uses the table; a process whose trail the file
builds also checkpoints in a background thread (`Checkpointer`) when ``every_seconds`` or
``every_events`` is set, on the first SQLite or PostgreSQL sink. The thread only reads and
sequences: a STRICT call never waits for it (on SQLite a checkpoint's short write transaction
queues with the writers, as any writer does).
"""

from __future__ import annotations

import logging
import os
import re
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, final

from sqlalchemy import func, select

from toolbox.audit._sink import AuditSinkError
from toolbox.audit.sinks._sql import SqlSink
from toolbox.audit.sinks._sql_schema import checkpoints_table
from toolbox.errors import ConfigurationError
from toolbox.foundations._table_reader import TableReader

__all__ = ["CheckpointSettings", "Checkpointer", "checkpoint_settings"]

_KEYS = {
    "origin",
    "key_file",
    "key_name",
    "witness_dirs",
    "witness_url_envs",
    "witness_http",
    "every_seconds",
    "every_events",
}
_log = logging.getLogger("toolbox.audit")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")  # as the sinks' url_env


@final
@dataclass(frozen=True)
class CheckpointSettings:
    """What ``[audit.checkpoints]`` says."""

    origin: str
    key_file: str
    key_name: str
    witness_dirs: tuple[str, ...] = ()
    witness_url_envs: tuple[str, ...] = ()
    #: (URL, verifier key file) of each HTTP witness (``toolbox audit witness-serve``).
    witness_http: tuple[tuple[str, str], ...] = ()
    every_seconds: int = 0
    every_events: int = 0

    def signer(self) -> Any:
        from toolbox.audit._note import KeyFileSigner

        return KeyFileSigner(self.key_file, name=self.key_name)

    def witnesses(self, keys: Any) -> list[Any]:
        """The configured witnesses, trusting ``keys``."""
        from toolbox.audit._witness import DirectoryWitness, SqlWitness, Witness

        stores: list[Any] = [DirectoryWitness(d) for d in self.witness_dirs]
        for name in self.witness_url_envs:
            url = os.environ.get(name)
            if not url:
                raise ConfigurationError(f"audit.checkpoints: environment variable {name} is not set")
            stores.append(SqlWitness(url, origin=self.origin))
        from toolbox.audit._note import VerifierKey
        from toolbox.audit._witness_http import HttpWitness

        remote = []
        for url, key_file in self.witness_http:
            try:
                with open(key_file, encoding="utf-8") as handle:
                    witness_key = VerifierKey.parse(handle.readline())
            except OSError as exc:
                raise ConfigurationError(
                    f"audit.checkpoints: cannot read {key_file}: {exc.strerror}"
                ) from None
            remote.append(HttpWitness(url, witness_key, keys))
        return [*(Witness(s, keys) for s in stores), *remote]


def checkpoint_settings(config: Mapping[str, Any], *, source: str) -> CheckpointSettings | None:
    """The checked ``checkpoints`` table of ``[audit]`` (None: there is none)."""
    if "checkpoints" not in config:
        return None
    table = TableReader(config, source=source, path="audit").table("checkpoints")
    table.only(_KEYS)
    from toolbox.audit._log import check_origin
    from toolbox.audit._note import CheckpointError

    origin = table.string("origin")
    try:
        check_origin(origin)
    except CheckpointError as exc:
        raise table.error("origin", str(exc)) from None
    envs = table.strings("witness_url_envs", [], what="variable name")
    for name in envs:
        if not _ENV_NAME.fullmatch(name):
            raise table.error("witness_url_envs", "takes NAMES of environment variables, never a URL")
    remote = []
    for witness in table.tables("witness_http"):
        witness.only({"url", "key_file"})
        url = witness.string("url")
        if not url.startswith(("http://", "https://")) or "@" in url:
            raise witness.error("url", "an http:// or https:// URL without credentials")
        remote.append((url, witness.string("key_file")))
    return CheckpointSettings(
        origin=origin,
        witness_http=tuple(remote),
        key_file=table.string("key_file"),
        key_name=table.string("key_name"),
        witness_dirs=tuple(table.strings("witness_dirs", [], what="directory")),
        witness_url_envs=tuple(envs),
        every_seconds=table.integer("every_seconds", 0, minimum=0),
        every_events=table.integer("every_events", 0, minimum=0),
    )


@final
class Checkpointer:
    """Checkpoints ``sink`` every ``every_seconds``, or once ``every_events`` are new, in a daemon thread.

    ``every_events`` is checked every few seconds (a count of the checkpoints' table and the
    store's newest events, never on the write path). A failed checkpoint or a refusing witness
    is logged (``toolbox.audit``, ERROR) and retried at the next turn.
    """

    __slots__ = ("_settings", "_sink", "_stop", "_thread", "_wait")

    def __init__(
        self, sink: SqlSink, settings: CheckpointSettings, *, wait: Callable[[float], bool] | None = None
    ) -> None:
        self._sink = sink
        self._settings = settings
        self._stop = threading.Event()
        # Sleeps ``seconds`` unless stopped (True: stop). Tests pass their own: no real waiting.
        self._wait = wait or self._stop.wait
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="toolbox-audit-checkpoints", daemon=True)
            self._thread.start()

    def run_once(self) -> str | None:
        """One checkpoint, handed to the witnesses; the note (None when it failed: logged)."""
        from toolbox.audit._log import MerkleLog
        from toolbox.audit._note import CheckpointError
        from toolbox.audit._witness import WitnessError

        try:
            signer = self._settings.signer()
            log = MerkleLog(self._sink)
            note: str = log.checkpoint(signer, self._settings.origin)
            log.publish(note, self._settings.witnesses([signer.verifier_key]))
        except (AuditSinkError, CheckpointError, WitnessError, ConfigurationError, OSError) as exc:
            _log.error("audit checkpoint failed: %s", exc)
            return None
        return note

    def _new_events(self) -> int:
        """Events stored since the latest checkpoint (an estimate from the log's own tables)."""
        from toolbox.audit._log import MerkleLog

        with self._sink.reading("count new events") as conn:
            covered = conn.execute(
                select(func.coalesce(func.max(checkpoints_table.c.tree_size), 0))
            ).scalar_one()
        return MerkleLog(self._sink).stored_events() - int(covered)

    def _loop(self) -> None:
        every, count = self._settings.every_seconds, self._settings.every_events
        tick = min(x for x in (every, 5 if count else 0) if x) if (every or count) else 0
        waited = 0
        while tick and not self._wait(tick):
            waited += tick
            try:
                due = (every and waited >= every) or (count and self._new_events() >= count)
            except AuditSinkError as exc:
                _log.error("audit checkpoint: cannot count new events: %s", exc)
                continue
            if due:
                waited = 0
                if self._sink_closed():
                    return
                self.run_once()

    def _sink_closed(self) -> bool:
        try:
            self._sink.schema_version()
        except AuditSinkError:
            return True
        return False

    def close(self) -> None:
        """Stop the thread (a checkpoint under way finishes first)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
