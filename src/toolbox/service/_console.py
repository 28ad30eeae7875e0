"""The operator console under ``/console``: tools, approvals, audit, kill switch.

Server-rendered Jinja2 with autoescaping (arguments and intent texts are
attacker-controlled text and render as text), one stylesheet served by the
app, no script, no CDN. Every page answers with a strict Content-Security-
Policy; every form carries a CSRF token; every action goes through the same
code, role checks and audit events as the REST API.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timezone
from typing import Any

from fastapi import APIRouter, FastAPI, Request
from fastapi.staticfiles import StaticFiles
from fastapi.templating import Jinja2Templates
from jinja2 import Environment, PackageLoader, select_autoescape
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import FormData
from starlette.responses import RedirectResponse, Response

from toolbox.audit._log_status import trace_inclusion
from toolbox.service._access import Caller, authenticate_token, check_role
from toolbox.service._approvals import approval_document, store_call
from toolbox.service._audit_reads import EventFilter, TenantAudit, tool_filter
from toolbox.service._console_session import ConsoleSession, Sessions
from toolbox.service._console_views import OUTCOMES, pretty, printed, tool_rows, trace_rows, when
from toolbox.service._identity import new_trace_id
from toolbox.service._kill_switch import SwitchState
from toolbox.service._problems import Problem
from toolbox.service._routes_kill import change_switch
from toolbox.service._service import Service, service_of

__all__ = ["mount_console"]

PAGES = (
    ("/console/tools", "Tools"),
    ("/console/approvals", "Approvals"),
    ("/console/audit", "Audit"),
    ("/console/kill-switch", "Kill switch"),
)
HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; "
        "frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}
_MAX_FORM = 32 * 1024

_environment = Environment(
    loader=PackageLoader("toolbox.service", "templates"),
    autoescape=select_autoescape(default=True, default_for_string=True),
    finalize=printed,
)
_environment.filters["when"] = when
_environment.filters["pretty"] = pretty
templates = Jinja2Templates(env=_environment)
router = APIRouter(prefix="/console", include_in_schema=False)


def _sessions(request: Request) -> Sessions:
    sessions: Sessions = request.app.state.console_sessions
    return sessions


def _page(
    request: Request, name: str, session: ConsoleSession | None, status: int = 200, **context: Any
) -> Response:
    values: dict[str, Any] = {
        "session": session,
        "csrf": _sessions(request).csrf_token(session) if session is not None else "",
        "pages": PAGES,
        "current": request.url.path,
        "title": context.pop("title", "console"),
        **context,
    }
    return templates.TemplateResponse(request, name, values, status_code=status, headers=HEADERS)


def _login_redirect() -> Response:
    return RedirectResponse("/console/login", status_code=303, headers=HEADERS)


def _refusal(request: Request, session: ConsoleSession | None, problem: Problem) -> Response:
    heading = {401: "Sign in again", 403: "Not allowed", 404: "Not found", 409: "Cannot do that now"}
    return _page(
        request,
        "error.html",
        session,
        problem.status,
        title=heading.get(problem.status, "Error"),
        heading=heading.get(problem.status, "Error"),
        message=problem.detail,
        reason_code=problem.reason_code,
        trace_id=problem.trace_id,
    )


def _caller(session: ConsoleSession) -> Caller:
    return Caller(session.identity, new_trace_id())


async def _form(request: Request) -> FormData | None:
    declared = request.headers.get("content-length")
    if declared is None or not declared.isdigit() or int(declared) > _MAX_FORM:
        return None
    if request.headers.get("content-type", "").split(";")[0].strip() != "application/x-www-form-urlencoded":
        return None
    return await request.form(max_files=0, max_fields=20)


async def _posted(request: Request) -> tuple[ConsoleSession, Caller, FormData] | Response:
    """A POST's session and form, or the response refusing it (no session, bad form, bad CSRF)."""
    service = service_of(request)
    session = _sessions(request).read(request)
    if session is None:
        return _login_redirect()
    caller = _caller(session)
    form = await _form(request)
    if form is None or not _sessions(request).csrf_ok(session, form.get("csrf")):
        await service.audit.refused(
            f"POST {request.url.path}"[:120],
            "CSRF_INVALID",
            "service:console:csrf",
            trace_id=caller.trace_id,
            identity=session.identity,
        )
        return _refusal(
            request,
            session,
            Problem(
                403, "CSRF_INVALID", "the form's CSRF token is missing or wrong", trace_id=caller.trace_id
            ),
        )
    return session, caller, form


