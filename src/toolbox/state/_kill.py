"""Engaging and releasing the fleet's kill switches, each change an audit event.

`toolbox kill` calls `change_kill_switch`; so can an application's own
console. Every process reading the store refuses (or runs again) within its
``kill_switch_refresh`` delay: the change is not instant, and docs/fleet.md says so.
"""

from __future__ import annotations

import re
from typing import final

from toolbox.audit._events import AuditEvent, EventType
from toolbox.audit._trail import AuditTrail
from toolbox.errors import ConfigurationError
from toolbox.foundations._descriptor import MAX_NAME_LENGTH, TOOL_NAME_PATTERN
from toolbox.pipeline._state_ports import KillEntry, KillSwitchStore

__all__ = ["KILL_SWITCH_TRACE", "KillChange", "change_kill_switch"]

#: The audit trace every kill-switch change is recorded in.
KILL_SWITCH_TRACE = "toolbox-kill-switch"
_MAX_TEXT = 1_000


@final
class KillChange:
    """What a change did: ``entry`` is the switch engaged, or the one released (None: was not engaged)."""

    __slots__ = ("action", "audited", "entry", "tool")

    def __init__(self, action: str, tool: str | None, entry: KillEntry | None, *, audited: bool) -> None:
        self.action = action
        self.tool = tool
        self.entry = entry
        self.audited = audited


def _check(tool: str | None, reason: str, who: str) -> None:
    if tool is not None and (len(tool) > MAX_NAME_LENGTH or not re.fullmatch(TOOL_NAME_PATTERN, tool)):
        raise ConfigurationError(f"not a valid tool name ({TOOL_NAME_PATTERN})")
    # One printable line each, as the service's console asks: shown on operators' terminals and pages.
    if not reason.strip() or len(reason) > _MAX_TEXT or not reason.isprintable():
        raise ConfigurationError(
            f"a kill-switch change needs a reason of 1 to {_MAX_TEXT} printable characters (one line)"
        )
    if not who.strip() or len(who) > _MAX_TEXT or not who.isprintable():
        raise ConfigurationError(f"who must be 1 to {_MAX_TEXT} printable characters (one line)")


def change_kill_switch(
    store: KillSwitchStore,
    action: str,
    *,
    tool: str | None,
    reason: str,
    who: str,
    trail: AuditTrail | None = None,
) -> KillChange:
    """``engage`` or ``release`` the global switch (``tool`` None) or one tool's; audit it in ``trail``.

    Raises:
        ConfigurationError: an unknown action, a bad tool name, an empty or huge reason.
        StateUnavailableError: the store did not answer (nothing changed).
    """
    if action not in ("engage", "release"):
        raise ConfigurationError(f"unknown kill-switch action {action!r}; use engage or release")
    _check(tool, reason, who)
    if action == "engage":
        entry: KillEntry | None = store.engage(tool, reason=reason, who=who)
    else:
        entry = store.release(tool, reason=reason, who=who)
    audited = False
    if trail is not None:
        event = AuditEvent(
            EventType.GOVERNANCE_DECISION,
            trace_id=KILL_SWITCH_TRACE,
            name="kill_switch",
            tool=tool or "*",
            decision="ENGAGE" if action == "engage" else "RELEASE",
            reason_code="KILL_SWITCH_ENGAGED" if action == "engage" else "KILL_SWITCH_RELEASED",
            rule_ids=("kill_switch:global" if tool is None else "kill_switch:tool",),
            intent_kind="reason",
            intent_text=reason,
            tenant="*",
            principal=who,
            status="ENGAGED" if action == "engage" else "RELEASED",
        )
        trail.sink.append([event])
        audited = True
    return KillChange(action, tool, entry, audited=audited)
