"""Static API keys: a file holding only their SHA-256 hashes, reloaded when it changes.

The key file is TOML, one table per key, named by a key id that is safe to log::

    [keys.alice-laptop]
    sha256 = "9f86d08...15b0f00a08"    # hex SHA-256 of the key; the key itself is never stored
    tenant = "acme"
    principal = "alice"
    roles = ["caller", "approver"]
    toolset = "support"                # optional: the credential sees only this tool set
    expires = 2027-06-30T00:00:00Z     # optional, with a time zone

`new_api_key` makes a key and its entry (``toolbox auth new-key`` prints one).
Rotation needs no restart: the file is read again whenever its size, inode or
modification time changes, so replacing it (write a new file, then rename it
over the old one) adds and revokes keys for the next request. A file that
stops parsing fails closed: every key is refused, with one warning in the log
naming the file and the key path, until it parses again.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import secrets
import sys
import threading
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import final

from toolbox.auth._identity import Identity, check_reference
from toolbox.errors import AuthenticationError, PolicyFileError
from toolbox.foundations._table_reader import TableReader

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

__all__ = ["ApiKeyFile", "hash_api_key", "new_api_key"]

_log = logging.getLogger("toolbox.auth")
_KEY_ID = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"
_SHA256 = r"^[0-9a-f]{64}$"
_KEY_ID_RE = re.compile(_KEY_ID)
#: Longer presented keys are refused before hashing: real keys are ``tbx_`` + 43 characters.
MAX_KEY_LENGTH = 512
_PRINTABLE = re.compile(r"^[\x21-\x7e]+$")
_PREFIX = "tbx_"


def hash_api_key(key: str) -> str:
    """The hex SHA-256 a key file stores for ``key``."""
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def new_api_key() -> tuple[str, str]:
    """A fresh random key and its hash: show the key once, store only the hash."""
    key = _PREFIX + secrets.token_urlsafe(32)
    return key, hash_api_key(key)


@final
@dataclass(frozen=True, slots=True)
class _Entry:
    identity: Identity
    expires: datetime | None


def _read(path: Path) -> dict[str, _Entry]:
    """The entries of the key file, by hash; `PolicyFileError` naming the key path when malformed."""
    source = str(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise PolicyFileError(f"API key file {source!r} does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise PolicyFileError(f"cannot read API key file {source!r}: {exc.__class__.__name__}") from None
    except tomllib.TOMLDecodeError as exc:
        raise PolicyFileError(f"{source}: not valid TOML: {exc}") from None
    root = TableReader(data, source=source)
    root.only(("keys",))
    keys = root.table("keys")
    entries: dict[str, _Entry] = {}
    for key_id in keys:
        if not _KEY_ID_RE.fullmatch(key_id):
            raise keys.error(key_id, f"not a valid key id ({_KEY_ID})")
        table = keys.table(key_id)
        table.only(("sha256", "tenant", "principal", "roles", "toolset", "expires"))
        digest = table.string("sha256", pattern=_SHA256, what="lowercase hex SHA-256")
        if digest in entries:
            raise table.error("sha256", "the same key hash is listed twice")
        expires = table.value("expires", None)
        if expires is not None and not (isinstance(expires, datetime) and expires.tzinfo is not None):
            raise table.error("expires", "must be a date-time with a time zone, e.g. 2027-01-01T00:00:00Z")
        try:
            identity = Identity(
                tenant=check_reference(table.string("tenant"), "tenant"),
                principal=check_reference(table.string("principal"), "principal"),
                roles=frozenset(check_reference(r, "role") for r in table.strings("roles", what="role")),
                toolset=(
                    check_reference(table.optional_string("toolset"), "toolset")
                    if "toolset" in table
                    else None
                ),
                credential=f"api-key:{key_id}",
                expires_at=expires.timestamp() if expires is not None else None,
                key_ref=key_ref(digest),
            )
        except AuthenticationError as exc:
            raise table.error("", str(exc).replace("the credential's", "the")) from None
        entries[digest] = _Entry(identity, expires)
    return entries


def key_ref(digest: str) -> str:
    """The `Identity.key_ref` of the key stored as ``digest``: a hash of the hash, safe to keep."""
    return hashlib.sha256(b"toolbox key ref\n" + digest.encode("ascii")).hexdigest()[:32]


def _stamp(path: Path) -> tuple[int, int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size, st.st_ino)


@final
class ApiKeyFile:
    """An `Authenticator` over a key file of SHA-256 hashes (module docs: the format).

    Raises:
        PolicyFileError: at construction, when the file is missing or malformed.
    """

    __slots__ = ("_entries", "_lock", "_path", "_stamp")

    def __init__(self, path: Path | str) -> None:
        self._path = Path(path)
        self._lock = threading.Lock()
        self._stamp = _stamp(self._path)
        self._entries: dict[str, _Entry] | None = _read(self._path)

    @property
    def path(self) -> Path:
        """The key file."""
        return self._path

    def _current(self) -> dict[str, _Entry] | None:
        stamp = _stamp(self._path)
        if stamp == self._stamp:
            return self._entries
        with self._lock:
            if stamp != self._stamp:
                try:
                    self._entries = _read(self._path)
                except PolicyFileError as exc:
                    # Fail closed: a revocation must never be undone by a typo in the new file.
                    _log.warning("API key file unusable, refusing every key until it is fixed: %s", exc)
                    self._entries = None
                self._stamp = stamp
            return self._entries

    def authenticate(self, token: str, /) -> Identity:
        """The identity whose key is ``token``; `AuthenticationError` otherwise."""
        if not token:
            raise AuthenticationError("no API key was presented", reason_code="MISSING_CREDENTIALS")
        if len(token) > MAX_KEY_LENGTH or not _PRINTABLE.fullmatch(token):
            raise AuthenticationError("the API key is malformed", reason_code="INVALID_CREDENTIALS")
        entries = self._current()
        entry = None if entries is None else entries.get(hash_api_key(token))
        if entry is None:
            raise AuthenticationError("the API key is not valid", reason_code="INVALID_CREDENTIALS")
        if entry.expires is not None and entry.expires <= datetime.now(timezone.utc):
            raise AuthenticationError("the API key has expired", reason_code="EXPIRED")
        return entry.identity

    def still_valid(self, identity: Identity, /) -> bool:
        """Whether ``identity``'s key is still in the file, unchanged and unexpired (`CredentialCheck`).

        A key removed, replaced under its id (another hash), given other roles, a tenant,
        principal or toolset of its own, or expired since: False. So is a file that stopped
        parsing (it fails closed).
        """
        entries = self._current()
        if entries is None or identity.key_ref is None:
            return False
        for entry in entries.values():
            found = entry.identity
            if found.credential == identity.credential:
                return (
                    found == identity
                    and found.key_ref == identity.key_ref
                    and (entry.expires is None or entry.expires > datetime.now(timezone.utc))
                )
        return False
