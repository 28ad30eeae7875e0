"""The ``toolbox`` command: what an operator checks at deploy time.

Usage::

    toolbox list  [--policy FILE] [--json]
    toolbox check [--policy FILE] [--require NAME ...] [--json]

``list`` shows every discovered tool, the providers that failed to load and
the distributions the policy blocked. ``check`` shows, for every tool, whether
this deployment may use it and why, and its acknowledgement state.

The policy is ``--policy FILE``, else the file named by ``TOOLBOX_POLICY``,
else `ToolPolicy.standard`. ``--json`` (before or after the command) prints
one JSON document instead of aligned columns.

Exit status: 0 on success; 1 when a ``--require``-d tool is unusable; 2 on an
error (malformed policy file, provider conflict, bad arguments), reported as
one ``toolbox: error: ...`` line on stderr, never a traceback.

Nothing from the environment is printed except acknowledgement variable names
and the values they must hold, which are approvals, not secrets.
"""

from __future__ import annotations

import argparse
import getpass
import json
import re
import shlex
import sys
from collections.abc import Sequence

from pydantic import ValidationError

from toolbox.catalog import POLICY_ENV
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
    lines = (
        _table(["TOOL", "VERSION", "RISK", "ACKNOWLEDGEMENT", "DISTRIBUTION"], rows)
        if rows
        else ["No tools found."]
    )
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
        "broken": [
            {"distribution": b.distribution, "origin": b.origin, "error": b.error}
            for b in tools.broken_providers
        ],
        "blocked": list(tools.blocked_distributions),
    }


def _check_lines(tools: Tools, policy: str, required: Sequence[ToolDecision]) -> list[str]:
    """The human-readable output of ``toolbox check``."""
    decisions = tools.decisions()
    label = policy
    if tools.policy.source is None:
        label += " (built in: MEMORY_ONLY tools allowed, every other tool needs an explicit allow)"
    lines = [f"Policy: {_clean(label)}", ""]
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
    return lines + _problem_lines(tools)


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


# -- entry point ----------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    """The argument parser: ``list`` and ``check``, ``--json`` accepted before or after them."""
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Inspect the tools this deployment can hand to LLM agents.",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    # Sub-commands accept --json too; SUPPRESS keeps `toolbox --json list` from being reset.
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--json", action="store_true", default=argparse.SUPPRESS, help="print one JSON document"
    )
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
    except ToolboxError as exc:  # malformed policy, provider conflict, ...
        return _fail(str(exc))
    except OSError as exc:
        return _fail(f"{type(exc).__name__}: {exc.strerror or exc}")
    except Exception as exc:  # noqa: BLE001 - an operator tool reports, it never dumps a traceback
        return _fail(f"unexpected {type(exc).__name__}: {exc}")
    return status
