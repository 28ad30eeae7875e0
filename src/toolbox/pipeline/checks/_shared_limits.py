"""`SharedLimits`: budgets and rate limits counted in a `LimitStore`, for the whole fleet.

A context's `toolbox.Budget` counts one run's calls in one process. These
limits count in the governance state store (``[state]`` in the policy file),
so K calls of a tenant's budget admit exactly K calls across every process,
and a rate of N per second admits at most N in any second, fleet-wide:

- a **budget** of ``limit`` calls per run, principal or tenant (optionally of
  one tool), counted for ``window`` seconds from its first call; a delegated
  run's calls count in its own run's budget and in every ancestor run's
  (`toolbox.ExecutionContext.lineage`), in the same atomic store operation;
- a **rate limit** of ``limit`` calls in any sliding window of ``window``
  seconds, per tenant, principal, tool or host (optionally of one tool). A
  ``host`` limit counts the calls whose ``url`` argument names the host
  (`canonical_host`): the HTTP tool's per-host limit, fleet-wide.

Every quota of a call is checked and counted in one atomic store operation
(one round trip): a refused call spends nothing. A rate refusal is
DENIED/RATE_LIMITED with ``retry_after``; a spent budget DENIED/BUDGET_EXHAUSTED.
When the store does not answer, the call is DENIED/STATE_UNAVAILABLE, unless
every quota of the call is a rate limit and ``fail_open_rates`` is set: then
it runs, with a warning in the log and in the audit trail.

On the async door (`acall`) the store operation runs on a worker thread
(`toolbox.pipeline._offload`) unless the store is in-process, so an event loop
serving many calls never waits on the store's round trip.
"""

from __future__ import annotations

import ipaddress
import logging
import math
import socket
from collections.abc import Sequence
from dataclasses import dataclass
from typing import final
from urllib.parse import urlsplit

from toolbox.pipeline._invocation import Invocation
from toolbox.pipeline._offload import blocks, off_loop
from toolbox.pipeline._result import Status, ToolResult
from toolbox.pipeline._state_ports import LimitStore, Quota, Refusal, StateUnavailableError, key_part

__all__ = ["BUDGET_SCOPES", "FAIL_OPEN_WARNING", "RATE_SCOPES", "LimitRule", "SharedLimits", "canonical_host"]

LOGGER = logging.getLogger("toolbox.state")
BUDGET_SCOPES = ("run", "principal", "tenant")
RATE_SCOPES = ("tenant", "principal", "tool", "host")
_MAX_URL = 8192
#: The warning a call admitted without its rate limits carries (and the audit trail records).
FAIL_OPEN_WARNING = "STATE_UNAVAILABLE_FAIL_OPEN: the state store did not answer; rate limits not applied"


@final
@dataclass(frozen=True, slots=True)
class LimitRule:
    """One budget or rate limit: ``limit`` calls per ``window`` seconds, counted per ``scope``.

    ``tool`` limits the rule to one tool (its calls counted apart); None counts every tool.
    """

    scope: str
    limit: int
    window: float
    tool: str | None = None

    def __post_init__(self) -> None:
        if self.scope not in BUDGET_SCOPES + RATE_SCOPES:
            raise ValueError(f"unknown limit scope {self.scope!r}")
        if not isinstance(self.limit, int) or isinstance(self.limit, bool) or self.limit < 0:
            raise ValueError("a limit must be a non-negative integer")
        if not isinstance(self.window, (int, float)) or not math.isfinite(self.window) or self.window <= 0:
            raise ValueError("a window must be a positive number of seconds")

    def name(self, kind: str) -> str:
        """The rule as a denial names it: ``state:budget:tenant`` or ``state:rate:tool:http``."""
        return f"state:{kind}:{self.scope}" + (f":{self.tool}" if self.tool else "")


def canonical_host(url: object) -> str | None:
    """The host a ``url`` argument names, one spelling per host; None without a usable host.

    Lower case, no trailing dot, IDNA for names; an IP address in its
    standard form (IPv4 also from the legacy forms ``inet_aton`` reads, such
    as ``0x7f.1``, and from IPv4-mapped IPv6, ``[::ffff:7f00:1]``), so no
    spelling of one address gets a bucket of its own.
    """
    if not isinstance(url, str) or len(url) > _MAX_URL:
        return None
    try:
        host = urlsplit(url.strip()).hostname
    except ValueError:
        return None
    if not host:
        return None
    host = host.rstrip(".").lower()
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        pass
    else:
        # toolbox-http connects ``[::ffff:1.2.3.4]`` to 1.2.3.4: one address, one bucket.
        mapped = getattr(address, "ipv4_mapped", None)
        return (mapped or address).compressed
    try:
        return socket.inet_ntoa(socket.inet_aton(host))
    except OSError:
        pass
    try:
        return host.encode("idna").decode("ascii")
    except UnicodeError:
        return None


def _subjects(scope: str, invocation: Invocation) -> tuple[str, ...]:
    """The keys a call counts under for ``scope``: a delegated run's also count in every run above it."""
    if scope == "run":
        ctx = invocation.context
        return (key_part(ctx.run_id), *(key_part(run) for run in ctx.lineage))
    subject = _subject(scope, invocation)
    return () if subject is None else (subject,)


