"""``toolbox serve``: the governance service (REST API and operator console) on uvicorn.

::

    toolbox serve --policy FILE [--host 127.0.0.1] [--port 8080] [--secret-file PATH]
                  [--tls-cert PEM --tls-key PEM] [--secure-cookies] [--no-console] [--workers N]

Binds 127.0.0.1 unless told otherwise. The policy file must have an
``[auth]`` section: there is no anonymous mode. Needs the service extra:
``pip install "toolbox-registry[service]"``. See docs/service.md.

``--workers N`` runs N uvicorn worker processes on one socket. They must share
what one process would keep to itself: the policy file's ``[state]`` (``sql``
or ``redis``: kill switches, approvals, budgets) and the secret that signs
console sessions (``--secret-file``, else one made for this run and handed to
every worker). Each worker writes the audit store itself: SQLite serializes
the writers of one file (WAL, ``BEGIN IMMEDIATE``, busy wait), PostgreSQL
runs them side by side. The workers are forked from the command, which has
imported everything already (`toolbox.cli._workers` says when a fork is safe).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import ipaddress
import json
import os
import secrets
import sys
import tempfile
from collections.abc import Iterator
from typing import Any

from toolbox.doors._catalog import POLICY_ENV
from toolbox.errors import ConfigurationError

__all__ = ["add_serve", "freeze_startup_objects", "worker_app"]

_INSTALL = 'toolbox serve needs the service extra: pip install "toolbox-registry[service]"'
#: How ``--workers`` hands the command line's options to each worker process (JSON; no secret in it).
_WORKER_ENV = "TOOLBOX_SERVE_WORKER"


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
    serve.add_argument(
        "--workers",
        type=int,
        default=1,
        metavar="N",
        help="worker processes (default 1); N > 1 needs a shared [state] (sql or redis)",
    )
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


def _options(args: argparse.Namespace, policy: str, secret_file: str | None) -> dict[str, Any]:
    """What `app_from_policy_file` needs, as `worker_app` reads it back in each worker."""
    return {
        "policy": os.path.abspath(policy),
        "secret_file": secret_file,
        "console": not args.no_console,
        "secure_cookies": args.secure_cookies,
        "host": args.host,
    }


def worker_app() -> Any:
    """The app of one ``--workers`` process (a uvicorn factory): the options the command put in its env."""
    from toolbox.service import app_from_policy_file

    options = json.loads(os.environ[_WORKER_ENV])
    app = app_from_policy_file(options.pop("policy"), **options)
    freeze_startup_objects()
    return app


def freeze_startup_objects() -> None:
    """Move every object made so far out of the garbage collector's reach (`gc.freeze`).

    A serving process starts with some 150,000 objects (FastAPI, pydantic,
    SQLAlchemy, the catalog) that live as long as it does. Every full
    collection walked them all: a pause of tens to hundreds of milliseconds
    every second or so under load, the service's p99 latency. Frozen, they
    are never walked again; only what requests leave behind is. (An object
    frozen here that later becomes cyclic garbage is not freed: startup
    objects do not.)
    """
    gc.collect()
    gc.freeze()


def _check_shared(app: Any, workers: int) -> None:
    """Refuse ``--workers N`` when a worker would keep kill switches and approvals to itself."""
    served = app.state.service.served
    if workers > 1 and not served.shared_state:
        raise ConfigurationError(
            f"--workers {workers} needs state the workers share: set [state] backend = "
            '"sql" or "redis" in the policy file (kill switches, approvals and budgets '
            "would otherwise live in each worker's memory)"
        )


@contextlib.contextmanager
def _run_secret(secret_file: str | None, workers: int) -> Iterator[str | None]:
    """The secret file the workers share: the given one, or one made for this run (removed after)."""
    if secret_file is not None or workers == 1:
        yield secret_file
        return
    handle, path = tempfile.mkstemp(prefix="toolbox-serve-", suffix=".secret")  # mode 0600
    try:
        with os.fdopen(handle, "w") as file:
            file.write(secrets.token_hex(32))
        yield path
    finally:
        with contextlib.suppress(OSError):
            os.unlink(path)


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
    if not 1 <= args.workers <= 64:
        raise ConfigurationError("--workers must be from 1 to 64")
    try:
        import uvicorn

        from toolbox.service import app_from_policy_file
    except ImportError:
        raise ConfigurationError(_INSTALL) from None
    # Here, not at the top: every command's parser imports this module, and _workers imports
    # multiprocessing (about 3 ms); still before freeze_startup_objects and any fork.
    from toolbox.cli._workers import forked_workers

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
    lines = _where(app, args.host, args.port, tls=bool(args.tls_cert))
    if args.workers > 1:
        try:
            _check_shared(app, args.workers)
        finally:
            app.state.service.served.close()  # each worker builds its own; this one only checked the file
        lines.append(f"{args.workers} worker processes")
    for line in lines:
        print(f"toolbox serve: {line}", file=sys.stderr, flush=True)
    with _run_secret(args.secret_file, args.workers) as secret_file:
        if args.workers > 1:
            os.environ[_WORKER_ENV] = json.dumps(_options(args, policy, secret_file))
        # With --workers, frozen before the workers fork: none of them walks (so copies) these.
        freeze_startup_objects()
        if args.workers == 1:
            _run(uvicorn, app, args)
        else:
            with forked_workers():
                _run(uvicorn, "toolbox.cli._serve:worker_app", args)
    return 0


def _run(uvicorn: Any, app: Any, args: argparse.Namespace) -> None:
    uvicorn.run(
        app,
        factory=isinstance(app, str),
        workers=args.workers if isinstance(app, str) else None,
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
