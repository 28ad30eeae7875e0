"""toolbox-http: `HttpTool`, HTTP(S) requests for toolbox agents on httpx.

Installing the package registers the ``http`` tool through the
``toolbox.providers`` entry point; a `toolbox.ToolPolicy` must still allow it.
"""

from __future__ import annotations

from toolbox_http._credentials import Credential, CredentialError
from toolbox_http._descriptor import HTTP_DESCRIPTOR
from toolbox_http._egress import EgressDeniedError, EgressMode, EgressPolicy, RateLimitedError
from toolbox_http._errors import (
    HttpStatusError,
    ResponseCheckError,
    ResponseEncodingError,
    ResponseSchemaError,
    TooManyRedirectsError,
    UnexpectedContentTypeError,
)
from toolbox_http._guard import AddressGuard
from toolbox_http._limits import RateLimit
from toolbox_http._options import HttpOptions
from toolbox_http._response import HttpResponse
from toolbox_http._tool import INSECURE_TLS_ENV, INSECURE_TLS_VALUE, HttpTool

__all__ = [
    "HTTP_DESCRIPTOR",
    "INSECURE_TLS_ENV",
    "INSECURE_TLS_VALUE",
    "AddressGuard",
    "Credential",
    "CredentialError",
    "EgressDeniedError",
    "EgressMode",
    "EgressPolicy",
    "HttpOptions",
    "HttpResponse",
    "HttpStatusError",
    "HttpTool",
    "RateLimit",
    "RateLimitedError",
    "ResponseCheckError",
    "ResponseEncodingError",
    "ResponseSchemaError",
    "TooManyRedirectsError",
    "UnexpectedContentTypeError",
]
