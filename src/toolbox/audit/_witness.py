"""Witnesses: copies of the signed checkpoints that the audit database's owner cannot rewrite.

A `Witness` accepts a checkpoint only when its signature verifies with a trusted key and,
if it already holds one of the same log, a consistency proof shows the new tree extends its
latest one: it refuses a log that did not only grow. It never replaces what it holds: a
second, different checkpoint of a size it has is a fork, refused and reported.

Where the copies live is a `WitnessStore`: `DirectoryWitness` (one file per checkpoint,
named by tree size, created with ``link`` so it is never overwritten: put the directory
where the database's owner cannot write, e.g. another host's mount or an append-only
bucket) or `SqlWitness` (a table in a second database, reached with other credentials).
"""

from __future__ import annotations

import os
import re
import secrets
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol, final, runtime_checkable

from sqlalchemy import BigInteger, Column, MetaData, Table, Text, create_engine, insert, select
from sqlalchemy.engine import Engine
from sqlalchemy.engine.url import make_url
from sqlalchemy.exc import IntegrityError, SQLAlchemyError

from toolbox.audit._merkle import verify_consistency
from toolbox.audit._note import Checkpoint, CheckpointError, VerifierKey, open_checkpoint

__all__ = ["CheckpointWitness", "DirectoryWitness", "SqlWitness", "Witness", "WitnessError", "WitnessStore"]

_FILE = re.compile(r"(\d{20})\.checkpoint")
_MAX_FILE = 1 << 16


class WitnessError(Exception):
    """A witness refused a checkpoint (bad signature, a log that did not only grow, a fork) or failed."""


@runtime_checkable
class WitnessStore(Protocol):
    """Where a witness keeps checkpoints: add-only, one note per (origin, size)."""

    @property
    def name(self) -> str:
        """How reports name this witness (never a password)."""

    def notes(self) -> list[str]:
        """Every note held, any order."""

    def add_new(self, size: int, note: str) -> bool:
        """Keep ``note`` as the checkpoint of ``size``; False (and nothing written) if one is held."""


@runtime_checkable
class CheckpointWitness(Protocol):
    """What a log hands checkpoints to: a `Witness` here, or an `HttpWitness` on another host."""

    @property
    def name(self) -> str:
        """How reports name this witness."""

    def notes(self) -> list[str]:
        """Every note held, as held."""

    def latest_size(self, origin: str) -> int:
        """The largest tree size held for ``origin`` (0: none)."""

    def add(self, note: str, proof: Sequence[bytes]) -> Checkpoint:
        """Keep ``note`` once it checks out (``proof``: consistency from the latest held)."""


@final
class DirectoryWitness:
    """Checkpoints as files ``<tree size, 20 digits>.checkpoint`` in ``path`` (one log per directory)."""

    __slots__ = ("_path",)

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self._path = Path(path)

    @property
    def name(self) -> str:
        return f"directory {str(self._path)!r}"

    def notes(self) -> list[str]:
        try:
            files = sorted(p for p in self._path.iterdir() if _FILE.fullmatch(p.name))
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise WitnessError(f"{self.name}: cannot list the checkpoints: {exc.strerror}") from None
        notes = []
        for file in files:
            try:
                with file.open("rb") as handle:
                    data = handle.read(_MAX_FILE + 1)
            except OSError as exc:
                raise WitnessError(f"{self.name}: cannot read {file.name}: {exc.strerror}") from None
            notes.append(data.decode("utf-8", "replace"))
        return notes

    def add_new(self, size: int, note: str) -> bool:
        try:
            self._path.mkdir(parents=True, exist_ok=True, mode=0o700)
            final_path = self._path / f"{size:020d}.checkpoint"
            temporary = self._path / f".incoming-{secrets.token_hex(8)}"
            with temporary.open("xb") as handle:  # whole and synced before it gets its name
                handle.write(note.encode("utf-8"))
                handle.flush()
                os.fsync(handle.fileno())
            try:
                os.chmod(temporary, 0o444)
                os.link(temporary, final_path)  # fails if the name exists: never overwritten
            except FileExistsError:
                return False
            finally:
                temporary.unlink()
            _sync_directory(self._path)
        except OSError as exc:
            raise WitnessError(f"{self.name}: cannot store the checkpoint: {exc.strerror}") from None
        return True


def _sync_directory(path: Path) -> None:
    if os.name != "posix":  # pragma: no cover - Windows has no directory handles
        return
    handle = os.open(path, os.O_RDONLY)
    try:
        os.fsync(handle)
    finally:
        os.close(handle)


