"""``toolbox audit show|tail|verify`` (and ``replay``, from `toolbox.cli._audit_replay`).

``audit`` reads an audit store (`toolbox.cli._audit_store`) as an auditor:
every tenant's events, with no tenant scoping (the operator running the command
is trusted with the store itself). ``show`` prints one trace's events in
sequence order, then the tree of the runs it delegated to (and the run that
delegated it); ``tail`` the latest events across traces; ``verify`` checks the
hash chains of one trace or of every trace and names each edited, removed or
reordered event (exit 1). Events are redacted when written; the command prints
them as stored, control characters escaped. Every error of an opened store is
one ``toolbox: error:`` line with the database URL and password masked.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta, timezone
from typing import Any

from toolbox.audit._events import AuditRecord
from toolbox.audit._runs import draw_tree, run_tree
from toolbox.audit._sink import AuditQuery, AuditSink, AuditSinkError
from toolbox.audit._verify import ChainProblem, TraceHeads, verify_chain, verify_heads
from toolbox.cli._audit_log import add_log_actions, add_witness_options, verify_against_witnesses
from toolbox.cli._audit_replay import add_replay
from toolbox.cli._audit_store import add_store_options, open_store, scrub
from toolbox.cli._common import (
    EXIT_OK,
    EXIT_UNUSABLE,
    PROG,
    CliError,
    Document,
    Parser,
    clean,
    emit_json,
    emit_lines,
    table,
)
from toolbox.errors import ToolboxError

__all__ = ["add_audit"]

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

AuditHandler = Callable[[argparse.Namespace, AuditSink], int]


def add_audit(commands: Any, common_json: argparse.ArgumentParser) -> None:
    """Register ``audit show|tail|verify|replay`` on the ``toolbox`` parser's sub-commands."""
    audit = commands.add_parser(
        "audit",
        parents=[common_json],
        help="show, tail and verify the audit trail (as an auditor: every tenant)",
        description=(
            "Read an audit store as an auditor: every tenant's events are shown, with no "
            "tenant scoping. Events were redacted when written and are printed as stored."
        ),
    )
    add_store_options(audit, default=None)
    audit.set_defaults(handler=_cmd_audit)
    store = Parser(add_help=False)
    add_store_options(store, default=argparse.SUPPRESS)
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
        help="check the hash chains (and the signed checkpoints); exit 1 naming each problem",
        description=(
            "Check the hash chain of one trace, or of every trace in the store. Each problem is "
            "printed with its trace, sequence number and event id; the exit status is 1 when "
            "there is one. On SQLite and PostgreSQL the stored trace heads also show a trace's "
            "removed last events and a removed trace; a JSON Lines file keeps no heads. With "
            "--public-key and witnesses (--witness-dir, --witness-url-env, --witness-http), the store "
            "is also checked against every signed checkpoint they hold: a rewrite by whoever owns the "
            "database is named by log index or trace."
        ),
    )
    verify.add_argument("trace_id", metavar="TRACE_ID", nargs="?", help="one trace (default: every trace)")
    add_witness_options(verify)  # --public-key and witnesses: the signed checkpoints catch the owner
    verify.set_defaults(audit_handler=_audit_verify)
    add_replay(actions, parents=[common_json, store])  # toolbox audit replay FALLBACK_FILE
    add_log_actions(actions, store=[common_json, store], plain=[common_json])


