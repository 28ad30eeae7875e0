"""Tool styles of the conformance matrix: the same five logical operations, written each way.

Every style offers ``read(item, api_key="")`` and ``ping(item)`` (READ_ONLY),
``pay(to, cents)`` (needs a human approval), ``vault(item)`` (a tool the
policy does not allow) and ``guarded(item)`` (a tool that needs a deployment
acknowledgement nobody gave). A style knows their by-name names, how the
typed door builds each intent, and how many times each really ran.

A provider's tools whose parameters are not the logical ones (toolbox-sql's
statement and parameters, toolbox-sandbox's code and stdin) say how a logical
call is written for them (`Style.wire`), where the item is in the arguments
governance sees (`Style.item`) and what an approver is shown (`Style.shown`):
`conformance.sql_style`, `conformance.sandbox_style`.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import toolbox_mcp.plugin
import zygote
from toolbox import (
    Acknowledgement,
    Effect,
    OperationDescriptor,
    RiskClass,
    ToolDescriptor,
    ToolPolicy,
    ToolProvider,
    ToolRuntime,
    tool,
)
from toolbox.registry._discovery import discover

LOGICAL = ("read", "ping", "pay", "vault", "guarded")
#: The logical operations that are READ_ONLY (declared with ``purpose``; the others with ``audit_as``).
READS = frozenset({"read", "ping", "vault", "guarded"})
ACK = Acknowledgement(env="CONFORMANCE_ACK", value="yes")
RUNS: collections.Counter[str] = collections.Counter()


class Spy:
    """Counts the calls of a provider's runner (``module.name``) while any world of a style is open.

    Installed when the first world opens it and put back when the last one closes, whatever the
    order; a call counts once, under the logical operation ``logical_of(*args)`` names, in `RUNS`.
    """

    def __init__(self, module: Any, name: str, prefix: str, logical_of: Callable[..., str]) -> None:
        self.module, self.name, self.prefix, self.logical_of = module, name, prefix, logical_of
        self.users = 0
        self.real: Callable[..., Any] | None = None

    def open(self) -> Callable[[], None]:
        """Count from now on; returns what stops this user's counting."""
        if self.users == 0:
            real = self.real = getattr(self.module, self.name)

            def counted(*args: Any, **kwargs: Any) -> Any:
                RUNS[f"{self.prefix}.{self.logical_of(*args)}"] += 1
                return real(*args, **kwargs)

            setattr(self.module, self.name, counted)
        self.users += 1
        closed = False

        def close() -> None:
            nonlocal closed
            if not closed:
                closed = True
                self.users -= 1
                if self.users == 0:
                    setattr(self.module, self.name, self.real)

        return close


def counted_runs(prefix: str) -> Callable[[], collections.Counter[str]]:
    """How many times each logical operation ran, from `RUNS` entries ``prefix.logical``."""
    start = len(prefix) + 1
    return lambda: collections.Counter({k[start:]: v for k, v in RUNS.items() if k.startswith(prefix + ".")})


@dataclass
class Style:
    """One way of writing the logical operations."""

    name: str
    providers: list[object]
    policy: ToolPolicy
    #: logical operation -> (tool name, operation name, by-name name)
    names: dict[str, tuple[str, str, str]]
    #: (tool instance, logical operation, arguments) -> the operation's intent
    typed: Callable[[Any, str, dict[str, Any]], Any]
    #: how many times each logical operation really ran
    runs: Callable[[], collections.Counter[str]]
    is_async: bool = False
    close: Callable[[], None] = field(default=lambda: None)
    #: the logical operations declared with ``purpose`` (READ_ONLY); the others take ``audit_as``
    reads: frozenset[str] = READS
    #: the process environment the tools are loaded with (database URLs, acknowledgements)
    env: Mapping[str, str] = field(default_factory=dict)
    #: (logical operation, logical arguments) -> the operation's own arguments
    wire: Callable[[str, Mapping[str, Any]], dict[str, Any]] = field(default=lambda _op, given: dict(given))
    #: the arguments authorizers and guardrails see -> the logical ``item`` in them (None: none)
    item: Callable[[Mapping[str, Any]], object] = field(default=lambda seen: seen.get("item"))
    #: (logical operation, logical arguments) -> the arguments an approval request shows
    shown: Callable[[str, Mapping[str, Any]], dict[str, Any]] = field(default=lambda _op, given: dict(given))

    def tool(self, logical: str) -> str:
        return self.names[logical][0]

    def by_name(self, logical: str) -> str:
        return self.names[logical][2]


