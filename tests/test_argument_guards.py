"""Argument guards on numbers (integer size, NaN, infinities), and events no sink could store."""

from __future__ import annotations

import copy
import functools
import math
from typing import Annotated, Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import AllowInfNan, Field

from toolbox import Effect, ExecutionContext, Gateway, Governance, RiskClass, Status, ToolPolicy, tool
from toolbox.audit import AuditEvent, AuditTrail, EventType, JsonlSink, MemorySink, Redaction
from toolbox.audit._batch import CallSubject, Opening
from toolbox.errors import ConfigurationError, InvalidArgumentsError
from toolbox.governance import ArgumentLimits
from toolbox.provider import check_limits

CALLS: list[tuple[str, object]] = []


@tool(risk=RiskClass.MEMORY_ONLY, effect=Effect.READ_ONLY)
def count(n: int) -> int:
    """Count to ``n``."""
    CALLS.append(("count", n))
    return 0


@tool(risk=RiskClass.MEMORY_ONLY, effect=Effect.READ_ONLY)
def scale(x: float) -> float:
    """Scale ``x``."""
    CALLS.append(("scale", x))
    return x


@tool(risk=RiskClass.MEMORY_ONLY, effect=Effect.READ_ONLY)
def loose(value: Any = None) -> Any:
    """Any JSON value, returned as given."""
    CALLS.append(("loose", value))
    return value


@tool(risk=RiskClass.MEMORY_ONLY, effect=Effect.READ_ONLY)
def ratio(x: Annotated[float, AllowInfNan(True)], y: float = 1.0) -> float:
    """A parameter that opts in to NaN and infinities."""
    CALLS.append(("ratio", x))
    return x


@tool(risk=RiskClass.MEMORY_ONLY, effect=Effect.READ_ONLY)
def series(values: list[Annotated[float, Field(allow_inf_nan=True)]]) -> int:
    """A list whose items opt in."""
    CALLS.append(("series", values))
    return len(values)


def gateway(sink: object = None, **limits: int) -> Gateway:
    trail = AuditTrail(sink or MemorySink(), fallback_path=None)
    governance = Governance(audit=trail, limits=ArgumentLimits(**limits) if limits else None)
    return Gateway.load(
        policy=ToolPolicy.standard(),
        providers=[count, scale, loose, ratio, series],
        discover=False,
        env={},
        governance=governance,
    )


def ctx() -> ExecutionContext:
    return ExecutionContext(tenant="tenant-a", principal="alice")


def events(sink: Any, context: ExecutionContext) -> list[tuple[str, str | None, str | None]]:
    return [(r.type.value, r.decision, r.status) for r in sink.read_trace(context.run_id)]


REFUSED = [
    ("INTENT_DECLARED", None, None),
    ("GOVERNANCE_DECISION", "INVALID", "INVALID_ARGUMENTS"),
    ("INVOCATION_RESPONSE", None, "INVALID_ARGUMENTS"),
]


@pytest.fixture(autouse=True)
def _clear_calls() -> None:
    CALLS.clear()


@pytest.fixture(params=["memory", "jsonl", "sqlite"])
def sink(request: pytest.FixtureRequest, tmp_path: Any) -> Any:
    if request.param == "memory":
        return MemorySink()
    if request.param == "jsonl":
        return JsonlSink(tmp_path / "audit.jsonl")
    from toolbox.audit import SqliteSink  # type: ignore[attr-defined]

    return SqliteSink(str(tmp_path / "audit.db"))


def test_huge_int_is_refused_and_costs_no_event(sink: Any) -> None:
    """Regression (finding 11): 10**5000 passed the guards and broke the memory sink's read-back."""
    gw, context = gateway(sink), ctx()
    result = gw.invoke("count", {"n": 10**5000, "purpose": "Count"}, context=context)
    assert (result.status, result.reason_code) == (Status.INVALID_ARGUMENTS, "INVALID_ARGUMENTS")
    assert (result.error_code, result.field_path) == ("int_too_large", "n")
    assert CALLS == []
    assert events(sink, context) == REFUSED
    stored = sink.read_trace(context.run_id)[0].payload_summary
    assert stored == '{"n":"<int of 16610 bits>","purpose":"Count"}'
    after = gw.invoke("count", {"n": 3, "purpose": "Count"}, context=context)
    assert after.status is Status.SUCCESS and CALLS == [("count", 3)]
    assert len(events(sink, context)) == 7