# -- sign in and out -----------------------------------------------------------------------


@router.get("")
@router.get("/")
async def home(request: Request) -> Response:
    """The tools page, or the login page without a session."""
    target = "/console/tools" if _sessions(request).read(request) else "/console/login"
    return RedirectResponse(target, status_code=303, headers=HEADERS)


def _login_page(request: Request, status: int = 200, error: str | None = None) -> Response:
    sessions = _sessions(request)
    nonce, token = sessions.login_nonce()
    page = _page(request, "login.html", None, status, title="Sign in", login_csrf=token, error=error)
    sessions.set_login_nonce(page, request, nonce)
    return page


@router.get("/login")
async def login_page(request: Request) -> Response:
    """The login form; its CSRF token is bound to a fresh nonce cookie."""
    return _login_page(request)


@router.post("/login")
async def login(request: Request) -> Response:
    """Check the key or token once; on success a session cookie replaces it."""
    service = service_of(request)
    sessions = _sessions(request)
    form = await _form(request)
    trace_id = new_trace_id()
    if form is None or not sessions.login_csrf_ok(request, form.get("csrf")):
        await service.audit.refused(
            "POST /console/login", "CSRF_INVALID", "service:console:csrf", trace_id=trace_id
        )
        return _refusal(
            request,
            None,
            Problem(403, "CSRF_INVALID", "reload the sign-in page and try again", trace_id=trace_id),
        )
    token = form.get("token")
    presented = token.strip() if isinstance(token, str) and token.strip() else None
    try:
        identity = await authenticate_token(service, presented, "POST /console/login", trace_id)
    except Problem as problem:
        return _login_page(request, 401, f"Not signed in: {problem.detail}.")
    response = RedirectResponse("/console/tools", status_code=303, headers=HEADERS)
    sessions.start(response, request, identity)
    return response


@router.post("/logout")
async def logout(request: Request) -> Response:
    """End the session."""
    posted = await _posted(request)
    if isinstance(posted, Response):
        return posted
    response = _login_redirect()
    _sessions(request).end(response, request)
    return response


# -- pages ------------------------------------------------------------------------------------


@router.get("/tools")
async def tools_page(request: Request) -> Response:
    """Each tool: risk, operations with effects, the policy's decision and rule, acknowledgements."""
    session = _sessions(request).read(request)
    if session is None:
        return _login_redirect()
    service = service_of(request)
    try:
        context = await service.toolsets.context(session.identity, "GET /console/tools", new_trace_id())
    except Problem as problem:
        return _refusal(request, session, problem)
    rows = await run_in_threadpool(tool_rows, service, context)
    policy = service.served.catalog.policy.source or "standard"
    return _page(request, "tools.html", session, title="Tools", tools=rows, policy=policy)


