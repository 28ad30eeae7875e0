"""`ServiceSettings`: the service's own knobs, with safe defaults."""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from typing import final

from toolbox.errors import ConfigurationError

__all__ = ["ServiceSettings"]


@final
@dataclass(frozen=True)
class ServiceSettings:
    """How the service behaves; every field has a safe default.

    ``secret`` signs console sessions and CSRF tokens. Every replica behind
    one load balancer must share it (``toolbox serve --secret-file``); the
    default is random per process, so a restart signs everyone out. (How long
    approvals wait and stay redeemable is the ``[state]`` section's
    ``approval_ttl`` and ``grant_ttl``.)
    """

    secret: bytes = field(default_factory=lambda: secrets.token_bytes(32), repr=False)
    #: How long a console session lasts after login.
    session_ttl_seconds: float = 1800.0
    #: Request bodies above this are refused with 413 before they are parsed.
    max_body_bytes: int = 64 * 1024 + 4096
    #: Mark cookies ``Secure`` even when the request did not arrive over TLS (behind a TLS proxy).
    force_secure_cookies: bool = False
    #: Page size limit of list routes.
    max_page: int = 500

    def __post_init__(self) -> None:
        if not isinstance(self.secret, bytes) or len(self.secret) < 16:
            raise ConfigurationError("the service secret must be at least 16 bytes")
        for name in ("session_ttl_seconds",):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
                raise ConfigurationError(f"{name} must be a positive number of seconds")
        for name in ("max_body_bytes", "max_page"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigurationError(f"{name} must be a positive integer")
