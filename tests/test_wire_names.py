"""Wire names: definitions every model API accepts, reversible, and both spellings callable alike."""

from __future__ import annotations

import asyncio
import re
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from toolbox import Effect, ExecutionContext, Gateway, Governance, RiskClass, Status, ToolPolicy, tool
from toolbox.audit import AuditTrail, MemorySink
from toolbox.doors import ToolChoice
from toolbox.doors._route import Route
from toolbox.errors import InvalidDescriptorError
from toolbox.foundations._descriptor import OPERATION_NAME_PATTERN, TOOL_NAME_PATTERN
from toolbox.foundations._wire_names import WIRE_NAME_PATTERN, dotted_name, is_wire_name
from toolbox.provider import from_wire_name, to_wire_name
from toolbox.testing import fake_provider
from toolbox_fs import FS_ACKNOWLEDGEMENT, FsTool
from toolbox_http import HttpTool
from toolbox_test_support.distributions import on_sys_path, write_distribution

WIRE = re.compile(WIRE_NAME_PATTERN)
CALLS: list[str] = []


@tool(risk=RiskClass.MEMORY_ONLY, effect=Effect.READ_ONLY, name="math.add")
def add(a: int, b: int = 0) -> int:
    """Add two integers."""
    CALLS.append("math.add")
    return a + b


@pytest.fixture(autouse=True)
def _no_calls_yet():
    CALLS.clear()


def shipped(tmp_path):
    return Gateway.load(
        policy=ToolPolicy.standard().allow(HttpTool, FsTool),
        providers=[add, fake_provider("acme.notes")],
        env={FS_ACKNOWLEDGEMENT.env: FS_ACKNOWLEDGEMENT.value},
        options={"fs": {"roots": [str(tmp_path)]}},
    )


def test_every_definition_name_is_a_wire_name(tmp_path):
    """Every emitted name matches ^[a-zA-Z0-9_-]{1,64}$ and maps back to a callable dotted name."""
    gateway = shipped(tmp_path)
    names = [d["name"] for d in gateway.definitions()]
    assert {"calculator__evaluate", "http__get", "fs__read_text", "math__add", "acme__notes__read"} <= set(
        names
    )
    for name in names:
        assert WIRE.match(name) and name == name.strip()
        dotted = from_wire_name(name)
        assert to_wire_name(dotted) == name
        assert gateway.catalog.resolve_name(name)[0] == dotted
    assert len(names) == len(set(names))


# Names built as the descriptor's rules allow: parts joined by ".", words in a part by single "_".
WORDS = st.lists(st.text(alphabet="ab1-", min_size=1, max_size=3), min_size=1, max_size=3).map("_".join)
TOOL_NAMES = st.lists(WORDS, min_size=1, max_size=3).map(lambda parts: ".".join("a" + part for part in parts))
OPERATIONS = st.lists(st.text(alphabet="ab1", min_size=1, max_size=3), min_size=1, max_size=3).map(
    lambda words: "a" + "_".join(words)
)


@given(TOOL_NAMES, OPERATIONS)
def test_every_accepted_name_round_trips(tool_name, operation):
    """For tool and operation names the descriptor accepts, the wire name decodes to the dotted name."""
    assert re.fullmatch(TOOL_NAME_PATTERN, tool_name) and re.fullmatch(OPERATION_NAME_PATTERN, operation)
    dotted = f"{tool_name}.{operation}"
    wire = to_wire_name(dotted)
    assert is_wire_name(wire) and "." not in wire
    assert from_wire_name(wire) == dotted == dotted_name(wire)
    assert dotted_name(dotted) == dotted


@given(TOOL_NAMES, TOOL_NAMES)
def test_two_accepted_names_never_share_a_wire_name(first, second):
    """Distinct accepted names have distinct wire names (what the load-time check relies on)."""
    assert (to_wire_name(first) == to_wire_name(second)) == (first == second)


@given(st.text(max_size=80))
def test_anything_but_a_wire_name_is_refused_or_left_alone(text):
    """``from_wire_name`` refuses non-wire text; ``dotted_name`` leaves it for the registry."""
    if is_wire_name(text):
        assert from_wire_name(text) == text.replace("__", ".")
    else:
        with pytest.raises(ValueError, match="wire name"):
            from_wire_name(text)
        assert dotted_name(text) == text


def test_a_trailing_newline_is_not_a_wire_name():
    """``$`` in a regex matches before a final newline; the check does not."""
    assert not is_wire_name("calculator__evaluate\n")
    assert dotted_name("calculator__evaluate\n") == "calculator__evaluate\n"


def test_a_name_too_long_for_the_wire_fails_at_decoration():
    """``tool.operation`` must fit 64 wire characters (each dot counts two): refused, with the numbers."""
    with pytest.raises(InvalidDescriptorError, match=r"66 characters as a wire name.*more than 64"):
        tool(risk=RiskClass.MEMORY_ONLY, name="a" * 60)(lambda: None)
    tool(risk=RiskClass.MEMORY_ONLY, name="a" * 58, summary="Do nothing.")(lambda: None)  # 64 exactly


