"""How the Redis backends lay out keys and values: shared by the sync and asyncio stores.

Keys: ``toolbox:{<namespace>}:kill`` (a hash: ``*`` or ``t:<tool>`` -> JSON
entry), ``...:b:<quota key>`` (budget counters), ``...:r:<quota key>`` (rate
windows, sorted sets scored in microseconds), ``...:a:<request id>`` (an
approval record, a hash), ``...:a:index`` (request ids by creation time) and
``...:a:q:<tenant>:<principal>`` (the record keys of a principal's requests
that may still be pending, by expiry: the bound on pending requests).
Every caller-chosen part goes through `key_part`.
"""

from __future__ import annotations

import json
import math
import time
import uuid
from collections.abc import Mapping, Sequence
from typing import Any, final

from toolbox.pipeline._grants import ApprovalRequest, PendingApproval
from toolbox.pipeline._state_ports import (
    ApprovalDecisionError,
    ApprovalQueueFullError,
    Clock,
    KillEntry,
    Quota,
    Refusal,
    key_part,
)
from toolbox.state._approval_rules import effective

__all__ = ["UNREADABLE", "Layout", "decision_error", "kill_entries", "kill_entry", "ms", "record_from_hash"]

#: The reason and who of an engaged switch whose stored value cannot be read.
UNREADABLE = "(the stored entry is unreadable)"


def ms(seconds: float) -> int:
    """Whole milliseconds, rounded up."""
    return math.ceil(seconds * 1000)


@final
class Layout:
    """The keys and script arguments of one deployment's namespace.

    ``clock``: None (the default) lets every script read the Redis server's ``TIME``, so
    hosts whose clocks drift agree; an injected clock (tests) is passed to each script as its
    last argument instead. Keys still expire on the server's clock (``PEXPIRE``), so a budget
    window ends only when the server says so.
    """

    __slots__ = ("_clock", "prefix")

    def __init__(self, namespace: str, clock: Clock | None = None) -> None:
        # The braces are a hash tag: every key of the namespace in one cluster slot.
        self.prefix = f"toolbox:{{{key_part(namespace)}}}:"
        self._clock = clock

    def now(self) -> float:
        """Wall-clock seconds as this store reads them (the injected clock, else this host's)."""
        return time.time() if self._clock is None else self._clock()

    def _stamp(self, per_second: int) -> str:
        """A script's last argument: the injected clock in ticks, or '' (read the server's TIME)."""
        return "" if self._clock is None else str(round(self._clock() * per_second))

    @property
    def kill(self) -> str:
        """The hash of engaged kill switches."""
        return self.prefix + "kill"

    @property
    def kill_channel(self) -> str:
        """The pub/sub channel every kill-switch change is announced on (the message is empty)."""
        return self.prefix + "kill:changed"

    @staticmethod
    def switch(tool: str | None) -> str:
        """The field of a switch in the kill hash."""
        return "*" if tool is None else "t:" + tool

    def record(self, request_id: str) -> str:
        """The hash of one approval request."""
        return self.prefix + "a:" + key_part(request_id)

    @property
    def index(self) -> str:
        """The sorted set of request ids by creation time."""
        return self.prefix + "a:index"

    def admit(self, budgets: Sequence[Quota], rates: Sequence[Quota]) -> tuple[list[str], list[Any]]:
        """The keys and arguments of the ADMIT script."""
        keys = [self.prefix + "b:" + q.key for q in budgets] + [self.prefix + "r:" + q.key for q in rates]
        args: list[Any] = [len(budgets), uuid.uuid4().hex]
        for quota in budgets:
            args += (quota.limit, max(1, ms(quota.window)))
        for quota in rates:
            args += (quota.limit, max(1, math.ceil(quota.window * 1_000_000)))
        args.append(self._stamp(1_000_000))
        return keys, args

    @staticmethod
    def refusal(answer: Any, budgets: Sequence[Quota], rates: Sequence[Quota]) -> Refusal | None:
        """The ADMIT script's answer as a `Refusal` (None: admitted)."""
        if answer is None:
            return None
        index, rate, wait = (int(v) for v in answer)
        quotas = [*budgets, *rates]
        return Refusal(quotas[index - 1], bool(rate), max(wait, 0) / (1_000_000 if rate else 1000))

    def queue(self, tenant: str, principal: str) -> str:
        """The sorted set of one principal's requests that may still be pending."""
        return f"{self.prefix}a:q:{key_part(tenant)}:{key_part(principal)}"

    def submit(
        self, pending: PendingApproval, retain: float, max_pending: int
    ) -> tuple[list[str], list[Any]]:
        """The keys and arguments of the SUBMIT script."""
        data = pending.as_dict()
        immutable = {k: data[k] for k in ("request", "intent_kind", "intent_text", "run_id", "created_at")}
        fields = {
            "data": json.dumps(immutable, separators=(",", ":"), default=repr),
            "state": pending.state,
            "expires_at_ms": ms(pending.expires_at),
            "expires_at": repr(pending.expires_at),
            "principal": pending.request.principal,
            "tenant": pending.request.tenant,
            "fingerprint": pending.request.fingerprint,
            "decided_by": pending.decided_by or "",
            "reason": pending.reason,
            "id": pending.id,
        }
        request = pending.request
        args: list[Any] = [
            pending.id,
            ms(pending.created_at),
            ms(pending.expires_at),
            ms(retain),
            max(0, int(max_pending)),
            request.fingerprint,
        ]
        for name, value in fields.items():
            args += (name, value)
        args.append(self._stamp(1000))
        return [self.record(pending.id), self.index, self.queue(request.tenant, request.principal)], args

    def decide(
        self, approve: bool, decided_by: str, reason: str, grant_ttl: float, retain: float
    ) -> list[Any]:
        """The arguments of the DECIDE script."""
        return [1 if approve else 0, decided_by, reason, ms(grant_ttl), ms(retain), self._stamp(1000)]

    def consume(self, fingerprint: str) -> list[Any]:
        """The arguments of the CONSUME script."""
        return [fingerprint, self._stamp(1000)]

    def record_of(self, raw: Mapping[str, str]) -> PendingApproval | None:
        """The approval record a hash holds, as of this store's now; None for an absent hash."""
        return record_from_hash(raw, self.now())

    @staticmethod
    def submitted(answer: Any) -> str:
        """The SUBMIT script's answer: the id the request waits under (`ApprovalQueueFullError` when full)."""
        kind, value = answer
        if kind == "full":
            raise ApprovalQueueFullError(
                f"{int(value)} approval requests of this principal are already waiting"
            )
        return str(value)


