"""``toolbox mcp``: the governed tools over the Model Context Protocol.

Usage::

    toolbox mcp serve [--policy FILE] [--transport stdio|http] [--toolset NAME]
                      [--tenant T --principal P [--role R ...]]        # stdio
                      [--host 127.0.0.1] [--port N] [--allowed-host NAME ...]   # http

``serve`` builds a `Gateway` from discovery and the policy exactly as
``toolbox check`` decides (``--policy FILE``, else ``TOOLBOX_POLICY``, else
the standard policy), with the audit trail the file's ``[audit]`` configures,
and serves it with the ``mcp`` SDK (`toolbox.mcp`):

- stdio: one client (Claude Desktop, VS Code, ...) over stdin/stdout; every call runs in
  the operator's context, ``--tenant``/``--principal``/``--role`` or the file's
  ``[mcp.context]``, never one the client names;
- http: streamable HTTP at ``/mcp``, every request authenticated by the file's ``[auth]``
  (401 otherwise). It binds 127.0.0.1; another address needs ``--allowed-host`` naming
  the host names clients use (DNS-rebinding protection).

The sub-commands of ``toolbox mcp`` are added by `add_mcp`; each is one function.
"""

from __future__ import annotations

import argparse
import socket
import sys
from typing import Any

from toolbox.cli._mcp_lock import add_lock
from toolbox.doors._catalog import POLICY_ENV
from toolbox.errors import ConfigurationError
from toolbox.foundations._context import ExecutionContext
from toolbox.governance._mcp_table import mcp_config

__all__ = ["add_mcp"]

EXIT_OK = 0
_TRANSPORTS = ("stdio", "http")
_INSTALL_HINT = 'toolbox mcp needs the MCP SDK: pip install "toolbox-registry[mcp]"'


def add_mcp(commands: Any) -> None:
    """Register ``toolbox mcp`` and its sub-commands on the top-level ``commands``."""
    group = commands.add_parser("mcp", help="serve the governed tools over MCP; pin remote servers' tools")
    actions = group.add_subparsers(dest="mcp_command", required=True, metavar="ACTION")
    _add_serve(actions)
    add_lock(actions)  # toolbox mcp lock NAME: pin a remote server's tools (toolbox-mcp)


def _add_serve(actions: Any) -> None:
    serve = actions.add_parser(
        "serve",
        help="serve the tools this deployment may use as an MCP server (stdio or streamable HTTP)",
        description=(
            "Serve the governed tools over MCP. Tools the policy denies, tools without their "
            "acknowledgement and tools stopped by the kill switch are not listed, and calls to "
            "them are refused. Every call is governed and audited like a call through the Gateway."
        ),
    )
    serve.add_argument(
        "--policy",
        metavar="FILE",
        help=f"TOML policy file (default: ${POLICY_ENV}, else the standard policy)",
    )
    serve.add_argument("--transport", choices=_TRANSPORTS, default="stdio", help="default: stdio")
    serve.add_argument("--toolset", metavar="NAME", help="serve only this [mcp.toolsets.NAME]")
    who = serve.add_argument_group("stdio: the trusted context (else the policy file's [mcp.context])")
    who.add_argument("--tenant", metavar="T", help="the tenant every call is made for")
    who.add_argument("--principal", metavar="P", help="the principal every call is made by")
    who.add_argument("--role", metavar="R", action="append", default=[], help="a role (repeatable)")
    http = serve.add_argument_group("http")
    http.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    http.add_argument("--port", type=int, default=8765, help="port (default 8765; 0 picks a free one)")
    http.add_argument(
        "--allowed-host",
        metavar="NAME",
        action="append",
        default=[],
        help="a Host name clients use; required to bind an address that is not loopback (repeatable)",
    )
    serve.set_defaults(handler=_cmd_serve)


def _stdio_context(args: argparse.Namespace, policy_governance: Any) -> ExecutionContext:
    """The operator's context: the flags, else ``[mcp.context]``; never the client's."""
    if args.tenant is not None or args.principal is not None or args.role:
        if not args.tenant or not args.principal:
            raise ConfigurationError("--tenant and --principal are needed together (--role is optional)")
        return ExecutionContext(tenant=args.tenant, principal=args.principal, roles=frozenset(args.role))
    configured = mcp_config(policy_governance).context
    if configured is None:
        raise ConfigurationError(
            "stdio needs the trusted context its calls run in: give --tenant and --principal, "
            "or [mcp.context] tenant/principal in the policy file"
        )
    return ExecutionContext(
        tenant=configured.tenant, principal=configured.principal, roles=frozenset(configured.roles)
    )


def _cmd_serve(args: argparse.Namespace) -> int:
    """``toolbox mcp serve``: build the gateway as ``toolbox check`` decides, then serve it."""
    try:
        import anyio

        from toolbox import mcp as served
    except ImportError:
        raise ConfigurationError(_INSTALL_HINT) from None
    from toolbox.doors._gateway import Gateway
    from toolbox.registry._policy import ToolPolicy

    policy = ToolPolicy.from_file(args.policy) if args.policy is not None else None
    gateway = Gateway.load(policy=policy)
    governance = gateway.catalog.policy.governance
    try:
        if args.transport == "stdio":
            context = _stdio_context(args, governance)
            anyio.run(served.serve_stdio, served.server(gateway, context=context, toolset=args.toolset))
        else:
            _serve_http(args, gateway, served)
    except KeyboardInterrupt:
        pass
    finally:
        gateway.close()
        trail = gateway.audit
        if trail is not None:
            trail.flush()
    return EXIT_OK


def _serve_http(args: argparse.Namespace, gateway: Any, served: Any) -> None:
    import uvicorn

    from toolbox.auth import authenticator_from_policy

    if args.tenant is not None or args.principal is not None or args.role:
        raise ConfigurationError(
            "over HTTP each request's credentials say who calls: drop --tenant/--principal/--role"
        )
    authenticator = authenticator_from_policy(gateway.catalog.policy)
    if authenticator is None:
        raise ConfigurationError(
            "--transport http needs credentials: add an [auth] section to the policy file"
        )
    app = served.McpHttpApp(
        gateway, authenticator, toolset=args.toolset, host=args.host, allowed_hosts=args.allowed_host
    )
    family = socket.AF_INET6 if ":" in args.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((args.host, args.port))
    sock.listen(2048)  # listening before the URL is printed: a client may connect at once
    shown = f"[{args.host}]" if family == socket.AF_INET6 else args.host
    print(f"toolbox mcp serve: http://{shown}:{sock.getsockname()[1]}/mcp", file=sys.stderr, flush=True)
    # MCP's streamable HTTP never speaks WebSocket: no protocol (nor its imports) to offer.
    config = uvicorn.Config(app.starlette(), log_level="warning", lifespan="on", ws="none")
    uvicorn.Server(config).run(sockets=[sock])
