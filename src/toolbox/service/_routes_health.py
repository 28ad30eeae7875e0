"""``/healthz`` (the process answers), ``/readyz`` (its stores answer), ``/metrics`` (Prometheus)."""

from __future__ import annotations

import logging

from fastapi import APIRouter, Request
from starlette.concurrency import run_in_threadpool
from starlette.responses import JSONResponse, Response

from toolbox.audit._sink import AuditQuery
from toolbox.service._access import authenticate, check_role
from toolbox.service._metrics import CONTENT_TYPE
from toolbox.service._service import Service, service_of

__all__ = ["router"]

LOGGER = logging.getLogger("toolbox.service")
router = APIRouter(tags=["health"])
#: A tenant no caller can have (a context's tenant is at most 256 characters): the probe reads nothing.
_PROBE_TENANT = "readyz-" + "-" * 300


@router.get("/healthz", include_in_schema=False)
async def healthz() -> dict[str, str]:
    """The process is up."""
    return {"status": "ok"}


def _probe(service: Service) -> dict[str, str]:
    checks: dict[str, str] = {}
    trail = service.served.audit
    if trail is not None:
        try:
            trail.sink.query(AuditQuery(tenant=_PROBE_TENANT, limit=1))
            checks["audit"] = "ok" if trail.healthy else "writer stopped"
        except Exception as exc:  # noqa: BLE001 - any failure means not ready; the type is logged
            LOGGER.warning("readyz: audit store unavailable (%s)", type(exc).__name__)
            checks["audit"] = "unavailable"
    for name, probe in (
        ("approvals", lambda: service.approvals.store.get("readyz")),
        ("kill_switch", service.served.kill_switch.global_state),
    ):
        try:
            probe()
            checks[name] = "ok"
        except Exception as exc:  # noqa: BLE001 - as above
            LOGGER.warning("readyz: %s store unavailable (%s)", name, type(exc).__name__)
            checks[name] = "unavailable"
    return checks


@router.get("/readyz", include_in_schema=False)
async def readyz(request: Request) -> Response:
    """200 when the audit store and the state stores answer, else 503 naming which did not."""
    checks = await run_in_threadpool(_probe, service_of(request))
    ready = all(value == "ok" for value in checks.values())
    return JSONResponse(
        {"status": "ready" if ready else "not ready", "checks": checks}, status_code=200 if ready else 503
    )


@router.get("/metrics", include_in_schema=False)
async def metrics(request: Request) -> Response:
    """Prometheus exposition; the auditor or admin role (it names tools and their traffic)."""
    service = service_of(request)
    caller = await authenticate(request)
    if "admin" not in caller.identity.roles:
        await check_role(service, caller, "auditor", "GET /metrics")
    return Response(service.metrics.render(), media_type=CONTENT_TYPE)