@pytest.mark.parametrize(
    ("value", "passes"),
    [(10**4300 - 1, True), (-(10**4300) + 1, True), (10**4300, False), (-(10**4300), False)],
    ids=["4300-digits", "minus-4300-digits", "4301-digits", "minus-4301-digits"],
)
def test_int_digits_boundary(value: int, passes: bool) -> None:
    """The default bound is 4300 digits (CPython's own limit for printing an int), both signs."""
    gw, context = gateway(), ctx()
    result = gw.invoke("count", {"n": value, "purpose": "Count"}, context=context)
    assert (result.status is Status.SUCCESS) is passes
    assert len(CALLS) == int(passes)
    if not passes:
        assert (result.error_code, result.field_path) == ("int_too_large", "n")


def test_int_digits_bound_is_configurable_and_reaches_nested_values() -> None:
    gw, context = gateway(max_int_digits=3), ctx()
    assert gw.invoke("count", {"n": 999, "purpose": "Count"}, context=context).status is Status.SUCCESS
    flat = gw.invoke("count", {"n": -1000, "purpose": "Count"}, context=context)  # the by-name fast path
    assert (flat.status, flat.error_code, flat.field_path) == (Status.INVALID_ARGUMENTS, "int_too_large", "n")
    nested = gw.invoke("loose", {"value": {"a": [1, 1000]}, "purpose": "Look"}, context=context)
    assert (nested.status, nested.error_code, nested.field_path) == (
        Status.INVALID_ARGUMENTS,
        "int_too_large",
        "value.a.1",
    )
    assert CALLS == [("count", 999)]


@pytest.mark.parametrize("bad", [0, -1, True, 1.5, 100_001])
def test_int_digits_bound_must_be_sane(bad: Any) -> None:
    with pytest.raises(ConfigurationError, match="max_int_digits"):
        ArgumentLimits(max_int_digits=bad)


@pytest.mark.parametrize("number", [math.nan, math.inf, -math.inf])
@pytest.mark.parametrize(
    ("name", "arguments", "path"),
    [
        ("scale", lambda v: {"x": v}, "x"),
        ("loose", lambda v: {"value": v}, "value"),
        ("loose", lambda v: {"value": {"a": [1.0, v]}}, "value.a.1"),
    ],
)
def test_non_finite_numbers_are_refused(number: float, name: str, arguments: Any, path: str) -> None:
    gw, context = gateway(), ctx()
    result = gw.invoke(name, {**arguments(number), "purpose": "Compute"}, context=context)
    assert (result.status, result.reason_code) == (Status.INVALID_ARGUMENTS, "INVALID_ARGUMENTS")
    assert (result.error_code, result.field_path) == ("non_finite_number", path)
    assert CALLS == []
    assert events(gw.catalog.audit.sink, context) == REFUSED  # type: ignore[union-attr]


@pytest.mark.parametrize("text", ["NaN", "Infinity", "-inf", "nan"])
def test_non_finite_numbers_as_strings_are_refused_for_float_parameters(text: str) -> None:
    """The schema refuses what lax parsing would turn into NaN or an infinity."""
    gw, context = gateway(), ctx()
    result = gw.invoke("scale", {"x": text, "purpose": "Compute"}, context=context)
    assert (result.status, result.error_code, result.field_path) == (
        Status.INVALID_ARGUMENTS,
        "finite_number",
        "x",
    )
    assert CALLS == []


def test_a_parameter_opts_in_to_non_finite_numbers() -> None:
    """``AllowInfNan(True)`` or ``Field(allow_inf_nan=True)`` lets them through for that parameter only."""
    gw, context = gateway(), ctx()
    assert gw.invoke("ratio", {"x": math.inf, "purpose": "Divide"}, context=context).content == math.inf
    assert math.isnan(gw.invoke("ratio", {"x": "NaN", "purpose": "Divide"}, context=context).content)
    other = gw.invoke("ratio", {"x": 1.0, "y": math.nan, "purpose": "Divide"}, context=context)
    assert (other.status, other.field_path) == (Status.INVALID_ARGUMENTS, "y")
    listed = gw.invoke("series", {"values": [1.0, -math.inf], "purpose": "Sum"}, context=context)
    assert (listed.status, listed.content) == (Status.SUCCESS, 2)
    assert len(CALLS) == 3


def test_typed_door_huge_int_is_stored_as_its_size() -> None:
    """The typed door does not guard (the program is the caller), but the audit trail still stores it."""
    sink = MemorySink()
    gw, context = gateway(sink), ctx()
    assert gw.tools_for(context).get(count).call(10**5000).purpose("Count").execute() == 0
    gw.invoke("count", {"n": 1, "purpose": "Count"}, context=context)
    records = sink.read_trace(context.run_id)
    assert len(records) == 8
    assert records[0].payload_summary == '{"n":"<int of 16610 bits>"}'


