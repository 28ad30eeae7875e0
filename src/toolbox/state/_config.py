"""The ``[state]`` table of a policy file: where governance state lives, and the shared limits.

::

    [state]
    backend = "redis"                    # memory (default), sql or redis
    url = "redis://127.0.0.1:6379/0"     # or url_env = "TOOLBOX_STATE_URL" (a URL with a password)
    namespace = "prod"                   # redis: the key namespace; sql: table prefix <namespace>_
    kill_switch_refresh = 1.0            # seconds a process may miss a kill-switch change
    rate_limits_fail_open = false        # true: a store outage lets rate-limited calls run (logged)
    kill_switch_max_stale = 0            # seconds the last kill switches read stay in force in an
                                         # outage (default 0; 60 with rate_limits_fail_open)
    approval_ttl = 3600                  # seconds a request waits for a decision
    grant_ttl = 900                      # seconds an approved grant stays redeemable
    max_pending_approvals = 20           # requests one principal may have waiting (0: no bound)

    [[state.budgets]]                    # calls per run, principal or tenant, fleet-wide
    per = "tenant"
    calls = 1000
    window = 86400                       # seconds the count lives from the first call
    tool = "http"                        # optional: this tool's calls only

    [[state.rate_limits]]                # calls in any sliding window, per tenant, principal, tool or host
    per = "principal"
    calls = 10
    window = 1.0

`check_state_config` validates it when the file loads (a bad value is a
`PolicyFileError` naming the key path); `state_from_config` connects nothing
until the first call (both clients connect lazily), except that a pipeline
built on the Redis backend starts its kill-switch listener (pub/sub), which
connects in the background and retries on its own.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, final
from urllib.parse import urlsplit

from toolbox.errors import ConfigurationError
from toolbox.foundations._descriptor import MAX_NAME_LENGTH, TOOL_NAME_PATTERN
from toolbox.foundations._table_reader import TableReader
from toolbox.pipeline._state_ports import DEFAULT_MAX_PENDING, ApprovalStore, KillSwitchStore, LimitStore
from toolbox.pipeline.checks._shared_limits import BUDGET_SCOPES, RATE_SCOPES, LimitRule
from toolbox.registry._policy import ToolPolicy
from toolbox.state._approval_rules import GRANT_TTL
from toolbox.state._memory import MemoryApprovalStore, MemoryLimitStore

__all__ = ["BACKENDS", "GovernanceState", "check_state_config", "state_from_config", "state_from_policy"]

BACKENDS = ("memory", "sql", "redis")
_KEYS = (
    "backend",
    "url",
    "url_env",
    "namespace",
    "kill_switch_refresh",
    "kill_switch_max_stale",
    "rate_limits_fail_open",
    "approval_ttl",
    "grant_ttl",
    "max_pending_approvals",
    "budgets",
    "rate_limits",
)
_NAMESPACE = re.compile(r"^[a-z][a-z0-9_]{0,29}$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_TOOL = re.compile(TOOL_NAME_PATTERN)
_MAX_RULES = 64
_MAX_WINDOW = 366 * 86_400.0
_MAX_PENDING = 100_000
#: Seconds the last kill switches read stay in force in a store outage when rate limits fail open:
#: the kill switch lives in the same store, and without them every call would stop after one refresh.
FAIL_OPEN_MAX_STALE = 60.0


@final
@dataclass(frozen=True)
class GovernanceState:
    """The stores and shared limits a `toolbox.Governance` builds its checks on.

    ``kill`` None: only the code and environment kill switches (the memory backend).
    ``approvals`` None: grants are verified by the approver alone, single-use in this process.
    """

    backend: str = "memory"
    kill: KillSwitchStore | None = None
    limits: LimitStore = field(default_factory=MemoryLimitStore)
    approvals: ApprovalStore | None = None
    kill_switch_refresh: float = 1.0
    rate_limits_fail_open: bool = False
    #: Seconds the last kill switches read stay in force while the store does not answer;
    #: None: `FAIL_OPEN_MAX_STALE` with ``rate_limits_fail_open``, else 0 (calls stop at once).
    kill_switch_max_stale: float | None = None
    approval_ttl: float = 3600.0
    max_pending_approvals: int = DEFAULT_MAX_PENDING
    budgets: tuple[LimitRule, ...] = ()
    rate_limits: tuple[LimitRule, ...] = ()

    @property
    def kill_switch_hold(self) -> float:
        """Seconds the last kill switches read stay in force in an outage (``kill_switch_max_stale``)."""
        if self.kill_switch_max_stale is not None:
            return self.kill_switch_max_stale
        return FAIL_OPEN_MAX_STALE if self.rate_limits_fail_open else 0.0

    def close(self) -> None:
        """Close the stores' connections (each store once); calls after this reconnect."""
        closed: set[int] = set()
        for store in (self.kill, self.limits, self.approvals):
            close = getattr(store, "close", None)
            if close is not None and id(store) not in closed:
                closed.add(id(store))
                close()


