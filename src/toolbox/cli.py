"""The ``toolbox`` command: what an operator checks at deploy time.

Usage::

    toolbox --version
    toolbox list  [--policy FILE] [--json]
    toolbox check [--policy FILE] [--require NAME ...] [--json]
    toolbox audit show TRACE_ID  STORE [--json]
    toolbox audit tail [-n N]    STORE [--json]
    toolbox audit verify [TRACE_ID] STORE [--json]
    toolbox audit replay FALLBACK_FILE STORE [--json]
    toolbox kill engage|release|status [--tool NAME] [--reason TEXT] [--policy FILE]   (cli_kill)
    toolbox mcp serve [--policy FILE] [--transport stdio|http] ...   (toolbox.cli_mcp)

    STORE: exactly one of --sqlite PATH, --jsonl PATH,
           --postgres-url-env VAR [--schema NAME], --policy FILE

``list`` shows every discovered tool, each operation with its effect, the
providers that failed to load and the distributions the policy blocked.
``check`` shows, for every tool, whether this deployment may use it and why,
and its acknowledgement state, and which Cedar policies the policy file loads.

``audit`` reads an audit store as an auditor: every tenant's events, with no
tenant scoping (the operator running the command is trusted with the store
itself). ``show`` prints one trace's events in sequence order, then the tree
of the runs it delegated to (and the run that delegated it); ``tail`` the
latest events across traces; ``verify`` checks the hash chains of one trace
or of every trace and names each edited, removed or reordered event (exit 1);
``replay`` stores a fallback file's events once each (``cli_audit_replay``).
A PostgreSQL URL is only ever read from the environment variable named by
``--postgres-url-env``, never from the command line; ``--policy`` reads the
first ``[[audit.sinks]]`` of the file's ``[audit]`` table. Events are redacted
when written; the command prints them as stored, control characters escaped.

The policy is ``--policy FILE``, else the file named by ``TOOLBOX_POLICY``,
else `ToolPolicy.standard`. ``--json`` (before or after the command) prints
one JSON document instead of aligned columns.

Exit status: 0 on success; 1 when a ``--require``-d tool is unusable, when
``audit verify`` finds a problem or when a trace has no events; 2 on an
error (malformed policy file, provider conflict, bad arguments), reported as
one ``toolbox: error: ...`` line on stderr, never a traceback.

Nothing from the environment is printed except acknowledgement variable names
and the values they must hold, which are approvals, not secrets.
"""

from __future__ import annotations

import argparse
import dataclasses
import getpass
import json
import os
import re
import shlex
import sqlite3
import sys
from collections.abc import Callable, Mapping, Sequence
from contextlib import closing
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, NoReturn
from urllib.parse import unquote, urlsplit

from pydantic import ValidationError

from toolbox.audit.events import AuditRecord
from toolbox.audit.runs import draw_tree, run_tree
from toolbox.audit.sink import AuditQuery, AuditSink, AuditSinkError
from toolbox.audit.verify import ChainProblem, TraceHeads, verify_chain, verify_heads
from toolbox.catalog import POLICY_ENV
from toolbox.cli_audit_replay import add_replay
from toolbox.cli_auth import add_auth
from toolbox.cli_format import (
    OPERATION_HEADERS,
    authorization_document,
    authorization_text,
    operation_rows,
    operations_of,
)
from toolbox.cli_kill import add_kill
from toolbox.cli_mcp import add_mcp
from toolbox.cli_mcp_lock import drift_document, drift_lines
from toolbox.context import ExecutionContext
from toolbox.errors import ToolboxError
from toolbox.policy import ToolPolicy
from toolbox.tools import AcknowledgementState, ToolDecision, Tools

__all__ = ["main"]

PROG = "toolbox"
EXIT_OK = 0
EXIT_UNUSABLE = 1
EXIT_ERROR = 2

CLI_TENANT = "cli"
FALLBACK_PRINCIPAL = "operator"
STANDARD = "standard"