def record_from_hash(raw: Mapping[str, str], now: float) -> PendingApproval | None:
    """The approval record a hash holds, as of ``now``; None for an empty (absent) hash."""
    if "data" not in raw:
        return None
    data = json.loads(raw["data"])
    r = data["request"]
    request = ApprovalRequest(
        id=r["id"],
        tool=r["tool"],
        operation=r["operation"],
        arguments=r["arguments"],
        fingerprint=r["fingerprint"],
        rules=tuple(r["rules"]),
        tenant=r["tenant"],
        principal=r["principal"],
        created_at=float(data["created_at"]),
    )
    decided_at = raw.get("decided_at_ms")
    pending = PendingApproval(
        request=request,
        intent_kind=data["intent_kind"],
        intent_text=data["intent_text"],
        run_id=data["run_id"],
        created_at=float(data["created_at"]),
        expires_at=float(raw["expires_at"]),
        state=raw["state"],
        decided_by=raw.get("decided_by") or None,
        decided_at=int(decided_at) / 1000 if decided_at else None,
        reason=raw.get("reason", ""),
    )
    return effective(pending, now)


def decision_error(answer: str, request_id: str) -> ApprovalDecisionError:
    """The DECIDE script's refusal as an `ApprovalDecisionError`."""
    code, _, current = answer.partition(":")
    messages = {
        "UNKNOWN_REQUEST": f"no approval request {request_id!r}",
        "EXPIRED": f"approval request {request_id!r} has expired",
        "SELF_APPROVAL": "the principal who made the request cannot decide it (four eyes)",
        "ALREADY_DECIDED": f"approval request {request_id!r} is already {current}",
    }
    return ApprovalDecisionError(messages.get(code, "the approval cannot be decided"), reason_code=code)


def kill_entry(tool: str | None, value: str) -> KillEntry:
    """One switch from its JSON value.

    A switch is engaged because its field exists, whatever its value: a value another writer
    left malformed is still an engaged switch (fail closed), shown as unreadable.
    """
    try:
        data = json.loads(value)
        return KillEntry(tool, str(data["reason"]), str(data["who"]), float(data["at"]))
    except (ValueError, TypeError, KeyError, RecursionError):
        return KillEntry(tool, UNREADABLE, UNREADABLE, 0.0)


def kill_entries(raw: Mapping[str, str]) -> dict[str | None, KillEntry]:
    """The kill hash as entries by tool (None: global)."""
    entries: dict[str | None, KillEntry] = {}
    for field, value in raw.items():
        tool = None if field == "*" else field[2:]
        entries[tool] = kill_entry(tool, value)
    return entries
