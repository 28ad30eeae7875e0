"""Scoped credentials: secrets bound to host patterns, added to requests by the tool only.

The caller and the model never see a secret: it is read from the environment
(or a callable) when a request to a matching host is sent, set on that one
outgoing request, and never put in the intent, the trace, an audit row or an
error message. It goes only over ``https``, unless the operator lists the host
in ``http_hosts``: plain ``http`` would hand it to anyone on the path (and an
``https`` to ``http`` redirect would downgrade it).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Annotated, final

import httpx
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from toolbox.errors import ToolExecutionError
from toolbox_http._egress import HostPattern, _check_pattern, host_matches

__all__ = ["SENSITIVE_HEADERS", "Credential", "CredentialError", "inject_credentials"]

#: Headers never forwarded across hosts and never recorded.
SENSITIVE_HEADERS = frozenset({"authorization", "proxy-authorization", "cookie", "set-cookie"})

_HEADER_NAME = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]{1,256}$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
_BAD_VALUE = re.compile(r"[\r\n\x00]")


class CredentialError(ToolExecutionError):
    """A configured credential could not be read (its secret is never in the message)."""


@final
class Credential(BaseModel):
    """One secret header for requests to some hosts.

    Example: ``{"hosts": ["api.example.com"], "header": "Authorization",
    "prefix": "Bearer ", "env": "EXAMPLE_TOKEN"}``.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)

    hosts: Annotated[tuple[HostPattern, ...], Field(min_length=1)]
    """Host patterns (exact or ``*.example.com``) the secret is sent to over https, and no others."""
    http_hosts: tuple[HostPattern, ...] = ()
    """Of those hosts, the ones the secret may also reach over plain ``http`` (an explicit opt-in)."""
    header: str = "Authorization"
    """The header that carries the secret."""
    prefix: str = ""
    """Text before the secret, e.g. ``"Bearer "``."""
    env: str | None = None
    """The environment variable holding the secret (read at each request)."""
    value_from: Callable[[], str] | None = Field(default=None, repr=False)
    """A callable returning the secret (code only), instead of ``env``."""

    @field_validator("hosts", "http_hosts")
    @classmethod
    def _hosts(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(_check_pattern(v) for v in value)

    def sent_to(self, url: httpx.URL) -> bool:
        """Whether this secret goes on a request to ``url``: a bound host, over https or opted-in http."""
        host = url.raw_host.decode("ascii")
        if not host_matches(host, self.hosts):
            return False
        return url.scheme == "https" or host_matches(host, self.http_hosts)

    @field_validator("header")
    @classmethod
    def _header(cls, value: str) -> str:
        if not _HEADER_NAME.match(value):
            raise ValueError("header must be an HTTP header name")
        return value

    @field_validator("env")
    @classmethod
    def _env(cls, value: str | None) -> str | None:
        if value is not None and not _ENV_NAME.match(value):
            raise ValueError("env must be an environment variable name")
        return value

    @model_validator(mode="after")
    def _one_source(self) -> Credential:
        if (self.env is None) == (self.value_from is None):
            raise ValueError("a credential needs exactly one of env or value_from")
        if _BAD_VALUE.search(self.prefix):
            raise ValueError("prefix must not contain CR, LF or NUL")
        stray = [p for p in self.http_hosts if p not in self.hosts and not host_matches(p, self.hosts)]
        if stray:
            raise ValueError(f"http_hosts {', '.join(stray)} not in hosts: a secret only goes to its hosts")
        return self

    def value(self, env: Mapping[str, str]) -> str:
        """The header value.

        Raises:
            CredentialError: the variable is unset or the secret is empty or malformed.
        """
        where = f"credential for {', '.join(self.hosts)} ({self.header})"
        if self.env is not None:
            secret = env.get(self.env)
            if not secret:
                raise CredentialError(
                    f"{where}: environment variable {self.env} is not set", request_sent=False
                )
        else:
            assert self.value_from is not None  # guaranteed by _one_source
            try:
                secret = self.value_from()
            except Exception:  # noqa: BLE001 - the callable's message could hold the secret
                raise CredentialError(f"{where}: value_from raised", request_sent=False) from None
            if not isinstance(secret, str) or not secret:
                raise CredentialError(f"{where}: value_from returned no str secret", request_sent=False)
        if _BAD_VALUE.search(secret) or not secret.isascii():
            raise CredentialError(f"{where}: the secret is not a valid header value", request_sent=False)
        return self.prefix + secret


def inject_credentials(
    request: httpx.Request, credentials: Sequence[Credential], env: Mapping[str, str]
) -> httpx.Request:
    """``request`` with the secret headers of every credential `Credential.sent_to` its URL."""
    matching = [c for c in credentials if c.sent_to(request.url)]
    if not matching:
        return request
    headers = request.headers.copy()
    for credential in matching:
        headers[credential.header] = credential.value(env)
    return httpx.Request(
        request.method, request.url, headers=headers, content=request.content, extensions=request.extensions
    )
