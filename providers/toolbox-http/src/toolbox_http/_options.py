"""`HttpOptions`: the settings of `HttpTool`, validated when the tool is built."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, final

import httpx
from pydantic import BaseModel, ConfigDict, Field, FilePath, ValidationError

from toolbox.descriptor import describe_validation_error

__all__ = ["HttpOptions"]

MIB = 1024 * 1024

Seconds = Annotated[float, Field(gt=0, allow_inf_nan=False)]
ByteCount = Annotated[int, Field(gt=0)]


@final
class HttpOptions(BaseModel):
    """Settings of `HttpTool`, passed as ``Tools.load(options={"http": {...}})``.

    TLS certificates are always verified; there is deliberately no option to
    turn that off.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)

    connect_timeout: Seconds = 5.0
    """Seconds to establish a connection (also to wait for a pooled one)."""
    read_timeout: Seconds = 10.0
    """Seconds to wait for each chunk of the response (and to send the request)."""
    total_timeout: Seconds = 30.0
    """Seconds for the whole exchange, including reading the body.

    Async calls are cancelled at the deadline. Sync calls check it after each
    chunk, so one silent read can add up to ``read_timeout`` (itself capped at
    ``total_timeout``).
    """
    max_response_bytes: ByteCount = 10 * MIB
    """Largest response body accepted; reading stops as soon as it is passed."""
    max_request_bytes: ByteCount = 10 * MIB
    """Largest request body accepted."""
    ca_bundle: FilePath | None = None
    """A PEM file of CA certificates to trust instead of the bundled ones."""
    transport: httpx.BaseTransport | None = None
    """Transport for sync calls (tests, egress control). You keep ownership: it is not closed."""
    async_transport: httpx.AsyncBaseTransport | None = None
    """Transport for async calls. You keep ownership: it is not closed."""

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