def _seconds(table: TableReader, key: str, default: float, *, minimum: float, maximum: float) -> float:
    if key not in table:
        return default
    value = float(table.number(key))
    if not minimum <= value <= maximum:
        raise table.error(key, f"must be from {minimum:g} to {maximum:g} seconds")
    return value


def _rules(table: TableReader, key: str, scopes: tuple[str, ...]) -> list[dict[str, Any]]:
    rules = table.tables(key)
    if len(rules) > _MAX_RULES:
        raise table.error(key, f"at most {_MAX_RULES} rules")
    checked = []
    for rule in rules:
        rule.only(("per", "calls", "window", "tool"))
        per = rule.string("per", choices=scopes, what="scope")
        calls = rule.integer("calls", minimum=0 if key == "budgets" else 1)
        window = _seconds(rule, "window", 0.0, minimum=0.001, maximum=_MAX_WINDOW)
        if "window" not in rule:
            raise rule.error("window", "missing")
        tool = rule.optional_string("tool")
        if tool is not None and (len(tool) > MAX_NAME_LENGTH or not _TOOL.fullmatch(tool)):
            raise rule.error("tool", f"not a valid tool name ({TOOL_NAME_PATTERN})")
        checked.append({"per": per, "calls": calls, "window": window, "tool": tool})
    return checked


def _max_pending(table: TableReader) -> int:
    value = table.integer("max_pending_approvals", DEFAULT_MAX_PENDING, minimum=0)
    if value > _MAX_PENDING:
        raise table.error("max_pending_approvals", f"must be at most {_MAX_PENDING}")
    return value


