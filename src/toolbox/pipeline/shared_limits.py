"""`SharedLimits`: budgets and rate limits counted in a `LimitStore`, for the whole fleet.

A context's `toolbox.Budget` counts one run's calls in one process. These
limits count in the governance state store (``[state]`` in the policy file),
so K calls of a tenant's budget admit exactly K calls across every process,
and a rate of N per second admits at most N in any second, fleet-wide:

- a **budget** of ``limit`` calls per run, principal or tenant (optionally of
  one tool), counted for ``window`` seconds from its first call;
- a **rate limit** of ``limit`` calls in any sliding window of ``window``
  seconds, per tenant, principal or tool (optionally of one tool).

Every quota of a call is checked and counted in one atomic store operation
(one round trip): a refused call spends nothing. A rate refusal is
DENIED/RATE_LIMITED with ``retry_after``; a spent budget DENIED/BUDGET_EXHAUSTED.
When the store does not answer, the call is DENIED/STATE_UNAVAILABLE, unless
every quota of the call is a rate limit and ``fail_open_rates`` is set: then
it runs, with a warning in the log and in the audit trail.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import final

from toolbox.pipeline.invocation import Invocation
from toolbox.pipeline.result import Status, ToolResult
from toolbox.pipeline.state_ports import LimitStore, Quota, StateUnavailableError, key_part

__all__ = ["BUDGET_SCOPES", "FAIL_OPEN_WARNING", "RATE_SCOPES", "LimitRule", "SharedLimits"]

LOGGER = logging.getLogger("toolbox.state")
BUDGET_SCOPES = ("run", "principal", "tenant")
RATE_SCOPES = ("tenant", "principal", "tool")
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


def _subject(scope: str, invocation: Invocation) -> str:
    ctx = invocation.context
    if scope == "run":
        return key_part(ctx.run_id)
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
    __slots__ = ("_budgets", "_fail_open_rates", "_rates", "_store")

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

    def applies(self, invocation: Invocation) -> bool:
        """Whether any rule counts calls of this tool."""
        tool = invocation.tool
        return any(rule.tool in (None, tool) for rule in self._budgets + self._rates)

    def quotas(self, invocation: Invocation) -> tuple[list[Quota], list[Quota]]:
        """The budget and rate quotas of this call, keyed per subject (and tool)."""
        tool = invocation.tool
        budgets = [self._quota("b", i, rule, invocation) for i, rule in enumerate(self._budgets)]
        rates = [self._quota("r", i, rule, invocation) for i, rule in enumerate(self._rates)]
        return (
            [q for q, rule in zip(budgets, self._budgets, strict=True) if rule.tool in (None, tool)],
            [q for q, rule in zip(rates, self._rates, strict=True) if rule.tool in (None, tool)],
        )

    @staticmethod
    def _quota(kind: str, index: int, rule: LimitRule, invocation: Invocation) -> Quota:
        # The rule's position and its numbers are in the key: changing a limit starts a fresh count.
        subject = _subject(rule.scope, invocation)
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
            if self._fail_open_rates and not budgets:
                LOGGER.warning("state store unavailable (%s): rate limits not applied", exc)
                invocation.warnings = (*invocation.warnings, FAIL_OPEN_WARNING)
                return None
            return invocation.denied(
                "STATE_UNAVAILABLE", "state:limits", "the governance state store is unavailable"
            )
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

    __call__ = admit
