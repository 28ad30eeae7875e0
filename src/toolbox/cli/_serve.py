"""``toolbox serve``: the governance service (REST API and operator console) on uvicorn.

::

    toolbox serve --policy FILE [--host 127.0.0.1] [--port 8080] [--secret-file PATH]
                  [--tls-cert PEM --tls-key PEM] [--secure-cookies] [--no-console]

Binds 127.0.0.1 unless told otherwise. The policy file must have an
``[auth]`` section: there is no anonymous mode. Needs the service extra:
``pip install "toolbox-registry[service]"``. See docs/service.md.
"""

from __future__ import annotations

import argparse
import ipaddress
import os
import sys
from typing import Any

from toolbox.doors._catalog import POLICY_ENV
from toolbox.errors import ConfigurationError

__all__ = ["add_serve"]

_INSTALL = 'toolbox serve needs the service extra: pip install "toolbox-registry[service]"'


def add_serve(commands: Any, common: argparse.ArgumentParser) -> None:
    """Register ``serve`` on the ``toolbox`` parser's sub-commands (``common``: --json and --policy)."""
    serve = commands.add_parser(
        "serve",
        parents=[common],
        help="run the governance service: REST API under /v1 and the operator console",
        description="Serve governed tool calls over HTTP, with approvals, audit read-back and a console.",
    )
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (default: 127.0.0.1)")
    serve.add_argument("--port", type=int, default=8080, help="port to bind (default: 8080)")
    serve.add_argument("--secret-file", metavar="PATH", help="the secret every replica shares (16+ bytes)")
    serve.add_argument("--tls-cert", metavar="PEM", help="serve HTTPS with this certificate chain")
    serve.add_argument("--tls-key", metavar="PEM", help="the private key of --tls-cert")
    serve.add_argument(
        "--secure-cookies", action="store_true", help="mark cookies Secure behind a TLS-terminating proxy"
    )
    serve.add_argument("--no-console", action="store_true", help="serve the REST API only")
    serve.set_defaults(handler=_cmd_serve)


def _loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def _where(app: Any, host: str, port: int, *, tls: bool) -> list[str]:
    """Where the REST API, the console and the MCP endpoint answer (what this app serves)."""
    shown = f"[{host}]" if ":" in host else host
    base = f"{'https' if tls else 'http'}://{shown}:{port}"
    lines = [f"REST API at {base}/v1"]
    if getattr(app.state, "console_sessions", None) is not None:  # set when the console is mounted
        lines.append(f"operator console at {base}/console")
    if "/mcp" in {getattr(route, "path", None) for route in app.routes}:
        lines.append(f"MCP endpoint at {base}/mcp")
    return lines


def _cmd_serve(args: argparse.Namespace) -> int:
    policy = args.policy or os.environ.get(POLICY_ENV)
    if not policy:
        raise ConfigurationError(
            f"give --policy FILE (or set {POLICY_ENV}): the service enforces a policy file"
        )
    if bool(args.tls_cert) != bool(args.tls_key):
        raise ConfigurationError("--tls-cert and --tls-key go together")
    if not 0 < args.port < 65536:
        raise ConfigurationError("--port must be from 1 to 65535")
    try:
        import uvicorn

        from toolbox.service import app_from_policy_file
    except ImportError:
        raise ConfigurationError(_INSTALL) from None
    app = app_from_policy_file(
        policy,
        secret_file=args.secret_file,
        console=not args.no_console,
        secure_cookies=args.secure_cookies,
        host=args.host,
    )
    if not _loopback(args.host) and not args.tls_cert:
        print(
            f"toolbox serve: warning: {args.host} is not a loopback address and TLS is off; "
            "put a TLS proxy in front and pass --secure-cookies",
            file=sys.stderr,
        )
    for line in _where(app, args.host, args.port, tls=bool(args.tls_cert)):
        print(f"toolbox serve: {line}", file=sys.stderr, flush=True)
    uvicorn.run(
        app,
        host=args.host,
        port=args.port,
        ssl_certfile=args.tls_cert,
        ssl_keyfile=args.tls_key,
        log_level="info",
        ws="none",  # the service never speaks WebSocket: no protocol (nor its imports) to offer
        server_header=False,
        proxy_headers=False,
        # Longer than the idle timeout of common clients and proxies, so the server is not the one
        # closing a kept-alive connection while a client sends its next request on it.
        timeout_keep_alive=75,
    )
    return 0
