"""Signed checkpoints in the C2SP ``tlog-checkpoint`` / ``signed-note`` text form (Ed25519).

A checkpoint's body is four lines, each ending in a newline::

    <origin>                       the store's name (the log's identity)
    <tree size>                    decimal, no leading zeros
    <root hash>                    base64 (standard alphabet) of the 32-byte RFC 9162 root
    timestamp <ISO 8601 UTC>       an extension line: when it was signed

then a blank line and one signature line per key: an em dash (U+2014), a space, the key
name, a space, and base64 of the 4-byte key id followed by the 64-byte Ed25519 signature of
the body (every byte up to and including its last newline). The key id is the first four
bytes of ``SHA-256(key name || 0x0A || 0x01 || public key)``; a verifier key is written
``<name>+<hex key id>+<base64(0x01 || public key)>``, as Go's ``sumdb/note`` writes it, so
tools of the transparency-log ecosystem read both.

The private key never reaches the store: `KeyFileSigner` reads a PEM (or raw 32-byte) file
that only its owner may read, and any object with the `Signer` methods (a KMS or an HSM)
signs instead.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
import re
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, final, runtime_checkable

try:
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise ImportError(
        "Signed audit checkpoints need cryptography. "
        'Please install it: pip install "toolbox-registry[audit-sign]"'
    ) from exc

__all__ = [
    "Checkpoint",
    "CheckpointError",
    "KeyFileSigner",
    "Signer",
    "VerifierKey",
    "generate_key",
    "key_id",
    "open_checkpoint",
    "sign_checkpoint",
]

_ED25519 = b"\x01"
_DASH = "\u2014 "
_MAX_NOTE = 1 << 16  # a checkpoint is a few hundred bytes: anything larger is not one
_MAX_SIGNATURES = 100
_NAME = re.compile(r"[^\s+\x00-\x1f]{1,200}")
_ORIGIN = re.compile(r"[^\x00-\x1f]{1,200}")
_TIMESTAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")
_SIZE = re.compile(r"0|[1-9]\d{0,18}")


class CheckpointError(ValueError):
    """A checkpoint or key that cannot be read, or whose signature does not verify."""


@final
@dataclass(frozen=True)
class Checkpoint:
    """A tree head: the log ``origin`` had ``size`` entries with root ``root`` at ``timestamp``."""

    origin: str
    size: int
    root: bytes
    timestamp: str

    def __post_init__(self) -> None:
        if not _ORIGIN.fullmatch(self.origin) or self.origin != self.origin.strip():
            raise CheckpointError("the origin must be 1..200 printable characters without surrounding spaces")
        if not 0 <= self.size < 2**63 or len(self.root) != 32 or not _TIMESTAMP.fullmatch(self.timestamp):
            raise CheckpointError("a checkpoint needs a size >= 0, a 32-byte root and a UTC timestamp")

    def body(self) -> str:
        """The signed text."""
        root = base64.b64encode(self.root).decode("ascii")
        return f"{self.origin}\n{self.size}\n{root}\ntimestamp {self.timestamp}\n"

    @classmethod
    def parse(cls, body: str) -> Checkpoint:
        """The checkpoint of a body written by `body` (strict: any other text is refused)."""
        lines = body.split("\n")
        if len(lines) != 5 or lines[4] != "" or not _SIZE.fullmatch(lines[1]):
            raise CheckpointError("not a toolbox checkpoint body (origin, size, root, timestamp)")
        if not lines[3].startswith("timestamp "):
            raise CheckpointError("the checkpoint has no timestamp line")
        try:
            root = base64.b64decode(lines[2], validate=True)
        except binascii.Error:
            raise CheckpointError("the checkpoint's root hash is not base64") from None
        checkpoint = cls(lines[0], int(lines[1]), root, lines[3][len("timestamp ") :])
        if checkpoint.body() != body:
            raise CheckpointError("the checkpoint body is not in canonical form")
        return checkpoint


def key_id(name: str, public_key: bytes) -> bytes:
    """The signed-note key id: ``SHA-256(name || 0x0A || 0x01 || public key)[:4]``."""
    return hashlib.sha256(name.encode("utf-8") + b"\n" + _ED25519 + public_key).digest()[:4]


def _check_name(name: str) -> str:
    if not _NAME.fullmatch(name):
        raise CheckpointError("a key name is 1..200 characters without spaces, '+' or control characters")
    return name


@final
@dataclass(frozen=True)
class VerifierKey:
    """A public key and its name: what a verifier needs, and all it needs."""

    name: str
    public_key: bytes

    def __post_init__(self) -> None:
        _check_name(self.name)
        if len(self.public_key) != 32:
            raise CheckpointError("an Ed25519 public key is 32 bytes")

    @property
    def key_id(self) -> bytes:
        return key_id(self.name, self.public_key)

    def text(self) -> str:
        """``<name>+<hex key id>+<base64(0x01 || public key)>``."""
        encoded = base64.b64encode(_ED25519 + self.public_key).decode("ascii")
        return f"{self.name}+{self.key_id.hex()}+{encoded}"

    @classmethod
    def parse(cls, text: str) -> VerifierKey:
        """The key written by `text` (its key id checked)."""
        parts = text.strip().split("+", 2)  # base64 may hold "+" too; a name never does
        if len(parts) != 3 or not re.fullmatch(r"[0-9a-f]{8}", parts[1]):
            raise CheckpointError("a verifier key reads <name>+<8 hex digits>+<base64 key>")
        try:
            raw = base64.b64decode(parts[2], validate=True)
        except binascii.Error:
            raise CheckpointError("the verifier key is not base64") from None
        if len(raw) != 33 or raw[:1] != _ED25519:
            raise CheckpointError("the verifier key is not an Ed25519 key")
        key = cls(parts[0], raw[1:])
        if key.key_id.hex() != parts[1]:
            raise CheckpointError("the verifier key's id does not match its name and key")
        return key


@runtime_checkable
class Signer(Protocol):
    """Signs checkpoints: a key file (`KeyFileSigner`), or your KMS or HSM behind these members."""

    @property
    def verifier_key(self) -> VerifierKey:
        """The key's name and public key."""

    def sign(self, message: bytes) -> bytes:
        """The 64-byte Ed25519 signature of ``message``."""


