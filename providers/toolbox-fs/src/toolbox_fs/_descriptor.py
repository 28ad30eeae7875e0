"""What the fs tool is: its risk class, acknowledgement and operations."""

from __future__ import annotations

from toolbox import Acknowledgement, Effect, OperationDescriptor, RiskClass, ToolDescriptor

__all__ = ["FS_ACKNOWLEDGEMENT", "FS_DESCRIPTOR"]

FS_ACKNOWLEDGEMENT = Acknowledgement(env="TOOLBOX_FS_ACK", value="allow-fs-within-roots")
"""Set ``TOOLBOX_FS_ACK=allow-fs-within-roots`` to approve the fs tool for a deployment."""

FS_DESCRIPTOR = ToolDescriptor(
    name="fs",
    version="0.1.0",
    summary="Read, list, write and delete files inside the configured root directories.",
    risk=RiskClass.PRIVILEGED,
    acknowledgement=FS_ACKNOWLEDGEMENT,
    operations=(
        OperationDescriptor(name="read_text", effect=Effect.READ_ONLY, summary="Read a text file."),
        OperationDescriptor(name="read_bytes", effect=Effect.READ_ONLY, summary="Read a file as bytes."),
        OperationDescriptor(name="list", effect=Effect.READ_ONLY, summary="List a directory's entries."),
        OperationDescriptor(
            name="write", effect=Effect.IDEMPOTENT, summary="Create or atomically replace a file."
        ),
        OperationDescriptor(name="delete", effect=Effect.UNSAFE, summary="Delete a file."),
    ),
)
"""The descriptor the fs provider registers."""
