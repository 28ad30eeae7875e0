"""`Service`: what every route reads, kept on ``app.state.service``."""

from __future__ import annotations

from typing import final

from starlette.requests import HTTPConnection

from toolbox.auth import Authenticator
from toolbox.service._approvals import ApprovalDesk
from toolbox.service._audit_log import ServiceAudit
from toolbox.service._calls import CallRunner
from toolbox.service._metrics import ServiceMetrics
from toolbox.service._serving import ServedGateway
from toolbox.service._settings import ServiceSettings
from toolbox.service._toolset_gate import ToolsetGate

__all__ = ["Service", "service_of"]


@final
class Service:
    """The served gateway, authenticator, settings, approvals, toolsets, the service's audit and metrics."""

    __slots__ = ("approvals", "audit", "authenticator", "metrics", "runner", "served", "settings", "toolsets")

    def __init__(
        self,
        served: ServedGateway,
        authenticator: Authenticator,
        settings: ServiceSettings,
        approvals: ApprovalDesk,
        audit: ServiceAudit,
    ) -> None:
        self.served = served
        self.authenticator = authenticator
        self.settings = settings
        self.audit = audit
        self.approvals = approvals
        self.metrics = ServiceMetrics(served.audit)
        self.runner = CallRunner(self.metrics)
        #: What a credential limited to a toolset may see and call.
        self.toolsets = ToolsetGate(served.catalog, audit)


def service_of(connection: HTTPConnection) -> Service:
    """The `Service` of the app serving ``connection``."""
    service: Service = connection.app.state.service
    return service