@final
class KeyFileSigner:
    """Signs with an Ed25519 private key read from a file only its owner can read.

    The file holds a PKCS#8 PEM key (``toolbox audit keygen`` writes one) or the 32 raw
    bytes of the key. A file that its group or others may read or write is refused.
    """

    __slots__ = ("_key", "_verifier")

    def __init__(self, path: str | os.PathLike[str], *, name: str) -> None:
        file = Path(path)
        try:
            mode = file.stat().st_mode
            data = file.read_bytes()
        except OSError as exc:
            raise CheckpointError(f"cannot read the signing key {file}: {exc.strerror}") from None
        if os.name == "posix" and mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise CheckpointError(
                f"the signing key {file} may be read or written by others "
                f"(mode {stat.S_IMODE(mode):o}): chmod 600"
            )
        self._key = _private_key(data, file)
        public = self._key.public_key().public_bytes(
            serialization.Encoding.Raw, serialization.PublicFormat.Raw
        )
        self._verifier = VerifierKey(_check_name(name), public)

    @property
    def verifier_key(self) -> VerifierKey:
        return self._verifier

    def sign(self, message: bytes) -> bytes:
        return self._key.sign(message)

    def __repr__(self) -> str:
        return f"KeyFileSigner({self._verifier.name!r})"  # never the key


def _private_key(data: bytes, file: Path) -> Ed25519PrivateKey:
    if len(data) == 32:
        return Ed25519PrivateKey.from_private_bytes(data)
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError):
        raise CheckpointError(
            f"the signing key {file} is not an unencrypted PEM or raw Ed25519 key"
        ) from None
    if not isinstance(key, Ed25519PrivateKey):
        raise CheckpointError(f"the signing key {file} is not an Ed25519 key")
    return key


def generate_key(name: str) -> tuple[bytes, VerifierKey]:
    """A new Ed25519 key: its PKCS#8 PEM (keep it secret) and its verifier key (publish it)."""
    key = Ed25519PrivateKey.generate()
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    public = key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return pem, VerifierKey(_check_name(name), public)


def sign_checkpoint(checkpoint: Checkpoint, signer: Signer) -> str:
    """The signed note of ``checkpoint``."""
    body = checkpoint.body()
    key = signer.verifier_key
    signature = signer.sign(body.encode("utf-8"))
    if len(signature) != 64:
        raise CheckpointError("the signer returned something other than a 64-byte Ed25519 signature")
    encoded = base64.b64encode(key.key_id + signature).decode("ascii")
    return f"{body}\n{_DASH}{key.name} {encoded}\n"


def open_checkpoint(note: str, keys: Sequence[VerifierKey]) -> Checkpoint:
    """The checkpoint of ``note`` once a signature by one of ``keys`` verifies.

    Refused: anything that is not a signed note of a checkpoint, a note no key of ``keys``
    signed, and a note where a signature by one of ``keys`` fails (as the C2SP spec says).
    """
    if len(note) > _MAX_NOTE or any(ord(c) < 0x20 and c != "\n" for c in note):
        raise CheckpointError("not a signed checkpoint (too large, or control characters)")
    split = note.rfind("\n\n")
    if split < 0 or not note.endswith("\n"):
        raise CheckpointError("not a signed note: no blank line before the signatures")
    body, lines = note[: split + 1], note[split + 2 : -1].split("\n")
    if len(lines) > _MAX_SIGNATURES:
        raise CheckpointError("too many signature lines")
    checkpoint = Checkpoint.parse(body)
    known = {(k.name, k.key_id): k for k in keys}
    verified = False
    for line in lines:
        if not line.startswith(_DASH) or line.count(" ") != 2:
            raise CheckpointError("a malformed signature line")
        name, encoded = line[len(_DASH) :].split(" ")
        try:
            raw = base64.b64decode(encoded, validate=True)
        except binascii.Error:
            raise CheckpointError("a signature line is not base64") from None
        key = known.get((name, raw[:4]))
        if key is None:
            continue  # someone else's signature (a witness's cosignature): not ours to judge
        try:
            Ed25519PublicKey.from_public_bytes(key.public_key).verify(raw[4:], body.encode("utf-8"))
        except InvalidSignature:
            raise CheckpointError(f"the signature by {name} does not verify (forged or altered)") from None
        verified = True
    if not verified:
        raise CheckpointError("no signature by a trusted key")
    return checkpoint