# -- @tool functions (def and async def) ------------------------------------------------------


def _function_tools(prefix: str, is_async: bool) -> list[object]:
    def count(logical: str) -> None:
        RUNS[f"{prefix}.{logical}"] += 1

    if is_async:

        async def read(item: str, api_key: str = "") -> str:
            count("read")
            return f"read {item}"

        async def ping(item: str) -> str:
            count("ping")
            return f"pong {item}"

        async def pay(to: str, cents: int) -> str:
            count("pay")
            return f"paid {cents} to {to}"

        async def vault(item: str) -> str:
            count("vault")
            return item

        async def guarded(item: str) -> str:
            count("guarded")
            return item

    else:

        def read(item: str, api_key: str = "") -> str:  # type: ignore[misc]
            count("read")
            return f"read {item}"

        def ping(item: str) -> str:  # type: ignore[misc]
            count("ping")
            return f"pong {item}"

        def pay(to: str, cents: int) -> str:  # type: ignore[misc]
            count("pay")
            return f"paid {cents} to {to}"

        def vault(item: str) -> str:  # type: ignore[misc]
            count("vault")
            return item

        def guarded(item: str) -> str:  # type: ignore[misc]
            count("guarded")
            return item

    mem, read_only = RiskClass.MEMORY_ONLY, Effect.READ_ONLY
    return [
        tool(risk=mem, effect=read_only, name=f"{prefix}.read", summary="Read an item.")(read),
        tool(risk=mem, effect=read_only, name=f"{prefix}.ping", summary="Ping an item.")(ping),
        tool(
            risk=mem,
            effect=Effect.UNSAFE,
            name=f"{prefix}.pay",
            requires_approval=True,
            summary="Pay someone.",
        )(pay),
        tool(risk=RiskClass.PRIVILEGED, effect=read_only, name=f"{prefix}.vault", summary="Read the vault.")(
            vault
        ),
        tool(
            risk=mem,
            effect=read_only,
            name=f"{prefix}.guarded",
            acknowledgement=ACK,
            summary="Read a guarded item.",
        )(guarded),
    ]


def function_style(name: str, prefix: str, is_async: bool) -> Callable[[Path], Style]:
    def build(_: Path) -> Style:
        return Style(
            name=name,
            providers=_function_tools(prefix, is_async),
            policy=ToolPolicy.standard(),
            names={op: (f"{prefix}.{op}", "call", f"{prefix}.{op}") for op in LOGICAL},
            typed=lambda instance, _op, arguments: instance.call(**arguments),
            runs=lambda: collections.Counter(
                {k.split(".")[1]: v for k, v in RUNS.items() if k.startswith(prefix)}
            ),
            is_async=is_async,
        )

    return build


# -- a class-based provider ---------------------------------------------------------------------


class Ledger:
    """A class-based tool: its operations build their intents without ``arguments=``."""

    def __init__(self, runtime: ToolRuntime) -> None:
        self._runtime = runtime

    def read(self, item: str, api_key: str = "") -> Any:
        return self._runtime.read_intent("read", lambda: _count_class("read", f"read {item}"))

    def pay(self, to: str, cents: int) -> Any:
        return self._runtime.write_intent("pay", lambda: _count_class("pay", f"paid {cents} to {to}"))


class Pinger:
    def __init__(self, runtime: ToolRuntime) -> None:
        self._runtime = runtime

    def ping(self, item: str) -> Any:
        return self._runtime.read_intent("ping", lambda: _count_class("ping", f"pong {item}"))


class Vault:
    def __init__(self, runtime: ToolRuntime) -> None:
        self._runtime = runtime

    def vault(self, item: str) -> Any:
        return self._runtime.read_intent("vault", lambda: _count_class("vault", item))


class Guarded:
    def __init__(self, runtime: ToolRuntime) -> None:
        self._runtime = runtime

    def guarded(self, item: str) -> Any:
        return self._runtime.read_intent("guarded", lambda: _count_class("guarded", item))


def _count_class(logical: str, value: str) -> str:
    RUNS[f"cls.{logical}"] += 1
    return value


def _descriptor(
    name: str, risk: RiskClass, *ops: OperationDescriptor, ack: Acknowledgement | None = None
) -> Any:
    return ToolDescriptor(name=name, version="1", risk=risk, operations=ops, acknowledgement=ack)