_CONTROL_CHARS = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_MAX_ERROR_TEXT = 500

Document = dict[str, object]


# -- text helpers ---------------------------------------------------------------


def _clean(text: object) -> str:
    """``text`` as one printable line: control characters (ANSI escapes, newlines) are escaped."""
    return _CONTROL_CHARS.sub(lambda m: f"\\x{ord(m.group()):02x}", str(text))


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]], *, indent: str = "") -> list[str]:
    """Lines of a plain table: columns left-aligned, two spaces apart, no trailing blanks."""
    cells = [[_clean(c) for c in row] for row in [headers, *rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    return [
        indent + "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in cells
    ]


def _emit_json(document: Document) -> None:
    """Print ``document`` as indented JSON."""
    print(json.dumps(document, indent=2, sort_keys=False))


def _emit_lines(lines: Sequence[str]) -> None:
    """Print human-readable ``lines``."""
    print("\n".join(lines))


# -- loading --------------------------------------------------------------------


def _operator_context() -> ExecutionContext:
    """The trusted context for CLI use: tenant ``cli``, principal the OS user (or ``operator``)."""
    try:
        user = getpass.getuser()
    except (OSError, KeyError, ImportError):  # no user name known to the OS or environment
        user = FALLBACK_PRINCIPAL
    try:
        return ExecutionContext(tenant=CLI_TENANT, principal=user)
    except ValidationError:  # e.g. an empty or unprintable user name
        return ExecutionContext(tenant=CLI_TENANT, principal=FALLBACK_PRINCIPAL)


def _load_tools(policy_file: str | None) -> Tools:
    """Discover installed providers and decide under ``policy_file`` (or the env/standard fallback).

    Raises:
        PolicyFileError: the policy file is missing or malformed.
        ProviderConflictError: two providers claim one tool.
    """
    policy = ToolPolicy.from_file(policy_file) if policy_file is not None else None
    return Tools.load(_operator_context(), policy=policy)


def _policy_label(tools: Tools, *, from_flag: bool) -> str:
    """Where the policy came from: its file (``--policy`` or ``TOOLBOX_POLICY``), or ``standard``."""
    source = tools.policy.source
    if source is None:
        return STANDARD
    return source if from_flag else f"{source} (from {POLICY_ENV})"


# -- toolbox list ---------------------------------------------------------------


def _list_document(tools: Tools, policy: str) -> Document:
    """The JSON document of ``toolbox list``: tools, broken providers, blocked distributions."""
    entries: list[Document] = []
    for desc in tools.descriptors():
        ack = desc.acknowledgement
        entries.append(
            {
                "name": desc.name,
                "version": desc.version,
                "risk": desc.risk.value,
                "summary": desc.summary,
                "acknowledgement_env": ack.env if ack else None,
                "acknowledgement_value": ack.value if ack else None,
                "distribution": tools.distribution_of(desc.name),
                "operations": operations_of(desc),
            }
        )
    return {
        "policy": policy,
        "tools": entries,
        "broken": [
            {"distribution": b.distribution, "origin": b.origin, "error": b.error}
            for b in tools.broken_providers
        ],
        "blocked": list(tools.blocked_distributions),
    }


def _problem_lines(tools: Tools) -> list[str]:
    """The broken-provider and blocked-distribution sections shared by both commands."""
    lines = [""]
    broken = tools.broken_providers
    if broken:
        lines.append(f"Broken providers ({len(broken)}):")
        rows = [[b.distribution, b.error[:_MAX_ERROR_TEXT]] for b in broken]
        lines += [*_table(["DISTRIBUTION", "ERROR"], rows, indent="  "), ""]
    else:
        lines.append("Broken providers: none")
    blocked = tools.blocked_distributions
    if blocked:
        lines.append(f"Blocked by the policy ({len(blocked)}):")
        lines += [f"  {_clean(name)}" for name in blocked]
    else:
        lines.append("Blocked by the policy: none")
    return lines


def _list_lines(tools: Tools) -> list[str]:
    """The human-readable output of ``toolbox list``."""
    rows = [
        [
            desc.name,
            desc.version,
            desc.risk.value,
            desc.acknowledgement.env if desc.acknowledgement else "-",
            tools.distribution_of(desc.name) or "-",
        ]
        for desc in tools.descriptors()
    ]
    if not rows:
        return ["No tools found.", *_problem_lines(tools)]
    lines = _table(["TOOL", "VERSION", "RISK", "ACKNOWLEDGEMENT", "DISTRIBUTION"], rows)
    lines += ["", "Operations (call by name as TOOL.OPERATION):"]
    lines += _table(OPERATION_HEADERS, operation_rows(tools.descriptors()), indent="  ")
    return lines + _problem_lines(tools)


def _cmd_list(args: argparse.Namespace) -> int:
    """``toolbox list``: print every discovered tool and every provider problem."""
    tools = _load_tools(args.policy)
    if args.json:
        _emit_json(_list_document(tools, _policy_label(tools, from_flag=args.policy is not None)))
    else:
        _emit_lines(_list_lines(tools))
    return EXIT_OK


# -- toolbox check --------------------------------------------------------------


def _ack_text(decision: ToolDecision) -> str:
    """The acknowledgement state for people: satisfied, or what to set to what."""
    state, env, value = decision.acknowledgement, decision.acknowledgement_env, decision.acknowledgement_value
    if state is AcknowledgementState.NOT_REQUIRED or env is None or value is None:
        return "not required"
    if state is AcknowledgementState.SATISFIED:
        return f"satisfied ({env})"
    problem = "missing" if state is AcknowledgementState.MISSING else "wrong value"
    return f"{problem}: set {env}={shlex.quote(value)}"


def _required(tools: Tools, names: Sequence[str]) -> list[ToolDecision]:
    """The decision for each required name, once each, in the order given."""
    return [tools.explain(name) for name in dict.fromkeys(names)]


def _check_document(tools: Tools, policy: str, required: Sequence[ToolDecision]) -> Document:
    """The JSON document of ``toolbox check``."""
    return {
        "policy": policy,
        "tools": [d.as_dict() for d in tools.decisions()],
        "required": [d.as_dict() for d in required],
        "ok": all(d.allowed for d in required),
        "authorization": authorization_document(tools.policy),
        "broken": [
            {"distribution": b.distribution, "origin": b.origin, "error": b.error}
            for b in tools.broken_providers
        ],
        "blocked": list(tools.blocked_distributions),
        "pinned_operations": drift_document(tools),
    }


def _check_lines(tools: Tools, policy: str, required: Sequence[ToolDecision]) -> list[str]:
    """The human-readable output of ``toolbox check``."""
    decisions = tools.decisions()
    label = policy
    if tools.policy.source is None:
        label += " (built in: MEMORY_ONLY tools allowed, every other tool needs an explicit allow)"
    lines = [f"Policy: {_clean(label)}", f"Authorization: {_clean(authorization_text(tools.policy))}", ""]
    if decisions:
        rows = [
            [
                d.tool,
                "allowed" if d.allowed else "denied",
                d.reason_code,
                d.rule,
                d.risk.value if d.risk else "-",
                _ack_text(d),
            ]
            for d in decisions
        ]
        lines += _table(["TOOL", "DECISION", "REASON", "RULE", "RISK", "ACKNOWLEDGEMENT"], rows)
        lines += ["", "Details:"]
        lines += _table(["TOOL", "WHY"], [[d.tool, d.detail] for d in decisions], indent="  ")[1:]
    else:
        lines.append("No tools found.")
    if required:
        rows = [
            [d.tool, "usable" if d.allowed else f"NOT USABLE ({d.reason_code}, rule {d.rule}): {d.detail}"]
            for d in required
        ]
        lines += ["", "Required tools:"]
        lines += _table(["TOOL", "STATE"], rows, indent="  ")[1:]
    return lines + drift_lines(tools) + _problem_lines(tools)


def _cmd_check(args: argparse.Namespace) -> int:
    """``toolbox check``: print each tool's decision; exit 1 if a required tool is unusable."""
    tools = _load_tools(args.policy)
    required = _required(tools, args.require)
    policy = _policy_label(tools, from_flag=args.policy is not None)
    if args.json:
        _emit_json(_check_document(tools, policy, required))
    else:
        _emit_lines(_check_lines(tools, policy, required))
    unusable = [d for d in required if not d.allowed]
    if unusable:
        names = ", ".join(f"{d.tool} ({d.reason_code})" for d in unusable)
        print(f"{PROG}: required tools not usable: {_clean(names)}", file=sys.stderr)
        return EXIT_UNUSABLE
    return EXIT_OK


# -- toolbox audit --------------------------------------------------------------

#: ``--postgres-url-env`` and ``url_env`` name a variable; anything else (a URL) is refused unread.
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
#: The query limit used to read "every" event (verify without a trace id).
_READ_ALL = 2**31 - 1
#: The most events one ``tail`` query may return before the window is narrowed.
_READ_PAGE = 100_000
#: ``tail`` looks at the last minute first, then at windows four times larger.
_FIRST_WINDOW = timedelta(minutes=1)
_TAIL_DEFAULT = 20
_TAIL_MAX = 10_000
_INTENT_WIDTH = 40
_PAYLOAD_WIDTH = 60
_HASH_SHOWN = 16
_URL_PASSWORD = re.compile(r"(://[^/\s:@]*:)[^@\s/]*@")

AuditHandler = Callable[[argparse.Namespace, AuditSink], int]


class _CliError(Exception):
    """A problem the operator can fix, reported as one ``toolbox: error:`` line (exit 2)."""


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def _truncate(text: object, width: int) -> str:
    """``text`` on one line (control characters escaped), cut to ``width`` with ``...``."""
    clean = _clean(text)
    return clean if len(clean) <= width else clean[: width - 3] + "..."


def _time(timestamp: str) -> str:
    """A stored ISO 8601 timestamp as ``YYYY-MM-DDTHH:MM:SS.mmmZ`` (UTC); unparsable ones as stored."""
    try:
        moment = datetime.fromisoformat(timestamp)
    except ValueError:
        return timestamp
    moment = _aware(moment).astimezone(timezone.utc)
    return f"{moment:%Y-%m-%dT%H:%M:%S}.{moment.microsecond // 1000:03d}Z"


def _aware(moment: datetime) -> datetime:
    """``moment``, naive ones taken as UTC (as the sinks do)."""
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=timezone.utc)


def _payload(record: AuditRecord) -> str:
    """The redacted payload summary, else the payload hash, else ``-``."""
    if record.payload_summary is not None:
        return _truncate(record.payload_summary, _PAYLOAD_WIDTH)
    if record.payload_hash is not None:
        return f"sha256:{record.payload_hash[:_HASH_SHOWN]}"
    return "-"


def _record_document(record: AuditRecord) -> Document:
    """An event as stored (already redacted at write time), JSON-ready."""
    return record.model_dump(mode="json")


def _problem_document(problem: ChainProblem) -> Document:
    return dataclasses.asdict(problem)


def _scrub(text: str, secrets: Sequence[str]) -> str:
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    return text


# -- opening the store ----------------------------------------------------------


def _check_env_name(name: str, where: str) -> str:
    """``name`` if it can name an environment variable; a URL (or anything else) is refused unechoed."""
    if not _ENV_NAME.match(name):
        raise _CliError(
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
        raise _CliError(f"audit database {path!r} does not exist")
    try:
        uri = f"{file.resolve().as_uri()}?mode=ro"
        with closing(sqlite3.connect(uri, uri=True)) as conn:
            found = conn.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'audit_events'"
            ).fetchone()
    except sqlite3.Error as exc:
        raise _CliError(f"cannot read audit database {path!r}: {type(exc).__name__}: {exc}") from None
    if found is None:
        raise _CliError(f"{path!r} is not a toolbox audit database (it has no audit_events table)")


def _policy_sink(path: str) -> tuple[dict[str, Any], str]:
    """The first ``[[audit.sinks]]`` table of the policy file ``path`` (validated with the file)."""
    policy = ToolPolicy.from_file(path)
    source = policy.source or path
    audit = policy.governance.get("audit")
    if not isinstance(audit, Mapping):
        raise _CliError(f"{source}: no [audit] table, so no audit store to read")
    first = dict(audit["sinks"][0])
    if first["type"] == "memory":
        raise _CliError(f"{source}: the first [[audit.sinks]] is a memory sink: it keeps nothing to read")
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
        raise _CliError(
            "choose the audit store: --sqlite PATH, --jsonl PATH, --postgres-url-env VAR or --policy FILE"
        )
    if len(given) > 1:
        raise _CliError(f"choose one audit store, not {' and '.join(flag for flag, _ in given)}")
    if args.schema is not None and args.postgres_url_env is None:
        raise _CliError("--schema applies to --postgres-url-env only")
    flag, value = given[0]
    if flag == "--policy":
        return _policy_sink(value)
    if flag == "--postgres-url-env":
        return {"type": "postgres", "url_env": value, "schema": args.schema}, flag
    return {"type": flag.removeprefix("--"), "path": value}, flag


def _open_store(args: argparse.Namespace, secrets: list[str]) -> AuditSink:
    """Open the chosen store for reading. ``secrets`` receives what error messages must mask."""
    config, source = _sink_config(args)
    kind = config["type"]
    if kind == "jsonl":
        if not Path(config["path"]).is_file():
            raise _CliError(f"audit file {config['path']!r} does not exist")
    elif kind == "sqlite":
        _check_sqlite_store(config["path"])
    elif kind == "postgres":
        where = (
            "--postgres-url-env" if source == "--postgres-url-env" else f"{source}: audit.sinks[0].url_env"
        )
        name = _check_env_name(str(config["url_env"]), where)
        url = os.environ.get(name)
        if not url:
            raise _CliError(f"environment variable {name} is not set (it must hold the PostgreSQL URL)")
        secrets.extend(_url_secrets(url))
    from toolbox.audit.config import sink_from_config

    return sink_from_config(config, source=source)


def _cmd_audit(args: argparse.Namespace) -> int:
    """``toolbox audit ...``: open the store, run the sub-command, close the store.

    Every error becomes one line with the database URL and password masked.
    """
    secrets: list[str] = []
    handler: AuditHandler = args.audit_handler
    try:
        sink = _open_store(args, secrets)
        try:
            return handler(args, sink)
        finally:
            sink.close()
    except (_CliError, ToolboxError, AuditSinkError, ImportError, ValueError) as exc:
        raise _CliError(_scrub(str(exc), secrets)) from None
    except OSError as exc:
        raise _CliError(_scrub(f"{type(exc).__name__}: {exc.strerror or exc}", secrets)) from None
    except Exception as exc:  # noqa: BLE001 - reported as one line, secrets masked
        raise _CliError(_scrub(f"unexpected {type(exc).__name__}: {exc}", secrets)) from None


# -- toolbox audit show ---------------------------------------------------------


def _show_lines(trace_id: str, records: Sequence[AuditRecord], problems: Sequence[ChainProblem]) -> list[str]:
    rows = [
        [
            str(r.sequence),
            _time(r.timestamp),
            r.type.value,
            r.name or "-",
            r.decision or "-",
            r.status or "-",
            r.reason_code or "-",
            _truncate(r.intent_text, _INTENT_WIDTH) if r.intent_text else "-",
            _payload(r),
        ]
        for r in records
    ]
    headers = ["SEQ", "TIME", "TYPE", "NAME", "DECISION", "STATUS", "REASON", "INTENT", "PAYLOAD"]
    lines = [f"Trace {_clean(trace_id)}: {_plural(len(records), 'event')}", "", *_table(headers, rows), ""]
    if problems:
        lines.append(f"Chain: BROKEN ({_plural(len(problems), 'problem')}):")
        lines += [f"  {_clean(p)}" for p in problems]
    else:
        lines.append("Chain: intact")
    return lines


def _no_events(trace_id: str) -> int:
    print(f"{PROG}: no events for trace {_clean(trace_id)}", file=sys.stderr)
    return EXIT_UNUSABLE


def _audit_show(args: argparse.Namespace, sink: AuditSink) -> int:
    """``toolbox audit show TRACE_ID``: one trace's events in sequence order, and its chain state."""
    records = sink.read_trace(args.trace_id)
    problems = verify_chain(records)
    # The run's sub-agents: runs whose events name this one as their parent (delegation).
    runs = run_tree(sink, args.trace_id, records)
    parent = records[0].parent_run_id if records else None
    if args.json:
        _emit_json(
            {
                "trace_id": args.trace_id,
                "events": [_record_document(r) for r in records],
                "chain_intact": not problems,
                "problems": [_problem_document(p) for p in problems],
                "parent_run_id": parent,
                "runs": runs.document(),
            }
        )
    elif records:
        lines = _show_lines(args.trace_id, records, problems)
        if parent or runs.children:
            lines[-1:-1] = [*draw_tree(runs, _clean, parent), ""]
        _emit_lines(lines)
    return EXIT_OK if records else _no_events(args.trace_id)


# -- toolbox audit tail ---------------------------------------------------------


def _latest(sink: AuditSink, count: int) -> list[AuditRecord]:
    """The newest ``count`` events, oldest first.

    `AuditSink.query` returns the *oldest* events of a time range, so this
    widens a ``since`` window back from now (1 minute, then x4) until it holds
    ``count`` events or the whole store; a window holding more than a page is
    narrowed again (bisection). Each query is bounded, and with the SQL sinks
    served by the timestamp index; events stamped in the future are included.
    """
    first = sink.query(AuditQuery(limit=1))
    if not first or count <= 0:
        return []
    oldest = _aware(datetime.fromisoformat(first[0].timestamp))
    now = datetime.now(timezone.utc)
    page = max(_READ_PAGE, count + 1)
    fewer = timedelta(0)  # a window known to hold fewer than `count` events
    too_many: timedelta | None = None  # a window known to hold a full page or more
    window = _FIRST_WINDOW
    while True:
        since = now - window
        everything = since <= oldest
        found = sink.query(AuditQuery(since=None if everything else since, limit=page))
        if len(found) >= page:
            too_many = window
        elif len(found) >= count or everything:
            return found[-count:]
        else:
            fewer = window
        if too_many is None:
            window = window * 4
        elif too_many - fewer <= timedelta(microseconds=1):
            return found[-count:]  # more than a page within a microsecond: best effort
        else:
            window = fewer + (too_many - fewer) / 2


def _audit_tail(args: argparse.Namespace, sink: AuditSink) -> int:
    """``toolbox audit tail``: the latest events across traces, oldest first."""
    records = _latest(sink, args.lines)
    if args.json:
        _emit_json({"events": [_record_document(r) for r in records]})
        return EXIT_OK
    if not records:
        _emit_lines(["No events."])
        return EXIT_OK
    rows = [
        [
            _time(r.timestamp),
            r.trace_id,
            str(r.sequence),
            r.type.value,
            r.name or "-",
            r.decision or "-",
            r.status or "-",
            r.reason_code or "-",
            r.tenant or "-",
            r.principal or "-",
        ]
        for r in records
    ]
    headers = ["TIME", "TRACE", "SEQ", "TYPE", "NAME", "DECISION", "STATUS", "REASON", "TENANT", "PRINCIPAL"]
    _emit_lines(_table(headers, rows))
    return EXIT_OK


# -- toolbox audit verify -------------------------------------------------------


def _audit_verify(args: argparse.Namespace, sink: AuditSink) -> int:
    """``toolbox audit verify [TRACE_ID]``: check the hash chains; exit 1 naming every problem."""
    if args.trace_id is not None:
        records = sink.read_trace(args.trace_id)
    else:
        records = sink.query(AuditQuery(limit=_READ_ALL))
    problems = verify_chain(records)
    traces = len({r.trace_id for r in records})
    if isinstance(sink, TraceHeads):  # SQL stores: a removed last event or a removed trace shows too
        heads = sink.trace_heads(args.trace_id)
        problems += verify_heads(records, heads, trace_id=args.trace_id)
        traces = len({r.trace_id for r in records} | set(heads))
    broken = len({p.trace_id for p in problems})
    if args.json:
        _emit_json(
            {
                "ok": not problems and bool(records or args.trace_id is None),
                "trace_id": args.trace_id,
                "events": len(records),
                "traces": traces,
                "problems": [_problem_document(p) for p in problems],
            }
        )
    elif problems:
        lines = [_clean(p) for p in problems]
        lines.append(
            f"FAILED: {_plural(len(problems), 'problem')} in {broken} of {_plural(traces, 'trace')} "
            f"({_plural(len(records), 'event')} checked)"
        )
        _emit_lines(lines)
    elif records or args.trace_id is None:
        _emit_lines([f"OK: {_plural(len(records), 'event')} in {_plural(traces, 'trace')}, chain intact"])
    if args.trace_id is not None and not records and not problems:
        return _no_events(args.trace_id)
    if problems:
        print(
            f"{PROG}: audit chain broken: {_plural(len(problems), 'problem')} in {_plural(broken, 'trace')}",
            file=sys.stderr,
        )
        return EXIT_UNUSABLE
    return EXIT_OK


# -- entry point ----------------------------------------------------------------


class _Parser(argparse.ArgumentParser):
    """argparse, with usage errors of every sub-command reported as ``toolbox: error: ...``."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        # A URL typed after a wrong option is echoed by argparse: never its password.
        masked = _URL_PASSWORD.sub(r"\1***@", message)
        self.exit(EXIT_ERROR, f"{PROG}: error: {_clean(masked)}\n")


def _positive_lines(text: str) -> int:
    """``tail -n``: an integer from 1 to `_TAIL_MAX`."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if not 1 <= value <= _TAIL_MAX:
        raise argparse.ArgumentTypeError(f"must be between 1 and {_TAIL_MAX}, got {value}")
    return value


def _add_store_options(parser: argparse.ArgumentParser, *, default: object) -> None:
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


def _add_audit(commands: Any, common_json: argparse.ArgumentParser) -> None:
    """``toolbox audit show|tail|verify``."""
    audit = commands.add_parser(
        "audit",
        parents=[common_json],
        help="show, tail and verify the audit trail (as an auditor: every tenant)",
        description=(
            "Read an audit store as an auditor: every tenant's events are shown, with no "
            "tenant scoping. Events were redacted when written and are printed as stored."
        ),
    )
    _add_store_options(audit, default=None)
    audit.set_defaults(handler=_cmd_audit)
    store = _Parser(add_help=False)
    _add_store_options(store, default=argparse.SUPPRESS)
    actions = audit.add_subparsers(dest="audit_command", required=True, metavar="ACTION")
    show = actions.add_parser(
        "show",
        parents=[common_json, store],
        help="one trace's events in sequence order",
        description="Print one trace's events in sequence order, and whether its hash chain is intact. "
        "Exit 1 when the trace has no events.",
    )
    show.add_argument("trace_id", metavar="TRACE_ID", help="the trace (the context's run id)")
    show.set_defaults(audit_handler=_audit_show)
    tail = actions.add_parser(
        "tail",
        parents=[common_json, store],
        help="the latest events across traces",
        description="Print the latest events of every trace, oldest first (by timestamp, then sequence).",
    )
    tail.add_argument(
        "-n",
        "--lines",
        metavar="N",
        type=_positive_lines,
        default=_TAIL_DEFAULT,
        help=f"how many events (default {_TAIL_DEFAULT}, at most {_TAIL_MAX})",
    )
    tail.set_defaults(audit_handler=_audit_tail)
    verify = actions.add_parser(
        "verify",
        parents=[common_json, store],
        help="check the hash chains; exit 1 naming each edited, removed or reordered event",
        description=(
            "Check the hash chain of one trace, or of every trace in the store. Each problem is "
            "printed with its trace, sequence number and event id; the exit status is 1 when "
            "there is one. On SQLite and PostgreSQL the stored trace heads also show a trace's "
            "removed last events and a removed trace; a JSON Lines file keeps no heads."
        ),
    )
    verify.add_argument("trace_id", metavar="TRACE_ID", nargs="?", help="one trace (default: every trace)")
    verify.set_defaults(audit_handler=_audit_verify)
    add_replay(actions, parents=[common_json, store])  # toolbox audit replay FALLBACK_FILE


def _version() -> str:
    """The installed distribution's version."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("toolbox-registry")
    except PackageNotFoundError:  # running from a source tree that was never installed
        return "unknown"


def _parser() -> argparse.ArgumentParser:
    """The argument parser: ``list``, ``check`` and ``audit``, ``--json`` accepted before or after them."""
    parser = _Parser(
        prog=PROG,
        description="Inspect the tools this deployment can hand to LLM agents, and its audit trail.",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    # Sub-commands accept --json too; SUPPRESS keeps `toolbox --json list` from being reset.
    common_json = _Parser(add_help=False)
    common_json.add_argument(
        "--json", action="store_true", default=argparse.SUPPRESS, help="print one JSON document"
    )
    common = _Parser(add_help=False, parents=[common_json])
    common.add_argument(
        "--policy",
        metavar="FILE",
        help=f"TOML policy file (default: ${POLICY_ENV}, else the standard policy)",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    list_cmd = commands.add_parser(
        "list", parents=[common], help="list discovered tools, broken providers and blocked distributions"
    )
    list_cmd.set_defaults(handler=_cmd_list)
    check_cmd = commands.add_parser(
        "check", parents=[common], help="show whether each tool may be used, and why"
    )
    check_cmd.add_argument(
        "--require",
        metavar="NAME",
        action="append",
        default=[],
        help="exit with status 1 unless tool NAME is usable (repeatable)",
    )
    check_cmd.set_defaults(handler=_cmd_check)
    _add_audit(commands, common_json)
    add_auth(commands, common_json)
    add_kill(commands, common)
    add_mcp(commands)
    from toolbox.cli_serve import add_serve

    add_serve(commands, common)
    return parser


def _fail(message: str) -> int:
    """Report an error as one line on stderr and return the error exit status."""
    text = _clean(message)
    if len(text) > _MAX_ERROR_TEXT * 2:
        text = text[: _MAX_ERROR_TEXT * 2 - 3] + "..."
    print(f"{PROG}: error: {text}", file=sys.stderr)
    return EXIT_ERROR


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``toolbox`` command with ``argv`` (default: ``sys.argv[1:]``); return the exit status."""
    try:
        args = _parser().parse_args(argv)
    except SystemExit as exc:  # argparse has already printed help or a usage error
        return exc.code if isinstance(exc.code, int) else EXIT_ERROR
    try:
        status: int = args.handler(args)
    except (ToolboxError, _CliError) as exc:  # malformed policy, provider conflict, bad store, ...
        return _fail(str(exc))
    except OSError as exc:
        return _fail(f"{type(exc).__name__}: {exc.strerror or exc}")
    except Exception as exc:  # noqa: BLE001 - an operator tool reports, it never dumps a traceback
        return _fail(f"unexpected {type(exc).__name__}: {exc}")
    return status
