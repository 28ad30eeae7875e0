"""The operator console in a real browser: Playwright driving Debian's chromium (no download).

An agent's call raises an approval whose arguments carry a ``<script>``; an
approver signs in, sees it rendered as text, approves it; the agent redeems
the grant and the call completes in the audit timeline. A second user without
the approver role sees no buttons, and their forged POSTs are refused.
Screenshots of every page go to ``test-artifacts/console/`` (or
``$TOOLBOX_TEST_ARTIFACTS/console``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import BrowserContext, Page, Playwright, sync_playwright

from service_support import PLAIN_HTTP, RUNS, TOOLS, Deployment, deployment
from toolbox.audit import AuditQuery

CHROMIUM = "/usr/bin/chromium"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
SCRIPT = "<script>window.pwned = 1</script>"
ARTIFACTS = (
    Path(os.environ.get("TOOLBOX_TEST_ARTIFACTS", Path(__file__).parent.parent / "test-artifacts"))
    / "console"
)


class Browser:
    """Launches one chromium per signed-in user, each on its own empty user-data-dir."""

    def __init__(self, playwright: Playwright, root: Path) -> None:
        self._playwright = playwright
        self._root = root
        self._contexts: list[BrowserContext] = []

    def new_context(self, base_url: str) -> BrowserContext:
        profile = self._root / f"profile-{len(self._contexts)}"
        profile.mkdir()
        context = self._playwright.chromium.launch_persistent_context(
            str(profile), executable_path=CHROMIUM, args=FLAGS, headless=True, base_url=base_url
        )
        self._contexts.append(context)
        return context

    def close(self) -> None:
        for context in self._contexts:
            context.close()


@pytest.fixture
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Browser]:
    if not Path(CHROMIUM).exists():
        raise RuntimeError(f"{CHROMIUM} is missing: install Debian's chromium package (scripts/setup does)")
    with sync_playwright() as playwright:
        launched = Browser(playwright, tmp_path_factory.mktemp("chromium"))
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture
def service(tmp_path: Path) -> Iterator[Deployment]:
    with deployment(tmp_path, console=True) as deployed:
        yield deployed


def shot(page: Page, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def sign_in(browser: Browser, service: Deployment, user: str) -> Page:
    context = browser.new_context(service.url)
    page = context.pages[0] if context.pages else context.new_page()
    outside: list[str] = []
    page.on(
        "request",
        lambda request: None if request.url.startswith(service.url) else outside.append(request.url),
    )
    page.outside = outside  # type: ignore[attr-defined]
    page.goto("/console/login")
    page.fill("#token", service.keys[user])
    page.click("button[type=submit]")
    page.wait_for_url("**/console/tools")
    return page


def test_approve_in_the_browser_then_the_call_completes(browser: Browser, service: Deployment) -> None:
    raised = service.invoke("alice", "transfer", {"amount": 40, "to": SCRIPT}, audit_as="Pay the supplier")
    assert raised.status_code == 202
    approval = raised.json()["approval"]

    page = sign_in(browser, service, "bob")
    assert page.locator("td strong", has_text="transfer").count() == 1
    shot(page, "tools")

    page.goto("/console/approvals")
    card = page.locator(f"#approval-{approval['id']}")
    assert SCRIPT in card.locator("pre.arguments").inner_text()  # shown as text ...
    assert page.evaluate("typeof window.pwned") == "undefined"  # ... never run
    assert "Pay the supplier" in card.inner_text()
    shot(page, "approvals")
    card.locator("input[name=reason]").fill("Invoice 7 checked")
    card.locator("button.approve").click()
    page.wait_for_url("**/console/approvals?notice=approved")
    assert "Approved." in page.inner_text("main")
    assert page.locator("td", has_text="Invoice 7 checked").count() == 1
    assert RUNS["transfer"] == 0

    done = service.invoke(
        "alice",
        "transfer",
        {"amount": 40, "to": SCRIPT},
        audit_as="Pay the supplier",
        approval_id=approval["id"],
    )
    assert done.status_code == 200 and RUNS["transfer"] == 1

    page.goto("/console/audit?tool=transfer")
    shot(page, "audit")
    page.click(f"a[href='/console/audit/{approval['run_id']}']")
    page.wait_for_url(f"**/console/audit/{approval['run_id']}")
    timeline = page.inner_text("ol.timeline")
    assert "APPROVAL_REQUIRED" in timeline and "APPROVED" in timeline and "SUCCESS" in timeline
    assert "Chain verified" in page.inner_text("main")
    assert page.evaluate("typeof window.pwned") == "undefined"
    shot(page, "trace")
    assert page.outside == []  # type: ignore[attr-defined]  # every asset came from the app


def test_a_caller_sees_no_buttons_and_forged_posts_are_refused(browser: Browser, service: Deployment) -> None:
    approval = service.invoke("alice", "transfer", {"amount": 5, "to": "x"}, audit_as="Pay").json()[
        "approval"
    ]
    page = sign_in(browser, service, "viewer")
    page.goto("/console/approvals")
    assert page.locator("button.approve").count() == 0 and page.locator("button.deny").count() == 0
    page.goto("/console/kill-switch")
    assert "Not allowed" in page.inner_text("main")
    shot(page, "forbidden")
    csrf = page.locator("input[name=csrf]").first.get_attribute("value")
    assert csrf
    forged = page.request.post(
        f"/console/approvals/{approval['id']}/decision",
        form={"decision": "approve", "reason": "me", "csrf": csrf},
    )
    assert forged.status == 403 and "ROLE_REQUIRED" in forged.text()
    no_token = page.request.post(
        f"/console/approvals/{approval['id']}/decision", form={"decision": "approve"}
    )
    assert no_token.status == 403 and "CSRF_INVALID" in no_token.text()
    assert service.get(f"/v1/approvals/{approval['id']}", "bob").json()["state"] == "pending"
    assert RUNS["transfer"] == 0
    refusals = [e.reason_code for e in service.sink.query(AuditQuery(tenant="acme"))]
    assert "ROLE_REQUIRED" in refusals and "CSRF_INVALID" in refusals


def test_kill_switch_page_needs_confirmation(browser: Browser, service: Deployment) -> None:
    page = sign_in(browser, service, "carol")
    page.goto("/console/kill-switch")
    shot(page, "kill-switch")
    row = page.locator("tr", has=page.locator("span.code", has_text=re.compile(r"^echo$")))
    row.locator("input[name=reason]").fill("incident 9")
    row.locator("button").click()  # the required checkbox is unticked: the browser does not submit
    assert page.url.endswith("/console/kill-switch")
    row.locator("input[name=confirm]").check()
    row.locator("button").click()
    page.wait_for_url("**/console/kill-switch?notice=changed")
    assert service.get("/v1/kill-switch", "carol").json()["tools"]["echo"]["reason"] == "incident 9"
    assert service.invoke("alice", "echo", {"text": "x"}, purpose="Greet").status_code == 403
    assert RUNS["echo"] == 0


def test_session_cookie_flags_and_login_csrf(service: Deployment) -> None:
    with httpx.Client(base_url=service.url, verify=PLAIN_HTTP) as client:
        check_login(service, client)


def check_login(service: Deployment, client: httpx.Client) -> None:
    login = client.get("/console/login")
    token = re.search(r'name="csrf" value="([^"]+)"', login.text)
    assert token
    forged = httpx.post(service.url + "/console/login", data={"csrf": "x", "token": service.keys["bob"]})
    assert forged.status_code == 403 and "toolbox_session" not in forged.headers.get("set-cookie", "")
    wrong = client.post("/console/login", data={"csrf": token.group(1), "token": "not-a-key"})
    assert wrong.status_code == 401 and "not-a-key" not in wrong.text
    token = re.search(r'name="csrf" value="([^"]+)"', wrong.text)
    assert token
    signed = client.post("/console/login", data={"csrf": token.group(1), "token": service.keys["bob"]})
    cookie = signed.headers["set-cookie"]
    assert signed.status_code == 303 and "HttpOnly" in cookie and "SameSite=strict" in cookie
    assert "Path=/console" in cookie and "Secure" not in cookie  # plain HTTP on loopback
    assert service.keys["bob"] not in cookie
    page = client.get("/console/tools")
    assert page.status_code == 200 and "default-src 'none'" in page.headers["content-security-policy"]
    tampered = httpx.get(service.url + "/console/tools", cookies={"toolbox_session": "e30.abc"})
    assert tampered.status_code == 303 and tampered.headers["location"] == "/console/login"


def test_cookies_are_secure_on_tls_and_behind_a_tls_proxy() -> None:
    from starlette.requests import Request
    from starlette.responses import Response

    from toolbox.auth import Identity
    from toolbox.service._console_session import Sessions

    identity = Identity("acme", "bob", frozenset({"approver"}), None, "api-key:bob")

    def cookie(scheme: str, *, force: bool) -> str:
        request = Request(
            {"type": "http", "scheme": scheme, "headers": [], "server": ("x", 443), "path": "/"}
        )
        response = Response()
        Sessions(b"k" * 32, ttl=60, force_secure=force).start(response, request, identity)
        return response.headers["set-cookie"]

    assert "Secure" in cookie("https", force=False)
    assert "Secure" in cookie("http", force=True)
    assert "Secure" not in cookie("http", force=False)


def test_a_session_signed_with_another_key_or_expired_is_refused() -> None:
    from starlette.requests import Request
    from starlette.responses import Response

    from toolbox.auth import Identity
    from toolbox.service._console_session import Sessions

    identity = Identity("acme", "bob", frozenset({"approver"}), None, "api-key:bob")
    scope = {"type": "http", "scheme": "http", "headers": [], "server": ("x", 80), "path": "/"}
    response = Response()
    Sessions(b"a" * 32, ttl=60, force_secure=False).start(response, Request(scope), identity)
    value = response.headers["set-cookie"].split(";", 1)[0].split("=", 1)[1]
    with_cookie = {**scope, "headers": [(b"cookie", f"toolbox_session={value}".encode())]}
    assert Sessions(b"a" * 32, ttl=60, force_secure=False).read(Request(with_cookie)) is not None
    assert Sessions(b"b" * 32, ttl=60, force_secure=False).read(Request(with_cookie)) is None
    expired = Response()
    Sessions(b"a" * 32, ttl=-1, force_secure=False).start(expired, Request(scope), identity)
    old = expired.headers["set-cookie"].split(";", 1)[0].split("=", 1)[1]
    stale = {**scope, "headers": [(b"cookie", f"toolbox_session={old}".encode())]}
    assert Sessions(b"a" * 32, ttl=60, force_secure=False).read(Request(stale)) is None


def test_pages_show_line_separators_and_bidi_controls_as_escapes(service: Deployment) -> None:
    """An argument holding U+202E (reverses the rest of a line) or U+2028 is shown escaped, so the
    page shows the approver what is stored, in that order (autoescaping alone leaves them raw)."""
    spoof = "acct-1\u202e7-tcca\u2028FAKE"
    raised = service.invoke("alice", "transfer", {"amount": 40, "to": spoof}, audit_as="Pay the supplier")
    assert raised.status_code == 202, raised.text
    with httpx.Client(base_url=service.url, verify=PLAIN_HTTP) as client:
        login = client.get("/console/login")
        token = re.search(r'name="csrf" value="([^"]+)"', login.text)
        assert token
        client.post("/console/login", data={"csrf": token.group(1), "token": service.keys["bob"]})
        page = client.get("/console/approvals")
    assert page.status_code == 200
    assert "\u202e" not in page.text and "\u2028" not in page.text
    assert "acct-1\\u202e7-tcca\\u2028FAKE" in page.text
    assert RUNS["transfer"] == 0


def test_printed_values_are_one_line_and_pretty_json_keeps_its_layout() -> None:
    from markupsafe import Markup

    from toolbox.service._console_views import pretty, printed

    assert printed("a\u202eb\nc") == "a\\u202eb\\x0ac"
    assert printed(3) == 3 and printed(None) is None
    shown = pretty({"to": "x\u2066y</pre>", "n": 1})
    assert isinstance(shown, Markup)
    assert shown == "{\n  &#34;n&#34;: 1,\n  &#34;to&#34;: &#34;x\\u2066y&lt;/pre&gt;&#34;\n}"
    assert printed(shown) is shown


def test_the_audit_page_filters_by_tool_operation_and_until(tmp_path: Path) -> None:
    """The Tool filter takes the ``tool.operation`` the list shows; Until bounds the time (as the API)."""
    from datetime import datetime, timedelta, timezone

    import toolbox.registry._calculator

    with deployment(tmp_path, console=True, tools=(*TOOLS, toolbox.registry._calculator)) as service:
        before = datetime.now(timezone.utc) - timedelta(minutes=5)
        sum_call = service.invoke("alice", "calculator.evaluate", {"expression": "1+1"}, purpose="Add")
        echo_call = service.invoke("alice", "echo", {"text": "x"}, purpose="Greet")
        assert sum_call.status_code == echo_call.status_code == 200
        adding, echoing = sum_call.json()["trace_id"], echo_call.json()["trace_id"]
        with httpx.Client(base_url=service.url, verify=PLAIN_HTTP) as client:
            login = client.get("/console/login")
            token = re.search(r'name="csrf" value="([^"]+)"', login.text)
            assert token
            client.post("/console/login", data={"csrf": token.group(1), "token": service.keys["bob"]})

            def listed(**query: str) -> set[str]:
                page = client.get("/console/audit", params=query)
                assert page.status_code == 200
                return {adding, echoing} & set(re.findall(r"/console/audit/([0-9a-f]{32})", page.text))

            assert listed() == {adding, echoing}
            assert listed(tool="calculator.evaluate") == {adding}  # as the list shows the name
            assert listed(tool="calculator") == {adding}
            assert listed(tool="echo") == {echoing}
            assert listed(tool="calculator.nope") == set()
            assert 'name="until"' in client.get("/console/audit").text
            assert listed(until=before.strftime("%Y-%m-%dT%H:%M")) == set()
            later = (datetime.now(timezone.utc) + timedelta(minutes=5)).strftime("%Y-%m-%dT%H:%M")
            assert listed(until=later) == {adding, echoing}
        # The API's tool= takes the same spellings.
        events = service.get("/v1/audit/events?tool=calculator.evaluate", "bob").json()["events"]
        assert events and {(e["tool"], e["operation"]) for e in events} == {("calculator", "evaluate")}