async def _approvals(
    service: Service, session: ConsoleSession
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    store = service.approvals.store
    tenant = session.identity.tenant
    trace_id = new_trace_id()
    pending = await store_call(trace_id, lambda: store.list(tenant=tenant, state="pending", limit=200))
    recent = await store_call(trace_id, lambda: store.list(tenant=tenant, state=None, limit=200))
    decided = [p for p in recent if p.state != "pending"]
    return [approval_document(p) for p in pending], [approval_document(p) for p in decided]


@router.get("/approvals")
async def approvals_page(request: Request, notice: str | None = None) -> Response:
    """Pending requests newest first, with the exact (redacted) arguments; decided ones below."""
    session = _sessions(request).read(request)
    if session is None:
        return _login_redirect()
    service = service_of(request)
    can_decide = "approver" in session.identity.roles
    try:
        pending, decided = (
            await _approvals(service, session)
            if can_decide or "auditor" in session.identity.roles
            else ([], [])
        )
    except Problem as problem:
        return _refusal(request, session, problem)
    message = {"approved": "Approved.", "denied": "Denied."}.get(notice or "")
    return _page(
        request,
        "approvals.html",
        session,
        title="Approvals",
        pending=pending,
        decided=decided,
        can_decide=can_decide,
        notice=message,
    )


@router.post("/approvals/{approval_id}/decision")
async def decide(request: Request, approval_id: str) -> Response:
    """An approver's Approve or Deny, with a reason."""
    posted = await _posted(request)
    if isinstance(posted, Response):
        return posted
    session, caller, form = posted
    service = service_of(request)
    decision, reason = form.get("decision"), form.get("reason")
    try:
        await check_role(service, caller, "approver", "POST /console/approvals/{id}/decision")
        if decision not in ("approve", "deny") or not isinstance(reason, str) or not reason.strip():
            raise Problem(
                422, "INVALID_REQUEST", "choose Approve or Deny and give a reason", trace_id=caller.trace_id
            )
        if len(reason) > 1000 or not reason.isprintable():
            raise Problem(
                422,
                "INVALID_REQUEST",
                "the reason must be printable text of at most 1000 characters",
                trace_id=caller.trace_id,
            )
        await service.approvals.decide(
            approval_id,
            approve=decision == "approve",
            reason=reason.strip(),
            identity=session.identity,
            trace_id=caller.trace_id,
        )
    except Problem as problem:
        return _refusal(request, session, problem)
    state = "approved" if decision == "approve" else "denied"
    return RedirectResponse(f"/console/approvals?notice={state}", status_code=303, headers=HEADERS)


def _moment(text: str | None) -> datetime | None:
    if not text:
        return None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)


def _filters(query: Mapping[str, str]) -> dict[str, Any]:
    def short(name: str, limit: int) -> str | None:
        value = query.get(name, "").strip()
        return value[:limit] if value else None

    status = short("status", 32)
    return {
        "principal": short("principal", 256),
        "tool": short("tool", 200),
        "status": status if status in OUTCOMES else None,
        "since": _moment(short("since", 40)),
        "since_text": short("since", 40) or "",
        "until": _moment(short("until", 40)),
        "until_text": short("until", 40) or "",
    }


async def _auditor(request: Request) -> tuple[ConsoleSession, TenantAudit] | Response:
    session = _sessions(request).read(request)
    if session is None:
        return _login_redirect()
    service = service_of(request)
    caller = _caller(session)
    try:
        await check_role(service, caller, "auditor", f"GET {request.url.path}"[:120])
        trail = service.served.audit
        if trail is None:
            raise Problem(
                404, "AUDIT_NOT_CONFIGURED", "this service has no audit trail", trace_id=caller.trace_id
            )
    except Problem as problem:
        return _refusal(request, session, problem)
    return session, TenantAudit(trail.sink, session.identity.tenant)


@router.get("/audit")
async def audit_page(request: Request) -> Response:
    """Traces of the tenant, newest first, filtered by principal, tool (or ``tool.operation``),
    status and time (since, until)."""
    reads = await _auditor(request)
    if isinstance(reads, Response):
        return reads
    session, audit = reads
    filters = _filters(request.query_params)
    tool, operation = tool_filter(service_of(request).served.catalog, filters["tool"])
    wanted = EventFilter(
        filters["principal"], tool, filters["status"], filters["since"], filters["until"], operation
    )
    records = await run_in_threadpool(audit.latest, wanted, 1000)
    return _page(
        request,
        "audit.html",
        session,
        title="Audit",
        traces=trace_rows(records)[:200],
        filters=filters,
        statuses=OUTCOMES,
    )


