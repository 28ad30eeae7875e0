"""The conformance matrix, as one table: promises x doors x tool styles x state stores.

Every cell runs (tests/conformance/test_matrix.py) unless `EXCLUDED` says why
it does not. To add a door, a tool style or a store, add one line to `DOORS`,
`STYLES` or `STORES`: it gets every row at once, and a cell that cannot apply
to it is one more `Exclusion`, with the reason. Which cells the default tier
runs is test_matrix.py's rule, narrowed by `FULL_ONLY` (with the reason);
``pytest --full`` runs them all.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from conformance import doors, promises, styles
from conformance.sandbox_style import sandbox_style
from conformance.sql_style import sql_style
from conformance.styles import Style

#: What every door, style and store must hold.
PROMISES: dict[str, promises.Check] = {
    "default_deny": promises.default_deny,
    "acknowledgement": promises.acknowledgement,
    "intent_required": promises.intent_required,
    "authorization_per_attempt": promises.authorization_per_attempt,
    "argument_guards": promises.argument_guards,
    "guardrails": promises.guardrails,
    "argument_bound_approvals": promises.argument_bound_approvals,
    "budgets": promises.budgets,
    "rate_limits": promises.rate_limits,
    "kill_switch": promises.kill_switch,
    "delegation_narrowing": promises.delegation_narrowing,
    "toolset_scoping": promises.toolset_scoping,
    "strict_audit": promises.strict_audit,
    "secret_never_shown": promises.secret_never_shown,
}

#: The ways a caller reaches a tool.
DOORS: dict[str, Callable[[], doors.Door]] = {
    "typed": doors.Typed,
    "by_name": doors.ByName,
    "by_name_async": doors.ByNameAsync,
    "mcp": doors.Mcp,
    "mcp_stdio": doors.McpStdio,
    "mcp_http": doors.McpHttp,
    "rest": doors.Rest,
    "pydantic_ai": doors.PydanticAI,
    "openai_agents": doors.OpenAIAgents,
    "langchain": doors.LangChain,
}

#: The ways a tool is written.
STYLES: dict[str, Callable[[Path], Style]] = {
    "function": styles.function_style("function", "fn", is_async=False),
    "async_function": styles.function_style("async_function", "afn", is_async=True),
    "class_based": styles.class_style,
    "remote_mcp": styles.remote_style,
    # toolbox-sql's sql.NAME readers and sql_write.NAME writers, on a SQLite file.
    "sql": sql_style,
    # toolbox-sandbox's tool: every call that runs builds a real bubblewrap sandbox.
    "sandbox": sandbox_style,
}

#: Where fleet state lives.
STORES: tuple[str, ...] = ("memory", "sqlite", "postgres", "redis")

_IN_PROCESS = ("typed", "by_name", "by_name_async", "pydantic_ai", "openai_agents", "langchain")
#: The promises whose check runs the tool (and expects it to succeed); the others only refuse.
RUNS_THE_TOOL = (
    "authorization_per_attempt",
    "argument_bound_approvals",
    "budgets",
    "rate_limits",
    "kill_switch",
    "delegation_narrowing",
    "toolset_scoping",
    "strict_audit",
    "secret_never_shown",
)


@dataclass(frozen=True)
class Cells:
    """Some cells of the table: ``promise``, ``door``, ``style`` and ``store`` match (``*``: any)."""

    why: str
    promise: str = "*"
    door: str = "*"
    style: str = "*"
    store: str = "*"

    def matches(self, promise: str, door: str, style: str, store: str) -> bool:
        wanted = (self.promise, self.door, self.style, self.store)
        return all(w in ("*", given) for w, given in zip(wanted, (promise, door, style, store), strict=True))


@dataclass(frozen=True)
class Exclusion(Cells):
    """Cells that do not run.

    ``applies`` False: the cell cannot apply, and ``why`` says why. True: it applies, but the
    matrix does not drive it yet, and ``why`` says where the promise is tested instead.
    """

    applies: bool = False


#: Every cell that does not run, and why.
EXCLUDED: tuple[Exclusion, ...] = (
    Exclusion(
        "typed arguments are Python values the operation method checks; the size and depth guards "
        "are for JSON arguments (every by-name door)",
        promise="argument_guards",
        door="typed",
    ),
    Exclusion(
        "a REST caller's context is built from its credential, never delegated in process; a "
        "credential's toolset narrows it instead (toolset_scoping)",
        promise="delegation_narrowing",
        door="rest",
    ),
    Exclusion(
        "an MCP-over-HTTP caller's context is built from its credential, never delegated in process; "
        "a credential's toolset narrows it instead (toolset_scoping)",
        promise="delegation_narrowing",
        door="mcp_http",
    ),
    *(
        Exclusion(
            "a toolset scopes a credential at the service and MCP doors; an in-process caller narrows "
            "its context with ExecutionContext.delegate (delegation_narrowing)",
            promise="toolset_scoping",
            door=door,
        )
        for door in _IN_PROCESS
    ),
    Exclusion(
        "a sync by-name call of an async def tool is refused (ERROR: call it with aexecute() or "
        "Gateway.ainvoke(), tests/test_route.py): the async door runs it",
        door="by_name",
        style="async_function",
    ),
)

#: Cells the default tier leaves to ``pytest --full``, beyond test_matrix.py's rule, and why.
FULL_ONLY: tuple[Cells, ...] = tuple(
    Cells(
        "each sandbox call that runs builds a real bubblewrap sandbox; the default tier runs the "
        "sandbox's calls through the typed, by-name (sync and async), MCP and REST doors; the framework "
        "adapters (which call the by-name doors) only refuse there: their runs are --full",
        promise=promise,
        door=door,
        style="sandbox",
    )
    for door in ("pydantic_ai", "openai_agents", "langchain")
    for promise in RUNS_THE_TOOL
)


def why_not(promise: str, door: str, style: str, store: str) -> str | None:
    """Why the cell does not run, or None."""
    for exclusion in EXCLUDED:
        if exclusion.matches(promise, door, style, store):
            return exclusion.why
    return None


def full_only(promise: str, door: str, style: str, store: str) -> bool:
    """Whether `FULL_ONLY` leaves the cell to ``pytest --full``."""
    return any(cells.matches(promise, door, style, store) for cells in FULL_ONLY)
