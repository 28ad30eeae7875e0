"""SSRF, metadata and DNS-rebinding refusals, run only inside a loopback-only network namespace.

`test_http_ssrf.py` runs this module under ``unshare -rn`` (with ``lo`` up), so
if a guard were broken the connection would fail instead of leaving the
machine, and the test would fail on the status. Every denial asserts the
exception, the reason code, that the loopback server saw no request and that
no socket connection was attempted. Resolvers are injected: no test asks DNS.
"""

from __future__ import annotations

import asyncio
import socket

import httpcore
import pytest

import toolbox_http.plugin
from toolbox import ExecutionContext, Gateway, Status, ToolPolicy
from toolbox_http import EgressDeniedError, HttpTool

PRIVATE = "10.20.30.40"
METADATA = "169.254.169.254"


@pytest.fixture(autouse=True)
def _only_loopback():
    """Refuse to run outside a namespace whose only interface is lo."""
    names = sorted(name for _, name in socket.if_nameindex())
    assert names == ["lo"], f"not in a loopback-only network namespace (interfaces: {names})"


@pytest.fixture
def connects(monkeypatch):
    """Counts every TCP connection httpcore's real backends are asked to open."""
    calls: list[tuple[str, int]] = []
    sync_connect = httpcore.SyncBackend.connect_tcp
    async_connect = httpcore.AnyIOBackend.connect_tcp

    def spy(self, host, port, *args, **kwargs):
        calls.append((host, port))
        return sync_connect(self, host, port, *args, **kwargs)

    async def aspy(self, host, port, *args, **kwargs):
        calls.append((host, port))
        return await async_connect(self, host, port, *args, **kwargs)

    monkeypatch.setattr(httpcore.SyncBackend, "connect_tcp", spy)
    monkeypatch.setattr(httpcore.AnyIOBackend, "connect_tcp", aspy)
    return calls


class Resolver:
    """A fake DNS: name -> list of answers (each answer a list of addresses), served in turn."""

    def __init__(self, answers):
        self.answers = {name: list(values) for name, values in answers.items()}
        self.calls: list[str] = []

    def __call__(self, host, port):
        self.calls.append(host)
        queue = self.answers.get(host)
        if not queue:
            raise socket.gaierror(socket.EAI_NONAME, "unknown name")
        return queue.pop(0) if len(queue) > 1 else queue[0]


NAMES = {
    "private.test": [[PRIVATE]],
    "metadata.test": [[METADATA]],
    "loopback.test": [["127.0.0.1"]],
    "mapped.test": [["::ffff:127.0.0.1"]],
    "public-then-private.test": [["93.184.216.34", PRIVATE]],
    "linklocal6.test": [["fe80::1"]],
    "ula.test": [["fd00::5"]],
}

DENIED_URLS = [
    "http://127.1:{port}/json",
    "http://2130706433:{port}/json",
    "http://0x7f.0.0.1:{port}/json",
    "http://017700000001:{port}/json",
    "http://127.0.0.1:{port}/json",
    "http://[::1]:{port}/json",
    "http://[::ffff:127.0.0.1]:{port}/json",
    "http://[::ffff:7f00:1]:{port}/json",
    "http://localhost:{port}/json",
    "http://localhost.:{port}/json",
    "http://user@allowed.example@127.0.0.1:{port}/json",
    "http://0.0.0.0:{port}/json",
    "http://[::]:{port}/json",
    f"http://{METADATA}/latest/meta-data/",
    "http://169.254.43518/latest/meta-data/",
    f"http://{PRIVATE}:{{port}}/json",
    "http://192.168.0.1/",
    "http://100.64.0.1/",
    "http://224.0.0.1/",
    "http://[fd00:ec2::254]/",
    "http://[2002:7f00:1::]:{port}/json",
    "http://[64:ff9b::7f00:1]:{port}/json",
    "http://private.test:{port}/json",
    "http://metadata.test/latest/meta-data/",
    "http://loopback.test:{port}/json",
    "http://mapped.test:{port}/json",
    "http://public-then-private.test:{port}/json",
    "http://linklocal6.test/",
    "http://ula.test/",
]


def _tools(http_tools, **egress):
    egress.setdefault("resolver", Resolver(NAMES))
    return http_tools(egress=egress)


@pytest.mark.parametrize("template", DENIED_URLS)
def test_refused_sync(template, loopback, http_tools, connects):
    """Each non-public target is DENIED/EGRESS_DENIED before any socket is opened (sync)."""
    tools = _tools(http_tools)
    ready = tools.get(HttpTool).get(template.format(port=loopback.port)).purpose("Probe")
    with pytest.raises(EgressDeniedError) as info:
        ready.execute()
    assert info.value.reason_code == "EGRESS_DENIED"
    assert info.value.rule == "http:egress:address"
    assert ready.record.status == "DENIED"
    assert ready.record.reason_code == "EGRESS_DENIED"
    assert loopback.requests == []
    assert connects == []


@pytest.mark.parametrize("template", DENIED_URLS)
def test_refused_async(template, loopback, http_tools, connects):
    """The async client is guarded the same way."""
    tool = _tools(http_tools).get(HttpTool)

    async def main():
        return await tool.get(template.format(port=loopback.port)).purpose("Probe").aexecute()

    with pytest.raises(EgressDeniedError) as info:
        asyncio.run(main())
    assert info.value.reason_code == "EGRESS_DENIED"
    assert loopback.requests == []
    assert connects == []