def class_style(_: Path) -> Style:
    read_only = Effect.READ_ONLY
    ledger = _descriptor(
        "cls",
        RiskClass.MEMORY_ONLY,
        OperationDescriptor(name="read", effect=read_only),
        OperationDescriptor(name="pay", effect=Effect.UNSAFE, requires_approval=True),
    )
    pinger = _descriptor(
        "cls-ping", RiskClass.MEMORY_ONLY, OperationDescriptor(name="ping", effect=read_only)
    )
    vault = _descriptor(
        "cls-vault", RiskClass.PRIVILEGED, OperationDescriptor(name="vault", effect=read_only)
    )
    guarded = _descriptor(
        "cls-guarded", RiskClass.MEMORY_ONLY, OperationDescriptor(name="guarded", effect=read_only), ack=ACK
    )
    names = {op: ("cls", op, f"cls.{op}") for op in ("read", "pay")}
    names["ping"] = ("cls-ping", "ping", "cls-ping.ping")
    names["vault"] = ("cls-vault", "vault", "cls-vault.vault")
    names["guarded"] = ("cls-guarded", "guarded", "cls-guarded.guarded")
    return Style(
        name="class_based",
        providers=[
            ToolProvider(Ledger, ledger),
            ToolProvider(Pinger, pinger),
            ToolProvider(Vault, vault),
            ToolProvider(Guarded, guarded),
        ],
        policy=ToolPolicy.standard(),
        names=names,
        typed=lambda instance, op, arguments: getattr(instance, op)(**arguments),
        runs=lambda: collections.Counter({k[4:]: v for k, v in RUNS.items() if k.startswith("cls.")}),
    )


# -- a remote MCP server's tools (toolbox-mcp, stdio) ---------------------------------------------

SERVER = Path(__file__).with_name("remote_tools.py")


def _toml(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {_toml(v)}" for k, v in value.items()) + " }"
    return repr(value)


def remote_style(directory: Path) -> Style:
    count_file = directory / "upstream-runs.txt"
    servers = {
        "conf": {"mode": "main", "operations": {"read": "READ_ONLY", "pay": "UNSAFE"}},
        "confping": {"mode": "ping", "operations": {"ping": "READ_ONLY"}},
        "confvault": {"mode": "vault", "operations": {"vault": "READ_ONLY"}},
        "confguard": {"mode": "guarded", "operations": {"guarded": "READ_ONLY"}},
    }
    lines = ["version = 1", "[allow]", 'tools = ["mcp.conf", "mcp.confping", "mcp.confguard"]']
    # ``python -I -S zygote_launcher.py SOCKET remote_tools.py``: a real stdio child of toolbox-mcp,
    # forked from a zygote that imported the SDK once (tests/zygote.py says what stays real).
    command, *args = zygote.shared(*zygote.MCP_SERVER_PRELOAD).command(SERVER)
    for name, spec in servers.items():
        lines.append(f"[tools.mcp.servers.{name}]")
        lines.append(f"command = {_toml(command)}")
        lines.append(f"args = {_toml(args)}")
        lines.append(f"env = {_toml({'MODE': spec['mode'], 'COUNT_FILE': str(count_file)})}")
        if name == "confguard":
            lines.append('risk = "PRIVILEGED"')
            lines.append(f"acknowledgement = {_toml({'env': ACK.env, 'value': ACK.value})}")
        for op, effect in spec["operations"].items():  # type: ignore[attr-defined]
            lines.append(f"[tools.mcp.servers.{name}.operations.{op}]")
            lines.append(f"effect = {_toml(effect)}")
            if op == "pay":
                lines.append("requires_approval = true")
    path = directory / "remote-policy.toml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    policy = ToolPolicy.from_file(path)
    for lock in discover(policy, [toolbox_mcp.plugin], entry_points=False).locks:
        lock.lock(timeout=60.0)
    policy = ToolPolicy.from_file(path)  # now with the pins

    def runs() -> collections.Counter[str]:
        text = count_file.read_text(encoding="utf-8") if count_file.exists() else ""
        return collections.Counter(text.split())

    names = {op: ("mcp.conf", op, f"mcp.conf.{op}") for op in ("read", "pay")}
    names["ping"] = ("mcp.confping", "ping", "mcp.confping.ping")
    names["vault"] = ("mcp.confvault", "vault", "mcp.confvault.vault")
    names["guarded"] = ("mcp.confguard", "guarded", "mcp.confguard.guarded")
    return Style(
        name="remote_mcp",
        providers=[toolbox_mcp.plugin],
        policy=policy,
        names=names,
        typed=lambda instance, op, arguments: instance.call(op, arguments),
        runs=runs,
    )
