"""``toolbox list`` and ``toolbox check``: the deployment's tools, and whether it may use them.

``list`` shows every discovered tool, each operation with its effect, the
providers that failed to load and the distributions the policy blocked.
``check`` shows, for every tool, whether this deployment may use it and why,
and its acknowledgement state, and which Cedar policies the policy file loads;
it exits 1 when a ``--require``-d tool is unusable.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from collections.abc import Sequence
from typing import Any

from toolbox.cli._common import (
    EXIT_OK,
    EXIT_UNUSABLE,
    MAX_ERROR_TEXT,
    PROG,
    Document,
    clean,
    emit_json,
    emit_lines,
    load_tools,
    policy_label,
    table,
)
from toolbox.cli._format import (
    OPERATION_HEADERS,
    authorization_document,
    authorization_text,
    operation_rows,
    operations_of,
)
from toolbox.cli._mcp_lock import drift_document, drift_lines
from toolbox.doors._tool_decision import AcknowledgementState, ToolDecision
from toolbox.doors._tools import Tools

__all__ = ["add_check", "add_list"]


def add_list(commands: Any, common: argparse.ArgumentParser) -> None:
    """Register ``list`` on the ``toolbox`` parser's sub-commands (``common``: --json and --policy)."""
    list_cmd = commands.add_parser(
        "list", parents=[common], help="list discovered tools, broken providers and blocked distributions"
    )
    list_cmd.set_defaults(handler=_cmd_list)


def add_check(commands: Any, common: argparse.ArgumentParser) -> None:
    """Register ``check`` on the ``toolbox`` parser's sub-commands (``common``: --json and --policy)."""
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
        rows = [[b.distribution, b.error[:MAX_ERROR_TEXT]] for b in broken]
        lines += [*table(["DISTRIBUTION", "ERROR"], rows, indent="  "), ""]
    else:
        lines.append("Broken providers: none")
    blocked = tools.blocked_distributions
    if blocked:
        lines.append(f"Blocked by the policy ({len(blocked)}):")
        lines += [f"  {clean(name)}" for name in blocked]
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
    lines = table(["TOOL", "VERSION", "RISK", "ACKNOWLEDGEMENT", "DISTRIBUTION"], rows)
    lines += ["", "Operations (call by name as TOOL.OPERATION):"]
    lines += table(OPERATION_HEADERS, operation_rows(tools.descriptors()), indent="  ")
    return lines + _problem_lines(tools)


def _cmd_list(args: argparse.Namespace) -> int:
    """``toolbox list``: print every discovered tool and every provider problem."""
    tools = load_tools(args.policy)
    if args.json:
        emit_json(_list_document(tools, policy_label(tools, from_flag=args.policy is not None)))
    else:
        emit_lines(_list_lines(tools))
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
    lines = [f"Policy: {clean(label)}", f"Authorization: {clean(authorization_text(tools.policy))}", ""]
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
        lines += table(["TOOL", "DECISION", "REASON", "RULE", "RISK", "ACKNOWLEDGEMENT"], rows)
        lines += ["", "Details:"]
        lines += table(["TOOL", "WHY"], [[d.tool, d.detail] for d in decisions], indent="  ")[1:]
    else:
        lines.append("No tools found.")
    if required:
        rows = [
            [d.tool, "usable" if d.allowed else f"NOT USABLE ({d.reason_code}, rule {d.rule}): {d.detail}"]
            for d in required
        ]
        lines += ["", "Required tools:"]
        lines += table(["TOOL", "STATE"], rows, indent="  ")[1:]
    return lines + drift_lines(tools) + _problem_lines(tools)


def _cmd_check(args: argparse.Namespace) -> int:
    """``toolbox check``: print each tool's decision; exit 1 if a required tool is unusable."""
    tools = load_tools(args.policy)
    required = _required(tools, args.require)
    policy = policy_label(tools, from_flag=args.policy is not None)
    if args.json:
        emit_json(_check_document(tools, policy, required))
    else:
        emit_lines(_check_lines(tools, policy, required))
    unusable = [d for d in required if not d.allowed]
    if unusable:
        names = ", ".join(f"{d.tool} ({d.reason_code})" for d in unusable)
        print(f"{PROG}: required tools not usable: {clean(names)}", file=sys.stderr)
        return EXIT_UNUSABLE
    return EXIT_OK