@router.get("/audit/{trace_id}")
async def trace_page(request: Request, trace_id: str) -> Response:
    """One trace as a timeline, colour-coded by status, with the chain's verification."""
    reads = await _auditor(request)
    if isinstance(reads, Response):
        return reads
    session, audit = reads
    events = await run_in_threadpool(audit.trace, trace_id)
    if not events:
        return _refusal(request, session, Problem(404, "UNKNOWN_TRACE", "no such trace in your tenant"))
    verify = await run_in_threadpool(audit.verify, trace_id)
    sink = service_of(request).served.audit
    inclusion = (
        None
        if sink is None
        else await run_in_threadpool(trace_inclusion, sink.sink, [e.event_id for e in events])
    )
    return _page(
        request,
        "trace.html",
        session,
        title=f"Trace {trace_id[:12]}",
        trace_id=trace_id,
        events=events,
        verify=verify,
        inclusion=inclusion,
    )


@router.get("/kill-switch")
async def kill_switch_page(request: Request) -> Response:
    """The global switch and each tool's, with a confirmed change form (admin role)."""
    session = _sessions(request).read(request)
    if session is None:
        return _login_redirect()
    service = service_of(request)
    try:
        await check_role(service, _caller(session), "admin", "GET /console/kill-switch")
    except Problem as problem:
        return _refusal(request, session, problem)
    control = service.served.kill_switch
    stopped = control.tool_states()
    rows = [{"tool": None, "state": control.global_state()}] + [
        {"tool": name, "state": stopped.get(name, SwitchState(False))}
        for name in service.served.catalog.names()
    ]
    return _page(
        request,
        "kill_switch.html",
        session,
        title="Kill switch",
        rows=rows,
        environment=control.from_environment(),
        notice=request.query_params.get("notice") and "Changed.",
    )


@router.post("/kill-switch")
async def kill_switch_change(request: Request) -> Response:
    """Stop or release one switch; needs the confirmation box and a reason."""
    posted = await _posted(request)
    if isinstance(posted, Response):
        return posted
    session, caller, form = posted
    service = service_of(request)
    tool, engaged, reason = form.get("tool"), form.get("engaged"), form.get("reason")
    try:
        await check_role(service, caller, "admin", "POST /console/kill-switch")
        if form.get("confirm") != "yes":
            raise Problem(
                422, "NOT_CONFIRMED", "tick the confirmation box to change a switch", trace_id=caller.trace_id
            )
        if engaged not in ("true", "false") or not isinstance(tool, str) or not isinstance(reason, str):
            raise Problem(422, "INVALID_REQUEST", "the form is incomplete", trace_id=caller.trace_id)
        if not reason.strip() or len(reason) > 1000 or not reason.isprintable():
            raise Problem(
                422,
                "INVALID_REQUEST",
                "give a printable reason of at most 1000 characters",
                trace_id=caller.trace_id,
            )
        await change_switch(service, caller, tool or None, engaged == "true", reason.strip())
    except Problem as problem:
        return _refusal(request, session, problem)
    return RedirectResponse("/console/kill-switch?notice=changed", status_code=303, headers=HEADERS)


def mount_console(app: FastAPI, key: bytes) -> None:
    """Add the console's routes and its static files to ``app``; sessions are signed with ``key``."""
    service = app.state.service
    settings = service.settings
    check = getattr(service.authenticator, "still_valid", None)
    app.state.console_sessions = Sessions(
        key,
        ttl=settings.session_ttl_seconds,
        force_secure=settings.force_secure_cookies,
        still_valid=check if callable(check) else None,
    )
    app.include_router(router)
    app.mount("/console/static", StaticFiles(packages=[("toolbox.service", "static")]), name="console-static")