_witness_metadata = MetaData()
_witness_table = Table(
    "audit_witness_checkpoints",
    _witness_metadata,
    Column("origin", Text, primary_key=True),
    Column("tree_size", BigInteger, primary_key=True, autoincrement=False),
    Column("note", Text, nullable=False),
)


@final
class SqlWitness:
    """Checkpoints in the table ``audit_witness_checkpoints`` of a second database.

    ``url`` is a SQLAlchemy URL (``sqlite:///path`` or ``postgresql+psycopg://``) with
    credentials of their own: the audit store's owner must not be able to update or delete
    rows there (grant INSERT and SELECT only). ``origin`` is the log the rows belong to.
    """

    __slots__ = ("_engine", "_name", "_origin", "_ready")

    def __init__(self, url: str, *, origin: str) -> None:
        parsed = make_url(url)
        if parsed.drivername in ("postgresql", "postgres"):
            parsed = parsed.set(drivername="postgresql+psycopg")
        self._engine: Engine = create_engine(parsed, hide_parameters=True)
        self._name = f"SQL witness {parsed.render_as_string(hide_password=True)}"
        self._origin = origin
        self._ready = False

    @property
    def name(self) -> str:
        return self._name

    def _prepare(self) -> None:
        if not self._ready:
            _witness_metadata.create_all(self._engine)
            self._ready = True

    def notes(self) -> list[str]:
        try:
            self._prepare()
            with self._engine.connect() as conn:
                rows = conn.execute(
                    select(_witness_table.c.note).where(_witness_table.c.origin == self._origin)
                )
                return [str(note) for (note,) in rows]
        except SQLAlchemyError as exc:
            raise WitnessError(f"{self.name}: cannot read the checkpoints: {type(exc).__name__}") from None

    def add_new(self, size: int, note: str) -> bool:
        try:
            self._prepare()
            with self._engine.begin() as conn:
                conn.execute(insert(_witness_table).values(origin=self._origin, tree_size=size, note=note))
        except IntegrityError:
            return False
        except SQLAlchemyError as exc:
            raise WitnessError(f"{self.name}: cannot store the checkpoint: {type(exc).__name__}") from None
        return True

    def close(self) -> None:
        self._engine.dispose()


@final
class Witness:
    """Accepts checkpoints of one log into ``store``: signed by a key of ``keys``, only ever growing."""

    __slots__ = ("_keys", "_store")

    def __init__(self, store: WitnessStore, keys: Sequence[VerifierKey]) -> None:
        self._store = store
        self._keys = tuple(keys)

    @property
    def name(self) -> str:
        return self._store.name

    def notes(self) -> list[str]:
        """Every note held, as held (unverified: `verify_log` judges each)."""
        return self._store.notes()

    def checkpoints(self, origin: str) -> list[Checkpoint]:
        """The checkpoints of ``origin`` held (each signature verified), by size."""
        held = [open_checkpoint(note, self._keys) for note in self._store.notes()]
        return sorted((c for c in held if c.origin == origin), key=lambda c: c.size)

    def latest_size(self, origin: str) -> int:
        """The largest tree size held for ``origin`` (0: none)."""
        held = self.checkpoints(origin)
        return held[-1].size if held else 0

    def add(self, note: str, proof: Sequence[bytes]) -> Checkpoint:
        """Keep ``note`` once its signature verifies and ``proof`` shows it extends the latest held."""
        try:
            checkpoint = open_checkpoint(note, self._keys)
        except CheckpointError as exc:
            raise WitnessError(f"{self.name} refuses the checkpoint: {exc}") from None
        held = {c.size: c for c in self.checkpoints(checkpoint.origin)}
        same = held.get(checkpoint.size)
        if same is not None:
            if same.root == checkpoint.root:
                return same  # already held (a retry): nothing to do
            raise WitnessError(
                f"{self.name} refuses the checkpoint: FORK: "
                f"it holds another root for tree size {checkpoint.size}"
            )
        if held:
            latest = held[max(held)]
            if latest.size > checkpoint.size:
                raise WitnessError(
                    f"{self.name} refuses the checkpoint: "
                    f"it holds a larger tree ({latest.size} > {checkpoint.size})"
                )
            if not verify_consistency(latest.size, checkpoint.size, latest.root, checkpoint.root, proof):
                raise WitnessError(
                    f"{self.name} refuses the checkpoint: tree {checkpoint.size} does not extend the tree "
                    f"{latest.size} it holds (the log was rewritten, or a fork)"
                )
        if not self._store.add_new(checkpoint.size, note):
            return self.add(note, proof)  # another writer was first: judge against what it stored
        return checkpoint
