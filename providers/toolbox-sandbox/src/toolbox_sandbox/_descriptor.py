"""What the sandbox tool is: its risk class, acknowledgement and operations."""

from __future__ import annotations

from toolbox import Acknowledgement, Effect, OperationDescriptor, RiskClass, ToolDescriptor

__all__ = ["SANDBOX_ACKNOWLEDGEMENT", "SANDBOX_DESCRIPTOR", "descriptor_for"]

SANDBOX_ACKNOWLEDGEMENT = Acknowledgement(env="TOOLBOX_SANDBOX_ACK", value="allow-sandboxed-code")
"""Set ``TOOLBOX_SANDBOX_ACK=allow-sandboxed-code`` to approve running code for a deployment."""


def descriptor_for(effect: Effect, *, requires_approval: bool = False) -> ToolDescriptor:
    """The descriptor with both operations declared ``effect`` (UNSAFE, or IDEMPOTENT when every
    profile is declared read-only to the world), each needing an approval if ``requires_approval``."""
    return ToolDescriptor(
        name="sandbox",
        version="0.1.0",
        summary="Run Python code or a program in an operating-system sandbox: no network, limits.",
        risk=RiskClass.PRIVILEGED,
        acknowledgement=SANDBOX_ACKNOWLEDGEMENT,
        operations=(
            OperationDescriptor(
                name="run_python",
                effect=effect,
                summary="Run Python code in a sandbox; returns exit code, output, times and exported files.",
                requires_approval=requires_approval,
            ),
            OperationDescriptor(
                name="run",
                effect=effect,
                summary="Run a program the profile allows in a sandbox; returns exit code, output and files.",
                requires_approval=requires_approval,
            ),
        ),
    )


SANDBOX_DESCRIPTOR = descriptor_for(Effect.UNSAFE)
"""The descriptor registered when the profiles are not all declared read-only to the world."""
