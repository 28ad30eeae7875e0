"""Building the app from a policy file: its ``[auth]`` authenticates, its ``[audit]`` records."""

from __future__ import annotations

import dataclasses
import ipaddress
import os

from fastapi import FastAPI

from toolbox.auth import authenticator_from_policy
from toolbox.errors import ConfigurationError
from toolbox.registry._policy import ToolPolicy
from toolbox.service._app import create_app, read_secret
from toolbox.service._settings import ServiceSettings

__all__ = ["app_from_environment", "app_from_policy_file"]

POLICY_ENV = "TOOLBOX_POLICY"
SECRET_FILE_ENV = "TOOLBOX_SERVICE_SECRET_FILE"  # noqa: S105 - the name of a variable, not a secret


def app_from_policy_file(
    path: str | os.PathLike[str],
    *,
    secret_file: str | os.PathLike[str] | None = None,
    console: bool = True,
    secure_cookies: bool = False,
    host: str = "127.0.0.1",
) -> FastAPI:
    """The service enforcing the policy file at ``path``.

    Args:
        path: the policy file; its ``[auth]`` is required, its ``[audit]`` and ``[state]`` are used.
        secret_file: the secret every replica shares (sessions, CSRF); default: random per process.
        console: serve the operator console under ``/console``.
        secure_cookies: mark cookies ``Secure`` although requests arrive over plain HTTP (TLS proxy).
        host: the address served (the MCP endpoint's Host/Origin checks use it).

    Raises:
        PolicyFileError: the file is missing or malformed.
        ConfigurationError: the file has no ``[auth]`` (there is no anonymous mode), or the
            secret file is unreadable or too short.
    """
    policy = ToolPolicy.from_file(path)
    authenticator = authenticator_from_policy(policy)
    if authenticator is None:
        raise ConfigurationError(
            f"{os.fspath(path)}: the service needs an [auth] section (api_keys and/or [auth.jwt]); "
            "there is no anonymous mode"
        )
    settings = ServiceSettings(force_secure_cookies=secure_cookies)
    if secret_file is not None:
        settings = dataclasses.replace(settings, secret=read_secret(secret_file))
    return create_app(
        policy=policy,
        authenticator=authenticator,
        settings=settings,
        console=console,
        mcp_options=_mcp_options(host),
    )


def _mcp_options(host: str) -> dict[str, object]:
    """The MCP endpoint's Host/Origin settings: a non-loopback bind address is the allowed host."""
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = host == "localhost"
    return {"host": host} if loopback else {"host": host, "allowed_hosts": (host,)}


def app_from_environment() -> FastAPI:
    """The app of the policy file ``$TOOLBOX_POLICY``, authenticated by its ``[auth]``.

    For ``uvicorn --factory toolbox.service:app_from_environment`` and gunicorn.
    ``$TOOLBOX_SERVICE_SECRET_FILE`` names the shared secret of several replicas.
    """
    path = os.environ.get(POLICY_ENV)
    if not path:
        raise ConfigurationError(f"set {POLICY_ENV} to the policy file the service enforces")
    return app_from_policy_file(path, secret_file=os.environ.get(SECRET_FILE_ENV))