def test_a_tool_with_nothing_to_describe_it_fails_at_decoration():
    """No docstring and no ``summary=``: every definition format would offer an empty description."""

    def undocumented() -> str:
        return "x"

    def blank() -> str:
        """ """
        return "x"

    for function, summary in ((undocumented, None), (blank, None), (undocumented, "  ")):
        with pytest.raises(InvalidDescriptorError, match=r"@tool .*docstring, or pass summary="):
            tool(risk=RiskClass.MEMORY_ONLY, summary=summary)(function)
    named = tool(risk=RiskClass.MEMORY_ONLY, summary="Return x.")(undocumented)
    gateway = Gateway.load(providers=[named], discover=False, env={})
    for format in ("neutral", "openai", "anthropic", "mcp"):
        (definition,) = gateway.definitions(format)
        described = definition.get("description") or definition.get("function", {}).get("description")
        assert described == "Return x.", format


def test_an_installed_tool_too_long_for_the_wire_is_a_broken_provider(tmp_path):
    """Installed, the same descriptor is isolated and named; everything else loads."""
    source = """
        from toolbox import hookimpl, ToolProvider
        from toolbox.testing import FakeTool

        @hookimpl
        def toolbox_providers():
            return [ToolProvider(tool_type=FakeTool, descriptor={"name": "acme." + "x" * 50, "version": "1",
                    "risk": "MEMORY_ONLY", "operations": [{"name": "read_everything_now"}]})]
    """
    write_distribution(tmp_path, "long-tools", {"long_plugin": source}, {"long": "long_plugin"})
    with on_sys_path(tmp_path):
        gateway = Gateway.load(env={})
    [broken] = gateway.catalog.broken_providers
    assert broken.distribution == "long-tools"
    assert "as a wire name" in broken.error and "more than 64" in broken.error
    assert "calculator__evaluate" in {d["name"] for d in gateway.definitions()}


# -- both spellings, one tool ----------------------------------------------------------------


def audited() -> tuple[Gateway, MemorySink]:
    sink = MemorySink()
    trail = AuditTrail(sink, fallback_path=None)
    return Gateway.load(providers=[add], discover=False, env={}, governance=Governance(audit=trail)), sink


def events_of(sink: MemorySink, context: ExecutionContext) -> list[Any]:
    return [event for event in sink.records if event.trace_id == context.run_id]


def observed(result: Any, context: ExecutionContext, sink: MemorySink) -> dict[str, Any]:
    result_data = result.as_dict()
    for key in ("trace_id", "correlation_id"):
        result_data.pop(key)
    records = []
    for record in context.trace.records():
        data = record.as_dict()
        for key in ("declared_at", "started_at", "ended_at", "duration"):
            data.pop(key)
        records.append(data)
    events = []
    for event in events_of(sink, context):
        data = event.model_dump()
        for key in (
            "event_id",
            "timestamp",
            "hash",
            "previous_hash",
            "trace_id",
            "correlation_id",
            "duration",
        ):
            data.pop(key)
        events.append(data)
    return {"result": result_data, "records": records, "events": events}


@pytest.mark.parametrize("asynchronous", [False, True])
@pytest.mark.parametrize("arguments", [{"a": 2, "b": 3, "purpose": "Sum"}, {"a": "x", "purpose": "Sum"}])
def test_both_spellings_leave_the_same_result_trace_and_audit(arguments, asynchronous):
    """Dotted and wire spelling, first call (full chain) and second (route): identical, dotted names."""
    seen = {}
    for spelling in ("math.add", "math__add", "math.add.call", "math__add__call"):
        gateway, sink = audited()
        runs = []
        for _ in range(2):
            context = ExecutionContext(tenant="tenant-a", principal="alice")
            if asynchronous:
                result = asyncio.run(gateway.ainvoke(spelling, arguments, context=context))
            else:
                result = gateway.invoke(spelling, arguments, context=context)
            runs.append(observed(result, context, sink))
        seen[spelling] = runs
    first = seen["math.add"]
    for spelling, runs in seen.items():
        expected = seen["math.add.call"] if spelling.endswith("call") else first
        assert runs == expected, spelling
    assert first[0]["result"]["name"] == "math.add"
    assert {event["name"] for event in first[0]["events"]} == {"math.add"}
    assert [r["name"] for r in first[0]["records"]] == ["math.add"]
    assert (first[0]["result"]["tool"], first[0]["result"]["operation"]) == ("math.add", "call")