def _subject(scope: str, invocation: Invocation) -> str | None:
    ctx = invocation.context
    if scope == "host":
        host = canonical_host(invocation.arguments.get("url"))
        return None if host is None else key_part(host)
    if scope == "principal":
        # A principal is only unique within its tenant.
        return f"{key_part(ctx.tenant)}:{key_part(ctx.principal)}"
    if scope == "tenant":
        return key_part(ctx.tenant)
    return key_part(invocation.tool)


@final
class SharedLimits:
    """Checks and counts a call's budgets and rate limits in one store operation."""

    name = "shared_limits"
    per_attempt = False
    #: Counted after the audit request, so a call refused by any other check spends nothing.
    spends = True
    __slots__ = ("_budgets", "_fail_open_rates", "_rates", "_store", "blocks")

    def __init__(
        self,
        store: LimitStore,
        *,
        budgets: Sequence[LimitRule] = (),
        rates: Sequence[LimitRule] = (),
        fail_open_rates: bool = False,
    ) -> None:
        for rule in budgets:
            if rule.scope not in BUDGET_SCOPES:
                raise ValueError(f"a budget is per {', '.join(BUDGET_SCOPES)}, not {rule.scope!r}")
        for rule in rates:
            if rule.scope not in RATE_SCOPES:
                raise ValueError(f"a rate limit is per {', '.join(RATE_SCOPES)}, not {rule.scope!r}")
            if rule.limit < 1:
                raise ValueError("a rate limit admits at least one call per window")
        self._store = store
        self._budgets = tuple(budgets)
        self._rates = tuple(rates)
        self._fail_open_rates = fail_open_rates
        #: Whether the async door runs the store operation off the event loop.
        self.blocks = blocks(store)

    def applies(self, invocation: Invocation) -> bool:
        """Whether any rule counts calls of this tool."""
        tool = invocation.tool
        return any(rule.tool in (None, tool) for rule in self._budgets + self._rates)

    def quotas(self, invocation: Invocation) -> tuple[list[Quota], list[Quota]]:
        """The budget and rate quotas of this call, keyed per subject (and tool).

        A ``host`` rule counts only calls whose ``url`` argument names a host.
        """
        return self._matching("b", self._budgets, invocation), self._matching("r", self._rates, invocation)

    @staticmethod
    def _matching(kind: str, rules: tuple[LimitRule, ...], invocation: Invocation) -> list[Quota]:
        quotas = []
        tool = invocation.tool
        for index, rule in enumerate(rules):
            if rule.tool not in (None, tool):
                continue
            for subject in _subjects(rule.scope, invocation):
                quotas.append(SharedLimits._quota(kind, index, rule, subject))
        return quotas

    @staticmethod
    def _quota(kind: str, index: int, rule: LimitRule, subject: str) -> Quota:
        # The rule's position and its numbers are in the key: changing a limit starts a fresh count.
        tool = key_part(rule.tool) if rule.tool else "*"
        key = f"{kind}{index}:{rule.scope}:{rule.limit}:{rule.window:g}:{tool}:{subject}"
        return Quota(key, rule.limit, float(rule.window), rule.name("budget" if kind == "b" else "rate"))

    def admit(self, invocation: Invocation) -> ToolResult | None:
        """None when every quota admits the call (now counted in each); else the denial."""
        budgets, rates = self.quotas(invocation)
        if not budgets and not rates:
            return None
        try:
            refusal = self._store.admit(budgets, rates)
        except StateUnavailableError as exc:
            return self._unavailable(invocation, budgets, exc)
        return self._verdict(invocation, refusal)

    __call__ = admit

    async def acall(self, invocation: Invocation) -> ToolResult | None:
        """`admit` for the async door: the store's round trip runs on a worker thread."""
        budgets, rates = self.quotas(invocation)
        if not budgets and not rates:
            return None
        try:
            refusal = await off_loop(self._store.admit, budgets, rates)
        except StateUnavailableError as exc:
            return self._unavailable(invocation, budgets, exc)
        return self._verdict(invocation, refusal)

    def _unavailable(
        self, invocation: Invocation, budgets: list[Quota], exc: StateUnavailableError
    ) -> ToolResult | None:
        if self._fail_open_rates and not budgets:
            LOGGER.warning("state store unavailable (%s): rate limits not applied", exc)
            invocation.warnings = (*invocation.warnings, FAIL_OPEN_WARNING)
            return None
        return invocation.denied(
            "STATE_UNAVAILABLE", "state:limits", "the governance state store is unavailable"
        )

    @staticmethod
    def _verdict(invocation: Invocation, refusal: Refusal | None) -> ToolResult | None:
        if refusal is None:
            return None
        quota = refusal.quota
        if not refusal.rate:
            return invocation.denied(
                "BUDGET_EXHAUSTED", quota.rule, f"the shared tool-call budget is spent ({quota.rule})"
            )
        wait = max(0.001, round(refusal.retry_after, 3))
        return invocation.result(
            Status.DENIED,
            reason_code="RATE_LIMITED",
            rule=quota.rule,
            message=f"rate limit of {quota.limit} per {quota.window:g} s; retry after {wait} s",
            retry_after=wait,
        )
