"""The audit store ``toolbox audit`` reads: chosen by its options, opened for reading.

Exactly one of ``--sqlite PATH``, ``--jsonl PATH``, ``--postgres-url-env VAR
[--schema NAME]`` or ``--policy FILE`` (the first ``[[audit.sinks]]`` of the
file's ``[audit]`` table). A PostgreSQL URL is only ever read from the
environment variable named by ``--postgres-url-env``, never from the command
line, and `scrub` masks it and its password in any error message. A missing
file or database is refused rather than created.
"""

from __future__ import annotations

import argparse
import os
import re
import sqlite3
from collections.abc import Mapping, Sequence
from contextlib import closing
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from toolbox.audit._sink import AuditSink
from toolbox.cli._common import CliError
from toolbox.registry._policy import ToolPolicy

__all__ = ["add_store_options", "open_store", "scrub"]

#: ``--postgres-url-env`` and ``url_env`` name a variable; anything else (a URL) is refused unread.
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def add_store_options(parser: argparse.ArgumentParser, *, default: object) -> None:
    """The store options; ``default=SUPPRESS`` on sub-commands keeps values given before them."""
    store = parser.add_argument_group(
        "audit store (exactly one)",
        "Read as an auditor: every tenant's events, no tenant scoping.",
    )
    store.add_argument("--sqlite", metavar="PATH", default=default, help="a SQLite audit database")
    store.add_argument("--jsonl", metavar="PATH", default=default, help="a JSON Lines audit file")
    store.add_argument(
        "--postgres-url-env",
        metavar="VAR",
        default=default,
        help="the NAME of the environment variable holding the PostgreSQL URL "
        "(a URL is never accepted on the command line)",
    )
    store.add_argument(
        "--schema", metavar="NAME", default=default, help="with --postgres-url-env: the schema of the tables"
    )
    store.add_argument(
        "--policy",
        metavar="FILE",
        default=default,
        help="a policy file: read the first [[audit.sinks]] of its [audit] table",
    )


def scrub(text: str, secrets: Sequence[str]) -> str:
    """``text`` with every (non-empty) secret replaced by ``***``."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    return text


def _check_env_name(name: str, where: str) -> str:
    """``name`` if it can name an environment variable; a URL (or anything else) is refused unechoed."""
    if not _ENV_NAME.match(name):
        raise CliError(
            f"{where} takes the NAME of an environment variable holding the PostgreSQL URL "
            "(e.g. TOOLBOX_AUDIT_DATABASE_URL), never the URL itself"
        )
    return name


def _url_secrets(url: str) -> list[str]:
    """The URL and its password, to be masked in any error message."""
    secrets = [url]
    try:
        password = urlsplit(url).password
    except ValueError:
        password = None
    if password:
        secrets += [password, unquote(password)]
    return secrets


def _check_sqlite_store(path: str) -> None:
    """Refuse a missing file or one without the audit schema (opening a sink would create it)."""
    file = Path(path)
    if not file.is_file():
        raise CliError(f"audit database {path!r} does not exist")
    try:
        uri = f"{file.resolve().as_uri()}?mode=ro"
        with closing(sqlite3.connect(uri, uri=True)) as conn:
            found = conn.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'audit_events'"
            ).fetchone()
    except sqlite3.Error as exc:
        raise CliError(f"cannot read audit database {path!r}: {type(exc).__name__}: {exc}") from None
    if found is None:
        raise CliError(f"{path!r} is not a toolbox audit database (it has no audit_events table)")


def _policy_sink(path: str) -> tuple[dict[str, Any], str]:
    """The first ``[[audit.sinks]]`` table of the policy file ``path`` (validated with the file)."""
    policy = ToolPolicy.from_file(path)
    source = policy.source or path
    audit = policy.governance.get("audit")
    if not isinstance(audit, Mapping):
        raise CliError(f"{source}: no [audit] table, so no audit store to read")
    first = dict(audit["sinks"][0])
    if first["type"] == "memory":
        raise CliError(f"{source}: the first [[audit.sinks]] is a memory sink: it keeps nothing to read")
    return first, source


def _sink_config(args: argparse.Namespace) -> tuple[dict[str, Any], str]:
    """The sink table the options describe, and where it came from (for error messages)."""
    given = [
        (flag, value)
        for flag, value in (
            ("--sqlite", args.sqlite),
            ("--jsonl", args.jsonl),
            ("--postgres-url-env", args.postgres_url_env),
            ("--policy", args.policy),
        )
        if value is not None
    ]
    if not given:
        raise CliError(
            "choose the audit store: --sqlite PATH, --jsonl PATH, --postgres-url-env VAR or --policy FILE"
        )
    if len(given) > 1:
        raise CliError(f"choose one audit store, not {' and '.join(flag for flag, _ in given)}")
    if args.schema is not None and args.postgres_url_env is None:
        raise CliError("--schema applies to --postgres-url-env only")
    flag, value = given[0]
    if flag == "--policy":
        return _policy_sink(value)
    if flag == "--postgres-url-env":
        return {"type": "postgres", "url_env": value, "schema": args.schema}, flag
    return {"type": flag.removeprefix("--"), "path": value}, flag


def open_store(args: argparse.Namespace, secrets: list[str]) -> AuditSink:
    """Open the chosen store for reading. ``secrets`` receives what error messages must mask."""
    config, source = _sink_config(args)
    kind = config["type"]
    if kind == "jsonl":
        if not Path(config["path"]).is_file():
            raise CliError(f"audit file {config['path']!r} does not exist")
    elif kind == "sqlite":
        _check_sqlite_store(config["path"])
    elif kind == "postgres":
        where = (
            "--postgres-url-env" if source == "--postgres-url-env" else f"{source}: audit.sinks[0].url_env"
        )
        name = _check_env_name(str(config["url_env"]), where)
        url = os.environ.get(name)
        if not url:
            raise CliError(f"environment variable {name} is not set (it must hold the PostgreSQL URL)")
        secrets.extend(_url_secrets(url))
    from toolbox.audit._config import sink_from_config

    return sink_from_config(config, source=source)