def test_lone_surrogates_are_stored_escaped(sink: Any) -> None:
    """Lone surrogates (no UTF-8 store accepts them) and line separators in names, keys and values."""
    gw, context = gateway(sink), ctx()
    unknown = gw.invoke("loose\ud800", {"purpose": "Look"}, context=context)
    assert unknown.status is Status.DENIED
    keyed = gw.invoke(
        "loose", {"value": {"k\udfff": "v\ud800", "s": "a\u2028b\x85"}, "purpose": "Look"}, context=context
    )
    assert keyed.status is Status.SUCCESS
    records = sink.read_trace(context.run_id)
    assert records[0].name == "loose\\ud800"
    assert '"k\\\\udfff":"v\\\\ud800"' in (records[1].payload_summary or "")
    assert len(records) == 5


class _Unredactable:
    """A redaction that fails, standing for a bug or a value no serialiser accepts."""

    def payload_fields(self, arguments: object) -> tuple[str, str]:
        raise ValueError("cannot serialise")


def test_memory_sink_isolates_a_batch_it_cannot_store() -> None:
    """An unstorable batch becomes one SYSTEM_ERROR event in its trace; the others are all kept."""
    sink = MemorySink()
    gw, context = gateway(sink), ctx()
    gw.invoke("count", {"n": 1, "purpose": "Count"}, context=context)
    broken = _Unredactable()
    subject = CallSubject("count", "count", "call", "MEMORY_ONLY", "READ_ONLY", "purpose", broken)  # type: ignore[arg-type]
    sink.hold(Opening(subject, context, "Count", {"n": 2}, 0.0))
    sink.append([AuditEvent(EventType.SYSTEM_ERROR, trace_id=context.run_id, attempt="x")])  # type: ignore[arg-type]
    gw.invoke("count", {"n": 3, "purpose": "Count"}, context=context)
    records = sink.read_trace(context.run_id)
    assert [(r.type.value, r.reason_code) for r in records][4:6] == [
        ("SYSTEM_ERROR", "AUDIT_EVENT_UNSTORABLE"),
        ("SYSTEM_ERROR", "AUDIT_EVENT_UNSTORABLE"),
    ]
    assert len(records) == 10
    assert [r.sequence for r in records] == list(range(1, 11))
    assert sink.records == records


# -- property: any JSON-like value is refused with a field path or passed unchanged ------------

_NUMBERS = st.one_of(
    st.integers(),
    st.integers(min_value=10**29, max_value=10**31),  # around the bound below
    st.floats(allow_nan=True, allow_infinity=True),
)
_SCALARS = st.one_of(st.none(), st.booleans(), _NUMBERS, st.text(max_size=20))
JSON_LIKE = st.recursive(
    _SCALARS,
    lambda children: st.one_of(
        st.lists(children, max_size=5), st.dictionaries(st.text(max_size=8), children, max_size=5)
    ),
    max_leaves=30,
)
_PROPERTY_SINK = MemorySink()


@functools.cache
def property_gateway() -> Gateway:
    # A 30-digit bound: the same code as 4300 digits, and every example stays printable.
    return gateway(_PROPERTY_SINK, max_int_digits=30)


def _same(a: object, b: object) -> bool:
    return repr(a) == repr(b)  # NaN != NaN, but a refused value never gets here


@given(value=JSON_LIKE)
def test_any_json_like_value_is_refused_with_a_path_or_passed_unchanged(value: object) -> None:
    sent = copy.deepcopy(value)
    context = ctx()
    CALLS.clear()
    result = property_gateway().invoke("loose", {"value": value, "purpose": "Look"}, context=context)
    if result.status is Status.INVALID_ARGUMENTS:
        assert result.error_code in {"int_too_large", "non_finite_number", "too_deep", "too_large"}
        assert result.field_path is not None and result.field_path.startswith("value")
        assert CALLS == []
    else:
        assert result.status is Status.SUCCESS
        assert _same(result.content, sent) and _same(CALLS, [("loose", sent)])
    assert _same(value, sent)  # the guards never change what they check
    assert len(_PROPERTY_SINK.read_trace(context.run_id)) in (3, 4)  # every event stored and readable


@given(value=JSON_LIKE)
def test_check_limits_raises_only_invalid_arguments(value: object) -> None:
    try:
        check_limits({"value": value}, ArgumentLimits(max_int_digits=30))
    except InvalidArgumentsError as exc:
        assert exc.field_path.startswith("value")


@pytest.mark.parametrize("value", ["http://a/\ud800", "https://u:p@a/\udc00?token=\ud800", "x\ud800"])
def test_redaction_keeps_lone_surrogates_storable(value: str) -> None:
    summary, digest = Redaction().payload_fields({"u": value, "k\ud800": 1})
    assert summary is not None and digest is not None
    summary.encode("utf-8")
    assert "p@" not in summary


def test_redaction_marks_huge_ints_without_printing_them() -> None:
    summary, digest = Redaction().payload_fields({"n": -(10**5000)})
    assert summary == '{"n":"<int of 16610 bits>"}' and digest is not None
