"""`HttpOptions`: the settings of `HttpTool`, validated when the tool is built."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, final

import httpx
from pydantic import BaseModel, ConfigDict, Field, FilePath, ValidationError, field_validator, model_validator

from toolbox.provider import describe_validation_error
from toolbox_http._credentials import Credential
from toolbox_http._egress import EgressPolicy
from toolbox_http._limits import RateLimit

__all__ = ["HttpOptions"]

MIB = 1024 * 1024

Seconds = Annotated[float, Field(gt=0, allow_inf_nan=False)]
ByteCount = Annotated[int, Field(gt=0)]


@final
class HttpOptions(BaseModel):
    """Settings of `HttpTool`, passed as ``Tools.load(options={"http": {...}})``.

    TLS certificates are always verified unless ``insecure_skip_verify`` is set
    *and* the deployment acknowledges it with
    ``TOOLBOX_HTTP_INSECURE_TLS=i-accept-mitm-risk``. See docs/http.md.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)

    connect_timeout: Seconds = 5.0
    """Seconds to establish a connection (also to wait for a pooled one)."""
    read_timeout: Seconds = 10.0
    """Seconds to wait for each chunk of the response (and to send the request)."""
    total_timeout: Seconds = 30.0
    """Seconds for the whole call: connecting, the response head, body and trailers,
    redirects, and the governed chain's retries (which share one deadline).

    Every connect, read and write is cut to the time left, on both doors; a retry
    with no time left is not sent. System name resolution is not interruptible.
    """
    max_response_bytes: ByteCount = 10 * MIB
    """Largest response body accepted, on the wire and decoded; reading stops as soon as it is passed."""
    max_request_bytes: ByteCount = 10 * MIB
    """Largest request body accepted."""
    ca_bundle: FilePath | None = None
    """A PEM file of CA certificates to trust instead of the bundled ones."""
    transport: httpx.BaseTransport | None = None
    """Transport for sync calls (tests, egress control). You keep ownership: it is not closed."""
    async_transport: httpx.AsyncBaseTransport | None = None
    """Transport for async calls. You keep ownership: it is not closed."""
    egress: EgressPolicy = EgressPolicy()
    """Where requests may go: schemes, hosts, ports, methods, non-public networks."""
    follow_redirects: bool = False
    """Follow 3xx redirects; every hop is checked like the first."""
    max_redirects: Annotated[int, Field(ge=1, le=20)] = 5
    """Most redirect hops followed before the call fails."""
    rate_limit: RateLimit | None = None
    """Per-host rate limit and concurrency cap; None: unlimited."""
    credentials: tuple[Credential, ...] = ()
    """Secret headers bound to host patterns, added by the tool (never seen by the caller)."""
    expect_content_types: tuple[str, ...] | None = None
    """Media types a 2xx response must have (``application/json``, ``text/*``); None: any."""
    json_model: type[BaseModel] | None = None
    """A pydantic model a 2xx response's JSON body must validate against (code only)."""
    insecure_skip_verify: bool = False
    """Skip TLS verification: refused unless ``TOOLBOX_HTTP_INSECURE_TLS=i-accept-mitm-risk``."""

    @field_validator("expect_content_types")
    @classmethod
    def _content_types(cls, value: tuple[str, ...] | None) -> tuple[str, ...] | None:
        if value is None:
            return None
        types = tuple(v.strip().lower() for v in value)
        for media in types:
            main, _, sub = media.partition("/")
            if not main or not sub or main == "*" or ";" in media:
                raise ValueError(f"{media!r} is not a media type like application/json or text/*")
        return types

    @model_validator(mode="after")
    def _tls(self) -> HttpOptions:
        if self.insecure_skip_verify and self.ca_bundle is not None:
            raise ValueError("insecure_skip_verify and ca_bundle exclude each other: trust the CA instead")
        return self

    @property
    def secret_headers(self) -> frozenset[str]:
        """Lower-case names of headers that carry configured secrets."""
        return frozenset(c.header.lower() for c in self.credentials)

    @classmethod
    def from_runtime(cls, options: Mapping[str, Any]) -> HttpOptions:
        """Validate the tool's options.

        Raises:
            ValueError: an option is unknown or has an invalid value (named, not echoed).
        """
        try:
            return cls.model_validate(dict(options))
        except ValidationError as exc:
            raise ValueError(f"invalid options for tool 'http': {describe_validation_error(exc)}") from None
