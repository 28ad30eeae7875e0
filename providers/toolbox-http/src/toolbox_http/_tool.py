"""`HttpTool`: HTTP(S) requests for agents, used with a declared intent."""

from __future__ import annotations

import dataclasses
from typing import Any, final

from toolbox import ReadIntent, ToolRuntime, WriteIntent
from toolbox.errors import AcknowledgementRequiredError
from toolbox_http._clients import Clients
from toolbox_http._deadline import Deadline
from toolbox_http._egress import EgressDeniedError, EgressMode
from toolbox_http._exchange import Exchange
from toolbox_http._options import HttpOptions
from toolbox_http._request import Headers, Params, Prepared, prepare
from toolbox_http._response import HttpResponse
from toolbox_http._view import governed_arguments

__all__ = ["HttpTool"]

Body = bytes | str

INSECURE_TLS_ENV = "TOOLBOX_HTTP_INSECURE_TLS"
"""The variable that acknowledges ``insecure_skip_verify`` (TLS checks off)."""
INSECURE_TLS_VALUE = "i-accept-mitm-risk"
"""The exact value `INSECURE_TLS_ENV` must hold."""


@final
class HttpTool:
    """HTTP and HTTPS requests. ``EXTERNAL_RESOURCE``: a policy must allow it explicitly.

    Each method checks its arguments and returns an intent::

        tools.get(HttpTool).get(url).purpose("Fetch rates").execute()
        tools.get(HttpTool).post(url, json=payload).audit_as("Sync inventory").execute()

    Every method raises `EgressDeniedError` (a `toolbox.ToolDeniedError`,
    reason ``EGRESS_DENIED``) at call time when the scheme, host, port or method
    is outside ``options.egress`` (unless its mode is ``REPORT``). It raises
    `ValueError` at call time, before anything is sent, when
    the URL is not an absolute ``http``/``https`` URL with a host or contains
    whitespace or control characters; when params or headers are malformed
    (one header name given twice in different case included); when both
    ``json`` and ``content`` are given; or when the body exceeds
    ``max_request_bytes``. ``params`` are added to the URL's query.

    Guardrails, authorizers and approvals see the request as it will be sent
    (``method``, ``url``, ``host``, ``params``, ``headers``, ``json``,
    ``content``), the same on both doors; records show it redacted.

    Executing returns an `HttpResponse` for any status. It raises
    `EgressDeniedError` when the host resolves to a refused address or a
    redirect leaves the policy, `RateLimitedError` (``RATE_LIMITED``),
    `toolbox.errors.ToolTimeoutError`, `toolbox.errors.ToolConnectionError`,
    `toolbox.errors.ResponseTooLargeError`, `ResponseEncodingError`, `ResponseCheckError` or
    `toolbox.ToolExecutionError`.
    """

    __slots__ = ("_clients", "_exchange", "_options", "_runtime")

    def __init__(self, runtime: ToolRuntime) -> None:
        """Build the tool from its runtime.

        Raises:
            ValueError: ``runtime.options`` are not valid `HttpOptions`.
            toolbox.AcknowledgementRequiredError: ``insecure_skip_verify`` is set without
                ``TOOLBOX_HTTP_INSECURE_TLS=i-accept-mitm-risk``.
        """
        self._runtime = runtime
        self._options = HttpOptions.from_runtime(runtime.options)
        env = runtime.tools.catalog.env
        if self._options.insecure_skip_verify and env.get(INSECURE_TLS_ENV) != INSECURE_TLS_VALUE:
            raise AcknowledgementRequiredError(
                "insecure_skip_verify turns off TLS certificate checks, which lets anyone on the path "
                f"read and change traffic. Set {INSECURE_TLS_ENV}={INSECURE_TLS_VALUE} (exact value) "
                "to acknowledge it, or use ca_bundle to trust a private CA instead.",
                tool=runtime.descriptor.name,
                rule=f"acknowledgement:{INSECURE_TLS_ENV}",
                env=INSECURE_TLS_ENV,
                value=INSECURE_TLS_VALUE,
            )
        self._clients = Clients(self._options, tool=runtime.tool_name)
        self._exchange = Exchange(self._clients, self._options, env, redaction_keys=runtime.redaction_keys)

    @property
    def options(self) -> HttpOptions:
        """The validated options."""
        return self._options

    def get(
        self, url: str, *, params: Params | None = None, headers: Headers | None = None
    ) -> ReadIntent[HttpResponse]:
        """Intent to GET ``url``; declare ``purpose(...)`` or ``audit_as(...)``, then execute."""
        return self._read("get", self._prepare("get", url, params=params, headers=headers))

    def head(
        self, url: str, *, params: Params | None = None, headers: Headers | None = None
    ) -> ReadIntent[HttpResponse]:
        """Intent to HEAD ``url``: the response has status and headers, no body."""
        return self._read("head", self._prepare("head", url, params=params, headers=headers))

    def put(
        self,
        url: str,
        *,
        json: Any = None,
        content: Body | None = None,
        params: Params | None = None,
        headers: Headers | None = None,
    ) -> WriteIntent[HttpResponse]:
        """Intent to PUT ``json`` or ``content`` to ``url``; declare ``audit_as(...)``, then execute."""
        prepared = self._prepare("put", url, params=params, headers=headers, json=json, content=content)
        return self._write("put", prepared)

    def delete(
        self,
        url: str,
        *,
        json: Any = None,
        content: Body | None = None,
        params: Params | None = None,
        headers: Headers | None = None,
    ) -> WriteIntent[HttpResponse]:
        """Intent to DELETE ``url``; declare ``audit_as(...)``, then execute."""
        prepared = self._prepare("delete", url, params=params, headers=headers, json=json, content=content)
        return self._write("delete", prepared)

    def post(
        self,
        url: str,
        *,
        json: Any = None,
        content: Body | None = None,
        params: Params | None = None,
        headers: Headers | None = None,
    ) -> WriteIntent[HttpResponse]:
        """Intent to POST ``json`` or ``content`` to ``url``; declare ``audit_as(...)``, then execute."""
        prepared = self._prepare("post", url, params=params, headers=headers, json=json, content=content)
        return self._write("post", prepared)

    def patch(
        self,
        url: str,
        *,
        json: Any = None,
        content: Body | None = None,
        params: Params | None = None,
        headers: Headers | None = None,
    ) -> WriteIntent[HttpResponse]:
        """Intent to PATCH ``url`` with ``json`` or ``content``; declare ``audit_as(...)``, then execute."""
        prepared = self._prepare("patch", url, params=params, headers=headers, json=json, content=content)
        return self._write("patch", prepared)

    def close(self) -> None:
        """Close the shared connection pool. `toolbox.Tools.close` calls this."""
        self._clients.close()

    def _prepare(
        self,
        operation: str,
        url: str,
        *,
        params: Params | None,
        headers: Headers | None,
        json: Any = None,
        content: Body | None = None,
    ) -> Prepared:
        prepared = prepare(
            operation.upper(),
            url,
            params=params,
            headers=headers,
            json=json,
            content=content,
            max_request_bytes=self._options.max_request_bytes,
            redaction_keys=self._runtime.redaction_keys,
        )
        egress = self._options.egress
        violation = egress.violation(prepared.request.method, prepared.request.url)
        if violation is None:
            return prepared
        rule, reason = violation
        message = f"{prepared.request.method} {prepared.target} denied by the egress policy: {reason}"
        if egress.mode is EgressMode.REPORT:
            return dataclasses.replace(prepared, warnings=(f"EGRESS_DENIED (report only): {message}",))
        error = EgressDeniedError(message, rule=rule, tool=self._runtime.descriptor.name)
        self._runtime.record_denial(error)
        raise error

    def _read(self, operation: str, prepared: Prepared) -> ReadIntent[HttpResponse]:
        exchange = self._exchange
        # One deadline per call: the chain's retries spend what the first attempt left.
        deadline = Deadline(self._options.total_timeout)
        return self._runtime.read_intent(
            operation,
            lambda: exchange.send(prepared, deadline),
            target=prepared.target,
            acall=lambda: exchange.send_async(prepared, deadline),
            arguments=governed_arguments(prepared),
            warnings=prepared.warnings,
        )

    def _write(self, operation: str, prepared: Prepared) -> WriteIntent[HttpResponse]:
        exchange = self._exchange
        deadline = Deadline(self._options.total_timeout)
        return self._runtime.write_intent(
            operation,
            lambda: exchange.send(prepared, deadline),
            target=prepared.target,
            acall=lambda: exchange.send_async(prepared, deadline),
            arguments=governed_arguments(prepared),
            warnings=prepared.warnings,
        )

    def __repr__(self) -> str:
        return f"HttpTool(context={self._runtime.context.run_id})"
