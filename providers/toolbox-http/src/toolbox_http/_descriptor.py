"""`HTTP_DESCRIPTOR`: what the ``http`` tool is and what each operation does."""

from __future__ import annotations

from toolbox import Effect, OperationDescriptor, RiskClass, ToolDescriptor

__all__ = ["HTTP_DESCRIPTOR"]

HTTP_DESCRIPTOR = ToolDescriptor(
    name="http",
    version="0.1.0",
    summary="HTTP(S) requests to remote services, bounded in size and time.",
    risk=RiskClass.EXTERNAL_RESOURCE,
    operations=(
        OperationDescriptor(name="get", effect=Effect.READ_ONLY, summary="GET a URL."),
        OperationDescriptor(name="head", effect=Effect.READ_ONLY, summary="HEAD a URL: status and headers."),
        OperationDescriptor(name="put", effect=Effect.IDEMPOTENT, summary="PUT a body to a URL."),
        OperationDescriptor(name="delete", effect=Effect.IDEMPOTENT, summary="DELETE a URL."),
        OperationDescriptor(name="post", effect=Effect.UNSAFE, summary="POST a body to a URL."),
        OperationDescriptor(name="patch", effect=Effect.UNSAFE, summary="PATCH a URL with a body."),
    ),
)
"""The ``http`` tool (``EXTERNAL_RESOURCE``) and the effect of each operation."""
