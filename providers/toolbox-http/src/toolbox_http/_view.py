"""What governance decides on: the request as it will be sent, never a redacted copy.

Guardrails, authorizers and the approval fingerprint receive this view on both
doors. It holds every value that reaches the server, secrets included, so a
rule can compare them and a grant is bound to them; the audit trail, traces and
approval displays redact it (`toolbox.audit.Redaction`). Credentials the tool
injects from ``options.credentials`` are not arguments and are not in it.
"""

from __future__ import annotations

import json as jsonlib
from typing import Any
from urllib.parse import parse_qsl

from toolbox_http._request import Prepared

__all__ = ["governed_arguments"]


def governed_arguments(prepared: Prepared) -> dict[str, Any]:
    """The decision view of ``prepared``.

    Keys: ``method``; ``url`` as sent (query included, userinfo moved to an
    ``Authorization`` header); ``host``; ``params``, every query parameter from
    the URL and ``params`` together, names and values decoded, each name mapped
    to the list of its values in order; ``headers`` as sent, names lower-cased,
    repeated names joined by ``", "``; ``json``, the decoded JSON body (or
    None); ``content``, any other body as text, or bytes when it is not UTF-8
    (or None).
    """
    request = prepared.request
    url = request.url
    params: dict[str, list[str]] = {}
    # The query httpx sends, decoded as httpx.QueryParams would (and a server would), faster.
    for name, value in parse_qsl(url.query.decode("ascii"), keep_blank_values=True):
        params.setdefault(name, []).append(value)
    body = request.content
    json_body: Any = None
    content: str | bytes | None = None
    if body:
        if prepared.json_body:
            json_body = jsonlib.loads(body)
        else:
            try:
                content = body.decode("utf-8")
            except UnicodeDecodeError:
                content = body
    return {
        "method": request.method,
        "url": str(url),
        "host": url.host,
        "params": params,
        "headers": dict(request.headers.items()),
        "json": json_body,
        "content": content,
    }