def check_state_config(table: TableReader) -> dict[str, Any]:
    """The validated ``[state]`` table, as `state_from_config` reads it. Never echoes a URL."""
    table.only(_KEYS)
    backend = table.string("backend", "memory", choices=BACKENDS, what="backend")
    url = table.optional_string("url")
    url_env = table.optional_string("url_env")
    if backend == "memory":
        for key in ("url", "url_env"):
            if key in table:
                raise table.error(key, "the memory backend has no URL")
    elif (url is None) == (url_env is None):
        raise table.error("", f"the {backend} backend needs exactly one of url and url_env")
    if url is not None:
        scheme = url.split("://", 1)[0].lower() if "://" in url else ""
        allowed = (
            ("redis", "rediss", "unix")
            if backend == "redis"
            else ("sqlite", "postgresql", "postgresql+psycopg")
        )
        if scheme not in allowed:
            raise table.error("url", f"a {backend} URL starts with {' or '.join(s + '://' for s in allowed)}")
        try:
            password = urlsplit(url).password
        except ValueError:
            raise table.error("url", "is not a valid URL") from None
        if password:
            raise table.error(
                "url", "holds a password: put the URL in an environment variable, named by url_env"
            )
    if url_env is not None and not _ENV_NAME.fullmatch(url_env):
        raise table.error("url_env", "must be an environment variable name")
    namespace = table.string("namespace", "default")
    if not _NAMESPACE.fullmatch(namespace):
        raise table.error("namespace", "must be lowercase letters, digits and _, starting with a letter")
    return {
        "backend": backend,
        "url": url,
        "url_env": url_env,
        "namespace": namespace,
        "kill_switch_refresh": _seconds(table, "kill_switch_refresh", 1.0, minimum=0.0, maximum=3600.0),
        "rate_limits_fail_open": table.boolean("rate_limits_fail_open", False),
        "kill_switch_max_stale": (
            _seconds(table, "kill_switch_max_stale", 0.0, minimum=0.0, maximum=3600.0)
            if "kill_switch_max_stale" in table
            else None
        ),
        "approval_ttl": _seconds(table, "approval_ttl", 3600.0, minimum=1.0, maximum=_MAX_WINDOW),
        "grant_ttl": _seconds(table, "grant_ttl", GRANT_TTL, minimum=1.0, maximum=_MAX_WINDOW),
        "max_pending_approvals": _max_pending(table),
        "budgets": _rules(table, "budgets", BUDGET_SCOPES),
        "rate_limits": _rules(table, "rate_limits", RATE_SCOPES),
    }


def _url(config: Mapping[str, Any], source: str) -> str:
    if config["url"] is not None:
        return str(config["url"])
    name = str(config["url_env"])
    value = os.environ.get(name)
    if not value:
        raise ConfigurationError(f"{source}: state.url_env: environment variable {name} is not set")
    return value


def state_from_config(config: Mapping[str, Any], *, source: str = "policy") -> GovernanceState:
    """The `GovernanceState` a validated ``[state]`` table describes (nothing connects yet)."""
    backend = config["backend"]
    kill: KillSwitchStore | None
    limits: LimitStore
    approvals: ApprovalStore
    if backend == "memory":
        kill, limits = None, MemoryLimitStore()
        approvals = MemoryApprovalStore(grant_ttl=config["grant_ttl"])
    elif backend == "redis":
        from toolbox.state._redis_backend import RedisState, connect

        try:
            redis_state = RedisState(
                connect(_url(config, source)), namespace=config["namespace"], grant_ttl=config["grant_ttl"]
            )
        except ValueError as exc:
            raise ConfigurationError(f"{source}: state.url: {exc}") from None
        kill = limits = approvals = redis_state
    else:
        from toolbox.state._sql_backend import SqlState

        try:
            sql_state = SqlState(
                _url(config, source), prefix=f"toolbox_{config['namespace']}_", grant_ttl=config["grant_ttl"]
            )
        except ValueError as exc:
            raise ConfigurationError(f"{source}: state.url: {exc}") from None
        kill = limits = approvals = sql_state
    return GovernanceState(
        backend=backend,
        kill=kill,
        limits=limits,
        approvals=approvals,
        kill_switch_refresh=config["kill_switch_refresh"],
        rate_limits_fail_open=config["rate_limits_fail_open"],
        kill_switch_max_stale=config.get("kill_switch_max_stale"),
        approval_ttl=config["approval_ttl"],
        max_pending_approvals=config.get("max_pending_approvals", DEFAULT_MAX_PENDING),
        budgets=tuple(LimitRule(r["per"], r["calls"], r["window"], r["tool"]) for r in config["budgets"]),
        rate_limits=tuple(
            LimitRule(r["per"], r["calls"], r["window"], r["tool"]) for r in config["rate_limits"]
        ),
    )


def state_from_policy(policy: ToolPolicy) -> GovernanceState | None:
    """The `GovernanceState` of ``policy``'s ``[state]`` table, or None without one."""
    config = policy.governance.get("state")
    if config is None:
        return None
    return state_from_config(config, source=policy.source or "policy")