def test_each_spelling_compiles_its_own_route_to_the_same_tool():
    """Routes are cached per spelling (one dict lookup), each recording the dotted name."""
    gateway, _ = audited()
    context = ExecutionContext(tenant="tenant-a", principal="alice")
    for spelling in ("math.add", "math__add"):
        for _ in range(2):
            result = gateway.invoke(spelling, {"a": 1, "b": 1, "purpose": "Sum"}, context=context)
            assert (result.status, result.content, result.name) == (Status.SUCCESS, 2, "math.add")
    routes = gateway._routes
    assert isinstance(routes["math.add"], Route) and isinstance(routes["math__add"], Route)
    assert routes["math.add"].name == routes["math__add"].name == "math.add"
    assert CALLS == ["math.add"] * 4


def test_a_wire_spelling_reaches_only_its_dotted_twin():
    """``acme__pay`` is acme.pay, never the separate tool ``acme_pay`` (nor the other way round)."""
    pay_calls: list[str] = []

    @tool(risk=RiskClass.MEMORY_ONLY, effect=Effect.READ_ONLY, name="acme_pay")
    def acme_pay() -> str:
        """Pay through acme_pay."""
        pay_calls.append("acme_pay")
        return "acme_pay"

    @tool(risk=RiskClass.MEMORY_ONLY, effect=Effect.READ_ONLY, name="acme.pay")
    def dotted_pay() -> str:
        """Pay through acme.pay."""
        pay_calls.append("acme.pay")
        return "acme.pay"

    gateway = Gateway.load(providers=[acme_pay, dotted_pay], discover=False, env={})
    context = ExecutionContext(tenant="tenant-a", principal="alice")
    for spelling, reached in [
        ("acme__pay", "acme.pay"),
        ("acme.pay", "acme.pay"),
        ("acme_pay", "acme_pay"),
        ("acme_pay__call", "acme_pay"),
    ]:
        result = gateway.invoke(spelling, {"purpose": "Pay"}, context=context)
        assert (result.status, result.content) == (Status.SUCCESS, reached), spelling
    assert pay_calls == ["acme.pay", "acme.pay", "acme_pay", "acme_pay"]


@pytest.mark.parametrize(
    "spelling",
    [
        "math___add",
        "math____add",
        "Math__add",
        "math__add\n",
        "math__add:1",  # a wire name carries no version
        "math__",
        "__math__add",
        "math__add__call__call",
    ],
)
def test_malformed_wire_spellings_reach_nothing(spelling):
    """Near-miss wire names are refused by the registry; the function never runs."""
    gateway, sink = audited()
    context = ExecutionContext(tenant="tenant-a", principal="alice")
    result = gateway.invoke(spelling, {"a": 1, "purpose": "Sum"}, context=context)
    assert result.status in (Status.DENIED, Status.INVALID_ARGUMENTS)
    assert result.reason_code in ("TOOL_UNAVAILABLE", "INVALID_ARGUMENTS")
    assert result.attempts == 0
    assert CALLS == []
    [event] = events_of(sink, context)
    assert event.reason_code == result.reason_code


@pytest.mark.parametrize(
    "name", [None, 5, b"math.add", ["math.add"], "", "math__add" * 1000, "math.add" * 1000]
)
def test_names_that_are_no_names_are_refused(name):
    """Non-strings, empty and huge names: INVALID_ARGUMENTS/bad_name, nothing runs."""
    gateway, _ = audited()
    context = ExecutionContext(tenant="tenant-a", principal="alice")
    result = gateway.invoke(name, {"a": 1, "purpose": "Sum"}, context=context)  # type: ignore[arg-type]
    assert (result.status, result.error_code, result.attempts) == (Status.INVALID_ARGUMENTS, "bad_name", 0)
    assert len(result.name) <= 200
    assert CALLS == []


def test_both_spellings_from_many_threads_reach_the_one_tool():
    """Concurrent first calls of both spellings compile routes safely and all reach math.add."""
    gateway, _ = audited()
    context = ExecutionContext(tenant="tenant-a", principal="alice")

    def call(index: int) -> tuple[Status, Any, str]:
        spelling = "math.add" if index % 2 else "math__add"
        result = gateway.invoke(spelling, {"a": index, "b": 1, "purpose": "Sum"}, context=context)
        return result.status, result.content, result.name

    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(call, range(200)))
    assert results == [(Status.SUCCESS, index + 1, "math.add") for index in range(200)]
    assert CALLS == ["math.add"] * 200
    assert {record.name for record in context.trace.records()} == {"math.add"}


def test_selection_choices_use_the_names_definitions_offer(tmp_path):
    """``ToolChoice.for_descriptor`` names each operation as ``definitions()`` does."""
    gateway = shipped(tmp_path)
    offered = {d["name"] for d in gateway.definitions()}
    for name in ("http", "fs", "calculator", "acme.notes"):
        descriptor = gateway.catalog.entry(name).descriptor
        assert {choice.name for choice in ToolChoice.for_descriptor(descriptor)} <= offered