def _positive_lines(text: str) -> int:
    """``tail -n``: an integer from 1 to `_TAIL_MAX`."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if not 1 <= value <= _TAIL_MAX:
        raise argparse.ArgumentTypeError(f"must be between 1 and {_TAIL_MAX}, got {value}")
    return value


# -- event formatting -----------------------------------------------------------


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def _truncate(text: object, width: int) -> str:
    """``text`` on one line (control characters escaped), cut to ``width`` with ``...``."""
    line = clean(text)
    return line if len(line) <= width else line[: width - 3] + "..."


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


# -- toolbox audit --------------------------------------------------------------


def _cmd_audit(args: argparse.Namespace) -> int:
    """``toolbox audit ...``: open the store, run the sub-command, close the store.

    Every error becomes one line with the database URL and password masked.
    """
    secrets: list[str] = []
    standalone: Callable[[argparse.Namespace], int] | None = getattr(args, "audit_standalone", None)
    try:
        if standalone is not None:  # keygen, check-proof: no store
            return standalone(args)
        handler: AuditHandler = args.audit_handler
        sink = open_store(args, secrets)
        try:
            return handler(args, sink)
        finally:
            sink.close()
    except (CliError, ToolboxError, AuditSinkError, ImportError, ValueError) as exc:
        raise CliError(scrub(str(exc), secrets)) from None
    except OSError as exc:
        raise CliError(scrub(f"{type(exc).__name__}: {exc.strerror or exc}", secrets)) from None
    except Exception as exc:  # noqa: BLE001 - reported as one line, secrets masked
        raise CliError(scrub(f"unexpected {type(exc).__name__}: {exc}", secrets)) from None


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
    lines = [f"Trace {clean(trace_id)}: {_plural(len(records), 'event')}", "", *table(headers, rows), ""]
    if problems:
        lines.append(f"Chain: BROKEN ({_plural(len(problems), 'problem')}):")
        lines += [f"  {clean(p)}" for p in problems]
    else:
        lines.append("Chain: intact")
    return lines


def _no_events(trace_id: str) -> int:
    print(f"{PROG}: no events for trace {clean(trace_id)}", file=sys.stderr)
    return EXIT_UNUSABLE


def _audit_show(args: argparse.Namespace, sink: AuditSink) -> int:
    """``toolbox audit show TRACE_ID``: one trace's events in sequence order, and its chain state."""
    records = sink.read_trace(args.trace_id)
    problems = verify_chain(records)
    # The run's sub-agents: runs whose events name this one as their parent (delegation).
    runs = run_tree(sink, args.trace_id, records)
    parent = records[0].parent_run_id if records else None
    if args.json:
        emit_json(
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
            lines[-1:-1] = [*draw_tree(runs, clean, parent), ""]
        emit_lines(lines)
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
        emit_json({"events": [_record_document(r) for r in records]})
        return EXIT_OK
    if not records:
        emit_lines(["No events."])
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
    emit_lines(table(headers, rows))
    return EXIT_OK


# -- toolbox audit verify -------------------------------------------------------


def _audit_verify(args: argparse.Namespace, sink: AuditSink) -> int:
    """``toolbox audit verify [TRACE_ID]``: check the hash chains; exit 1 naming every problem."""
    if args.trace_id is not None and args.public_key:
        raise CliError("the witnessed checkpoints cover the whole store: verify without TRACE_ID")
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
    # Signed checkpoints (--public-key, witnesses): what someone who rewrote the store hides from the above.
    problems += verify_against_witnesses(args, sink, records)
    if args.json:
        emit_json(
            {
                "ok": not problems and bool(records or args.trace_id is None),
                "trace_id": args.trace_id,
                "events": len(records),
                "traces": traces,
                "problems": [_problem_document(p) for p in problems],
            }
        )
    elif problems:
        lines = [clean(p) for p in problems]
        lines.append(
            f"FAILED: {_plural(len(problems), 'problem')} in {broken} of {_plural(traces, 'trace')} "
            f"({_plural(len(records), 'event')} checked)"
        )
        emit_lines(lines)
    elif records or args.trace_id is None:
        checked = ", the log matches every witnessed checkpoint" if args.public_key else ""
        emit_lines(
            [f"OK: {_plural(len(records), 'event')} in {_plural(traces, 'trace')}, chain intact{checked}"]
        )
    if args.trace_id is not None and not records and not problems:
        return _no_events(args.trace_id)
    if problems:
        print(
            f"{PROG}: audit chain broken: {_plural(len(problems), 'problem')} in {_plural(broken, 'trace')}",
            file=sys.stderr,
        )
        return EXIT_UNUSABLE
    return EXIT_OK
