"""``toolbox kill engage|release|status``: the fleet's kill switches, from the command line.

::

    toolbox kill engage  [--tool NAME] --reason TEXT [--who NAME] [--policy FILE] [--json]
    toolbox kill release [--tool NAME] --reason TEXT [--who NAME] [--policy FILE] [--json]
    toolbox kill status  [--policy FILE] [--json]

The store is the policy file's ``[state]`` (``--policy``, else ``TOOLBOX_POLICY``);
the memory backend is refused, since it would stop no other process. Every
change is an audit event in the policy's ``[audit]`` trail (trace
``toolbox-kill-switch``). Workers see a change within their
``kill_switch_refresh`` delay (default 1 s).
"""

from __future__ import annotations

import argparse
import getpass
import json
import os
import sys
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from toolbox.cli._common import clean
from toolbox.doors._catalog import POLICY_ENV
from toolbox.errors import ConfigurationError
from toolbox.pipeline._state_ports import KillSwitchStore
from toolbox.registry._policy import ToolPolicy

if TYPE_CHECKING:
    from toolbox.state._kill import KillChange

__all__ = ["add_kill"]


def add_kill(commands: Any, common: argparse.ArgumentParser) -> None:
    """Register ``kill`` on the ``toolbox`` parser's sub-commands (``common``: --json and --policy)."""
    kill = commands.add_parser(
        "kill",
        parents=[common],
        help="engage, release or show the fleet's kill switches ([state] in the policy file)",
        description="Stop every governed call of the fleet, or one tool's, within the configured delay.",
    )
    kill.add_argument("action", choices=("engage", "release", "status"), help="what to do")
    kill.add_argument("--tool", metavar="NAME", help="one tool's switch (default: the global switch)")
    kill.add_argument("--reason", metavar="TEXT", help="why (required to engage or release)")
    kill.add_argument("--who", metavar="NAME", help="who is acting (default: the OS user)")
    kill.set_defaults(handler=_cmd_kill)


def _who(given: str | None) -> str:
    if given is not None:
        return given
    try:
        return getpass.getuser()
    except (OSError, KeyError, ImportError):
        return "operator"


def _store(policy: ToolPolicy) -> KillSwitchStore:
    from toolbox.state._config import state_from_config

    config = policy.governance.get("state")
    source = policy.source or "policy"
    if config is None or config["backend"] == "memory":
        raise ConfigurationError(
            f"{source}: the kill switch needs a shared [state] backend (sql or redis); "
            "the memory backend would stop no other process"
        )
    state = state_from_config(config, source=source)
    assert state.kill is not None
    return state.kill


def _status(store: KillSwitchStore, *, as_json: bool) -> int:
    entries = store.engaged()
    if as_json:
        print(json.dumps({"engaged": [e.as_dict() for e in entries.values()]}, indent=2))
    elif not entries:
        print("No kill switch is engaged.")
    for entry in () if as_json else entries.values():
        # The entries come from a shared store: another writer's control characters are escaped.
        at = datetime.fromtimestamp(entry.at, timezone.utc).isoformat(timespec="seconds")
        print(clean(f"{entry.tool or 'ALL TOOLS'}: engaged by {entry.who} at {at}: {entry.reason}"))
    return 0


def _report(args: argparse.Namespace, change: KillChange, *, as_json: bool) -> None:
    target = args.tool or "all tools"
    if as_json:
        entry = None if change.entry is None else change.entry.as_dict()
        print(
            json.dumps({"action": args.action, "tool": args.tool, "entry": entry, "audited": change.audited})
        )
    elif args.action == "engage":
        print(f"Kill switch engaged for {target}.")
    elif change.entry is None:
        print(f"The kill switch for {target} was not engaged.")
    else:
        print(f"Kill switch released for {target}.")
    if not change.audited:
        print("warning: the policy has no [audit] trail; this change was not audited", file=sys.stderr)


def _no_such_tool(policy: ToolPolicy, tool: str) -> str | None:
    """A warning when no call here would hit a switch named ``tool`` (a typo, an operation)."""
    from toolbox.registry._discovery import discover

    try:
        names = {found.descriptor.name for found in discover(policy).tools}
    except Exception:  # noqa: BLE001 - a warning only: never stand between an operator and the switch
        return None
    if tool in names:
        return None
    owner = next((name for name in sorted(names) if tool.startswith(name + ".")), None)
    if owner is not None:
        return (
            f"warning: {tool!r} names an operation of tool {owner!r}; a kill switch stops whole "
            f"tools: --tool {owner}"
        )
    return (
        f"warning: no tool named {tool!r} is installed here; the switch stops only calls of a tool "
        "of exactly that name (check the spelling)"
    )


def _cmd_kill(args: argparse.Namespace) -> int:
    """Run one ``toolbox kill`` action; 0 on success (errors raise and become exit status 2)."""
    from toolbox.state._kill import change_kill_switch

    path = args.policy or os.environ.get(POLICY_ENV)
    if not path:
        raise ConfigurationError(f"choose the policy file with [state]: --policy FILE or ${POLICY_ENV}")
    policy = ToolPolicy.from_file(path)
    store = _store(policy)
    as_json = bool(getattr(args, "json", False))
    if args.action == "status":
        return _status(store, as_json=as_json)
    if args.reason is None:
        raise ConfigurationError(f"toolbox kill {args.action} needs --reason TEXT")
    trail = None
    if "audit" in policy.governance:
        from toolbox.audit._config import trail_from_config

        trail = trail_from_config(policy.governance["audit"], source=policy.source or path)
    change = change_kill_switch(
        store, args.action, tool=args.tool, reason=args.reason, who=_who(args.who), trail=trail
    )
    if trail is not None:
        trail.flush()
    _report(args, change, as_json=as_json)
    if args.action == "engage" and args.tool is not None:
        warning = _no_such_tool(policy, args.tool)
        if warning is not None:
            print(warning, file=sys.stderr)
    return 0
