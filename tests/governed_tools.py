"""A billing tool with controllable failures, for the governed-pipeline tests."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from pydantic import Field

from toolbox import (
    Effect,
    OperationDescriptor,
    ReadIntent,
    RiskClass,
    ToolDescriptor,
    ToolProvider,
    ToolRuntime,
    WriteIntent,
)

BILLING = ToolDescriptor(
    name="billing",
    version="2.1",
    summary="Invoices and charges.",
    risk=RiskClass.EXTERNAL_RESOURCE,
    operations=(
        OperationDescriptor(name="lookup_invoice", effect=Effect.READ_ONLY, summary="Find an invoice."),
        OperationDescriptor(name="update_note", effect=Effect.IDEMPOTENT),
        OperationDescriptor(name="charge", effect=Effect.UNSAFE),
        OperationDescriptor(name="transfer", effect=Effect.RECONCILABLE),
        OperationDescriptor(name="refund", effect=Effect.UNSAFE, requires_approval=True),
    ),
)


class Billing:
    """Each operation runs the next scripted behaviour (a value, or an exception to raise)."""

    def __init__(self, runtime: ToolRuntime) -> None:
        self._runtime = runtime
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.script: list[object] = []
        self.on_call: Callable[[], None] | None = None

    def _run(self, operation: str, arguments: dict[str, Any]) -> Any:
        self.calls.append((operation, arguments))
        if self.on_call is not None:
            self.on_call()
        outcome = self.script.pop(0) if self.script else {"ok": True, **arguments}
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    def lookup_invoice(
        self, invoice_id: Annotated[int, Field(gt=0)], tenant: str = "tenant-a"
    ) -> ReadIntent[Any]:
        """Intent to find an invoice."""
        args = {"invoice_id": invoice_id, "tenant": tenant}
        return self._runtime.read_intent(
            "lookup_invoice", lambda: self._run("lookup_invoice", args), arguments=args
        )

    def update_note(self, invoice_id: int, note: str) -> WriteIntent[Any]:
        """Intent to set an invoice's note (idempotent)."""
        args = {"invoice_id": invoice_id, "note": note}
        return self._runtime.write_intent(
            "update_note", lambda: self._run("update_note", args), arguments=args
        )

    def charge(
        self, amount: Annotated[int, Field(gt=0, le=10_000)], currency: str = "EUR"
    ) -> WriteIntent[Any]:
        """Intent to charge a card (unsafe)."""
        args = {"amount": amount, "currency": currency}
        return self._runtime.write_intent("charge", lambda: self._run("charge", args), arguments=args)

    def transfer(self, amount: int, reference: str) -> WriteIntent[Any]:
        """Intent to transfer money (reconcilable by reference)."""
        args = {"amount": amount, "reference": reference}
        return self._runtime.write_intent("transfer", lambda: self._run("transfer", args), arguments=args)

    def refund(self, amount: int) -> WriteIntent[Any]:
        """Intent to refund (needs approval)."""
        args = {"amount": amount}
        return self._runtime.write_intent("refund", lambda: self._run("refund", args), arguments=args)


PROVIDER = ToolProvider(tool_type=Billing, descriptor=BILLING)