@pytest.mark.parametrize("template", DENIED_URLS[:12])
def test_refused_by_name(template, loopback, connects):
    """The by-name door returns DENIED/EGRESS_DENIED and nothing reaches the network."""
    gateway = Gateway.load(
        policy=ToolPolicy.standard().allow(HttpTool),
        providers=[toolbox_http.plugin],
        discover=False,
        env={},
        options={"http": {"egress": {"resolver": Resolver(NAMES)}}},
    )
    try:
        result = gateway.invoke(
            "http.get",
            {"url": template.format(port=loopback.port), "purpose": "Probe"},
            context=ExecutionContext(tenant="t", principal="p"),
        )
    finally:
        gateway.close()
    assert result.status is Status.DENIED
    assert result.reason_code == "EGRESS_DENIED"
    assert loopback.requests == []
    assert connects == []


def test_rebinding_one_bad_answer_refuses_all(loopback, http_tools, connects):
    """A name answering a public and a private address is refused: every address is checked."""
    resolver = Resolver({"rebind.test": [["93.184.216.34", PRIVATE]]})
    tool = _tools(http_tools, resolver=resolver).get(HttpTool)
    with pytest.raises(EgressDeniedError, match="private"):
        tool.get("http://rebind.test/").purpose("Probe").execute()
    assert connects == []


def test_rebinding_second_answer_is_never_asked(loopback, http_tools, connects):
    """Resolved once per connection: a name that turns private on its second lookup cannot swap it.

    The first answer (loopback, allowed here) is the address connected to; the
    resolver is not asked again for the same request.
    """
    resolver = Resolver({"rebind.test": [["127.0.0.1"], [PRIVATE], [PRIVATE]]})
    tools = _tools(http_tools, resolver=resolver, allow_networks=["127.0.0.0/8"])
    response = tools.get(HttpTool).get(f"http://rebind.test:{loopback.port}/json").purpose("Read").execute()
    assert response.json() == {"rates": {"EUR": 1.1}}
    assert resolver.calls == ["rebind.test"]
    assert connects == [("127.0.0.1", loopback.port)]
    assert loopback.requests == [("GET", "/json", f"rebind.test:{loopback.port}")]


@pytest.mark.parametrize(
    "template",
    [
        "http://127.1:{port}/json",
        "http://2130706433:{port}/json",
        "http://0x7f.0.0.1:{port}/json",
        "http://017700000001:{port}/json",
        "http://localhost.:{port}/json",
        "http://loopback.test:{port}/json",
    ],
)
def test_allowed_loopback_connects_to_the_normalised_address(template, loopback, http_tools, connects):
    """With loopback allowed, every literal form connects to 127.0.0.1 itself, Host header intact."""
    tools = _tools(http_tools, allow_networks=["127.0.0.0/8", "::1/128"])
    url = template.format(port=loopback.port)
    assert tools.get(HttpTool).get(url).purpose("Read").execute().status_code == 200
    assert connects[0] == ("127.0.0.1", loopback.port)
    host = url.split("//", 1)[1].split("/", 1)[0]
    assert loopback.requests[0][2] == host


def test_metadata_stays_refused_inside_an_allowed_network(loopback, http_tools, connects):
    """Allowing 169.254.0.0/16 does not open the metadata address."""
    tools = _tools(http_tools, allow_networks=["169.254.0.0/16"])
    with pytest.raises(EgressDeniedError, match="metadata"):
        tools.get(HttpTool).get(f"http://{METADATA}/latest/").purpose("Probe").execute()
    assert connects == []


@pytest.mark.parametrize(
    "target",
    [f"http://{PRIVATE}/", f"http://{METADATA}/latest/meta-data/", "http://private.test/", "http://[::1]:1/"],
)
def test_redirect_hops_are_checked(target, loopback, http_tools, connects):
    """A redirect from an allowed server to a refused address is DENIED; only the first hop connected."""
    egress = {"resolver": Resolver(NAMES), "allow_networks": ["127.0.0.1/32"]}
    tools = http_tools(egress=egress, follow_redirects=True)
    ready = tools.get(HttpTool).get(f"{loopback.url}/redirect", params={"to": target}).purpose("Follow")
    with pytest.raises(EgressDeniedError) as info:
        ready.execute()
    assert info.value.reason_code == "EGRESS_DENIED"
    assert [r[1].partition("?")[0] for r in loopback.requests] == ["/redirect"]
    assert connects == [("127.0.0.1", loopback.port)]


@pytest.mark.parametrize("answer", [["not-an-address"], [None], ["127.0.0.1", "bogus"]])
def test_resolver_garbage_is_refused(answer, loopback, http_tools, connects):
    """A resolver answer that is not an IP address refuses the request; nothing connects."""
    tools = _tools(http_tools, resolver=lambda host, port: answer, allow_networks=["127.0.0.0/8"])
    with pytest.raises(EgressDeniedError, match="not an IP address"):
        tools.get(HttpTool).get(f"http://odd.test:{loopback.port}/json").purpose("Probe").execute()
    assert loopback.requests == []
    assert connects == []


def test_unknown_name_is_a_connection_error(loopback, http_tools, connects):
    """A name the resolver does not know is ToolConnectionError (not sent, so retried for GET)."""
    from toolbox.errors import ToolConnectionError

    tools = _tools(http_tools)
    with pytest.raises(ToolConnectionError, match="host name could not be resolved"):
        tools.get(HttpTool).get("http://nowhere.test/").purpose("Probe").execute()
    assert connects == []
