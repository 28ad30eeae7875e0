"""``toolbox auth``: make API keys and the key-file entries that hold only their hashes.

``toolbox auth new-key --id ID --tenant T --principal P --role caller`` prints a
fresh key once and the ``[keys.ID]`` table to add to the key file;
``toolbox auth hash-key`` reads a key from standard input and prints its hash.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from datetime import datetime
from typing import Any

from toolbox.auth._keys import MAX_KEY_LENGTH, hash_api_key, new_api_key
from toolbox.errors import ConfigurationError
from toolbox.foundations._line_text import breaks_line

__all__ = ["add_auth"]

_KEY_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


def _reference(value: str, flag: str) -> str:
    if not 1 <= len(value) <= 256 or breaks_line(value):
        raise ConfigurationError(
            f"{flag} must be 1 to 256 characters without control characters, line separators "
            "or bidirectional controls"
        )
    return value


def _toml_string(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)  # a JSON string is a valid TOML basic string


def _entry_lines(key_id: str, entry: dict[str, Any]) -> list[str]:
    lines = [f"[keys.{key_id}]"]
    for name, value in entry.items():
        if isinstance(value, list):
            lines.append(f"{name} = [{', '.join(_toml_string(v) for v in value)}]")
        elif name == "expires":
            lines.append(f"{name} = {value}")
        else:
            lines.append(f"{name} = {_toml_string(value)}")
    return lines


def _cmd_new_key(args: argparse.Namespace) -> int:
    if not _KEY_ID.fullmatch(args.id):
        raise ConfigurationError("--id must be letters, digits, '.', '_' or '-' (at most 64, starting alnum)")
    entry: dict[str, Any] = {
        "sha256": "",
        "tenant": _reference(args.tenant, "--tenant"),
        "principal": _reference(args.principal, "--principal"),
        "roles": sorted({_reference(role, "--role") for role in args.role}),
    }
    if args.toolset is not None:
        entry["toolset"] = _reference(args.toolset, "--toolset")
    if args.expires is not None:
        try:
            moment = datetime.fromisoformat(args.expires.replace("Z", "+00:00"))
        except ValueError:
            raise ConfigurationError(
                "--expires must be an ISO date-time, e.g. 2027-01-01T00:00:00Z"
            ) from None
        if moment.tzinfo is None:
            raise ConfigurationError("--expires needs a time zone, e.g. 2027-01-01T00:00:00Z")
        entry["expires"] = moment.isoformat()
    key, digest = new_api_key()
    entry["sha256"] = digest
    if getattr(args, "json", False):
        print(json.dumps({"id": args.id, "key": key, "entry": entry}, indent=2))
        return 0
    print(f"key: {key}")
    print("Shown once: give it to its holder through your secret store. Add to the key file:")
    print()
    print("\n".join(_entry_lines(args.id, entry)))
    return 0


def _cmd_hash_key(args: argparse.Namespace) -> int:
    key = sys.stdin.readline(MAX_KEY_LENGTH + 2).strip()
    if not key or len(key) > MAX_KEY_LENGTH:
        raise ConfigurationError(f"give one key (at most {MAX_KEY_LENGTH} characters) on standard input")
    digest = hash_api_key(key)
    print(json.dumps({"sha256": digest}) if getattr(args, "json", False) else digest)
    return 0


def add_auth(commands: Any, common_json: argparse.ArgumentParser) -> None:
    """Add ``toolbox auth new-key`` and ``toolbox auth hash-key`` to the CLI's sub-commands."""
    auth = commands.add_parser("auth", parents=[common_json], help="make API keys for toolbox serve / mcp")
    actions = auth.add_subparsers(dest="auth_command", required=True, metavar="ACTION")
    new = actions.add_parser(
        "new-key", parents=[common_json], help="print a new API key once, and its key-file entry"
    )
    new.add_argument("--id", required=True, help="key id: shown in logs and the audit trail")
    new.add_argument("--tenant", required=True)
    new.add_argument("--principal", required=True)
    new.add_argument("--role", action="append", default=[], help="a role (repeatable)")
    new.add_argument("--toolset", help="limit the key to one tool set")
    new.add_argument("--expires", help="expiry, an ISO date-time with a time zone")
    new.set_defaults(handler=_cmd_new_key)
    hashed = actions.add_parser(
        "hash-key", parents=[common_json], help="print the SHA-256 of a key read from standard input"
    )
    hashed.set_defaults(handler=_cmd_hash_key)
